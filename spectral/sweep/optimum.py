"""The base optimum of ``--tune`` fitted, not read off the grid: a near-tie must not decide the target run.

The grid's argmin is decided by noise where two configurations are within seed noise of each
other (a Muon-Kimi+AdamW base winner beat its runner-up by 0.0002, a hundredth of the seed
spread). :func:`fit_optimum` fits, **per knob** (each ``--tune`` key and log2 η), a parabola by
least squares to the seed-mean losses along that knob through the argmin (the other knobs at the
argmin's values), in log2 of the value, over the argmin and up to two grid points on each side
(a local fit: the loss is not a parabola across the whole grid, steep where η diverges). Its
vertex is the fitted optimum; the same fit on each seed's losses gives one vertex per seed, and
their 95 % t-interval (:func:`spectral.sweep.compare.t_quantile`) is the interval of the optimum.
The winner is the grid point nearest the vertex on each knob (a run is a grid point: the target
runs are made there), the argmin's where the vertex is equidistant.

Why a parabola and not "the mean of every configuration within seed noise of the best": the
within-noise set has no order (its mean can sit on a point no one ran, and with a flat valley
the set spans the grid), and it needs a noise threshold; the parabola uses every nearby point
with its weight and gives an interval in the knob's own units.

Not fitted (the argmin kept, and said so): a knob tried at one value or two (a one-point grid is
an edge), the argmin on the grid's edge (the optimum may lie beyond: an edge, a bound), fewer
than three finite points in the window, or a fit without positive curvature.

Pure (no torch, no files).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from .student import t_quantile

__all__ = ["KnobFit", "Optimum", "fit_optimum", "parabola_vertex"]

WINDOW = 2
"""Grid points on each side of the argmin that enter a knob's fit."""


def parabola_vertex(xs: Sequence[float], ys: Sequence[float]) -> float | None:
    """The vertex of the least-squares parabola y = a x² + b x + c through ``(xs, ys)``;
    ``None`` with fewer than three distinct x or curvature a ≤ 0 (no minimum).

    >>> parabola_vertex([-1.0, 0.0, 1.0], [1.0, 0.0, 1.0])
    0.0
    >>> round(parabola_vertex([0.0, 1.0, 2.0, 3.0], [4.0, 1.0, 0.0, 1.0]), 6)
    2.0
    """
    if len(set(xs)) < 3:
        return None
    n = len(xs)
    mx = sum(xs) / n  # centred for conditioning
    u = [x - mx for x in xs]
    s = [sum(v**p for v in u) for p in range(5)]
    t = [sum(y * v**p for v, y in zip(u, ys, strict=True)) for p in range(3)]
    # normal equations [[s4 s3 s2] [s3 s2 s1] [s2 s1 s0]] (a, b, c) = (t2, t1, t0), by Cramer's rule
    m = [[s[4], s[3], s[2]], [s[3], s[2], s[1]], [s[2], s[1], s[0]]]
    rhs = [t[2], t[1], t[0]]

    def det(q: list[list[float]]) -> float:
        return (q[0][0] * (q[1][1] * q[2][2] - q[1][2] * q[2][1]) - q[0][1] * (q[1][0] * q[2][2] - q[1][2] * q[2][0])
                + q[0][2] * (q[1][0] * q[2][1] - q[1][1] * q[2][0]))

    d = det(m)
    if d == 0:
        return None
    a = det([[rhs[i], m[i][1], m[i][2]] for i in range(3)]) / d
    b = det([[m[i][0], rhs[i], m[i][2]] for i in range(3)]) / d
    if not a > 0:
        return None
    return -b / (2 * a) + mx


@dataclass(frozen=True)
class KnobFit:
    """One knob's fit: its grid (log2 values), the argmin, the fitted vertex and its interval."""

    knob: str
    """``log2 η`` or a ``--tune`` key."""
    grid: tuple[float, ...]
    """log2 of the knob's values, ascending."""
    argmin: float
    vertex: float | None
    """The fitted optimum in log2 (``None``: not fitted, see ``why``)."""
    interval: tuple[float, float] | None
    """95 % t-interval of the per-seed vertices (``None``: a seed has no vertex, or one seed)."""
    chosen: float
    """The grid value (log2) nearest the vertex: where the winner sits on this knob."""
    why: str = ""
    """Why the knob was not fitted ("" when it was)."""
    clipped: bool = False
    """The vertex lay beyond the points fitted and was moved to the nearest of them (a bound)."""

    @property
    def moved(self) -> bool:
        return self.chosen != self.argmin

    def text(self) -> str:
        """``log2 η: argmin −5, fitted −4.62 [−5.1, −4.1] → −5`` (values in log2)."""
        if self.vertex is None:
            return f"{self.knob}: argmin {self.argmin:g}, not fitted ({self.why})"
        iv = "" if self.interval is None else f" [{self.interval[0]:+.2f}, {self.interval[1]:+.2f}]"
        clip = "; the vertex lies beyond the points fitted: clipped, a bound" if self.clipped else ""
        return (f"{self.knob}: argmin {self.argmin:g}, fitted {self.vertex:+.2f}{iv} → {self.chosen:g}"
                f" ({self.vertex - self.argmin:+.2f} from the argmin{clip})")


