"""Fitting: exponents with intervals, their rounding, and the declaration they make.

Pure functions (sympy only for printing a declaration): :func:`fit_exponent` reads an
exponent and its interval from several runs, :func:`round_exponent` rounds it to a small
fraction only when that fraction lies inside the interval, and :func:`fit_declaration`
turns the three weight roles' exponents into ``a, b, c, g`` of
``n_in^a n_out^b min(n_in, n_out)^c G^g`` (:func:`declaration`), or says why they don't fit.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from fractions import Fraction
from typing import Any

from ..measure.fit import fit_line

__all__ = [
    "FLOOR",
    "MAX_DENOMINATOR",
    "MAX_HALF_WIDTH",
    "Exponent",
    "declaration",
    "fit_declaration",
    "fit_exponent",
    "round_exponent",
    "unrounded",
]

FLOOR = 0.03
"""Smallest half-width of an exponent's interval."""
MAX_DENOMINATOR = 4
"""Exponents are rounded to ``p/q`` with ``q ≤ 4`` (and only inside their interval)."""
MAX_HALF_WIDTH = 0.25
"""An exponent whose interval is wider than ±0.25 is too uncertain to round."""
_T975 = {1: 12.71, 2: 4.30, 3: 3.18, 4: 2.78, 5: 2.57, 6: 2.45, 7: 2.36, 8: 2.31, 9: 2.26}


def round_exponent(value: float, low: float, high: float) -> Fraction | None:
    """The fraction ``p/q`` (``q ≤ MAX_DENOMINATOR``) in ``[low, high]`` nearest ``value``.

    The simplest such fraction wins (smallest denominator, then nearest): an interval that
    holds both ``-1/2`` and ``-1/3`` is not evidence for thirds. ``None`` when no such
    fraction lies in the interval.

    >>> round_exponent(0.49, 0.45, 0.53)
    Fraction(1, 2)
    >>> round_exponent(-0.38, -0.59, -0.18)
    Fraction(-1, 2)
    >>> round_exponent(0.37, 0.35, 0.39) is None
    True
    >>> round_exponent(0.5, 0.1, 0.9) is None  # wider than ±0.25: too uncertain
    True
    """
    if not all(math.isfinite(x) for x in (value, low, high)) or high - low > 2 * MAX_HALF_WIDTH:
        return None
    best: tuple[int, float, Fraction] | None = None
    for q in range(1, MAX_DENOMINATOR + 1):
        for p in range(math.ceil(low * q - 1e-12), math.floor(high * q + 1e-12) + 1):
            f = Fraction(p, q)
            key = (f.denominator, abs(float(f) - value), f)
            if best is None or key[:2] < best[:2]:
                best = key
    return None if best is None else best[2]


@dataclass(frozen=True)
class Exponent:
    """A fitted exponent, its interval, and its rounding (``None``: no small fraction fits)."""

    value: float
    low: float
    high: float

    @property
    def rounded(self) -> Fraction | None:
        return round_exponent(self.value, self.low, self.high)

    def text(self) -> str:
        r = self.rounded
        shown = "—" if r is None else str(r)
        return f"{self.value:+.3f} [{self.low:+.3f}, {self.high:+.3f}] → {shown}"

    def to_dict(self) -> dict[str, Any]:
        r = self.rounded
        return {
            "value": round(self.value, 6),
            "interval": [round(self.low, 6), round(self.high, 6)],
            "rounded": None if r is None else str(r),
        }


