"""Θ-calculus laws and the incomparable case."""

from __future__ import annotations

from fractions import Fraction as F

import pytest
from hypothesis import given
from hypothesis import strategies as st

from spectral import IncomparableError, Theta

n, L, one = Theta.monomial(1, 0), Theta.monomial(0, 1), Theta.one()
rationals = st.fractions(min_value=-4, max_value=4, max_denominator=6)
monomials = st.builds(Theta.monomial, rationals, rationals)


@st.composite
def thetas(draw):
    """Random max/min/product combinations of monomials."""
    items = draw(st.lists(monomials, min_size=1, max_size=4))
    out = items[0]
    for item in items[1:]:
        op = draw(st.sampled_from(["max", "min", "mul"]))
        out = Theta.maximum(out, item) if op == "max" else Theta.minimum(out, item) if op == "min" else out * item
    return out


@given(rationals, rationals, rationals, rationals)
@pytest.mark.slow  # seconds on the 2-core CPU: out of pytest -m "not slow"
def test_products_add_exponents(a, b, c, d):
    assert (Theta.monomial(a, b) * Theta.monomial(c, d)).exponents == (a + c, b + d)


@given(rationals, rationals, rationals)
@pytest.mark.slow  # seconds on the 2-core CPU: out of pytest -m "not slow"
def test_powers_scale_exponents(a, b, p):
    assert (Theta.monomial(a, b) ** p).exponents == (a * p, b * p)


@given(thetas(), thetas())
@pytest.mark.slow  # seconds on the 2-core CPU: out of pytest -m "not slow"
def test_max_min_and_order_laws(f, g):
    hi, lo = Theta.maximum(f, g), Theta.minimum(f, g)
    assert f.le(hi) and g.le(hi) and lo.le(f) and lo.le(g)
    assert hi * lo == f * g  # max·min = product, pointwise in the exponent
    assert Theta.maximum(f, f) == f


@given(thetas(), thetas(), thetas())
@pytest.mark.slow  # seconds on the 2-core CPU: out of pytest -m "not slow"
def test_product_distributes_over_max(f, g, h):
    assert Theta.maximum(f, g) * h == Theta.maximum(f * h, g * h)


@given(thetas())
@pytest.mark.slow  # seconds on the 2-core CPU: out of pytest -m "not slow"
def test_reciprocal_swaps_max_and_min(f):
    assert (f * f.reciprocal()) == one


def test_comparable_terms_collapse_to_the_dominant_one():
    assert Theta.maximum(n, n * L, one) == n * L
    assert Theta.minimum(n ** F(1, 2), n) == n ** F(1, 2)


def test_incomparable_terms_are_never_a_monomial():
    s = Theta.maximum(n, L)
    assert not s.is_monomial
    assert str(s) == "max(n, L)"
    assert str(Theta.minimum(n, L)) == "min(n, L)"
    with pytest.raises(IncomparableError, match=r"max\(n, L\) is not a single monomial"):
        _ = s.exponents
    # n·L / max(n, L) = min(n, L): still not a monomial
    assert (n * L / s) == Theta.minimum(n, L)


@pytest.mark.parametrize(
    "theta,text",
    [
        (one, "1"),
        (n, "n"),
        (n.reciprocal(), "1/n"),
        (n ** F(1, 2) / L, "√n/L"),
        ((n * L ** F(1, 2)).reciprocal(), "1/(n√L)"),
        (L ** -2, "1/L²"),
        (n ** F(3, 2), "n³ᐟ²"),
    ],
)
def test_rendering(theta, text):
    assert str(theta) == text


def test_one_object_per_value_and_equality_by_value():
    """Products, powers and max/min return one object per value (cached, so a derivation
    compares by identity); == and hash stay by value for a Theta built directly."""
    built = Theta(((F(0), F(-1)), (F(1), F(1, 2))))  # √n/L, not through the caches
    via_ops = n ** F(1, 2) / L
    assert via_ops is n ** F(1, 2) * L**-1 is Theta.monomial(F(1, 2), -1)
    assert built is not via_ops and built == via_ops and hash(built) == hash(via_ops)
    assert built != n and n != built and built != "√n/L"
    assert n**2 is n ** F(2) is n * n and str(n**2) == "n²"
    assert (n**0.5).points == (n ** F(1, 2)).points == ((F(0), F(0)), (F(1), F(1, 2)))
    assert Theta.one() is Theta.monomial(0, 0) is n**0 is n * n.reciprocal()
    assert Theta.maximum(n, L) is Theta.maximum(n, L) and Theta.maximum(n, L) != Theta.minimum(n, L)
