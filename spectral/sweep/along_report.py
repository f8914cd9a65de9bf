"""The sweep along the horizon or the batch, read back: the fitted exponent of the optimal η
and the regret of the two transfer arms (:mod:`spectral.sweep.along` plans the runs).

* **Fit.** Per point and seed, the optimal log2 η: the vertex of the parabola through the grid's
  best point and its neighbours (:func:`spectral.sweep.exponent.optimum`; an optimum on the grid's
  edge is flagged). The least-squares slope of it against ``log2 r`` over every (point, seed)
  is the measured exponent, with its 95 % interval (Student t, ``points − 2`` degrees of freedom:
  :func:`spectral.measure.fit.fit_line`), beside the optimizer's law.
* **Regret.** At every point other than the base: ``best`` is the lowest seed-mean loss of the
  η grid there (η re-tuned at that point); an arm's regret is its seed-mean loss minus ``best``.
  The arms are the base's η and λ unchanged and the rules (:func:`spectral.sweep.along.rule_config`);
  their paired difference (unchanged − rules, seed by seed) has a 95 % t-interval
  (:func:`spectral.sweep.student.t_quantile`): above 0, the rules transfer better.

:func:`axis_result` is pure; :func:`write_along_report` renders ``along.md`` and ``along.json``
from templates/along_summary.md.j2.
"""

from __future__ import annotations

import json
import math
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ..io import write_atomic
from ..measure.fit import fit_line
from ..templating import environment
from .along import Along, Laws, point_config, rule_config
from .exponent import optimum, run_loss
from .student import t_quantile
from .tune import freeze

__all__ = ["ALONG_FILE", "AxisResult", "Point", "axis_result", "write_along_report"]

ALONG_FILE = "along.json"


@dataclass(frozen=True)
class Point:
    """One point of the axis: its runs and both arms."""

    value: int
    steps: int
    batch: int
    width: int
    log2_ratio: float
    losses: tuple[tuple[float | None, ...], ...]
    """``losses[s][j]``: seed s at log2 η j (``None``: not run; ``inf``: diverged)."""
    optima: tuple[tuple[float, bool] | None, ...]
    unchanged: tuple[float | None, ...]
    """Per seed: the base's η and λ unchanged (a grid run)."""
    rules: tuple[float | None, ...]
    """Per seed: η and λ moved by the laws."""
    lr_factor: float
    wd_factor: float

    def best(self) -> tuple[float, int] | None:
        """The lowest seed-mean grid loss and its column (``None``: a run missing, or none finite)."""
        if any(v is None for row in self.losses for v in row):
            return None
        means = [sum(row[j] for row in self.losses) / len(self.losses) for j in range(len(self.losses[0]))]  # type: ignore[misc]
        finite = [(m, j) for j, m in enumerate(means) if math.isfinite(m)]
        return min(finite) if finite else None


@dataclass(frozen=True)
class AxisResult:
    axis: str
    base_value: int
    log2_lrs: tuple[int, ...]
    seeds: tuple[int, ...]
    base_log2_lr: int
    expected: float
    assumed: bool
    points: tuple[Point, ...]
    slope: float | None
    intercept: float | None
    half_width: float | None

    @property
    def complete(self) -> bool:
        return all(v is not None for p in self.points for row in p.losses for v in row) and all(
            v is not None for p in self.points for v in (*p.unchanged, *p.rules))

    @property
    def interval(self) -> tuple[float, float] | None:
        if self.slope is None or self.half_width is None:
            return None
        return self.slope - self.half_width, self.slope + self.half_width

    @property
    def edges(self) -> list[str]:
        return [f"{p.value} seed {s}" for p in self.points for s, o in zip(self.seeds, p.optima, strict=True)
                if o is not None and o[1]]

    @property
    def verdict(self) -> str:
        """``agrees`` (the law's exponent in the interval), ``differs``, ``edge`` (an optimum
        on the grid's edge: widen ``--log2-lrs``) or ``incomplete``."""
        if not self.complete or self.interval is None:
            return "incomplete"
        if self.edges:
            return "edge"
        lo, hi = self.interval
        return "agrees" if lo <= self.expected <= hi else "differs"


