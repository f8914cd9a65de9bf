"""Measured exponents: does the loss want each role's rule, or another power of the size?

The rules are asymptotic: a role's learning rate, init std or multiplier is its base value
times ``r_n**a * r_L**b``. ``spectral sweep --fit-exponent lr.hidden_weight`` measures ``a``
(and ``b``) on the loss itself:

1. **Base η.** The base-size runs over ``--log2-lrs`` (with ``--tune``'s candidates, if any)
   pick the base learning rate η*, as the base tuning does (:func:`spectral.sweep.tune.choose`).
2. **Factor grid.** At every size of the width sweep (and of the depth sweep), μP runs at η*
   with *one* role's value multiplied by ``2**e`` for each ``e`` of ``--log2-factors``, every
   other role at its rule, every seed (:func:`fit_configs`).
3. **Optimum.** Per size and seed, the best factor: the vertex of the parabola through the
   grid's best point and its two neighbours (:func:`optimum`; an optimum on the grid's edge is
   flagged, since the true one may lie beyond).
4. **Fit.** Least squares of log2 f* against log2 of the size ratio over every (size, seed):
   the slope ``s`` and its 95 % interval (Student t, ``points − 2`` degrees of freedom;
   :func:`spectral.measure.fit.fit_line`). The measured exponent is the derived one plus
   ``s`` — zero slope means the rule's exponent is the one the loss wants (:func:`fit_axis`).

Pure (no torch, no files): :mod:`spectral.sweep.train` runs the configs this module plans and
:mod:`spectral.sweep.exponent_report` renders the fits.
"""

from __future__ import annotations

import argparse
import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any

from ..measure.fit import fit_line
from .tune import freeze

__all__ = [
    "AxisFit",
    "FitKey",
    "derived_exponent",
    "fit_axis",
    "fit_configs",
    "optimum",
    "parse_fit_key",
    "with_factor",
]

KINDS = {"lr": "lr", "init": "init_var", "multiplier": "multiplier"}
"""Key prefix → the rule entry whose exponent is measured."""
LAYER_ROLES = {"input": "input_weight", "hidden": "hidden_weight", "output": "output_weight"}


@dataclass(frozen=True)
class FitKey:
    """What one fit varies: ``lr.ROLE`` (a factor on the role's base η), ``init.ROLE`` (on
    its base init std) or ``multiplier.KEY`` (on its base multiplier, KEY a role or layer)."""

    kind: str
    name: str

    @property
    def text(self) -> str:
        return f"{self.kind}.{self.name}"

    @property
    def role(self) -> str:
        return LAYER_ROLES.get(self.name, self.name)

    @property
    def quantity(self) -> str:
        """What the exponent is of, in words."""
        return {"lr": "learning rate", "init": "init std", "multiplier": "multiplier"}[self.kind]


def parse_fit_key(text: str) -> FitKey:
    """``lr.hidden_weight`` → ``FitKey("lr", "hidden_weight")``; the role is checked later
    against the optimizer's roles (with ``--lr-scale``'s check)."""
    kind, sep, name = text.strip().lower().partition(".")
    if not sep or kind not in KINDS or not name or "." in name or "=" in name:
        raise argparse.ArgumentTypeError(
            f"expected lr.ROLE, init.ROLE or multiplier.KEY (e.g. lr.hidden_weight), got {text!r}"
        )
    return FitKey(kind, name)


def with_factor(cfg: Any, key: FitKey, factor: float) -> Any:
    """``cfg`` (a :class:`~spectral.sweep.options.SweepConfig`) with ``key``'s base value
    multiplied by ``factor``, on top of what ``cfg`` sets already."""
    if key.kind == "lr":
        scale = dict(cfg.lr_scale or {})
        return replace(cfg, lr_scale=scale | {key.name: scale.get(key.name, 1.0) * factor})
    if key.kind == "init":
        scale = dict(cfg.init_scale or {})
        return replace(cfg, init_scale=scale | {key.name: scale.get(key.name, 1.0) * factor})
    mult = cfg.multiplier
    base = dict(mult) if isinstance(mult, dict) else ({} if mult == 1.0 else {"default": float(mult)})
    start = base.get(key.name, base.get("default", 1.0))
    return replace(cfg, multiplier=base | {key.name: start * factor})


def fit_configs(cfg: Any, key: FitKey, log2_factors: Sequence[int], seeds: Sequence[int],
                log2_lr: int) -> list[tuple[int, int, Any]]:
    """Stage 2: ``(log2 factor, seed, config)`` for every grid point, each config μP only at
    the one base η ``log2_lr`` over both axes of ``cfg``."""
    mup = replace(cfg, parameterizations=("mup",), log2_lrs=(log2_lr,))
    return [(e, s, replace(with_factor(mup, key, 2.0**e), seed=s)) for e in log2_factors for s in seeds]


def derived_exponent(rules: Mapping[str, Mapping[str, tuple[float, float]]], key: FitKey, axis: str) -> float:
    """The rule's exponent of ``key``'s quantity in ``r_n`` (width) or ``r_L`` (depth); an
    init *std*'s is half its variance's."""
    a, b = rules[key.role][KINDS[key.kind]]
    e = a if axis == "width" else b
    return e / 2 if key.kind == "init" else e


