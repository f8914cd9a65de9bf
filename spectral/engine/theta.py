"""Exact Θ-calculus for scales ``Θ(n^a L^b)`` with rational ``a, b``.

Why a piecewise-linear function: width ``n`` and depth ``L`` grow jointly at *any*
relative rate. Write ``n = e^{s·u}``, ``L = e^{s·(1-u)}`` with a direction ``u ∈ [0, 1]``
and ``s → ∞``; then ``log Θ(n^a L^b) / s = a·u + b·(1-u)``, a line in ``u``. Products add
these lines, powers scale them, and ``Θ(f + g) = Θ(max(f, g))`` takes the pointwise
maximum. Every expression built from monomials with ``* / ** + max min`` is therefore a
continuous piecewise-linear function of ``u``, and two expressions have the same Θ-scale
exactly when their functions are equal. A quantity is a single monomial exactly when its
function is a straight line; ``n + L`` (a kink at ``u = 1/2``) is not, and is never
reported as one.

>>> n, L = Theta.monomial(1, 0), Theta.monomial(0, 1)
>>> str(n * L ** Fraction(-1, 2))
'n/√L'
>>> str(Theta.maximum(n, n ** 2))
'n²'
>>> Theta.maximum(n, L).is_monomial
False
>>> str(Theta.maximum(n, L))
'max(n, L)'
"""

from __future__ import annotations

from functools import cache

from dataclasses import dataclass
from fractions import Fraction
from itertools import pairwise
from collections.abc import Callable, Iterable

from ..errors import IncomparableError

__all__ = ["Theta", "format_monomial"]

Point = tuple[Fraction, Fraction]
_ZERO, _ONE = Fraction(0), Fraction(1)


def _as_fraction(x: int | Fraction) -> Fraction:
    return x if isinstance(x, Fraction) else Fraction(x)


def _interp(points: tuple[Point, ...], u: Fraction) -> Fraction:
    """Value of the piecewise-linear function at ``u`` (``points`` sorted by ``u``)."""
    for (u0, v0), (u1, v1) in pairwise(points):
        if u0 <= u <= u1:
            return v0 + (v1 - v0) * (u - u0) / (u1 - u0)
    raise ValueError(f"u={u} outside [0, 1]")  # pragma: no cover - internal invariant


def _canonical(points: Iterable[Point]) -> tuple[Point, ...]:
    """Drop interior points that lie on the line through their neighbours."""
    pts = list(points)
    out: list[Point] = [pts[0]]
    for i in range(1, len(pts) - 1):
        (u0, v0), (u1, v1), (u2, v2) = out[-1], pts[i], pts[i + 1]
        if (v1 - v0) * (u2 - u0) != (v2 - v0) * (u1 - u0):
            out.append(pts[i])
    out.append(pts[-1])
    return tuple(out)


def _grid(a: Theta, b: Theta) -> list[Fraction]:
    """Breakpoints of both functions plus the points where they cross."""
    us = sorted({u for u, _ in a.points} | {u for u, _ in b.points})
    grid = [us[0]]
    for u0, u1 in pairwise(us):
        d0 = a(u0) - b(u0)
        d1 = a(u1) - b(u1)
        if d0 * d1 < 0:
            grid.append(u0 + (u1 - u0) * d0 / (d0 - d1))
        grid.append(u1)
    return grid