def axis_result(records: Iterable[dict[str, Any]], cfg: Any, along: Along, seeds: Sequence[int],
                base_log2_lr: int, laws: Laws) -> AxisResult:
    """The fit and the arms of one axis from the recorded runs (pure). A record counts when
    its optimizer, size and η match and its settings equal a planned run's (the seed is one)."""
    grid, arms = {}, {}
    for v in along.values:
        n = along.width(v, cfg.base_width)
        for s in seeds:
            grid[(n, freeze(point_config(cfg, along, v, s).settings()))] = (v, s)
            arms[(n, freeze(rule_config(cfg, along, v, s, base_log2_lr, laws).settings()))] = (v, s)
    by_grid: dict[tuple[int, int, int], dict[str, Any]] = {}
    by_rule: dict[tuple[int, int], dict[str, Any]] = {}
    for r in records:
        if r.get("optimizer") != cfg.optimizer or r.get("depth") != cfg.base_depth:
            continue
        key = (r.get("width"), freeze(r.get("settings")))
        if key in grid:
            by_grid[(*grid[key], r.get("log2_lr"))] = r  # last wins
        if key in arms and r.get("log2_lr") == base_log2_lr:
            by_rule[arms[key]] = r
    lrs = tuple(sorted(cfg.log2_lrs))
    points = []
    for v in sorted(along.values):
        steps, batch = along.steps_batch(v)
        rows = tuple(tuple(run_loss(by_grid.get((v, s, e))) for e in lrs) for s in seeds)
        f_lr, f_wd = laws.factors(*along.ratios(v))
        points.append(Point(
            value=v, steps=steps, batch=batch, width=along.width(v, cfg.base_width), log2_ratio=math.log2(along.ratio(v)), losses=rows,
            optima=tuple(optimum(lrs, row) if None not in row else None for row in rows),
            unchanged=tuple(run_loss(by_grid.get((v, s, base_log2_lr))) for s in seeds),
            rules=tuple(run_loss(by_rule.get((v, s))) for s in seeds),
            lr_factor=f_lr, wd_factor=f_wd))
    xs = [p.log2_ratio for p in points for o in p.optima if o is not None]
    ys = [o[0] for p in points for o in p.optima if o is not None]
    slope = intercept = half = None
    if len(set(xs)) >= 2 and len(xs) >= 3:
        line = fit_line(xs, ys)
        slope, intercept, half = line.slope, line.intercept, line.half_width
    return AxisResult(along.axis, along.base_value, lrs, tuple(seeds), base_log2_lr, float(laws.expected(along.axis)),
                      ("batch" if along.axis == "batch" else "horizon") in laws.assumed, tuple(points), slope, intercept, half)


def _mean(values: Sequence[float | None]) -> float | None:
    if not values or any(v is None for v in values):
        return None
    return sum(values) / len(values)  # type: ignore[arg-type]


def _paired(a: Sequence[float | None], b: Sequence[float | None]) -> tuple[float, float | None] | None:
    """The mean of ``a − b`` seed by seed and its 95 % t half-width (``None``: < 2 seeds or not finite)."""
    if any(v is None for v in (*a, *b)):
        return None
    d = [x - y for x, y in zip(a, b, strict=True)]  # type: ignore[operator]
    if not all(math.isfinite(x) for x in d):
        return math.inf, None
    mean = sum(d) / len(d)
    if len(d) < 2:
        return mean, None
    sd = math.sqrt(sum((x - mean) ** 2 for x in d) / (len(d) - 1))
    return mean, t_quantile(len(d) - 1) * sd / math.sqrt(len(d))


def _num(v: float | None, fmt: str = ".3f") -> str:
    if v is None:
        return "—"
    return "div" if not math.isfinite(v) else format(v, fmt)


def _label(axis: str) -> str:
    return "B" if axis == "batch" else "steps"


def as_json(res: AxisResult) -> dict[str, Any]:
    """The axis's numbers, as ``along.json`` holds them."""
    points = []
    for p in res.points:
        best = p.best()
        pair = _paired(p.unchanged, p.rules)
        points.append({
            "value": p.value, "steps": p.steps, "batch": p.batch, "width": p.width, "log2_ratio": p.log2_ratio,
            "val_loss": [list(r) for r in p.losses],
            "optimal_log2_lr": [None if o is None else o[0] for o in p.optima],
            "on_edge": [None if o is None else o[1] for o in p.optima],
            "best": None if best is None else best[0],
            "best_log2_lr": None if best is None else res.log2_lrs[best[1]],
            "unchanged": list(p.unchanged), "rules": list(p.rules),
            "lr_factor": p.lr_factor, "wd_factor": p.wd_factor,
            "unchanged_minus_rules": None if pair is None else pair[0],
            "half_width": None if pair is None else pair[1],
        })
    return {
        "axis": res.axis, "base": res.base_value, "log2_lrs": list(res.log2_lrs), "seeds": list(res.seeds),
        "base_log2_lr": res.base_log2_lr, "law": res.expected, "law_assumed": res.assumed,
        "measured": res.slope, "half_width": res.half_width, "intercept": res.intercept,
        "verdict": res.verdict, "edges": res.edges, "points": points,
    }


