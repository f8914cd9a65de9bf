"""Running ``spectral sweep --ablate``: the base η, the swaps at the target width, the table.

The stages are :mod:`spectral.sweep.ablate`'s (pure); this module trains them through the
caller's ``train`` (the CLI's :func:`~spectral.sweep.train.run_sweep` on one folder, so every
run lands in one ``runs.jsonl`` and a rerun resumes) and renders ``ablation.md`` (the
``sweep_ablation.md.j2`` template), ``ablation.json`` and the base tuning's ``tuning.json``. With ``--report-only`` ``train``
trains nothing and the same files are rendered from the runs on disk, byte for byte.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from dataclasses import asdict
from pathlib import Path
from typing import Any

from ..errors import SpecError
from ..io import write_atomic
from ..templating import environment
from .ablate import Ablation, AblationRow, ablation_configs, ablation_rows, sp_swaps
from .options import SweepConfig
from .recipe import derived_rules
from .compare_arms import write_ablation_comparison
from .records import META_FILE, RUNS_FILE, read_runs
from .report import read_meta
from .train import tune_at_base
from .tune import label

__all__ = ["ABLATION_FILE", "ablations_for", "render_ablation", "run_ablation"]

ABLATION_FILE = "ablation.json"


def ablations_for(cfg: SweepConfig, variants: Sequence[Ablation], folder: Path, *,
                  swaps: bool = True) -> list[Ablation]:
    """Every SP swap of :data:`~spectral.sweep.ablate.ROLE_RULES` for ``cfg``'s rules (none with
    ``swaps=False``: ``--variants-only``), then the variants."""
    if not swaps:
        return list(variants)
    rules = dict(derived_rules(cfg, folder))
    if not cfg.experts:  # a dense model has no router: its rules change nothing
        rules.pop("router_weight", None)
    return sp_swaps(rules) + list(variants)


def run_ablation(cfg: SweepConfig, variants: Sequence[Ablation], tune: Sequence[tuple[str, tuple[float, ...]]],
                 seeds: Sequence[int], out: Path, train: Callable[[SweepConfig], None], *,
                 warn: Callable[[str], None] | None = None, command: str | None = None,
                 rule: str = "fit", swaps: bool = True) -> list[Path]:
    """Train what is missing (base tuning, then every swap at the largest width) and write the table.

    ``swaps=False`` (``--variants-only``): μP and the named variants only, no swap to SP's rules
    and no SP run; the comparison then pairs each variant with μP."""
    target = max(cfg.widths)
    if target <= cfg.base_width:
        raise SpecError(f"--ablate: the target width (the largest of --widths, {target}) must exceed "
                        f"--base-width {cfg.base_width}")
    before = cfg
    cfg, choice = tune_at_base(cfg, tune, seeds, out, train, warn=warn, rule=rule)
    winner = choice.winner  # tune_at_base refuses a choice without a winner
    assert winner is not None
    col = choice.winner_col
    assert col is not None
    log2_lr = choice.log2_lrs[col]
    rules = derived_rules(cfg, out / "generated")
    ablations = ablations_for(cfg, variants, out / "generated", swaps=swaps)
    for c in ablation_configs(cfg, ablations, target, log2_lr, seeds, sp=swaps):
        train(c)
    rows = ablation_rows(read_runs(out / RUNS_FILE, warn=warn), cfg, ablations, rules, target, log2_lr, seeds,
                         sp=swaps)
    meta = read_meta(out / META_FILE, warn)
    base = {
        "log2_lr": log2_lr,
        "loss": choice.mean[winner][col],
        "log2_lrs": list(choice.log2_lrs),
        "tuned": ", ".join(choice.keys),
        "winner": label(choice.chosen, choice.keys) if choice.keys else "",
        "edges": choice.edges(),
    } | choice.fit_text()
    data = meta.get("data") if isinstance(meta.get("data"), dict) else None
    text = render_ablation(cfg.optimizer, rows, settings=cfg.settings(), base=base, target=target, seeds=seeds,
                           command=meta.get("command") or command, data=data)
    payload = {"optimizer": cfg.optimizer, "base": base, "target_width": target, "depth": cfg.base_depth,
               "seeds": list(seeds), "rows": [asdict(r) for r in rows]}
    return [
        write_atomic(out / "ablation.md", text, force=True),
        write_atomic(out / ABLATION_FILE, json.dumps(payload, indent=2, ensure_ascii=False) + "\n", force=True),
        write_atomic(out / "tuning.json", json.dumps(choice.as_json(), indent=2) + "\n", force=True),
        *write_ablation_comparison(out, before, cfg, choice, seeds, target, log2_lr,
                                   command=meta.get("command") or command, warn=warn,
                                   variants=() if swaps else variants),
    ]


def _num(v: float | None, signed: bool = False) -> str:
    if v is None:
        return "–"
    text = f"{v:+.3f}" if signed else f"{v:.3f}"
    return "+0.000" if text == "-0.000" else text


def _seed(v: float | str | None) -> str:
    return "div" if v == "div" else "–" if v is None else f"{v:.3f}"


def render_ablation(optimizer: str, rows: Sequence[AblationRow], *, settings: dict[str, Any], base: dict[str, Any],
                    target: int, seeds: Sequence[int], command: str | None, data: dict[str, Any] | None) -> str:
    """``ablation.md`` from the rows (pure)."""
    table = [{
        "name": r.name,
        "change": r.change,
        "per_seed": " / ".join(_seed(v) for v in r.per_seed),
        "mean": _num(r.mean),
        "sd": _num(r.sd),
        "delta": "0 (reference)" if i == 0 else _num(r.delta, signed=True),
        "range": "–" if i == 0 or r.delta_lo is None else f"[{_num(r.delta_lo, True)}, {_num(r.delta_hi, True)}]",
        "lower": "–" if i == 0 else f"{r.lower} of {len(r.per_seed)}",
        "note": "no-op (μP's runs)" if r.noop else ("same numbers as μP (its runs)" if r.reused and i and r.delta == 0 else ""),
    } for i, r in enumerate(rows)]
    return environment("text").get_template("sweep_ablation.md.j2").render(
        optimizer=optimizer, rows=table, settings=settings, base=base, target=target,
        ratio=target // settings["base_width"] if target % settings["base_width"] == 0 else target / settings["base_width"],
        seeds=", ".join(str(s) for s in seeds), command=command, data=data or {},
    )
