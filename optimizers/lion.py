"""Lion: ``A = sign(β₁ m + (1-β₁) ∇W)``.

Idealised update (App. C.5, Lion): without momentum this is sign descent, as for AdamW:
``‖A‖_R = n_in`` for a low-rank gradient. Lion has no ε. Applies to weights and biases.
"""

from typing import Any

from spectral.optimizers import records_on_first_use
from spectral.spec import OptimizerSpec
from spectral.symbols import n_in

SPEC = OptimizerSpec(
    name="lion",
    update_norm=n_in,
    applies_to="all",
    summary="sign of interpolated momentum",
    paper="App. C.5 Lion (Table adamw-mup); k = 1: App. D.4",
    doc=__doc__,
)

# TORCH (the torch implementation the generated module builds, and how it was checked),
# PROBE (how `spectral probe` steps it to measure its update) and JAX (the optax
# implementation of the generated JAX module, or why it has none): built on first use,
# since deriving the rules needs SPEC alone (spectral.optimizers.records_on_first_use).
def _records() -> dict[str, Any]:
    from spectral.optimizers.entry import JaxImpl, ProbeSetup, TorchImpl

    TORCH = TorchImpl(
        cls="pytorch_optimizer.Lion",
        fixed={"weight_decouple": True},
        sharding="elementwise",
        notes=(
            "Lion: pytorch_optimizer.Lion, sign(beta1 m + (1 - beta1) g) with decoupled",
            "weight decay (lr * wd; weight_decouple=True, its default): the idealised",
            "sign step. Lion has no eps.",
        ),
    )

    PROBE = ProbeSetup(
        label="pytorch_optimizer.Lion",
    )

    JAX = JaxImpl(
        transform="optax.lion",
        notes=(
            "Lion: optax.lion, sign(b1 m + (1 - b1) g) with decoupled weight decay (lr *",
            "wd), b1 = 0.9, b2 = 0.99: the idealised sign step, and the step of",
            "pytorch_optimizer.Lion. optax's default weight_decay=1e-3 is replaced by each",
            "role's value. Lion has no eps.",
        ),
    )
    return {"TORCH": TORCH, "PROBE": PROBE, "JAX": JAX}


__getattr__ = records_on_first_use(__name__, _records)
