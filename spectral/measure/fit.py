"""The measuring toolkit: RMS, the least-squares slope with its interval, tolerances, verdicts.

Every measurement of spectral reads an exponent the same way: a size (an RMS) at several
widths or depths, a least-squares line through the log-log points, its slope compared with
the exponent the rules predict. The runtime's check across widths
(:mod:`spectral.torch.check`), the coordinate check (:mod:`spectral.coordcheck`), the probe
(:mod:`spectral.measure.probe`), inference (:mod:`spectral.infer`) and the exponent sweeps
(:mod:`spectral.sweep.exponent`) all use these functions, so a slope means one thing:

* :func:`rms`: the entrywise RMS of a tensor, in float64;
* :func:`fit_line`: the one least-squares fit, ``y = slope*x + intercept``, with the
  slope's standard error and 95 % interval (:class:`Line`, :func:`t_quantile`);
* :func:`log_slope`: the slope of ``log y`` on ``log x`` (a power law's exponent), and
  :func:`loggable`, the points it can take;
* one tolerance per quantity judged (``SLOPE_TOLERANCE_*``) and :func:`within`, the verdict.

Standard library only: the torch runtime is vendored with it (its modules may import only
the standard library and torch), so :func:`rms` takes a tensor by its methods. It sits in
tests/test_layers.py's lowest layer, under the runtime, though its folder's other modules
sit above it.
"""

from __future__ import annotations

import functools
import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

__all__ = [
    "SLOPE_TOLERANCE_COORD",
    "SLOPE_TOLERANCE_PROBE",
    "SLOPE_TOLERANCE_WIDTHS",
    "Line",
    "fit_line",
    "log_slope",
    "loggable",
    "rms",
    "t_quantile",
    "within",
]

SLOPE_TOLERANCE_COORD = 0.15
"""The coordinate check's bar: largest ``|slope|`` of ``log ||h_L||_R`` and
``log ||h_L(t) - h_L(0)||_R`` (the last hidden layer after training steps, mean over
seeds) against ``log n`` or ``log L``, where muP predicts 0. Standard parameterization's
``delta h`` grows as ``n^0.33`` to ``n^2`` on the reference models, which it fails; muP's
finite-size drift there stays under it (README's coordinate-check table: the closest is
-0.130, GPT with AdamW)."""

SLOPE_TOLERANCE_WIDTHS = 0.2
"""The check across widths' bar: largest ``|measured - predicted|`` width exponent of one
module's output RMS at init or of its one-step change, on small twins of a user's model
(a few heads of width, one step). Wider than :data:`SLOPE_TOLERANCE_COORD` because it
judges every module of an arbitrary model on one draw rather than one hidden layer of the
reference models averaged over seeds: one draw's branch slopes scatter by about 0.1 from
seed to seed at these widths (:func:`spectral.torch.check.widths.check_widths`), and a
wrong rule is off by 1/2 or more."""

SLOPE_TOLERANCE_PROBE = 0.1
"""The probe's bar: largest ``|measured - declared|`` width exponent of one optimizer
step's RMS-to-RMS norm on a single matrix with a synthetic gradient. Tighter than the
others: the measurement is deterministic, over widths 64 to 1024, and a declaration's
exponents are halves, so 0.1 still tells 1/2 from 0 with room for finite-width
curvature."""


def rms(t: Any) -> float:
    """Entrywise RMS of a tensor, ``||t||_R`` of an activation or of its change, computed in
    float64 (torch's methods: the module does not import torch)."""
    return float(t.detach().double().pow(2).mean().sqrt())


def _t_cdf(t: float, df: int) -> float:
    """Student t's CDF, by Simpson's rule on its density (exact enough for a 95 % quantile)."""
    c = math.exp(math.lgamma((df + 1) / 2) - math.lgamma(df / 2)) / math.sqrt(
        df * math.pi
    )
    x = abs(t)
    n = 2000
    h = x / n
    total = sum(
        (1 if k in (0, n) else 4 if k % 2 else 2)
        * (1 + (k * h) ** 2 / df) ** (-(df + 1) / 2)
        for k in range(n + 1)
    )
    half = c * total * h / 3
    return 0.5 + half if t >= 0 else 0.5 - half


