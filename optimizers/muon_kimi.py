"""Muon-Kimi: Muon with RMS matching, ``A = 0.2·sqrt(max(n_in, n_out))·U Vᵀ``.

Idealised update (Sec. 4.2, App. C.1): with the compact SVD ``∇W = U Σ Vᵀ``, the step is
``ΔW = -η (0.2 sqrt(max(n_in, n_out)) U Vᵀ + λ W)``. ``‖U Vᵀ‖_2 = 1``, so
``‖A‖_R = 0.2 sqrt(max(n_in, n_out)) sqrt(n_in/n_out)``. Matrices only. This is exactly
``torch.optim.Muon(adjust_lr_fn="match_rms_adamw")``.
"""

from typing import Any

import sympy as sp

from spectral.engine.axes import MUON_HORIZON
from spectral.optimizers import records_on_first_use
from spectral.spec import OptimizerSpec
from spectral.symbols import n_in, n_out

SPEC = OptimizerSpec(
    name="muon-kimi",
    update_norm=sp.Rational(1, 5) * sp.sqrt(sp.Max(n_in, n_out)) * sp.sqrt(n_in / n_out),
    applies_to="matrices",
    summary="0.2·sqrt(max(n_in, n_out)) · orthogonalised gradient U Vᵀ",
    paper="Sec. 4.2, App. C.1 (Table muon-kimi-wd); k = 1: App. D.1",
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
        fixed={"adjust_lr_fn": "match_rms_adamw"},
        sharding="gathered",
        notes=(
            "Muon-Kimi: torch.optim.Muon(adjust_lr_fn='match_rms_adamw'), which steps by",
            "lr * 0.2 * sqrt(max(A, B)) * NS(momentum) and decays theta *= 1 - lr * wd with",
            "the unadjusted lr: exactly dW = -eta (0.2 sqrt(max(n_in, n_out)) U V^T +",
            "lambda W). Differences that do not change the scaling: Newton-Schulz (5",
            "steps, bfloat16) returns U S' V^T with S' in about (0.5, 1.5) rather than",
            "U V^T, and the step uses Nesterov momentum 0.95. torch's default",
            "weight_decay=0.1 is replaced by each group's value.",
        ),
    )

    PROBE = ProbeSetup(
        label="torch.optim.Muon(adjust_lr_fn='match_rms_adamw')",
        kwargs={"adjust_lr_fn": "match_rms_adamw"},
    )

    JAX = JaxImpl(
        transform="optax.contrib.muon",
        fixed={"consistent_rms": 0.2},
        notes=(
            "Muon-Kimi: optax.contrib.muon(consistent_rms=0.2), which multiplies the",
            "orthogonalised momentum by 0.2 * sqrt(max(fan_in, fan_out)), then adds",
            "wd * W and scales by -lr: exactly dW = -eta (0.2 sqrt(max(n_in, n_out)) U V^T",
            "+ lambda W), the catalog's update RMS, as torch.optim.Muon(adjust_lr_fn=",
            "'match_rms_adamw') does. No compensation is needed (the default",
            "consistent_rms=None would scale by sqrt(max(1, fan_out / fan_in)) instead).",
            "Differences from torch.optim.Muon that do not change the scaling: (1)",
            "Newton-Schulz runs in the momentum's dtype (float32 here; torch casts to",
            "bfloat16) and divides by ||X||_F + 1e-8 (torch: max(||X||_F, 1e-7)); (2) with",
            "nesterov=True (both defaults) optax bias-corrects the momentum and the",
            "gradient separately, b m_t / (1 - b^(t+1)) + (1 - b) g_t / (1 - b^t), where",
            "torch takes b m_t + (1 - b) g_t: the same direction at step 1, a slightly",
            "different mix later (nesterov=False: both orthogonalise m_t, identical). 2-D",
            "kernels only; Newton-Schulz is transpose-equivariant, so a (in, out) flax",
            "kernel and a (out, in) torch weight get the same step.",
        ),
    )
    return {"TORCH": TORCH, "PROBE": PROBE, "JAX": JAX}


__getattr__ = records_on_first_use(__name__, _records)
