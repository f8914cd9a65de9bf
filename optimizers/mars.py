"""MARS (AdamW form): AdamW on a variance-reduced gradient, matrices only.

Idealised update (Yuan et al. 2024, Alg. 2, MARS-AdamW; implementation
``pytorch_optimizer.MARS``, ``mars_type="adamw"``): the corrected gradient
``c_t = ∇W_t + γ β₁/(1-β₁) (∇W_t - ∇W_{t-1})`` (rescaled to unit Frobenius norm when
larger) feeds AdamW's moments, ``ΔW = -η m̂/(sqrt(v̂) + ε)``. With a steady gradient
``c_t = ∇W_t`` and the step is ``sign(∇W)``: ``‖A‖_R = n_in`` for a low-rank gradient; ε
is added to ``sqrt(v̂)``, ``Θ(G / sqrt(n_in n_out))`` (the clip rescales ``m`` and ``sqrt(v̂)``
alike, so only ε sees it: a width-independent factor of at most 1 at a steady gradient).

Matrices only, as in the paper: pytorch-optimizer steps 1-D parameters with its own AdamW
at ``lr_1d`` and ``weight_decay_1d`` (unless ``optimize_1d=True``), ignoring the group's lr,
so biases and norm gains go to another optimizer (``--others adamw``). Weight decay is
decoupled (``W ← (1 - η λ) W``).
"""

from typing import Any

import sympy as sp

from spectral.optimizers import records_on_first_use
from spectral.spec import OptimizerSpec
from spectral.symbols import G, n_in, n_out

SPEC = OptimizerSpec(
    name="mars",
    update_norm=n_in,
    eps=G / sp.sqrt(n_in * n_out),
    eps_label="MARS ε",
    applies_to="matrices",
    summary="AdamW on the variance-reduced gradient ∇W_t + γ β₁/(1-β₁)(∇W_t - ∇W_{t-1})",
    paper="Yuan et al. 2024, Alg. 2 (MARS-AdamW); as AdamW, App. C.5",
    doc=__doc__,
)

# TORCH (the torch implementation the generated module builds, and how it was checked),
# PROBE (how `spectral probe` steps it to measure its update) and JAX (the optax
# implementation of the generated JAX module, or why it has none): built on first use,
# since deriving the rules needs SPEC alone (spectral.optimizers.records_on_first_use).
def _records() -> dict[str, Any]:
    from spectral.optimizers.entry import NoJax, ProbeSetup, TorchImpl

    TORCH = TorchImpl(
        cls="pytorch_optimizer.MARS",
        fixed={"mars_type": "adamw"},
        default_eps=1e-08,
        sharding="gathered",
        notes=(
            "MARS: pytorch_optimizer.MARS(mars_type='adamw'), AdamW on the variance-reduced",
            "gradient g_t + gamma beta1/(1 - beta1) (g_t - g_(t-1)): sign-like. eps (base",
            "default 1e-8) is added to sqrt(v_hat), scaled per role. Matrices only: it",
            "steps 1-D parameters with its own AdamW at lr_1d (ignoring the group lr), so",
            "biases and norm gains need another optimizer (--others adamw).",
        ),
    )

    PROBE = ProbeSetup(
        label="pytorch_optimizer.MARS(mars_type='adamw')",
        kwargs={"mars_type": "adamw"},
    )

    JAX = NoJax(
        reason="no optax factory is set up for it",
    )
    return {"TORCH": TORCH, "PROBE": PROBE, "JAX": JAX}


__getattr__ = records_on_first_use(__name__, _records)
