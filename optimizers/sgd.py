"""SGD: the raw gradient, ``A = ∇W``.

Idealised update (App. C.3): ``ΔW = -η (∇W + λ W)``, so ``‖A‖_R = sqrt(n_in/n_out)·G``
with ``G = ‖∇W‖_2``, whose scale the engine derives per role from the loss-sensitivity
argument of App. C.4. Applies to weights and biases.
"""

from typing import Any

import sympy as sp

from spectral.engine.axes import SGD_LINEAR
from spectral.optimizers import records_on_first_use
from spectral.spec import OptimizerSpec
from spectral.symbols import G, n_in, n_out

SPEC = OptimizerSpec(
    name="sgd",
    update_norm=sp.sqrt(n_in / n_out) * G,
    applies_to="all",
    summary="raw gradient ∇W",
    paper="App. C.3 (Table sgd-mup); k = 1: App. D.3",
    lr_batch=SGD_LINEAR,
    doc=__doc__,
)

# TORCH (the torch implementation the generated module builds, and how it was checked),
# PROBE (how `spectral probe` steps it to measure its update) and JAX (the optax
# implementation of the generated JAX module, or why it has none): built on first use,
# since deriving the rules needs SPEC alone (spectral.optimizers.records_on_first_use).
def _records() -> dict[str, Any]:
    from spectral.optimizers.entry import JaxImpl, ProbeSetup, TorchImpl

    TORCH = TorchImpl(
        cls="torch.optim.SGD",
        sharding="elementwise",
        notes=(
            "SGD: torch.optim.SGD. Idealised: dW = -eta (grad + lambda W). torch's",
            "weight_decay is coupled (added to the gradient before momentum); with the",
            "default momentum=0 the step is exactly the idealised one, and with momentum mu",
            "both terms grow by about 1/(1 - mu) alike, so the rules still hold.",
        ),
    )

    PROBE = ProbeSetup(
        label="torch.optim.SGD(momentum=0)",
        kwargs={"momentum": 0.0},
    )

    JAX = JaxImpl(
        transform="optax.sgd",
        recipe="coupled",
        notes=(
            "SGD: optax.add_decayed_weights, then optax.sgd. Idealised: dW = -eta (grad +",
            "lambda W). The decay is added to the gradient (coupled, as torch.optim.SGD",
            "does); with the default momentum=None the step is exactly the idealised one,",
            "and with momentum mu (optax.trace, torch's buffer without dampening) both",
            "terms grow by about 1/(1 - mu) alike, so the rules still hold.",
        ),
    )
    return {"TORCH": TORCH, "PROBE": PROBE, "JAX": JAX}


__getattr__ = records_on_first_use(__name__, _records)
