"""AdamW: ``A = m̂/(sqrt(v̂) + ε)``, idealised as ``sign(∇W)``.

Idealised update (App. C.5): with ``β₁ = β₂ = 0`` and ``ε = 0`` Adam is sign descent. For a
low-rank gradient ``‖sign(∇W)‖_2 = Θ(‖sign(∇W)‖_F) = Θ(sqrt(n_in n_out))``, so
``‖A‖_R = n_in``. ε is added to ``sqrt(v̂)``, the entrywise RMS of the gradient,
``‖∇W‖_F / sqrt(n_in n_out) = Θ(G / sqrt(n_in n_out))``. Applies to weights and biases.
"""

import sympy as sp

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
    doc=__doc__,
)
