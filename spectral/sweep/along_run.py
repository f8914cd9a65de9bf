"""Running the sweep along the horizon or the batch (:mod:`spectral.sweep.along` plans it).

Order: the η grid at the base point (every seed), the base optimum from it
(:func:`spectral.sweep.tune.choose`), then each other point's η grid and its rules arm. Each
config goes through the caller's ``train`` (the CLI's :func:`~spectral.sweep.train.run_sweep`
on one folder), so every run lands in one ``runs.jsonl`` and a rerun resumes; with
``--report-only`` ``train`` trains nothing and the report is rendered from the runs on disk.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from ..errors import SpecError
from .along import Along, grid_configs, optimizer_laws, point_config, rule_config
from .along_report import axis_result, write_along_report
from .options import SweepConfig
from .records import META_FILE, RUNS_FILE, read_runs
from .report import read_meta
from .tune import Choice, choose, freeze

__all__ = ["along_configs", "base_choice", "run_along", "train_along"]


def along_configs(cfg: SweepConfig, alongs: Sequence[Along], seeds: Sequence[int]) -> list[SweepConfig]:
    """Every run of the axes for ``--estimate``: the grids and the rules arms, the grid's middle
    η standing in for the base optimum (a run's cost does not depend on its η)."""
    mid = sorted(cfg.log2_lrs)[len(cfg.log2_lrs) // 2]
    laws = optimizer_laws(cfg.optimizer)
    out: dict[Any, SweepConfig] = {}  # the base point's grid is shared by both axes
    for a in alongs:
        for v, s, c in grid_configs(cfg, a, seeds):
            out.setdefault(freeze(c.settings()), c)
            if v != a.base_value:
                r = rule_config(cfg, a, v, s, mid, laws)
                out.setdefault(freeze(r.settings()), r)
    return list(out.values())


def base_choice(cfg: SweepConfig, along: Along, seeds: Sequence[int], out: Path, *,
                warn: Callable[[str], None] | None = None, rule: str = "fit") -> Choice:
    """The base-optimal η from the base point's grid runs on disk (the grid point nearest the
    fitted optimum, as ``--tune`` picks it; ``--base-optimum argmin``: the grid's lowest)."""
    base = point_config(cfg, along, along.base_value, seeds[0])
    return choose(read_runs(out / RUNS_FILE, warn=warn), base, [cfg.multiplier], seeds, (), rule)


def train_along(cfg: SweepConfig, along: Along, seeds: Sequence[int], out: Path,
                train: Callable[[SweepConfig], None], *, warn: Callable[[str], None] | None = None,
                rule: str = "fit") -> Choice:
    """Train what is missing of one axis; returns the base choice."""
    grid = grid_configs(cfg, along, seeds)
    for v, _, c in grid:
        if v == along.base_value:
            train(c)
    choice = base_choice(cfg, along, seeds, out, warn=warn, rule=rule)
    if not choice.complete:
        raise SpecError(f"{out / RUNS_FILE} lacks some runs of the base point's η grid; "
                        "run the sweep (without --report-only) to finish them")
    log2_lr = choice.winner_log2_lr
    if log2_lr is None:
        raise SpecError("no η of --log2-lrs reached a finite loss at the base point; widen --log2-lrs")
    laws = optimizer_laws(cfg.optimizer)
    for v, s, c in grid:
        if v != along.base_value:
            train(c)
            train(rule_config(cfg, along, v, s, log2_lr, laws))
    return choice


def run_along(cfg: SweepConfig, alongs: Sequence[Along], seeds: Sequence[int], out: Path,
              train: Callable[[SweepConfig], None], *, warn: Callable[[str], None] | None = None,
              command: str | None = None, rule: str = "fit") -> list[Path]:
    """Train what is missing of every axis, then write ``along.md`` and ``along.json``."""
    laws = optimizer_laws(cfg.optimizer)
    chosen = [train_along(cfg, a, seeds, out, train, warn=warn, rule=rule) for a in alongs]
    records = read_runs(out / RUNS_FILE, warn=warn)
    results = []
    for a, choice in zip(alongs, chosen, strict=True):
        assert choice.winner_log2_lr is not None  # train_along refuses a choice without one
        results.append(axis_result(records, cfg, a, seeds, choice.winner_log2_lr, laws))
    meta = read_meta(out / META_FILE, warn)
    data = meta.get("data") if isinstance(meta.get("data"), dict) else None
    settings = point_config(cfg, alongs[0], alongs[0].base_value, seeds[0]).settings()
    return write_along_report(out, cfg.optimizer, results, settings=settings,
                              command=meta.get("command") or command, data=data, rule=rule)
