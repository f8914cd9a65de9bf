"""Muon-Kimi: Muon with RMS matching, ``A = 0.2·sqrt(max(n_in, n_out))·U Vᵀ``.

Idealised update (Sec. 4.2, App. C.1): with the compact SVD ``∇W = U Σ Vᵀ``, the step is
``ΔW = -η (0.2 sqrt(max(n_in, n_out)) U Vᵀ + λ W)``. ``‖U Vᵀ‖_2 = 1``, so
``‖A‖_R = 0.2 sqrt(max(n_in, n_out)) sqrt(n_in/n_out)``. Matrices only. This is exactly
``torch.optim.Muon(adjust_lr_fn="match_rms_adamw")``.
"""

import sympy as sp

from spectral.spec import OptimizerSpec
from spectral.symbols import n_in, n_out

SPEC = OptimizerSpec(
    name="muon-kimi",
    update_norm=sp.Rational(1, 5) * sp.sqrt(sp.Max(n_in, n_out)) * sp.sqrt(n_in / n_out),
    applies_to="matrices",
    summary="0.2·sqrt(max(n_in, n_out)) · orthogonalised gradient U Vᵀ",
    paper="Sec. 4.2, App. C.1 (Table muon-kimi-wd); k = 1: App. D.1",
    doc=__doc__,
)
