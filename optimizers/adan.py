"""Adan: Adam with Nesterov momentum from gradient differences.

Idealised update (Xie et al. 2024, Alg. 1; implementation ``pytorch_optimizer.Adan``):
``m`` averages ``∇W_t``, ``d`` averages ``∇W_t - ∇W_{t-1}``, ``v`` averages
``(∇W_t + β₂(∇W_t - ∇W_{t-1}))²``, and ``ΔW = -η (m + β₂ d)/(sqrt(v) + ε)``. With the
momenta at 0 and a steady gradient the step is ``sign(∇W)``: ``‖A‖_R = n_in`` for a
low-rank gradient, as Adam's; ε is added to ``sqrt(v)``, the entrywise RMS of the gradient,
``Θ(G / sqrt(n_in n_out))``. Weight decay is the paper's proximal form
``W ← W/(1 + η λ)`` (``weight_decouple=False``, the default), which is ``(1 - η λ) W`` to
first order in ``η λ``: decoupled, as assumed. Applies to weights and biases.
"""

from typing import Any

import sympy as sp

from spectral.optimizers import records_on_first_use
from spectral.spec import OptimizerSpec
from spectral.symbols import G, n_in, n_out

SPEC = OptimizerSpec(
    name="adan",
    update_norm=n_in,
    eps=G / sp.sqrt(n_in * n_out),
    eps_label="Adan ε",
    applies_to="all",
    summary="(m + β₂ d)/(sqrt(v) + ε), d the averaged gradient difference ≈ sign(∇W)",
    paper="Xie et al. 2024, Alg. 1; as AdamW, App. C.5",
    doc=__doc__,
)

# TORCH (the torch implementation the generated module builds, and how it was checked),
# PROBE (how `spectral probe` steps it to measure its update) and JAX (the optax
# implementation of the generated JAX module, or why it has none): built on first use,
# since deriving the rules needs SPEC alone (spectral.optimizers.records_on_first_use).
def _records() -> dict[str, Any]:
    from spectral.optimizers.entry import NoJax, ProbeSetup, TorchImpl

    TORCH = TorchImpl(
        cls="pytorch_optimizer.Adan",
        default_eps=1e-08,
        sharding="gathered",
        coupling_option="max_grad_norm",
        notes=(
            "Adan: pytorch_optimizer.Adan, (m + beta2 d) / (sqrt(v) + eps) with d the",
            "averaged gradient difference: sign-like at a steady gradient. eps is added to",
            "sqrt(v) and scaled per role (base default 1e-8). Decay is the paper's proximal",
            "W / (1 + lr * wd) (weight_decouple=False), = (1 - lr * wd) W to first order.",
        ),
    )

    PROBE = ProbeSetup(
        label="pytorch_optimizer.Adan",
    )

    JAX = NoJax(
        reason="no optax factory is set up for it",
    )
    return {"TORCH": TORCH, "PROBE": PROBE, "JAX": JAX}


__getattr__ = records_on_first_use(__name__, _records)
