"""Lion: ``A = sign(β₁ m + (1-β₁) ∇W)``.

Idealised update (App. C.5, Lion): without momentum this is sign descent, as for AdamW:
``‖A‖_R = n_in`` for a low-rank gradient. Lion has no ε. Applies to weights and biases.
"""

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