@dataclass(frozen=True)
class Optimum:
    """The fitted base optimum: one fit per knob, and the grid point they choose."""

    fits: tuple[KnobFit, ...]
    winner: int
    """Index of the chosen candidate."""
    col: int
    """Column (log2 η) of the chosen point."""
    argmin: tuple[int, int]
    """(candidate, column) of the grid's argmin."""

    @property
    def moved(self) -> bool:
        return (self.winner, self.col) != self.argmin


def _finite(v: Any) -> bool:
    return isinstance(v, float) and math.isfinite(v)


def _fit(knob: str, xs: list[float], mean: list[Any], seeds: list[list[Any]], at: int) -> KnobFit:
    """Fit one knob: ``xs`` ascending log2 values, ``mean[i]`` / ``seeds[s][i]`` the losses, ``at``
    the argmin's index."""
    grid = tuple(xs)

    def keep(why: str) -> KnobFit:
        return KnobFit(knob, grid, xs[at], None, None, xs[at], why)

    if len(xs) < 3:
        return keep("one value tried: an edge" if len(xs) == 1 else "two values tried")
    if at in (0, len(xs) - 1):
        return keep("the argmin is on the grid's edge: a bound")
    lo, hi = max(0, at - WINDOW), min(len(xs), at + WINDOW + 1)
    idx = [i for i in range(lo, hi) if _finite(mean[i])]
    if len(idx) < 3:
        return keep("fewer than three finite points")
    vertex = parabola_vertex([xs[i] for i in idx], [mean[i] for i in idx])
    if vertex is None:
        return keep("no positive curvature")
    clipped = not xs[idx[0]] <= vertex <= xs[idx[-1]]
    vertex = min(max(vertex, xs[idx[0]]), xs[idx[-1]])
    per = []
    for row in seeds:
        if not all(_finite(row[i]) for i in idx):
            per = []
            break
        v = parabola_vertex([xs[i] for i in idx], [row[i] for i in idx])
        if v is None:
            per = []
            break
        per.append(min(max(v, xs[idx[0]]), xs[idx[-1]]))
    interval = None
    if len(per) > 1:
        m = sum(per) / len(per)
        sd = math.sqrt(sum((v - m) ** 2 for v in per) / (len(per) - 1))
        h = t_quantile(len(per) - 1) * sd / math.sqrt(len(per))
        interval = (m - h, m + h)
    dist = [(abs(x - vertex), i != at, i) for i, x in enumerate(xs) if _finite(mean[i])]
    chosen = xs[min(dist)[2]]
    return KnobFit(knob, grid, xs[at], vertex, interval, chosen, clipped=clipped)


def fit_optimum(choice: Any) -> Optimum | None:
    """The fitted optimum of a :class:`~spectral.sweep.tune.Choice` (``None``: no argmin).

    Each knob is fitted along the line through the argmin; the chosen point combines each
    knob's choice. Where that combination is not a finite cell of the grid, the argmin stays.
    """
    if choice.winner is None or choice.best_col[choice.winner] is None:
        return None
    ci, col = choice.winner, choice.best_col[choice.winner]
    n_seeds = len(choice.seeds)
    fits = []
    chosen: dict[str, float] = {}
    lrs = [float(e) for e in choice.log2_lrs]
    fits.append(_fit("log2 η", lrs, list(choice.mean[ci]), [list(choice.per_seed[ci][s]) for s in range(n_seeds)], col))
    win = choice.candidates[ci]
    for key in choice.keys:
        line = [(math.log2(c[key]), k) for k, c in enumerate(choice.candidates)
                if all(c[o] == win[o] for o in choice.keys if o != key)]
        line.sort()
        xs = [x for x, _ in line]
        rows = [k for _, k in line]
        f = _fit(key, xs, [choice.mean[k][col] for k in rows],
                 [[choice.per_seed[k][s][col] for k in rows] for s in range(n_seeds)],
                 rows.index(ci))
        fits.append(f)
        chosen[key] = 2.0 ** f.chosen
    new_col = lrs.index(fits[0].chosen)
    new_ci = next((k for k, c in enumerate(choice.candidates)
                   if all(math.isclose(c[key], chosen[key]) for key in choice.keys)), ci)
    if not _finite(choice.mean[new_ci][new_col]):
        new_ci, new_col = ci, col
    return Optimum(tuple(fits), new_ci, new_col, (ci, col))