@dataclass(frozen=True)
class Theta:
    """A Θ-scale as a canonical piecewise-linear exponent function on ``u ∈ [0, 1]``.

    ``points`` holds ``(u, exponent)`` pairs from ``u = 0`` (pure depth growth) to
    ``u = 1`` (pure width growth), with collinear points removed, so ``==`` is equality
    of Θ-scales.
    """

    points: tuple[Point, ...]

    def __hash__(self) -> int:
        # computed once per value: the products' cache hashes the same few Θ-values
        # thousands of times; of the integers, since a Fraction's hash is a modular inverse
        # in Python (equal Fractions have equal numerators and denominators)
        try:
            return self.__dict__["_hash"]  # type: ignore[no-any-return]
        except KeyError:
            h = hash(tuple((u.numerator, u.denominator, v.numerator, v.denominator) for u, v in self.points))
            object.__setattr__(self, "_hash", h)
            return h

    def __eq__(self, other: object) -> bool:
        # the same value is most often the same object (the caches below return one object
        # per value); unequal cached hashes settle the rest without comparing Fractions
        if self is other:
            return True
        if not isinstance(other, Theta):
            return NotImplemented
        d, e = self.__dict__, other.__dict__
        if "_hash" in d and "_hash" in e and d["_hash"] != e["_hash"]:
            return False
        return self.points == other.points

    # -- construction -------------------------------------------------------------
    @classmethod
    def monomial(cls, a: int | Fraction = 0, b: int | Fraction = 0) -> Theta:
        """``Θ(n^a L^b)``."""
        a, b = _as_fraction(a), _as_fraction(b)
        return _interned(cls(((_ZERO, b), (_ONE, a))))

    @classmethod
    def one(cls) -> Theta:
        return _THETA_ONE

    def __call__(self, u: Fraction) -> Fraction:
        return _interp(self.points, u)

    # -- arithmetic -------------------------------------------------------------
    def _combine(self, other: Theta, op: Callable[[Fraction, Fraction], Fraction]) -> Theta:
        if len(self.points) == 2 and len(other.points) == 2:  # fast path: comparable monomials
            (_, b1), (_, a1) = self.points
            (_, b2), (_, a2) = other.points
            if (a1 >= a2 and b1 >= b2) or (a1 <= a2 and b1 <= b2):
                upper = self if (a1 >= a2 and b1 >= b2) else other
                lower = other if upper is self else self
                return upper if op is max else lower
        grid = _grid(self, other)
        return Theta(_canonical((u, op(self(u), other(u))) for u in grid))

    def __mul__(self, other: Theta) -> Theta:
        return _theta_product(self, other)

    def _mul(self, other: Theta) -> Theta:
        if len(self.points) == 2 and len(other.points) == 2:  # fast path: two monomials
            (_, b1), (_, a1) = self.points
            (_, b2), (_, a2) = other.points
            return Theta(((_ZERO, b1 + b2), (_ONE, a1 + a2)))
        us = sorted({u for u, _ in self.points} | {u for u, _ in other.points})
        return Theta(_canonical((u, self(u) + other(u)) for u in us))

    def __truediv__(self, other: Theta) -> Theta:
        return self * other.reciprocal()

    def reciprocal(self) -> Theta:
        return _theta_power(self, -1)

    def __pow__(self, p: int | Fraction) -> Theta:
        return _theta_power(self, p)

    def _pow(self, p: int | Fraction) -> Theta:
        p = p if isinstance(p, int) else _as_fraction(p)  # an integer multiplies faster
        if p == 0:
            return Theta.one()
        if p == 1:
            return self
        return Theta(tuple((u, v * p) for u, v in self.points))

    @staticmethod
    def maximum(*items: Theta) -> Theta:
        """``Θ(max(f, g, …)) = Θ(f + g + …)``."""
        out = items[0]
        for item in items[1:]:
            out = _theta_combine(out, item, max)
        return out

    @staticmethod
    def minimum(*items: Theta) -> Theta:
        out = items[0]
        for item in items[1:]:
            out = _theta_combine(out, item, min)
        return out

    # -- comparison -------------------------------------------------------------
    def le(self, other: Theta) -> bool:
        """``self = O(other)`` along every joint growth direction of ``n`` and ``L``."""
        return all(self(u) <= other(u) for u in _grid(self, other))

    # -- monomials ----------------------------------------------------------------
    @property
    def is_monomial(self) -> bool:
        return len(self.points) == 2

    @property
    def exponents(self) -> tuple[Fraction, Fraction]:
        """``(a, b)`` of ``Θ(n^a L^b)``; raises :class:`IncomparableError` otherwise."""
        if not self.is_monomial:
            raise IncomparableError(f"{self} is not a single monomial n^a L^b")
        (_, b), (_, a) = self.points
        return a, b

    def pieces(self) -> list[tuple[Fraction, Fraction]]:
        """The monomials ``(a, b)`` whose lines make up this function, left to right."""
        out = []
        for (u0, v0), (u1, v1) in pairwise(self.points):
            slope = (v1 - v0) / (u1 - u0)
            b = v0 - slope * u0
            out.append((b + slope, b))
        return out

    def __str__(self) -> str:
        return _text(self)

    def _str(self) -> str:
        if self.is_monomial:
            return format_monomial(*self.exponents, "n", "L")
        slopes = [a - b for a, b in self.pieces()]
        kind = "max" if slopes == sorted(slopes) else "min" if slopes == sorted(slopes)[::-1] else None
        # width-heaviest piece first: max(n, L) rather than max(L, n)
        ordered = sorted(self.pieces(), key=lambda ab: (-ab[0], -ab[1]))
        inner = ", ".join(format_monomial(a, b, "n", "L") for a, b in ordered)
        return f"{kind}({inner})" if kind else f"piecewise({inner})"

    def __repr__(self) -> str:
        return f"Theta({self})"


