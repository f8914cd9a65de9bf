"""Sophia: ``A = clip(m / max(ρ h, ε), 1)``.

Idealised update (App. C.5, Sophia): every entry of ``A`` is at most 1 in magnitude, so
``‖A‖_R ≤ ‖1_{n_out×n_in}‖_R = n_in`` — the AdamW scale, which the paper adopts. The paper
tabulates no ε for Sophia. Applies to weights and biases.
"""

from spectral.spec import OptimizerSpec
from spectral.symbols import n_in

SPEC = OptimizerSpec(
    name="sophia",
    update_norm=n_in,
    applies_to="all",
    summary="clipped Hessian-preconditioned momentum",
    paper="App. C.5 Sophia (Table adamw-mup); k = 1: App. D.4",
    doc=__doc__,
)
