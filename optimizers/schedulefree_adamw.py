"""Schedule-Free AdamW: an AdamW step on ``z``, the parameter an average of the iterates.

Idealised update (Defazio et al. 2024, Alg. 1; implementation
``pytorch_optimizer.ScheduleFreeAdamW``): three sequences, the gradient taken at
``y_t = (1-β₁) z_t + β₁ x_t``:

    z_{t+1} = z_t - γ (∇W(y_t)/(sqrt(v̂) + ε) + λ y_t),    x_{t+1} = (1 - c_t) x_t + c_t z_{t+1},

with ``c_t = 1/t`` at a constant lr (``r = 0``, no warm-up). The ``z`` step is AdamW's
(``β₁ = 0`` in its numerator): ``≈ sign(∇W)``, ``‖A‖_R = n_in`` for a low-rank gradient,
ε added to ``sqrt(v̂)``, ``Θ(G / sqrt(n_in n_out))``.

Outside the framework's assumptions: the framework's step ``ΔW = -η (A + λW)`` acts on the
weights the gradient is evaluated at; here those are ``y``, which moves by
``(1-β₁) Δz + β₁ Δx`` — the current step plus an average over past steps. The rules hold
for ``γ``, the step of ``z``; ``y`` (and ``x``) move by a fixed, width-independent mix of
steps each of that size, so their width scaling is the declared one, but the framework says
nothing about the averaging itself (it has no notion of iterate averages). The weights
stored in the model during training are ``y``: call ``optimizer.eval()`` on this part
(``opt.parts["schedulefree-adamw"]``) before evaluating and ``.train()`` after — the
``x`` weights are the ones to evaluate. Applies to weights and biases.
"""

from typing import Any

import sympy as sp

from spectral.optimizers import records_on_first_use
from spectral.spec import OptimizerSpec
from spectral.symbols import G, n_in, n_out

SPEC = OptimizerSpec(
    name="schedulefree-adamw",
    update_norm=n_in,
    eps=G / sp.sqrt(n_in * n_out),
    eps_label="Schedule-Free AdamW ε",
    applies_to="all",
    summary="AdamW step on z, parameter y = (1-β₁) z + β₁ x, x the running average of z",
    paper="Defazio et al. 2024, Alg. 1 (iterate averaging outside the framework: see the note)",
    doc=__doc__,
)

# TORCH (the torch implementation the generated module builds, and how it was checked),
# PROBE (how `spectral probe` steps it to measure its update) and JAX (the optax
# implementation of the generated JAX module, or why it has none): built on first use,
# since deriving the rules needs SPEC alone (spectral.optimizers.records_on_first_use).
def _records() -> dict[str, Any]:
    from spectral.optimizers.entry import NoJax, ProbeSetup, TorchImpl

    TORCH = TorchImpl(
        cls="pytorch_optimizer.ScheduleFreeAdamW",
        default_eps=1e-08,
        sharding="elementwise",
        notes=(
            "Schedule-Free AdamW: pytorch_optimizer.ScheduleFreeAdamW. The lr is the step of",
            "z (AdamW's sign-like step, eps added to sqrt(v_hat), scaled per role, base",
            "default 1e-8); the model holds y = (1 - beta1) z + beta1 x, x the running",
            "average of z: a width-independent mix of steps of that size, but iterate",
            "averaging is outside the rules' assumptions. Call",
            'opt.parts["schedulefree-adamw"].eval() before evaluating and .train() after.',
            "Decay acts at y with the lr (decoupled).",
        ),
    )

    PROBE = ProbeSetup(
        label="pytorch_optimizer.ScheduleFreeAdamW",
        steps=3,
        note="the change of the stored weights y = (1-β₁) z + β₁ x at step 3 is measured",
    )

    JAX = NoJax(
        reason="no optax factory is set up for it",
    )
    return {"TORCH": TORCH, "PROBE": PROBE, "JAX": JAX}


__getattr__ = records_on_first_use(__name__, _records)
