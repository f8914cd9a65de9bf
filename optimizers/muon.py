"""Muon: the orthogonalised gradient, ``A = U Vᵀ``.

Idealised update (App. C.2, eq. updaterule_muon): ``∇W = U Σ Vᵀ``,
``ΔW = -η (U Vᵀ + λ W)``; ``‖A‖_R = sqrt(n_in/n_out)``. Matrices only.
"""

import sympy as sp

from spectral.spec import OptimizerSpec
from spectral.symbols import n_in, n_out

SPEC = OptimizerSpec(
    name="muon",
    update_norm=sp.sqrt(n_in / n_out),
    applies_to="matrices",
    summary="orthogonalised gradient U Vᵀ (Newton–Schulz)",
    paper="App. C.2 (Table muon-wd); k = 1: App. D.2",
    doc=__doc__,
)
