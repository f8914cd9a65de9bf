"""Base tuning for a sweep: tune chosen base multipliers × η at the base size only, then transfer.

μP practice tunes a few base values on the base model (microsoft/mup's ``output_mult``,
CompleteP's input/output α) and transfers them with the learning rate. ``spectral sweep
--tune output=1,4,16`` does exactly that in one command:

1. **At the base size** ``(base_width, base_depth)``, every candidate — each combination of
   the ``--tune`` values, on top of ``--multiplier`` — × every log2 η of the grid × every
   seed. At the base size every parameterisation is the same model, so these are ``sp`` runs.
2. **Choose** the candidate whose seed-mean loss curve has the lowest minimum over η
   (:func:`choose`); a diverged seed makes that η +∞ for the candidate.
3. **Transfer:** the usual sweep over both axes at the winning multiplier, every seed. Its
   base-size runs are the winner's stage-1 runs (same key), so nothing is trained twice.

This module is pure (no torch, no files): candidates, the stage-1 configurations, and the
choice from recorded runs. :mod:`spectral.sweep.train` runs the stages; :mod:`spectral.sweep.report`
renders the choice.
"""

from __future__ import annotations

import argparse
import itertools
import math
from dataclasses import dataclass, replace
from typing import Any
from collections.abc import Iterable, Sequence

LR_PREFIX = "lr."
INIT_PREFIX = "init."
FACTOR_PREFIXES = (LR_PREFIX, INIT_PREFIX)
"""A ``--tune`` key ``lr.ROLE`` is a factor on that role's base η (``--lr-scale``), ``init.ROLE``
one on its base init std (``--init-scale``); any other key is a multiplier key (``--multiplier``)."""

__all__ = ["RULES", "parse_tune", "candidates", "label", "apply", "base_configs", "Choice", "cell", "choose", "freeze",
           "mean_cell"]


def parse_tune(text: str) -> tuple[str, tuple[float, ...]]:
    """``output=1,4,16`` → ``("output", (1.0, 4.0, 16.0))``; values are finite numbers > 0;
    ``none`` → ``("none", ())``.

    Parsed by hand (no ``eval``); the key is checked against the optimizer's roles later,
    with ``--multiplier``'s check.
    """
    if text.strip().lower() == "none":  # turns off a preset's tuning
        return "none", ()
    key, sep, values = text.partition("=")
    key = key.strip().lower()
    if not sep or not key or "," in key:
        raise argparse.ArgumentTypeError(f"expected KEY=V1,V2,… (e.g. output=1,4,16), got {text!r}")
    out: list[float] = []
    for part in values.split(","):
        part = part.strip()
        try:
            v = float(part)
        except ValueError:
            raise argparse.ArgumentTypeError(f"{key}: {part!r} is not a number") from None
        if not math.isfinite(v) or v <= 0:
            raise argparse.ArgumentTypeError(f"{key}: expected numbers > 0, got {part!r}")
        if v in out:
            raise argparse.ArgumentTypeError(f"{key}: {part} is given twice")
        out.append(v)
    return key, tuple(out)


def candidates(base: float | dict[str, float], tune: Sequence[tuple[str, tuple[float, ...]]]) -> list[float | dict[str, float]]:
    """Every combination of the tuned values, each on top of ``base`` (``--multiplier``).

    Order: the ``--tune`` options' order, each option's values as given (so ties go to the
    first given). A number ``base`` becomes the ``default`` key of each candidate dict; when
    only ``lr.`` / ``init.`` keys are tuned, ``base`` is left out (:func:`apply` keeps
    ``--multiplier``).
    """
    keys = [k for k, _ in tune]
    if len(set(keys)) != len(keys):
        dup = next(k for k in keys if keys.count(k) > 1)
        raise argparse.ArgumentTypeError(f"--tune {dup} is given twice")
    start: dict[str, float] = {}
    if any(not k.startswith(FACTOR_PREFIXES) for k in keys):  # the candidates carry the multiplier
        start = dict(base) if isinstance(base, dict) else ({} if base == 1.0 else {"default": float(base)})
    out: list[float | dict[str, float]] = []
    for combo in itertools.product(*(values for _, values in tune)):
        out.append(start | dict(zip(keys, combo, strict=True)))
    return out


def label(multiplier: float | dict[str, float], keys: Iterable[str] | None = None) -> str:
    """``output=16`` (only ``keys`` when given), or ``1`` for a plain number."""
    if not isinstance(multiplier, dict):
        return f"{multiplier:g}"
    items = [(k, v) for k, v in multiplier.items() if keys is None or k in keys]
    return ",".join(f"{k}={v:g}" for k, v in items)


