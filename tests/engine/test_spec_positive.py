"""The declaration's positivity check: monomials read off their tree, the rest asked of sympy."""

from __future__ import annotations

import pytest
import sympy as sp

from spectral import SpecError, catalog
from spectral.spec import OptimizerSpec, _monomial_positive
from spectral.symbols import G, L, n_in, n_out


@pytest.mark.parametrize(
    "expr",
    [n_in, G / sp.sqrt(n_in * n_out), sp.Rational(3, 2) * n_in ** sp.Rational(3, 4) / L, G**2, sp.Integer(2)],
)
def test_monomials_of_positive_symbols_are_positive(expr):
    assert _monomial_positive(expr) is True
    assert expr.is_positive is True  # sympy agrees


@pytest.mark.parametrize(
    "expr",
    [
        -n_in,
        sp.Integer(0),
        n_in - n_out,
        sp.Max(1, n_out / n_in),  # positive, but not a monomial: sympy decides
        n_in ** sp.Symbol("p"),  # a symbolic exponent
        sp.Symbol("x") * n_in,  # a symbol of no known sign
        sp.Float(2.0) * n_in,
    ],
)
def test_anything_else_is_left_to_sympy(expr):
    assert _monomial_positive(expr) is False


@pytest.mark.parametrize("bad", [-n_in, sp.Integer(0), 0 * n_in, -G / n_in])
def test_non_positive_declarations_are_still_refused(bad):
    with pytest.raises(SpecError, match="is not positive"):
        OptimizerSpec(name="bad", update_norm=bad)


def test_catalog_monomials_agree_with_sympy():
    seen = 0
    for spec in catalog().values():
        for expr in (spec.update_norm, spec.eps):
            if expr is not None and _monomial_positive(expr):
                seen += 1
                assert expr.is_positive is True, (spec.name, expr)
    assert seen >= 20
