"""Running ``spectral sweep --fit-exponent``: the base η, the factor grids, the fits, the report.

The stages are :mod:`spectral.sweep.exponent`'s (pure); this module trains them through the
caller's ``train`` (the CLI's :func:`~spectral.sweep.train.run_sweep` on one folder, so every
run lands in one ``runs.jsonl`` and a rerun resumes) and renders the result with
:mod:`spectral.sweep.exponent_report`. With ``--report-only`` ``train`` trains nothing and the
same files are rendered from the runs on disk.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from .exponent import FitKey, fit_axis, fit_configs
from .exponent_report import write_exponent_index, write_exponent_report
from .options import SweepConfig
from .recipe import derived_rules
from .records import META_FILE, RUNS_FILE, read_runs
from .report import read_meta
from .train import tune_at_base
from .tune import label

__all__ = ["fit_exponents", "write_exponent_index"]


def fit_exponents(cfg: SweepConfig, keys: Sequence[FitKey], log2_factors: Sequence[int],
                  tune: Sequence[tuple[str, tuple[float, ...]]], seeds: Sequence[int], out: Path,
                  train: Callable[[SweepConfig], None], *, warn: Callable[[str], None] | None = None,
                  command: str | None = None, rule: str = "fit") -> list[Path]:
    """Train what is missing and write the report of every key's fit; returns the files written."""
    cfg, choice = tune_at_base(cfg, tune, seeds, out, train, warn=warn, rule=rule)
    col = choice.winner_col  # tune_at_base refuses a choice without a winner
    assert col is not None
    log2_lr = choice.log2_lrs[col]
    for key in keys:
        for _, _, c in fit_configs(cfg, key, log2_factors, seeds, log2_lr):
            train(c)
    records = read_runs(out / RUNS_FILE, warn=warn)
    rules = derived_rules(cfg, out / "generated")
    fits = [fit_axis(records, cfg, key, axis, log2_factors, seeds, log2_lr, rules)
            for key in keys for axis in ("width", "depth") if len(cfg.sizes(axis)) >= 2]
    meta = read_meta(out / META_FILE, warn)
    base_choice: dict[str, Any] = {
        "log2_lr": log2_lr,
        "loss": choice.mean[choice.winner][col],
        "log2_lrs": list(choice.log2_lrs),
        "tuned": ", ".join(choice.keys),
        "winner": label(choice.chosen, choice.keys) if choice.keys else "",
    }
    data = meta.get("data") if isinstance(meta.get("data"), dict) else None
    return write_exponent_report(out, cfg.optimizer, fits, settings=cfg.settings(), base_choice=base_choice,
                                 command=meta.get("command") or command, data=data)