def apply(cfg: Any, candidate: float | dict[str, float]) -> Any:
    """``cfg`` with a candidate's values: its ``lr.ROLE`` keys go to ``lr_scale`` (on top of
    ``cfg.lr_scale``), its ``init.ROLE`` keys to ``init_scale``, the others are the multiplier
    (``cfg.multiplier`` stays when there are none, so that untuned runs keep their keys)."""
    if not isinstance(candidate, dict):
        return replace(cfg, multiplier=candidate)
    mult = {k: v for k, v in candidate.items() if not k.startswith(FACTOR_PREFIXES)}
    lrs = {k[len(LR_PREFIX):]: v for k, v in candidate.items() if k.startswith(LR_PREFIX)}
    inits = {k[len(INIT_PREFIX):]: v for k, v in candidate.items() if k.startswith(INIT_PREFIX)}
    out = replace(cfg, multiplier=mult) if mult else cfg
    out = replace(out, lr_scale=(cfg.lr_scale or {}) | lrs) if lrs else out
    return replace(out, init_scale=(cfg.init_scale or {}) | inits) if inits else out


def base_configs(cfg: Any, candidate: float | dict[str, float], seeds: Sequence[int]) -> list[Any]:
    """Stage 1: one :class:`~spectral.sweep.SweepConfig` per seed that trains only the base size
    (``sp``: at the base size every parameterisation is the same model) with ``candidate``."""
    base = replace(cfg, parameterizations=("sp",), widths=(cfg.base_width,), depth=cfg.base_depth,
                   depths=(cfg.base_depth,), width=cfg.base_width)
    return [replace(apply(base, candidate), seed=s) for s in seeds]


@dataclass(frozen=True)
class Choice:
    """The stage-1 result: each candidate's seed-mean loss per log2 η, and the winner."""

    keys: tuple[str, ...]
    """The tuned keys (``--tune`` order)."""
    candidates: tuple[Any, ...]
    log2_lrs: tuple[int, ...]
    seeds: tuple[int, ...]
    mean: tuple[tuple[float | str | None, ...], ...]
    """``mean[c][j]``: seed-mean loss of candidate c at log2 η j; ``"div"`` if any seed
    diverged, ``None`` if any seed's run is missing."""
    per_seed: tuple[tuple[tuple[float | str | None, ...], ...], ...]
    """``per_seed[c][s][j]``: seed s's loss (or ``"div"`` / ``None``)."""
    winner: int | None
    """Index of the chosen candidate (``None``: no candidate has a finite mean)."""
    best_col: tuple[int | None, ...]
    """Per candidate, the column of its lowest finite mean loss."""
    col: int | None = None
    """The winner's log2 η column (``None``: its ``best_col``, the argmin over η)."""
    optimum: Any = None
    """The fitted optimum (:class:`spectral.sweep.optimum.Optimum`; ``None``: no argmin)."""
    rule: str = "argmin"
    """How the winner was chosen: ``fit`` (the grid point nearest the fitted optimum) or
    ``argmin`` (the grid's lowest seed-mean loss)."""

    @property
    def winner_col(self) -> int | None:
        """The log2 η column the winner is run at."""
        if self.winner is None:
            return None
        return self.best_col[self.winner] if self.col is None else self.col

    @property
    def winner_log2_lr(self) -> int | None:
        col = self.winner_col
        return None if col is None else self.log2_lrs[col]

    @property
    def moved(self) -> bool:
        """The fitted optimum is not the grid's argmin."""
        return self.optimum is not None and self.optimum.moved

    @property
    def chosen(self) -> Any:
        """The winning candidate (its multiplier and ``lr.`` keys; :func:`apply` sets them)."""
        return None if self.winner is None else self.candidates[self.winner]

    @property
    def complete(self) -> bool:
        return all(v is not None for row in self.mean for v in row)

    def edges(self) -> list[str]:
        """Where the winner sits on an edge of what was tried — its optimum may lie beyond.
        One sentence per edge."""
        if self.winner is None:
            return []
        out = []
        win = self.candidates[self.winner]
        for key in self.keys:
            tried = {c[key] for c in self.candidates}
            if len(tried) == 1:  # a one-point grid is an edge: the knob was not searched
                out.append(f"{key}={win[key]:g} is the only value tried; not searched, a bound")
            elif win[key] in (min(tried), max(tried)):
                side = "smallest" if win[key] == min(tried) else "largest"
                out.append(f"{key}={win[key]:g} is the {side} value tried; its optimum may lie beyond")
        col, lrs = self.winner_col, self.log2_lrs
        if col is not None and len(lrs) == 1:
            out.append(f"log2 η ({lrs[col]}) is the only value of --log2-lrs; not searched, a bound")
        elif col is not None and col in (0, len(lrs) - 1):
            out.append(f"the winner's best log2 η ({lrs[col]}) is at the edge of --log2-lrs")
        return out

    def fit_lines(self) -> list[str]:
        """One line per knob: the argmin, the fitted optimum with its interval, the grid point chosen."""
        return [] if self.optimum is None else [f.text() for f in self.optimum.fits]

    def fitted_label(self) -> str | None:
        """The grid point nearest the fitted optimum (candidate, log2 η) as text."""
        if self.optimum is None:
            return None
        return f"{label(self.candidates[self.optimum.winner], self.keys) or 'base'}, log2 η {self.log2_lrs[self.optimum.col]}"

    def fit_text(self) -> dict[str, Any]:
        """What the reports show of the fit: its lines, the rule, and the argmin and fitted point."""
        return {"fit": self.fit_lines(), "rule": self.rule, "moved": self.moved, "argmin": self.argmin_label(),
                "fitted": self.fitted_label()}

    def argmin_label(self) -> str | None:
        """The grid's argmin (candidate, log2 η) as text."""
        if self.optimum is None:
            return None
        ci, col = self.optimum.argmin
        return f"{label(self.candidates[ci], self.keys) or 'base'}, log2 η {self.log2_lrs[col]}"

    def as_json(self) -> dict[str, Any]:
        return {
            "keys": list(self.keys),
            "candidates": [label(c, self.keys) for c in self.candidates],
            "log2_lrs": list(self.log2_lrs),
            "seeds": list(self.seeds),
            "mean_val_loss": [list(r) for r in self.mean],
            "per_seed_val_loss": [[list(r) for r in c] for c in self.per_seed],
            "winner": None if self.winner is None else label(self.candidates[self.winner], self.keys),
            "winner_log2_lr": self.winner_log2_lr,
            "edges": self.edges(),
            "rule": self.rule,
            "argmin": self.argmin_label(),
            "fit": self.fit_lines(),
        }