def optimum(log2_factors: Sequence[float], losses: Sequence[float | None]) -> tuple[float, bool] | None:
    """The best log2 factor of one loss curve, and whether it sits on the grid's edge.

    The vertex of the parabola through the lowest finite point and its two neighbours (on a
    uniform grid), kept within half a step of that point; the point itself when a neighbour is
    missing or diverged (``None`` / non-finite). ``None`` when no loss is finite.
    """
    finite = [(y, i) for i, y in enumerate(losses) if y is not None and math.isfinite(y)]
    if not finite:
        return None
    _, i = min(finite)
    x0 = float(log2_factors[i])
    edge = i in (0, len(losses) - 1)
    if edge:
        return x0, True
    ym, y0, yp = losses[i - 1], losses[i], losses[i + 1]
    if ym is None or yp is None or not (math.isfinite(ym) and math.isfinite(yp)):
        return x0, False
    assert y0 is not None
    h = float(log2_factors[i + 1]) - x0
    curvature = ym - 2 * y0 + yp
    if curvature <= 0:
        return x0, False
    shift = h * (ym - yp) / (2 * curvature)
    return x0 + max(-h / 2, min(h / 2, shift)), False


@dataclass(frozen=True)
class AxisFit:
    """One key's fit along one axis."""

    key: FitKey
    axis: str
    sizes: tuple[int, ...]
    base_size: int
    log2_factors: tuple[int, ...]
    seeds: tuple[int, ...]
    log2_lr: int
    losses: tuple[tuple[tuple[float | None, ...], ...], ...]
    """``losses[i][s][j]``: size i, seed s, factor j (``None``: missing; ``inf``: diverged)."""
    optima: tuple[tuple[tuple[float, bool] | None, ...], ...]
    """``optima[i][s]``: the best log2 factor and whether it is on the grid's edge."""
    derived: float
    slope: float | None
    intercept: float | None
    half_width: float | None

    @property
    def complete(self) -> bool:
        return all(v is not None for size in self.losses for seed in size for v in seed)

    @property
    def measured(self) -> float | None:
        return None if self.slope is None else self.derived + self.slope

    @property
    def interval(self) -> tuple[float, float] | None:
        if self.measured is None or self.half_width is None:
            return None
        return self.measured - self.half_width, self.measured + self.half_width

    @property
    def edges(self) -> list[str]:
        """``n=256 seed 1``-style labels of the optima on the grid's edge."""
        sym = "n" if self.axis == "width" else "L"
        return [f"{sym}={size} seed {seed}" for size, row in zip(self.sizes, self.optima, strict=True)
                for seed, o in zip(self.seeds, row, strict=True) if o is not None and o[1]]

    @property
    def verdict(self) -> str:
        """``agrees``: the derived exponent lies in the 95 % interval; ``differs``: it does
        not; ``edge``: an optimum sat on the grid's edge (the fit is a bound, widen the grid);
        ``incomplete``: runs are missing or too few points."""
        if not self.complete or self.interval is None:
            return "incomplete"
        if self.edges:
            return "edge"
        lo, hi = self.interval
        return "agrees" if lo <= self.derived <= hi else "differs"


def run_loss(record: dict[str, Any] | None) -> float | None:
    """A run's validation loss: None when the run is missing, inf when it diverged."""
    if record is None:
        return None
    if record.get("diverged") or record.get("val_loss") is None:
        return math.inf
    return float(record["val_loss"])


def fit_axis(records: Iterable[dict[str, Any]], cfg: Any, key: FitKey, axis: str,
             log2_factors: Sequence[int], seeds: Sequence[int], log2_lr: int,
             rules: Mapping[str, Mapping[str, tuple[float, float]]]) -> AxisFit:
    """The fit of ``key`` along ``axis`` from the recorded runs (pure).

    A record counts when it is μP at that size and η and its settings equal a grid point's
    (the seed and the factor are part of the settings)."""
    sizes = [n if axis == "width" else L for n, L in cfg.sizes(axis)]
    base = cfg.base_width if axis == "width" else cfg.base_depth
    wanted = {}
    for e, s, c in fit_configs(cfg, key, log2_factors, seeds, log2_lr):
        wanted[freeze(c.settings())] = (e, s)
    index: dict[tuple[int, int, int, int], dict[str, Any]] = {}
    for r in records:
        if r.get("optimizer") != cfg.optimizer or r.get("parameterization") != "mup" or r.get("log2_lr") != log2_lr:
            continue
        hit = wanted.get(freeze(r.get("settings")))
        if hit is not None:
            index[(r.get("width"), r.get("depth"), *hit)] = r  # last wins
    losses, optima = [], []
    for (width, depth) in cfg.sizes(axis):
        rows = [tuple(run_loss(index.get((width, depth, e, s))) for e in log2_factors) for s in seeds]
        losses.append(tuple(rows))
        optima.append(tuple(optimum(log2_factors, row) if None not in row else None for row in rows))
    xs, ys = [], []
    for size, row in zip(sizes, optima, strict=True):
        for o in row:
            if o is not None:
                xs.append(math.log2(size / base))
                ys.append(o[0])
    slope = intercept = half = None
    if len(set(xs)) >= 2:
        line = fit_line(xs, ys)
        slope, intercept, half = line.slope, line.intercept, line.half_width
    return AxisFit(key, axis, tuple(sizes), base, tuple(log2_factors), tuple(seeds), log2_lr,
                   tuple(losses), tuple(optima), derived_exponent(rules, key, axis), slope, intercept, half)