@functools.cache
def t_quantile(df: int, p: float = 0.975) -> float:
    """The ``p`` quantile of Student's t with ``df`` degrees of freedom (bisection on the CDF;
    cached: the same few ``df`` recur)."""
    if df < 1:
        raise ValueError(f"df must be >= 1, got {df}")
    lo, hi = 0.0, 1000.0
    for _ in range(100):
        mid = (lo + hi) / 2
        if _t_cdf(mid, df) < p:
            lo = mid
        else:
            hi = mid
    return (lo + hi) / 2


@dataclass(frozen=True)
class Line:
    """A least-squares line ``y = slope*x + intercept`` through ``points`` points."""

    slope: float
    intercept: float
    stderr: float | None
    """The slope's standard error,
    ``sqrt(sum(residual^2) / (points - 2) / sum((x - mean x)^2))``; ``None`` with fewer
    than three points (no residual degree of freedom)."""
    points: int

    @property
    def half_width(self) -> float | None:
        """Half-width of the slope's 95 % interval, ``t(points - 2) * stderr``; ``None``
        with fewer than three points."""
        return (
            None if self.stderr is None else t_quantile(self.points - 2) * self.stderr
        )


def fit_line(xs: Sequence[float], ys: Sequence[float]) -> Line:
    """The least-squares line through ``(xs, ys)``; ``ValueError`` with fewer than two
    distinct ``x`` (no slope is defined).

    >>> fit_line([0.0, 1.0, 2.0], [1.0, 3.0, 5.0])
    Line(slope=2.0, intercept=1.0, stderr=0.0, points=3)
    """
    n = len(xs)
    mx, my = sum(xs) / n, sum(ys) / n
    sxx = sum((x - mx) ** 2 for x in xs)
    if sxx == 0:
        raise ValueError("a fit needs at least two distinct sizes")
    slope = sum((x - mx) * (y - my) for x, y in zip(xs, ys, strict=True)) / sxx
    intercept = my - slope * mx
    if n < 3:
        return Line(slope, intercept, None, n)
    resid = sum((y - (slope * x + intercept)) ** 2 for x, y in zip(xs, ys, strict=True))
    return Line(slope, intercept, math.sqrt(resid / (n - 2) / sxx), n)


def log_slope(xs: Sequence[float], ys: Sequence[float]) -> float | None:
    """The exponent ``e`` of ``y ~ x^e``: the slope of :func:`fit_line` through
    ``(log x, log y)``, rounded to 12 decimals (float noise out, ``-0.0`` as ``0.0``, so a
    written slope reads the same everywhere). ``None`` when a value is not positive and
    finite (it has no logarithm: a dead module, a diverged run) or with fewer than two
    points or two distinct ``x`` (:func:`loggable` leaves such points out first, where a
    caller may).

    >>> log_slope([1, 2, 4], [3, 6, 12])
    1.0
    """
    if len(ys) < 2 or len(set(xs)) < 2:
        return None
    if any(not (v > 0 and math.isfinite(v)) for v in (*xs, *ys)):
        return None
    line = fit_line([math.log(x) for x in xs], [math.log(y) for y in ys])
    return round(line.slope, 12) + 0.0


def loggable(
    xs: Sequence[float], ys: Sequence[float | None]
) -> tuple[list[float], list[float]]:
    """The points of ``(xs, ys)`` that have a logarithm (``x`` and ``y`` positive and finite),
    for a fit that leaves out what could not be measured (a diverged run's NaN or inf).

    >>> loggable([1, 2, 4], [1.0, float("inf"), 4.0])
    ([1, 4], [1.0, 4.0])
    """
    kept = [
        (x, y)
        for x, y in zip(xs, ys, strict=True)
        if y is not None and x > 0 and y > 0 and math.isfinite(x) and math.isfinite(y)
    ]
    return [x for x, _ in kept], [y for _, y in kept]


def within(measured: float, target: float, tolerance: float) -> bool:
    """The verdict: ``|measured - target| <= tolerance``; NaN or infinite fails."""
    return abs(measured - target) <= tolerance