_SUPERSCRIPT = str.maketrans("0123456789-/", "⁰¹²³⁴⁵⁶⁷⁸⁹⁻ᐟ")


def _power(symbol: str, e: Fraction, *, unicode: bool = True) -> str:
    """``symbol^e`` for ``e > 0``: ``n``, ``n²``, ``√n``, ``n^(3/2)``."""
    if e == 1:
        return symbol
    if e == Fraction(1, 2):
        return f"√{symbol}"
    if not unicode:
        return f"{symbol}^{e}" if e.denominator == 1 else f"{symbol}^({e})"
    return symbol + str(e).translate(_SUPERSCRIPT)


def _product(parts: list[tuple[str, Fraction]]) -> str:
    """``n√L``, ``√(nL)``, ``r_n r_L``, ``r_n√r_L`` for positive powers of one or two symbols."""
    if not parts:
        return "1"
    sep = "" if all(len(sym) == 1 for sym, _ in parts) else " "
    if len(parts) == 2 and parts[0][1] == parts[1][1] and parts[0][1] != 1:
        return _power(f"({sep.join(sym for sym, _ in parts)})", parts[0][1])
    # integer powers first, so a root sign only ever starts the last factor: n√L, r_n√r_L
    parts = sorted(parts, key=lambda p: p[1].denominator != 1)
    out = _power(*parts[0])
    for sym, e in parts[1:]:
        text = _power(sym, e)
        if out.startswith("√"):  # "√n·L", never the ambiguous "√nL"
            out += "·" + text
        else:
            out += ("" if text.startswith("√") else sep) + text
    return out


def format_monomial(a: Fraction, b: Fraction, n: str = "n", L: str = "L") -> str:
    """``n^a L^b`` as a fraction: ``1``, ``n``, ``1/n``, ``√n/L``, ``1/(n√L)``, ``1/√(nL)``."""
    top = _product([(s, e) for s, e in ((n, a), (L, b)) if e > 0])
    den = [(s, -e) for s, e in ((n, a), (L, b)) if e < 0]
    if not den:
        return top
    bottom = _product(den)
    simple = len(den) == 1 or bottom.startswith(("√(", "("))
    return f"{top}/{bottom}" if simple else f"{top}/({bottom})"


_INTERNED: dict[Theta, Theta] = {}


def _interned(t: Theta) -> Theta:
    """The one object of ``t``'s value (``t`` itself the first time)."""
    return _INTERNED.setdefault(t, t)


_THETA_ONE = _interned(Theta(((_ZERO, _ZERO), (_ONE, _ZERO))))


# Derivations multiply, raise, compare and print the same few Θ-values thousands of times
# (a catalog × k derivation: ~17 000 products, ~7 500 texts, a few hundred distinct
# values); each is a pure function of frozen values, so it is computed once, and a value
# met again is the same object (whose hash is cached and whose == is `is`).
@cache
def _theta_product(a: Theta, b: Theta) -> Theta:
    return _interned(a._mul(b))


@cache
def _theta_power(a: Theta, p: int | Fraction) -> Theta:
    return _interned(a._pow(p))


@cache
def _theta_combine(a: Theta, b: Theta, op: Callable[[Fraction, Fraction], Fraction]) -> Theta:
    return _interned(a._combine(b, op))


@cache
def _text(t: Theta) -> str:
    return t._str()
