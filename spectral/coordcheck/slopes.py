"""The pass rule of a coordinate check and the slopes it judges: pure functions, no torch.

A check records points (one per run and step, :func:`record_step`); :func:`compute_slopes`
fits the log–log slope of each metric against width and against depth at one step (the
seed-mean, :func:`aggregate`), and :func:`slope_passes` applies the pass rule
``|slope| ≤`` :data:`SLOPE_TOLERANCE`. The JAX check (:mod:`spectral.coordcheck.jax`) uses
the same functions, so both frameworks are judged alike.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence
from typing import Any

from ..measure.common import fit_slope

__all__ = [
    "EXTRA_METRICS",
    "METRICS",
    "PARAMETERIZATIONS",
    "SLOPE_TOLERANCE",
    "aggregate",
    "compute_slopes",
    "fit_slope",
    "record_step",
    "slope_passes",
]

SLOPE_TOLERANCE = 0.15
"""Largest |log–log slope| that passes."""
PARAMETERIZATIONS = ("sp", "mup-k1", "mup")
METRICS = ("h", "delta_h")
"""Metrics judged by the pass rule (the ``"slopes"`` list)."""
EXTRA_METRICS = ("out", "delta_out", "delta_top")
"""Metrics whose slopes are reported but not judged (``"extra_slopes"``)."""


def slope_passes(slope: float, tolerance: float = SLOPE_TOLERANCE) -> bool:
    """``|slope| ≤ tolerance``; ``nan`` (a diverged or degenerate fit) fails."""
    return math.isfinite(slope) and abs(slope) <= tolerance


def record_step(
    points: list[dict[str, Any]],
    run: tuple[str, str, int, int, int],
    t: int,
    steps: int,
    values: dict[str, float],
) -> bool:
    """Append the point of step ``t`` of one run; True when the run stops there.

    ``run`` is ``(parameterization, axis, width, depth, seed)``, ``values`` the metrics.
    A non-finite value is stored as ``inf`` (the slope fit drops that point). A run stops at
    its last step, or when ``h`` diverged; then the remaining steps are padded with the
    last point, so that every step has one.
    """
    param, axis, width, depth, seed = run
    point: dict[str, Any] = {
        "parameterization": param,
        "axis": axis,
        "width": width,
        "depth": depth,
        "seed": seed,
        "step": t,
    }
    point.update({k: v if math.isfinite(v) else math.inf for k, v in values.items()})
    points.append(point)
    if t < steps and math.isfinite(point["h"]):
        return False
    points.extend({**point, "step": tt} for tt in range(t + 1, steps + 1))
    return True


def aggregate(values: Iterable[float]) -> float:
    """Mean over seeds; ``inf`` if any seed diverged (so the fit drops that point)."""
    vals = list(values)
    if not vals:
        return math.nan
    if any(v is None or not math.isfinite(v) for v in vals):  # None: inf/nan read from JSON
        return math.inf
    return sum(vals) / len(vals)


def compute_slopes(
    points: Sequence[dict[str, Any]],
    *,
    metrics: Sequence[str] = METRICS,
    step: int | None = None,
    judged: bool = True,
) -> list[dict[str, Any]]:
    """Slopes at ``step`` (default: the last) of each metric, per parameterization and axis.

    ``points`` are dicts with keys ``parameterization``, ``axis``, ``width``, ``depth``,
    ``seed``, ``step`` and the metrics. Returns dicts with keys ``parameterization``,
    ``axis``, ``metric``, ``slope``, ``pass`` (``judged``), ``step``, ``x`` and ``y``.
    """
    if not points:
        return []
    last = max(p["step"] for p in points) if step is None else step
    out = []
    params = list(dict.fromkeys(p["parameterization"] for p in points))
    for param in params:
        for axis in ("width", "depth"):
            sel = [
                p
                for p in points
                if p["parameterization"] == param and p["axis"] == axis and p["step"] == last
            ]
            if not sel:
                continue
            xs = sorted({p[axis] for p in sel})
            for metric in metrics:
                if not all(metric in p for p in sel):
                    continue
                ys = [aggregate(p[metric] for p in sel if p[axis] == x) for x in xs]
                slope, _ = fit_slope(xs, ys)
                row = {
                    "parameterization": param,
                    "axis": axis,
                    "metric": metric,
                    "slope": slope if math.isfinite(slope) else None,
                    "step": last,
                    "x": xs,
                    "y": [y if math.isfinite(y) else None for y in ys],
                }
                if judged:
                    row["pass"] = slope_passes(slope)
                out.append(row)
    return out
