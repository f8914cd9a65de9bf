"""SSO (Spectral Sphere Optimizer): a step of fixed RMS operator norm, ``‖A‖_R = 1``.

Idealised update (App. C.8): the update direction is normalised in the RMS→RMS operator
norm, so its size does not depend on width, depth or the gradient. Matrices only.
"""

import sympy as sp

from spectral.spec import OptimizerSpec

SPEC = OptimizerSpec(
    name="sso",
    update_norm=sp.Integer(1),
    applies_to="matrices",
    summary="spectral-sphere constrained step, unit RMS operator norm",
    paper="App. C.8 (Table sso-mup); k = 1: App. D.5",
    doc=__doc__,
)
