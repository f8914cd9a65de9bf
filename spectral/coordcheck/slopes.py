"""The pass rule of a coordinate check and the slopes it judges: pure functions, no torch.

A check records points (one per run and step, :func:`record_step`); :func:`compute_slopes`
fits the log–log slope of each metric against width and against depth at one step (the
seed-mean, :func:`aggregate`) with :func:`spectral.measure.fit.log_slope`, and
:func:`slope_passes` applies the pass rule ``|slope| ≤``
:data:`~spectral.measure.fit.SLOPE_TOLERANCE_COORD`. The JAX check
(:mod:`spectral.coordcheck.jax`) uses the same functions, so both frameworks are judged
alike.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence
from typing import Any

from ..measure.fit import SLOPE_TOLERANCE_COORD, log_slope, loggable, within

__all__ = [
    "DIVERGENCE_METRICS",
    "EXTRA_METRICS",
    "METRICS",
    "PARAMETERIZATIONS",
    "SLOPE_TOLERANCE_COORD",
    "aggregate",
    "compute_slopes",
    "diverged",
    "divergence_text",
    "judge",
    "record_step",
    "slope_passes",
]

PARAMETERIZATIONS = ("sp", "mup-k1", "mup")
METRICS = ("h", "delta_h")
"""Metrics judged by the pass rule (the ``"slopes"`` list)."""
EXTRA_METRICS = ("out", "delta_out", "delta_top")
"""Metrics whose slopes are reported but not judged (``"extra_slopes"``)."""
DIVERGENCE_METRICS = ("h", "delta_h", "out", "delta_out", "loss")
"""A run whose value of any of these is NaN, infinite or past OVERFLOW has diverged
(:func:`diverged`)."""

OVERFLOW = math.sqrt(3.4028234663852886e38)
"""sqrt of float32's largest value (1.84e19): past it a gradient's square overflows to inf in
float32, where Adam's second moment lives, and the update is 0 (an output times 1e30 has a
finite loss and never moves: slopes of nothing, not a pass)."""


def slope_passes(slope: float, tolerance: float = SLOPE_TOLERANCE_COORD) -> bool:
    """``|slope| ≤ tolerance``; ``nan`` (a diverged or degenerate fit) fails."""
    return within(slope, 0.0, tolerance)


def record_step(
    points: list[dict[str, Any]],
    run: tuple[str, str, int, int, int],
    t: int,
    steps: int,
    values: dict[str, float],
) -> bool:
    """Append the point of step ``t`` of one run; True when the run stops there.

    ``run`` is ``(parameterization, axis, width, depth, seed)``, ``values`` the metrics.
    A non-finite value is stored as it is, NaN or ±inf (the slope fit drops that point;
    :func:`diverged` names the first). A run stops at its last step, or when ``h`` diverged;
    then the remaining steps are padded with the last point, so that every step has one (a
    run whose loss alone went NaN trains on: its ``h`` at the last step is still measured,
    not a stale earlier value, and :func:`judge` fails it anyway).
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
    point.update(values)
    points.append(point)
    if t < steps and math.isfinite(point["h"]):
        return False
    points.extend({**point, "step": tt} for tt in range(t + 1, steps + 1))
    return True


def _not_finite(point: dict[str, Any]) -> str | None:
    """The first of :data:`DIVERGENCE_METRICS` in ``point`` that is NaN, ±inf or (read
    back from JSON) None."""
    for metric in DIVERGENCE_METRICS:
        if metric in point:
            v = point[metric]
            if v is None or not math.isfinite(v) or abs(v) > OVERFLOW:
                return metric
    return None


def diverged(points: Iterable[dict[str, Any]]) -> dict[str, Any] | None:
    """Where the first diverged run (in sweep order) first went non-finite: the point's
    ``parameterization``, ``axis``, ``width``, ``depth``, ``seed`` and ``step``, the
    ``metric`` and its ``value`` (``"NaN"``, ``"inf"``, ``"-inf"``, a finite value past
    OVERFLOW as text such as ``"7.58e+28"``; ``None`` read back from JSON, where NaN and inf
    are null); ``None`` when every run stayed finite and below OVERFLOW."""
    for p in points:
        metric = _not_finite(p)
        if metric is not None:
            v = p[metric]
            value = (
                None
                if v is None
                else "NaN"
                if math.isnan(v)
                else f"{v:.3g}"
                if math.isfinite(v)
                else "inf"
                if v > 0
                else "-inf"
            )
            keys = ("parameterization", "axis", "width", "depth", "seed", "step")
            return {**{k: p.get(k) for k in keys}, "metric": metric, "value": value}
    return None


_WORDS = {
    "h": "h_L",
    "delta_h": "h_L(t) - h_L(0)",
    "out": "the output",
    "delta_out": "the output's change",
    "loss": "the loss",
}


def divergence_text(where: dict[str, Any]) -> str:
    """``diverged at step 3 (mup, n = 64, L = 2, seed 0): the loss is NaN`` for a
    :func:`diverged` record."""
    value = where["value"] or "NaN or inf"
    if value not in ("NaN", "inf", "-inf", "NaN or inf"):  # finite, past OVERFLOW
        value += (
            f", past {OVERFLOW:.3g}, where a gradient's square overflows float32 (the "
            "optimizer's update is then 0)"
        )
    return (
        f"diverged at step {where['step']} ({where['parameterization']}, n = {where['width']}, "
        f"L = {where['depth']}, seed {where['seed']}): {_WORDS[where['metric']]} is {value}"
    )


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
                # a diverged seed's point (inf) is left out of the fit
                fitted = log_slope(*loggable(xs, ys))
                slope = math.nan if fitted is None else fitted
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


def judge(points: Sequence[dict[str, Any]]) -> dict[str, Any]:
    """The verdict part of a coordinate check's result, for the torch and the JAX check
    alike: ``pass_rule``; ``pass`` (every μP slope passes and no μP run diverged; ``None``
    without a μP parameterization); ``diverged``, the first judged run that went NaN or
    infinite (:func:`diverged`; the judged runs are the μP ones, or the ``sp`` ones when
    only ``sp`` is checked: ``sp`` beside μP is the comparison, expected to blow up at
    large sizes, and its divergence only drops points from its fits); ``slopes`` (judged)
    and ``extra_slopes`` (reported)."""
    slopes = compute_slopes(points, metrics=METRICS, judged=True)
    extra = compute_slopes(points, metrics=EXTRA_METRICS, judged=False)
    mu = [s for s in slopes if s["parameterization"] != "sp"]
    blown = diverged([p for p in points if p["parameterization"] != "sp"] or points)
    return {
        "pass_rule": f"|slope| <= {SLOPE_TOLERANCE_COORD} at the last step, for h and delta_h, "
        "against width and against depth, and no mup run diverged (NaN or inf); sp is "
        "judged by the same slope test",
        "pass": all(s["pass"] for s in mu) and blown is None if mu else None,
        "diverged": blown,
        "slopes": slopes,
        "extra_slopes": extra,
    }
