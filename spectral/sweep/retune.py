"""SP tuned as μP is tuned: SP re-tunes, at every size, the keys μP tunes at the base.

``--tune`` tunes some base values (α_out, a role's η or init std) × η at the base size and
transfers the winner. μP needs no more; SP, which keeps base values fixed, is only fairly
compared when it gets the same search *at every size*: SP's best there is the lowest
seed-mean loss over every ``--tune`` candidate × every log2 η, not just over η at the base
winner. The sweep trains each other candidate's SP runs at every size (the winner's are the
transfer sweep's; at the base size they are the base tuning's, reused), and the report sets
three numbers side by side per size: SP at the base values (η re-tuned), SP re-tuned (every
tuned key and η), and μP tuned once at the base.

Pure (no torch, no files): the configurations to train and the table from recorded runs.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, replace
from typing import Any

from .tune import apply, cell, freeze, label, mean_cell

__all__ = ["RetunedRow", "retune_configs", "retuned_rows", "has_retune_runs"]


def retune_configs(cfg: Any, cands: Sequence[Any], winner: int | None, seeds: Sequence[int]) -> list[Any]:
    """SP's runs with every candidate but the winner (whose SP runs are the transfer sweep's),
    one config per (candidate, seed), over both axes of ``cfg`` (the config *before* the
    winner was applied). Empty when ``cfg`` does not run SP."""
    if "sp" not in cfg.parameterizations:
        return []
    sp = replace(cfg, parameterizations=("sp",))
    return [replace(apply(sp, c), seed=s) for ci, c in enumerate(cands) if ci != winner for s in seeds]


@dataclass(frozen=True)
class RetunedRow:
    """One size of one axis: SP's best at the base values, SP's best re-tuned, μP's."""

    axis: str
    size: int
    base_values: float | str | None
    """SP's seed-mean best over η at the base winner (``"div"``/``None`` as in the tables)."""
    retuned: float | None
    """SP's seed-mean best over every candidate × η (``None``: no candidate complete and finite)."""
    retuned_label: str
    """The candidate and log2 η of ``retuned``, e.g. ``init.hidden_weight=0.5, log2 η -8``."""
    retuned_per_seed: tuple[float | str | None, ...]
    """Each seed's loss at that (candidate, η)."""
    mup: float | None
    """μP's seed-mean best over η at the base winner (``None``: not run)."""
    complete: bool
    """Every candidate × η × seed of SP was run at this size."""

    @property
    def mup_minus_retuned(self) -> float | None:
        if self.mup is None or self.retuned is None:
            return None
        return self.mup - self.retuned


def _index(records: Iterable[dict[str, Any]], optimizer: str) -> dict[tuple, dict[str, Any]]:
    out: dict[tuple, dict[str, Any]] = {}
    for r in records:
        if r.get("optimizer") != optimizer:
            continue
        out[(freeze(r.get("settings")), r.get("parameterization"), r.get("width"), r.get("depth"), r.get("log2_lr"))] = r
    return out


def _curve(index: dict, cfg: Any, param: str, width: int, depth: int, seeds: Sequence[int]) -> list[tuple[int, Any, list]]:
    """Per log2 η of ``cfg``: (η, seed-mean, per-seed cells) of ``param`` at one size."""
    out = []
    for e in sorted(cfg.log2_lrs):
        cells = [cell(index.get((freeze(replace(cfg, seed=s).settings()), param, width, depth, e))) for s in seeds]
        out.append((e, mean_cell(cells), cells))
    return out


def _best(curve: list[tuple[int, Any, list]]) -> tuple[float, int, list] | None:
    finite = [(m, e, cells) for e, m, cells in curve if isinstance(m, float) and math.isfinite(m)]
    return min(finite, key=lambda t: (t[0], t[1])) if finite else None


def retuned_rows(records: Iterable[dict[str, Any]], cfg: Any, cands: Sequence[Any], winner: int,
                 seeds: Sequence[int], keys: Sequence[str]) -> list[RetunedRow]:
    """Per size of each axis (width first): SP at the base winner, SP re-tuned over every
    candidate × η (the seed-mean's minimum; ties go to the first candidate, then the lower
    η), and μP at the base winner. ``cfg`` is the config before the winner was applied."""
    index = _index(records, cfg.optimizer)
    rows = []
    for axis in ("width", "depth"):
        for width, depth in cfg.sizes(axis):
            best: tuple[float, int, list, int] | None = None
            complete = True
            base_best: float | str | None = None
            mup_best: float | None = None
            for ci, c in enumerate(cands):
                curve = _curve(index, apply(cfg, c), "sp", width, depth, seeds)
                complete = complete and all(m is not None for _, m, _ in curve)
                b = _best(curve)
                if ci == winner:
                    base_best = b[0] if b else ("div" if any(m == "div" for _, m, _ in curve) else None)
                    mb = _best(_curve(index, apply(cfg, c), "mup", width, depth, seeds))
                    mup_best = mb[0] if mb else None
                if b is not None and (best is None or b[0] < best[0]):
                    best = (*b, ci)
            rows.append(RetunedRow(
                axis=axis,
                size=width if axis == "width" else depth,
                base_values=base_best,
                retuned=None if best is None else best[0],
                retuned_label="" if best is None else f"{label(cands[best[3]], keys)}, log2 η {best[1]}",
                retuned_per_seed=() if best is None else tuple(best[2]),
                mup=mup_best,
                complete=complete,
            ))
    return rows


def has_retune_runs(records: Iterable[dict[str, Any]], cfg: Any, cands: Sequence[Any], winner: int | None) -> bool:
    """Whether any SP run of a non-winning candidate exists away from the base size: only
    then does the report show the re-tuned table (older sweeps render as before)."""
    wanted = {freeze(replace(apply(cfg, c), seed=s).settings())
              for ci, c in enumerate(cands) if ci != winner for s in _seeds_in(records)}
    for r in records:
        if (r.get("optimizer") == cfg.optimizer and r.get("parameterization") == "sp"
                and (r.get("width"), r.get("depth")) != (cfg.base_width, cfg.base_depth)
                and freeze(r.get("settings")) in wanted):
            return True
    return False


def _seeds_in(records: Iterable[dict[str, Any]]) -> set[int]:
    return {r["settings"]["seed"] for r in records if isinstance(r.get("settings"), dict) and "seed" in r["settings"]}
