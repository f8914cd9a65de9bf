"""ADOPT: Adam with the current gradient left out of its own normalisation.

Idealised update (Taniguchi et al. 2024, Alg. 2; implementation ``pytorch_optimizer.ADOPT``):
``m_t = β₁ m_{t-1} + (1-β₁) clip(∇W_t / max(sqrt(v_{t-1}), ε), t^¼)``, ``ΔW = -η m_t``, and
only then ``v_t = β₂ v_{t-1} + (1-β₂) ∇W_t²``. With ``β₁ = β₂ = 0`` and a steady gradient
the step is ``∇W/|∇W| = sign(∇W)``: ``‖A‖_R = n_in`` for a low-rank gradient, as Adam's.
ε floors ``sqrt(v)``, the entrywise RMS of the gradient: ``Θ(G / sqrt(n_in n_out))``.
The first step only initialises ``v`` (no update). pytorch-optimizer's default
``weight_decouple=False`` adds ``λW`` to the gradient before the normalisation (coupled);
the generated module fixes ``weight_decouple=True`` (``W ← (1 - η λ) W``), the decay the
rules assume. Applies to weights and biases.
"""

from typing import Any

import sympy as sp

from spectral.optimizers import records_on_first_use
from spectral.spec import OptimizerSpec
from spectral.symbols import G, n_in, n_out

SPEC = OptimizerSpec(
    name="adopt",
    update_norm=n_in,
    eps=G / sp.sqrt(n_in * n_out),
    eps_label="ADOPT ε",
    applies_to="all",
    summary="momentum of ∇W / max(sqrt(v_{t-1}), ε) ≈ sign(∇W) (pytorch_optimizer.ADOPT)",
    paper="Taniguchi et al. 2024, Alg. 2; as AdamW, App. C.5",
    doc=__doc__,
)

# TORCH (the torch implementation the generated module builds, and how it was checked),
# PROBE (how `spectral probe` steps it to measure its update) and JAX (the optax
# implementation of the generated JAX module, or why it has none): built on first use,
# since deriving the rules needs SPEC alone (spectral.optimizers.records_on_first_use).
def _records() -> dict[str, Any]:
    from spectral.optimizers.entry import NoJax, ProbeSetup, TorchImpl

    TORCH = TorchImpl(
        cls="pytorch_optimizer.ADOPT",
        fixed={"weight_decouple": True},
        default_eps=1e-06,
        sharding="gathered",
        notes=(
            "ADOPT: pytorch_optimizer.ADOPT, momentum of grad / max(sqrt(v_prev), eps):",
            "sign-like. Its first step only initialises v. eps floors sqrt(v) and is scaled",
            "per role (base default 1e-6). Its default weight_decouple=False adds lambda W",
            "to the gradient before the normalisation; weight_decouple=True is fixed here.",
        ),
    )

    PROBE = ProbeSetup(
        label="pytorch_optimizer.ADOPT",
        steps=2,
        note="ADOPT's first step only initialises v; the second step is measured",
    )

    JAX = NoJax(
        reason="no optax factory is set up for it",
    )
    return {"TORCH": TORCH, "PROBE": PROBE, "JAX": JAX}


__getattr__ = records_on_first_use(__name__, _records)
