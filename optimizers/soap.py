"""SOAP: Adam in Shampoo's eigenbasis.

Idealised update (App. C.7): without momentum, Adam reduces to ``sign`` of the rotated
gradient ``Q_Lᵀ G Q_R = diag(Σ, 0)``, which rotates back to ``U Vᵀ`` — Muon's direction,
``‖A‖_R = sqrt(n_in/n_out)``. The paper tabulates no ε for SOAP. Matrices only.
"""

import sympy as sp

from spectral.optimizers.entry import NoJax, TorchImpl
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

TORCH = TorchImpl(
    cls="pytorch_optimizer.SOAP",
    sharding="gathered",
    notes=(
        "SOAP: pytorch_optimizer.SOAP, Adam in the eigenbasis of Shampoo's L and R.",
        "Decoupled weight decay (lr * wd), as assumed. Its first step only sets up the",
        "eigenbasis (no update). Adam's eps (default 1e-8) is not scaled: the paper",
        "tabulates none for SOAP. A dimension above max_precondition_dim (10000) is",
        "not rotated, and the step there is Adam's, not Muon's scale: keep large",
        "embedding tables with --others. Default weight_decay=0.01 is replaced.",
    ),
)
"""The torch implementation the generated module builds, and how it was checked."""

JAX = NoJax(
    reason="optax implements no SOAP",
)
"""The optax implementation of the generated JAX module, or why it has none."""
