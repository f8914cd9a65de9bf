"""AdamW: ``A = m̂/(sqrt(v̂) + ε)``, idealised as ``sign(∇W)``.

Idealised update (App. C.5): with ``β₁ = β₂ = 0`` and ``ε = 0`` Adam is sign descent. For a
low-rank gradient ``‖sign(∇W)‖_2 = Θ(‖sign(∇W)‖_F) = Θ(sqrt(n_in n_out))``, so
``‖A‖_R = n_in``. ε is added to ``sqrt(v̂)``, the entrywise RMS of the gradient,
``‖∇W‖_F / sqrt(n_in n_out) = Θ(G / sqrt(n_in n_out))``. Applies to weights and biases.
"""

from typing import Any

import sympy as sp

from spectral.engine.axes import ADAM_SDE
from spectral.optimizers import records_on_first_use
from spectral.spec import OptimizerSpec
from spectral.symbols import G, n_in, n_out

SPEC = OptimizerSpec(
    name="adamw",
    update_norm=n_in,
    eps=G / sp.sqrt(n_in * n_out),
    eps_label="AdamW ε",
    applies_to="all",
    summary="m̂ / (sqrt(v̂) + ε) ≈ sign(∇W), decoupled weight decay",
    paper="App. C.5 (Table adamw-mup); k = 1: App. D.4",
    lr_batch=ADAM_SDE[0],
    eps_batch=ADAM_SDE[1],
    momentum_batch=ADAM_SDE[2],
    doc=__doc__,
)

# TORCH (the torch implementation the generated module builds, and how it was checked),
# PROBE (how `spectral probe` steps it to measure its update) and JAX (the optax
# implementation of the generated JAX module, or why it has none): built on first use,
# since deriving the rules needs SPEC alone (spectral.optimizers.records_on_first_use).
def _records() -> dict[str, Any]:
    from spectral.optimizers.entry import JaxImpl, ProbeSetup, TorchImpl

    TORCH = TorchImpl(
        cls="torch.optim.AdamW",
        default_eps=1e-08,
        sharding="elementwise",
        notes=(
            "AdamW: torch.optim.AdamW. Idealised (beta1 = beta2 = 0, eps = 0): sign(grad),",
            "dW = -eta (A + lambda W). torch decays decoupled, theta *= 1 - lr * wd, as",
            "assumed; eps is added to sqrt(v_hat), the declared place, and is scaled per",
            "role (group key 'eps'; base default 1e-8). Momentum and bias correction keep",
            "the entries of the step Theta(1), so they do not change the scaling. torch's",
            "default weight_decay=0.01 is replaced by each group's value.",
        ),
    )

    PROBE = ProbeSetup(
        label="torch.optim.AdamW",
    )

    JAX = JaxImpl(
        transform="optax.adamw",
        notes=(
            "AdamW: optax.adamw = scale_by_adam, add_decayed_weights, scale by -lr:",
            "dW = -eta (m_hat / (sqrt(v_hat) + eps) + lambda W), the step of",
            "torch.optim.AdamW (decoupled decay, eps outside the square root, the declared",
            "place; b1 = 0.9, b2 = 0.999 in both). eps is scaled per role (base default",
            "1e-8, optax's and torch's). optax's default weight_decay=1e-4 is replaced by",
            "each role's value.",
        ),
    )
    return {"TORCH": TORCH, "PROBE": PROBE, "JAX": JAX}


__getattr__ = records_on_first_use(__name__, _records)
