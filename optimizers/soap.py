"""SOAP: Adam in Shampoo's eigenbasis.

Idealised update (App. C.7): without momentum, Adam reduces to ``sign`` of the rotated
gradient ``Q_Lᵀ G Q_R = diag(Σ, 0)``, which rotates back to ``U Vᵀ`` — Muon's direction,
``‖A‖_R = sqrt(n_in/n_out)``. Matrices only. ε is Adam's, added to ``sqrt(v̂)`` of the
*rotated* gradient, whose nonzero entries are the singular values ``Σ`` of a low-rank
gradient, ``Θ(‖∇W‖_2)``; so ``ε = Θ(G)`` (not Adam's entrywise ``G/sqrt(n_in n_out)``).
The paper tabulates no ε for SOAP; ``pytorch_optimizer.SOAP`` reads it from ``eps``.
"""

import sympy as sp

from spectral.spec import OptimizerSpec
from spectral.symbols import G, n_in, n_out

SPEC = OptimizerSpec(
    name="soap",
    update_norm=sp.sqrt(n_in / n_out),
    eps=G,
    eps_label="SOAP ε",
    eps_key="eps",  # pytorch_optimizer.SOAP(eps=1e-8)
    applies_to="matrices",
    summary="Adam in the eigenbasis of Shampoo's preconditioners",
    paper="App. C.7 (Table muon-wd); k = 1: App. D.2",
    doc=__doc__,
)