def mean_cell(cells: Sequence[float | str | None]) -> float | str | None:
    """The seed mean of one grid cell: ``None`` if a seed's run is missing, ``"div"`` if a
    seed diverged (a learning rate that diverges for one seed in two is not usable)."""
    if any(v is None for v in cells):
        return None
    if any(v == "div" for v in cells):
        return "div"
    return sum(cells) / len(cells)  # type: ignore[arg-type]


def cell(record: dict[str, Any] | None) -> float | str | None:
    """One run's loss as the tables show it: ``None`` if not run, ``"div"`` if it diverged."""
    if record is None:
        return None
    if record.get("diverged") or record.get("val_loss") is None:
        return "div"
    return float(record["val_loss"])


def choose(records: Iterable[dict[str, Any]], cfg: Any, cands: Sequence[Any], seeds: Sequence[int], keys: Sequence[str],
           rule: str = "fit") -> Choice:
    """The winner among ``cands`` from the recorded base-size runs (pure).

    ``rule``: ``fit`` (default) takes the grid point nearest the fitted optimum
    (:func:`spectral.sweep.optimum.fit_optimum`: a per-knob parabola in log2, so that a near-tie
    does not decide); ``argmin`` the grid's lowest seed-mean loss. The fit is computed (and
    reported) either way.

    A record counts when its optimizer and settings equal a stage-1 config's (the seed and
    multiplier are part of the settings) and it is the base size; ``sp`` or any
    parameterisation reusing the same run will do, since at the base size they coincide.
    """
    index: dict[tuple[int, int, int], dict[str, Any]] = {}
    wanted = {}
    for ci, c in enumerate(cands):
        for s, sc in zip(seeds, base_configs(cfg, c, seeds), strict=True):
            wanted[freeze(sc.settings())] = (ci, s)
    for r in records:
        if r.get("optimizer") != cfg.optimizer or (r.get("width"), r.get("depth")) != (cfg.base_width, cfg.base_depth):
            continue
        hit = wanted.get(freeze(r.get("settings")))
        if hit is not None:
            index[(*hit, r["log2_lr"])] = r  # last wins
    lrs = tuple(sorted(cfg.log2_lrs))
    per_seed, mean, best_col = [], [], []
    for ci, _ in enumerate(cands):
        rows = [tuple(cell(index.get((ci, s, e))) for e in lrs) for s in seeds]
        per_seed.append(tuple(rows))
        m = [mean_cell([row[j] for row in rows]) for j in range(len(lrs))]
        mean.append(tuple(m))
        finite = [(v, j) for j, v in enumerate(m) if isinstance(v, float) and math.isfinite(v)]
        best_col.append(min(finite)[1] if finite else None)
    scored = [(mean[ci][j], ci) for ci, j in enumerate(best_col) if j is not None]
    winner = min(scored)[1] if scored else None
    if rule not in RULES:
        raise ValueError(f"rule must be one of {', '.join(RULES)}, got {rule!r}")
    grid = Choice(tuple(keys), tuple(cands), lrs, tuple(seeds), tuple(mean), tuple(per_seed), winner, tuple(best_col))
    from .optimum import fit_optimum

    opt = fit_optimum(grid)
    if opt is None or rule == "argmin":
        return replace(grid, optimum=opt, rule=rule)
    return replace(grid, winner=opt.winner, col=opt.col, optimum=opt, rule=rule)


RULES = ("fit", "argmin")
"""How :func:`choose` picks the winner (``--base-optimum``)."""


def freeze(obj: Any) -> Any:
    """A hashable, order-independent form of a settings dict (for lookup)."""
    if isinstance(obj, dict):
        return tuple(sorted((k, freeze(v)) for k, v in obj.items()))
    if isinstance(obj, (list, tuple)):
        return tuple(freeze(v) for v in obj)
    return obj