def _rows(res: AxisResult) -> dict[str, Any]:
    """What the template shows of one axis."""
    iv = res.interval
    fit = {
        "axis": res.axis,
        "law": f"{res.expected:+.3f}" + (" (assumed)" if res.assumed else ""),
        "measured": "—" if res.slope is None else f"{res.slope:+.3f}",
        "interval": "—" if iv is None else f"[{iv[0]:+.3f}, {iv[1]:+.3f}]",
        "verdict": res.verdict,
        "offer": (f"{res.slope:.2f}" if res.verdict == "differs" and res.slope is not None else None),
    }
    optima = []
    for p in res.points:
        opt = [("—" if o is None else f"{o[0]:+.2f}" + ("*" if o[1] else "")) for o in p.optima]
        finite = [o[0] for o in p.optima if o is not None]
        optima.append({"value": p.value, "steps": p.steps, "batch": p.batch, "width": p.width, "log2_ratio": f"{p.log2_ratio:+.0f}",
                       "per_seed": ", ".join(opt),
                       "mean": "—" if not finite else f"{sum(finite) / len(finite):+.2f}",
                       "losses": [" / ".join(_num(row[j]) for row in p.losses) for j in range(len(res.log2_lrs))]})
    arms = []
    for p in res.points:
        if p.value == res.base_value:
            continue
        best = p.best()
        un, ru = _mean(p.unchanged), _mean(p.rules)
        pair = _paired(p.unchanged, p.rules)
        if pair is None:
            diff = "—"
        elif pair[1] is None:
            diff = _num(pair[0], "+.4f")
        else:
            diff = f"{pair[0]:+.4f} ± {pair[1]:.4f}"
        arms.append({
            "value": p.value, "steps": p.steps, "batch": p.batch, "width": p.width,
            "best": "—" if best is None else f"{best[0]:.4f} (log2 η {res.log2_lrs[best[1]]})",
            "unchanged": _num(None if un is None or best is None else un - best[0], "+.4f"),
            "rules": _num(None if ru is None or best is None else ru - best[0], "+.4f"),
            "factors": f"× {p.lr_factor:.3f} / × {p.wd_factor:.3f}",
            "diff": diff,
            "verdict": _arm_verdict(pair),
        })
    return {"axis": res.axis, "label": _label(res.axis), "together": res.axis == "together",
            "law_key": "batch" if res.axis == "batch" else "horizon", "fit": fit, "optima": optima, "arms": arms,
            "log2_lrs": list(res.log2_lrs), "base_value": res.base_value, "base_log2_lr": res.base_log2_lr,
            "edges": res.edges}


def _arm_verdict(pair: tuple[float, float | None] | None) -> str:
    if pair is None:
        return "incomplete"
    mean, half = pair
    if half is None:
        return "no interval"
    if mean - half > 0:
        return "rules better"
    if mean + half < 0:
        return "unchanged better"
    return "tie (interval spans 0)"


def write_along_report(out: Path, optimizer: str, results: Sequence[AxisResult], *, settings: dict[str, Any],
                       command: str | None, data: dict[str, Any] | None, rule: str) -> list[Path]:
    """``along.md`` and ``along.json`` of one optimizer's axes into ``out``."""
    text = environment("text").get_template("along_summary.md.j2").render(
        optimizer=optimizer, settings=settings, command=command, data=data or {}, rule=rule,
        axes=[_rows(r) for r in results], together=any(r.axis == "together" for r in results), seeds=", ".join(str(s) for s in (results[0].seeds if results else ())),
    )
    payload = {"optimizer": optimizer, "axes": [as_json(r) for r in results]}
    return [
        write_atomic(out / "along.md", text, force=True),
        write_atomic(out / ALONG_FILE, json.dumps(payload, indent=2, allow_nan=True) + "\n", force=True),
    ]
