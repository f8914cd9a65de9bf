"""The degree of a declared expression in the gradient scale ``G``.

An update homogeneous of degree ``p`` in the gradient (``A(θ∇) = θ^p A(∇)``) is what lets
a multiplier be absorbed (:mod:`spectral.engine.absorb`) and what picks the default batch
law of its lr (:mod:`spectral.engine.axes`): degree 0 (sign-like, orthogonalised,
normalised) or 1 (SGD-like).
"""

from __future__ import annotations

from fractions import Fraction

import sympy as sp

from ..errors import SpecError
from ..spec import OptimizerSpec, show
from ..symbols import G

__all__ = ["homogeneity"]

_T = sp.Symbol("theta", positive=True)


def _degree(spec: OptimizerSpec, field: str, expr: sp.Expr) -> Fraction:
    """``d`` with ``expr(θ G) = θ^d expr(G)``; refused when there is none."""
    ratio = sp.powsimp(sp.simplify(expr.subs(G, _T * G) / expr), force=True)
    if ratio == 1:
        return Fraction(0)
    base, exp = ratio.as_base_exp()
    if base == _T and exp.is_Rational:
        return Fraction(int(exp.p), int(exp.q))
    raise SpecError(
        f"{spec.name}: {field} = {show(expr)} is not homogeneous in G (scaling the gradient "
        "by θ does not scale it by a power of θ), so no lr, weight decay and ε absorb a "
        "multiplier; keep the multiplier hooks"
    )


def homogeneity(spec: OptimizerSpec) -> tuple[Fraction, Fraction | None]:
    """``(p, q)``: the degrees of the declared update size and ε in the gradient scale G.

    >>> from spectral.catalog import catalog
    >>> [homogeneity(catalog()[n]) for n in ("adamw", "sgd", "lion", "shampoo")]
    [(Fraction(0, 1), Fraction(1, 1)), (Fraction(1, 1), None), (Fraction(0, 1), None), (Fraction(0, 1), Fraction(2, 1))]
    """
    p = _degree(spec, "update_norm", spec.update_norm)
    q = None if spec.eps is None else _degree(spec, "eps", spec.eps)
    return p, q
