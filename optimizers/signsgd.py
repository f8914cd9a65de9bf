"""SignSGD / Signum: ``A = sign(m)``, ``m = β m + (1-β) ∇W`` (``β = 0``: SignSGD).

Idealised update (Bernstein et al. 2018, Alg. 1 and 3; implementation
``pytorch_optimizer.SignSGD``, momentum 0.9 by default, i.e. Signum): every entry of the
step is ±1, and for a low-rank gradient ``‖sign(∇W)‖_2 = Θ(sqrt(n_in n_out))``, so
``‖A‖_R = n_in`` — Lion's and AdamW's scale. No ε. Weight decay is decoupled
(``weight_decouple=True``, its default). Applies to weights and biases.
"""

from typing import Any

from spectral.optimizers import records_on_first_use
from spectral.spec import OptimizerSpec
from spectral.symbols import n_in

SPEC = OptimizerSpec(
    name="signsgd",
    update_norm=n_in,
    applies_to="all",
    summary="sign of the momentum (Signum; SignSGD at momentum 0)",
    paper="Bernstein et al. 2018, Alg. 1 and 3; as Lion, App. C.5",
    doc=__doc__,
)

# TORCH (the torch implementation the generated module builds, and how it was checked),
# PROBE (how `spectral probe` steps it to measure its update) and JAX (the optax
# implementation of the generated JAX module, or why it has none): built on first use,
# since deriving the rules needs SPEC alone (spectral.optimizers.records_on_first_use).
def _records() -> dict[str, Any]:
    from spectral.optimizers.entry import NoJax, ProbeSetup, TorchImpl

    TORCH = TorchImpl(
        cls="pytorch_optimizer.SignSGD",
        fixed={"weight_decouple": True},
        sharding="elementwise",
        notes=(
            "SignSGD: pytorch_optimizer.SignSGD, sign of momentum 0.9 (Signum; momentum=0",
            "gives SignSGD): the idealised sign step, as Lion's. No eps. Decoupled weight",
            "decay (weight_decouple=True, its default, fixed here).",
        ),
    )

    PROBE = ProbeSetup(
        label="pytorch_optimizer.SignSGD (Signum, momentum 0.9)",
    )

    JAX = NoJax(
        reason="no optax factory is set up for it",
    )
    return {"TORCH": TORCH, "PROBE": PROBE, "JAX": JAX}


__getattr__ = records_on_first_use(__name__, _records)
