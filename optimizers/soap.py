"""SOAP: Adam in Shampoo's eigenbasis.

Idealised update (App. C.7): without momentum, Adam reduces to ``sign`` of the rotated
gradient ``Q_Lᵀ G Q_R = diag(Σ, 0)``, which rotates back to ``U Vᵀ`` — Muon's direction,
``‖A‖_R = sqrt(n_in/n_out)``. The paper tabulates no ε for SOAP. Matrices only.
"""

import sympy as sp

from spectral.spec import OptimizerSpec
from spectral.symbols import n_in, n_out

SPEC = OptimizerSpec(
    name="soap",
    update_norm=sp.sqrt(n_in / n_out),
    applies_to="matrices",
    summary="Adam in the eigenbasis of Shampoo's preconditioners",
    paper="App. C.7 (Table muon-wd); k = 1: App. D.2",
    doc=__doc__,
)