def fit_exponent(xs: Sequence[float], curves: Sequence[Sequence[float]]) -> Exponent:
    """Exponent of ``y`` in ``x`` from several runs (one curve each): the mean slope, with a
    95% t-interval over the runs plus half the spread of the local slopes of the mean
    curve (a power law has none), and at least :data:`FLOOR` either side."""
    lx = [math.log(x) for x in xs]  # each run's slope on log–log axes, unrounded
    slopes = [fit_line(lx, [math.log(y) for y in c]).slope for c in curves]
    k = len(slopes)
    mean = sum(slopes) / k
    stat = 0.0
    if k > 1:
        sd = math.sqrt(sum((s - mean) ** 2 for s in slopes) / (k - 1))
        stat = _T975.get(k - 1, 2.0) * sd / math.sqrt(k)
    geo = [math.exp(sum(math.log(c[i]) for c in curves) / k) for i in range(len(xs))]
    local = [
        fit_line(lx[i : i + 2], [math.log(y) for y in geo[i : i + 2]]).slope
        for i in range(len(xs) - 1)
    ]
    drift = (max(local) - min(local)) / 2 if len(local) > 1 else 0.0
    half = max(FLOOR, stat + drift)
    return Exponent(round(mean, 6) + 0.0, round(mean - half, 6), round(mean + half, 6))


def _power(sym: str, e: Fraction) -> str:
    return f"{sym}**({e})" if e.denominator != 1 or e < 0 else f"{sym}**{e}"


def declaration(a: Fraction, b: Fraction, c: Fraction, g: Fraction) -> str:
    """``n_in^a n_out^b min(n_in, n_out)^c G^g`` as the spec-file expression sympy prints.

    >>> declaration(Fraction(1), Fraction(0), Fraction(-1, 2), Fraction(0))
    'n_in/sqrt(min(n_in, n_out))'
    >>> declaration(Fraction(1, 2), Fraction(-1, 2), Fraction(0), Fraction(1))
    'G*sqrt(n_in)/sqrt(n_out)'
    """
    import sympy as sp

    from ..spec import show
    from ..symbols import G, n_in, n_out

    def rat(x: Fraction) -> sp.Rational:
        return sp.Rational(x.numerator, x.denominator)

    expr = n_in ** rat(a) * n_out ** rat(b) * sp.Min(n_in, n_out) ** rat(c) * G ** rat(g)
    return show(expr)


def unrounded(e: Exponent, var: str) -> str:
    """Why ``e`` has no rounding, after its value and interval."""
    head = f"{e.value:+.3f} [{e.low:+.3f}, {e.high:+.3f}]: "
    half = (e.high - e.low) / 2
    if half > MAX_HALF_WIDTH:
        why = (
            "the seeds and gradient ranks disagree, or the local slope drifts across the "
            "widths"
            if var == "n"
            else "the local slope drifts across G = 0.1, 1, 10 (a clip or a floor acting "
            "in that range?)"
        )
        return head + (
            f"the interval (±{half:.2f}) is wider than ±{MAX_HALF_WIDTH} — {why} — so no "
            f"power of {var} is supported"
        )
    return head + (
        f"no fraction p/q with q ≤ {MAX_DENOMINATOR} in the interval, so it is not a simple "
        f"power of {var} over the measured range"
    )


def fit_declaration(
    fits: dict[str, Exponent], gs: dict[str, Exponent], label: str
) -> tuple[dict[str, Fraction] | None, list[str]]:
    """``a, b, c, g`` from the three weight roles' exponents, or the reasons they don't fit."""
    problems = []
    r = {role: fits[role].rounded for role in ("input_weight", "hidden_weight", "output_weight")}
    for role, value in r.items():
        if value is None:
            problems.append(f"{label} of {role} is n^{unrounded(fits[role], 'n')}")
    gr = {role: gs[role].rounded for role in r}
    for role, value in gr.items():
        if value is None:
            problems.append(f"{label} of {role} is G^{unrounded(gs[role], 'G')}")
    if problems:
        return None, problems
    if len(set(gr.values())) > 1:
        shown = ", ".join(f"{k} G^{gs[k].value:+.2f}" for k in gr)
        return None, [f"{label} scales with a different power of G per role ({shown}); one "
                      "declaration has one power of G"]
    a, b = r["output_weight"], r["input_weight"]
    c = r["hidden_weight"] - a - b
    return {"a": a, "b": b, "c": c, "g": gr["input_weight"]}, []
