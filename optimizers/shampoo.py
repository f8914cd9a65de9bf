"""Shampoo: Kronecker-factored preconditioning, ``A = L̂^{-1/4} G R̂^{-1/4}``.

Idealised update (App. C.6): without momentum and ε, ``L̂ = G Gᵀ`` and ``R̂ = Gᵀ G`` turn
the step into ``U Vᵀ`` — Muon's direction, ``‖A‖_R = sqrt(n_in/n_out)``. Its ε is added to
``L̂`` and ``R̂``, whose spectral norm is ``‖∇W‖_2²``, so ``ε = Θ(G²)``. Matrices only.
pytorch-optimizer's ``Shampoo`` reads that ε from ``matrix_eps``.
"""

import sympy as sp

from spectral.spec import OptimizerSpec
from spectral.symbols import G, n_in, n_out

SPEC = OptimizerSpec(
    name="shampoo",
    update_norm=sp.sqrt(n_in / n_out),
    eps=G**2,
    eps_label="Shampoo ε",
    eps_key="matrix_eps",  # pytorch_optimizer.Shampoo(matrix_eps=1e-6)
    applies_to="matrices",
    summary="(L̂ + εI)^{-1/4} G (R̂ + εI)^{-1/4}, no grafting",
    paper="App. C.6 (Table muon-wd, Shampoo ε); k = 1: App. D.2",
    doc=__doc__,
)
