"""Muon: the orthogonalised gradient, ``A = U Vᵀ``.

Idealised update (App. C.2, eq. updaterule_muon): ``∇W = U Σ Vᵀ``,
``ΔW = -η (U Vᵀ + λ W)``; ``‖A‖_R = sqrt(n_in/n_out)``. Matrices only.
"""

from typing import Any

import sympy as sp

from spectral.engine.axes import MUON_HORIZON
from spectral.optimizers import records_on_first_use
from spectral.spec import OptimizerSpec
from spectral.symbols import n_in, n_out

SPEC = OptimizerSpec(
    name="muon",
    update_norm=sp.sqrt(n_in / n_out),
    applies_to="matrices",
    summary="orthogonalised gradient U Vᵀ (Newton–Schulz)",
    paper="App. C.2 (Table muon-wd); k = 1: App. D.2",
    lr_horizon=MUON_HORIZON,
    doc=__doc__,
)

# TORCH (the torch implementation the generated module builds, and how it was checked),
# PROBE (how `spectral probe` steps it to measure its update) and JAX (the optax
# implementation of the generated JAX module, or why it has none): built on first use,
# since deriving the rules needs SPEC alone (spectral.optimizers.records_on_first_use).
def _records() -> dict[str, Any]:
    from spectral.optimizers.entry import JaxImpl, ProbeSetup, TorchImpl

    TORCH = TorchImpl(
        cls="torch.optim.Muon",
        fixed={"adjust_lr_fn": "original"},
        compensation="muon-shape",
        sharding="gathered",
        notes=(
            "Muon: torch.optim.Muon(adjust_lr_fn='original'). It multiplies lr by",
            "sqrt(max(1, A/B)) (A, B = weight.shape), while the idealised Muon steps by",
            "U V^T alone, and no adjust_lr_fn of torch.optim.Muon leaves lr unchanged. So",
            "each group's lr is divided by that factor and its weight_decay multiplied by",
            "it (torch decays with the unadjusted lr), which restores dW = -eta (U V^T +",
            "lambda W) exactly (see _compensation). Square hidden matrices have factor 1.",
            "Newton-Schulz gives U S' V^T, S' in about (0.5, 1.5); Nesterov momentum 0.95.",
            "torch's default weight_decay=0.1 is replaced by each group's value.",
        ),
    )

    PROBE = ProbeSetup(
        label="torch.optim.Muon(adjust_lr_fn=None)",
        note="torch's default adjust_lr_fn ('original') scales lr by sqrt(max(1, n_out/n_in))",
    )

    JAX = JaxImpl(
        transform="optax.contrib.scale_by_muon",
        recipe="unscaled-muon",
        notes=(
            "Muon: the transformations optax.contrib.muon is made of, without its",
            "scale_by_shape. optax.contrib.muon always rescales the orthogonalised step (by",
            "sqrt(max(1, fan_out / fan_in)), or by consistent_rms * sqrt(max(fan_in,",
            "fan_out))), while the idealised Muon steps by U V^T alone; chaining",
            "scale_by_muon, add_decayed_weights and scale_by_learning_rate gives exactly",
            "dW = -eta (U V^T + lambda W), the step the PyTorch module reaches by dividing",
            "torch.optim.Muon's lr by its shape factor. Newton-Schulz in float32 (torch:",
            "bfloat16); optax's Nesterov mix bias-corrects (see muon-kimi).",
        ),
    )
    return {"TORCH": TORCH, "PROBE": PROBE, "JAX": JAX}


__getattr__ = records_on_first_use(__name__, _records)
