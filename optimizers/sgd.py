"""SGD: the raw gradient, ``A = ∇W``.

Idealised update (App. C.3): ``ΔW = -η (∇W + λ W)``, so ``‖A‖_R = sqrt(n_in/n_out)·G``
with ``G = ‖∇W‖_2``, whose scale the engine derives per role from the loss-sensitivity
argument of App. C.4. Applies to weights and biases.
"""

import sympy as sp

from spectral.spec import OptimizerSpec
from spectral.symbols import G, n_in, n_out

SPEC = OptimizerSpec(
    name="sgd",
    update_norm=sp.sqrt(n_in / n_out) * G,
    applies_to="all",
    summary="raw gradient ∇W",
    paper="App. C.3 (Table sgd-mup); k = 1: App. D.3",
    doc=__doc__,
)
