"""SignSGD / Signum: ``A = sign(m)``, ``m = β m + (1-β) ∇W`` (``β = 0``: SignSGD).

Idealised update (Bernstein et al. 2018, Alg. 1 and 3; implementation
``pytorch_optimizer.SignSGD``, momentum 0.9 by default, i.e. Signum): every entry of the
step is ±1, and for a low-rank gradient ``‖sign(∇W)‖_2 = Θ(sqrt(n_in n_out))``, so
``‖A‖_R = n_in`` — Lion's and AdamW's scale. No ε. Weight decay is decoupled
(``weight_decouple=True``, its default). Applies to weights and biases.
"""

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
