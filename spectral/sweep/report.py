"""Tables, plots and optimum drift of a learning-rate sweep, as the paper shows them.

From ``OUT/runs.jsonl`` (:mod:`spectral.sweep.records`) this writes, into ``OUT``:

* ``summary.md`` — first the transfer regret and the best loss per size and parameterisation,
  then the optimum drift, then every table (final validation loss per size × log2 LR, best
  per row in bold), the data and the command;
* ``tables.tex`` — the regret / best-loss table and the loss tables in the paper's LaTeX
  style (booktabs);
* ``drift.json`` — the drift, regret and best-loss numbers, machine-readable;
* ``lr_width.png`` / ``lr_depth.png`` — loss vs log2 LR, one curve per size, one panel per
  parameterisation side by side, and a last panel of the best loss and the loss at the
  base-optimal LR vs size (the gap is the regret) (matplotlib, Agg backend).

Transfer regret (:func:`transfer_regret`): at each size, the loss at the base-optimal LR
(the best log2 η_base at the base size of that axis) minus the best loss over the LR grid at
that size — what a user who tunes at the base and transfers pays against re-tuning at every
size. Drift alone can hide it (a one-step drift on a flat valley costs nothing; on a steep
one, a lot) and best loss alone hides what transfer saves (SP re-tuned per size is a
sweep per size).

Drift, in grid steps of log2 η_base: ``end`` = argmin index at the largest size minus at the
smallest; ``spread`` = max − min of the argmin index over all sizes. Diverged runs count as
+∞; a size with no finite run has no argmin and is left out of the drift.

Templates: ``templates/sweep_table.md.j2``, ``sweep_table.tex.j2``, ``sweep_summary.md.j2``.
"""

from __future__ import annotations

import io
import json
import math
from dataclasses import asdict, dataclass, replace
from pathlib import Path
from typing import Any
from collections.abc import Callable, Iterable

from ..io import write_atomic
from ..templating import environment
from .records import META_FILE, RUNS_FILE, read_runs
from .tune import label, mean_cell

__all__ = [
    "Table",
    "read_meta",
    "build_tables",
    "mean_tables",
    "drift",
    "transfer_regret",
    "render_markdown",
    "render_latex",
    "plot",
    "write_report",
    "write_index",
]

_AXIS_META = {
    "width": {"name": "width", "symbol": "n", "label": "n"},
    "depth": {"name": "depth", "symbol": "L", "label": "L"},
}
_PARAM_TITLE = {"sp": "SP", "mup-k1": "μP (k=1)", "mup": "μP (k=2)"}
_PARAM_TEX = {"sp": "SP", "mup-k1": r"$\mu$P ($k=1$)", "mup": r"$\mu$P ($k\ge2$)"}


@dataclass
class Table:
    optimizer: str
    axis: str
    parameterization: str
    sizes: list[int]
    """Width (width axis) or depth (depth axis) per row, ascending."""
    log2_lrs: list[int]
    values: list[list[float | None | str]]
    """``values[row][col]``: loss, ``"div"`` (diverged) or ``None`` (not run)."""
    base_size: int | None = None
    """The base model's width (width axis) or depth (depth axis): where the LR is tuned.
    ``None``: unknown, the smallest size stands in for it."""

    def argmins(self) -> list[int | None]:
        out: list[int | None] = []
        for row in self.values:
            finite = [(v, i) for i, v in enumerate(row) if isinstance(v, float) and math.isfinite(v)]
            out.append(min(finite)[1] if finite else None)
        return out

    @property
    def title(self) -> str:
        return f"{self.optimizer}, {_PARAM_TITLE.get(self.parameterization, self.parameterization)}, {self.axis} scaling"


def build_tables(records: Iterable[dict[str, Any]], cfg: Any) -> list[Table]:
    """One table per (axis, parameterisation) of ``cfg``, from the matching records (last wins)."""
    settings = cfg.settings()
    latest: dict[tuple, dict[str, Any]] = {}
    for r in records:
        if r.get("optimizer") != cfg.optimizer or r.get("settings") != settings:
            continue
        latest[(r["parameterization"], r["width"], r["depth"], r["log2_lr"])] = r
    lrs = sorted(cfg.log2_lrs)
    tables = []
    for axis in ("width", "depth"):
        sizes = cfg.sizes(axis)
        for p in cfg.parameterizations:
            values = []
            for w, d in sizes:
                row: list[float | None | str] = []
                for e in lrs:
                    r = latest.get((p, w, d, e))
                    if r is None:
                        row.append(None)
                    elif r.get("diverged") or r.get("val_loss") is None:
                        row.append("div")
                    else:
                        row.append(float(r["val_loss"]))
                values.append(row)
            base = cfg.base_width if axis == "width" else cfg.base_depth
            tables.append(
                Table(cfg.optimizer, axis, p, [w if axis == "width" else d for w, d in sizes], lrs, values, base)
            )
    return tables


def mean_tables(per_seed: list[list[Table]]) -> list[Table]:
    """The seed-mean of aligned tables (one list per seed, the same tables in each):
    each cell the mean loss, ``"div"`` if any seed diverged, ``None`` if any is missing."""
    out = []
    for group in zip(*per_seed, strict=True):
        first = group[0]
        values = [
            [mean_cell([t.values[i][j] for t in group]) for j in range(len(row))]
            for i, row in enumerate(first.values)
        ]
        out.append(replace(first, values=values))
    return out


def seed_rows(per_seed: dict[int, list[Table]]) -> list[dict[str, Any]]:
    """Per (axis, parameterisation): each seed's best loss (its log2 η) and regret at the
    largest size, and the gap between the seeds' best losses — how far apart seeds are,
    against which a difference between parameterisations is read."""
    rows = []
    seeds = list(per_seed)
    for i, t in enumerate(per_seed[seeds[0]]):
        cells, bests = [], []
        for s in seeds:
            ts = per_seed[s][i]
            r = transfer_regret(ts)
            am = ts.argmins()[-1] if ts.values else None
            b = r["best_loss"][-1] if r["best_loss"] else None
            bests.append(b)
            where = "" if am is None else f" ({ts.log2_lrs[am]})"
            cells.append(f"{_fmt(b)}{where} / {_fmt(r['regret'][-1] if r['regret'] else None)}")
        finite = [b for b in bests if isinstance(b, float)]
        gap = _fmt(max(finite) - min(finite)) if len(finite) == len(bests) and finite else "–"
        rows.append({"axis": t.axis, "symbol": _AXIS_META[t.axis]["symbol"], "size": t.sizes[-1] if t.sizes else "–",
                     "parameterization": t.parameterization, "cells": cells, "gap": gap})
    return rows


def tuning_rows(choice: Any) -> list[dict[str, Any]]:
    """The base-tuning table: one row per candidate, the seed-mean loss per log2 η (its
    minimum in bold) and whether it won."""
    rows = []
    for ci, c in enumerate(choice.candidates):
        best = choice.best_col[ci]
        cells = [{"text": _fmt(v), "best": j == best} for j, v in enumerate(choice.mean[ci])]
        rows.append({"label": label(c, choice.keys), "cells": cells, "winner": ci == choice.winner})
    return rows


def drift(table: Table) -> dict[str, Any]:
    """Optimum drift of one table in grid steps (``None`` where fewer than one row has an optimum)."""
    am = table.argmins()
    known = [a for a in am if a is not None]
    end = am[-1] - am[0] if am and am[0] is not None and am[-1] is not None else None
    return {
        "optimizer": table.optimizer,
        "axis": table.axis,
        "parameterization": table.parameterization,
        "sizes": table.sizes,
        "argmin_log2_lr": [table.log2_lrs[a] if a is not None else None for a in am],
        "end": end,
        "spread": (max(known) - min(known)) if known else None,
    }


def transfer_regret(table: Table) -> dict[str, Any]:
    """Best loss and transfer regret at each size of one table (pure: no torch, no files).

    The reference row is the base size (``table.base_size``; the smallest size when it is
    ``None`` or not in the table). Its argmin is the base-optimal log2 η — what a user tunes
    on the base model. At each size:

    * ``best_loss`` — the lowest finite loss over the LR grid (``None``: no finite run);
    * ``loss_at_base_lr`` — the loss at the base-optimal log2 η (``"div"`` if that run
      diverged, ``None`` if it was not run);
    * ``regret`` — ``loss_at_base_lr − best_loss`` (≥ 0; 0 at the base size by definition;
      ``"div"`` when the transferred LR diverges; ``None`` when either side is missing or
      the base size has no optimum).

    Returns ``{"sizes", "base_size", "base_log2_lr", "best_loss", "loss_at_base_lr", "regret"}``
    (lists aligned with ``sizes``).
    """
    am = table.argmins()
    ref = table.sizes.index(table.base_size) if table.base_size in table.sizes else 0
    base_col = am[ref] if am else None
    best: list[float | None] = []
    at_base: list[float | str | None] = []
    regret: list[float | str | None] = []
    for row, a in zip(table.values, am, strict=False):
        b = row[a] if a is not None else None
        v = row[base_col] if base_col is not None else None
        best.append(b)
        at_base.append(v)
        if v == "div" and b is not None:
            regret.append("div")
        elif isinstance(v, float) and b is not None:
            regret.append(v - b)
        else:
            regret.append(None)
    return {
        "sizes": table.sizes,
        "base_size": table.sizes[ref] if table.sizes else None,
        "base_log2_lr": table.log2_lrs[base_col] if base_col is not None else None,
        "best_loss": best,
        "loss_at_base_lr": at_base,
        "regret": regret,
    }


def _fmt(v: float | str | None) -> str:
    """A loss or regret cell: 3 decimals, ``div`` or ``–``."""
    return "–" if v is None else ("div" if v == "div" else f"{v:.3f}")


def regret_rows(tables: list[Table]) -> tuple[list[str], list[dict[str, Any]]]:
    """The regret / best-loss table: one row per (axis, size), ``best`` and ``regret`` per parameterisation.

    Returns (parameterisations in column order, rows); a row is ``{"axis", "symbol", "size",
    "base", "cells": [{"best", "regret"} text per parameterisation]}``.
    """
    params: list[str] = []
    for t in tables:
        if t.parameterization not in params:
            params.append(t.parameterization)
    rows = []
    for axis in ("width", "depth"):
        regs = {t.parameterization: transfer_regret(t) for t in tables if t.axis == axis}
        if not regs:
            continue
        first = next(iter(regs.values()))
        base = next(t.base_size for t in tables if t.axis == axis)  # the true base, which may not be in the table
        for i, size in enumerate(first["sizes"]):
            cells = []
            for p in params:
                r = regs.get(p)
                cells.append({"best": _fmt(r["best_loss"][i]) if r else "–",
                              "regret": _fmt(r["regret"][i]) if r else "–"})
            rows.append({"axis": axis, "symbol": _AXIS_META[axis]["symbol"], "size": size,
                         "base": size == base, "cells": cells})
    return params, rows


def _base_lrs(tables: list[Table]) -> list[dict[str, Any]]:
    """Per axis: the base size and each parameterisation's base-optimal log2 η, for captions."""
    out = []
    for axis in ("width", "depth"):
        regs = [(t.parameterization, transfer_regret(t)) for t in tables if t.axis == axis]
        if regs:
            out.append({
                "axis": axis,
                "symbol": _AXIS_META[axis]["symbol"],
                "base_size": regs[0][1]["base_size"],
                "lrs": ", ".join(f"{p} {'–' if r['base_log2_lr'] is None else r['base_log2_lr']}" for p, r in regs),
            })
    return out


def render_regret_markdown(tables: list[Table]) -> str:
    """The regret / best-loss table in markdown (``templates/sweep_regret.md.j2``)."""
    params, rows = regret_rows(tables)
    return environment("text").get_template("sweep_regret.md.j2").render(
        params=params, rows=rows, bases=_base_lrs(tables))


def render_regret_latex(tables: list[Table]) -> str:
    """The regret / best-loss table in the paper's LaTeX style (``templates/sweep_regret.tex.j2``)."""
    params, rows = regret_rows(tables)
    optimizer = tables[0].optimizer if tables else ""
    return environment("latex").get_template("sweep_regret.tex.j2").render(
        optimizer=optimizer, params=[_PARAM_TEX.get(p, p) for p in params], rows=rows,
        bases=_base_lrs(tables), label=f"tab:sweep-{optimizer}-regret".replace("+", "-"))


def _rows(table: Table) -> list[dict[str, Any]]:
    rows = []
    for size, row, best in zip(table.sizes, table.values, table.argmins(), strict=False):
        cells = []
        for i, v in enumerate(row):
            text = "–" if v is None else ("div" if v == "div" else f"{v:.3f}")
            cells.append({"text": text, "best": i == best})
        rows.append({"size": size, "cells": cells})
    return rows


def _caption(table: Table) -> str:
    return f"Final validation loss, {table.title}."


def render_markdown(table: Table) -> str:
    meta = _AXIS_META[table.axis]
    return environment("text").get_template("sweep_table.md.j2").render(
        caption=f"*{_caption(table)}*", size_label=meta["label"], log2_lrs=table.log2_lrs, rows=_rows(table)
    )


def render_latex(table: Table) -> str:
    meta = _AXIS_META[table.axis]
    label = f"tab:sweep-{table.optimizer}-{table.axis}-{table.parameterization}".replace("+", "-")
    caption = f"{table.optimizer}, {table.parameterization}, {table.axis} scaling: final validation loss."
    return environment("latex").get_template("sweep_table.tex.j2").render(
        caption=caption, size_name=meta["name"], size_symbol=meta["symbol"],
        log2_lrs=table.log2_lrs, rows=_rows(table), label=label,
    )


def plot(tables: list[Table], axis: str, path: str | Path, note: str = "") -> Path:
    """Loss vs log2 LR, one curve per size, one panel per parameterisation (SP beside μP).

    A last panel shows, per parameterisation, the best loss vs size (solid) and the loss at
    the base-optimal LR (dashed): the vertical gap is the transfer regret, and the regret at
    the largest size is written beside the legend.
    """
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    panels = [t for t in tables if t.axis == axis]
    fig, axes = plt.subplots(1, len(panels) + 1, figsize=(4.2 * (len(panels) + 1), 3.4), squeeze=False)
    for ax in axes[0][1:len(panels)]:
        ax.sharey(axes[0][0])
    finite = [v for t in panels for row in t.values for v in row if isinstance(v, float) and math.isfinite(v)]
    cmap = plt.get_cmap("viridis")
    for ax, t in zip(axes[0], panels, strict=False):
        for j, (size, row, best) in enumerate(zip(t.sizes, t.values, t.argmins(), strict=False)):
            color = cmap(0.85 * j / max(1, len(t.sizes) - 1))
            xs = [e for e, v in zip(t.log2_lrs, row, strict=False) if isinstance(v, float)]
            ys = [v for v in row if isinstance(v, float)]
            sym = _AXIS_META[axis]["symbol"]
            ax.plot(xs, ys, "o-", color=color, ms=3.5, lw=1.4, label=f"{sym}={size}")
            if best is not None:
                ax.plot([t.log2_lrs[best]], [row[best]], "*", color=color, ms=11, mec="black", mew=0.5)
        ax.set_title(_PARAM_TITLE.get(t.parameterization, t.parameterization))
        ax.set_xlabel(r"$\log_2 \eta_{\mathrm{base}}$")
        ax.grid(alpha=0.3)
    axes[0][0].set_ylabel("final validation loss")
    if finite:
        lo = min(finite)
        hi = min(max(finite), lo + 2.0)  # keep the optimum region readable when some runs blow up
        axes[0][0].set_ylim(lo - 0.05 * (hi - lo + 1e-9), hi + 0.05 * (hi - lo + 1e-9))
    axes[0][len(panels) - 1 if panels else 0].legend(fontsize=8, loc="upper right")
    _plot_regret(axes[0][-1], panels, axis)
    fig.suptitle(f"{panels[0].optimizer if panels else ''}: {axis} scaling{note}")
    fig.tight_layout()
    buffer = io.BytesIO()  # rendered in memory, then the one writer (atomic, no debris)
    try:
        fig.savefig(buffer, format="png", dpi=120)
    finally:
        plt.close(fig)
    return write_atomic(path, buffer.getvalue(), force=True)


_PARAM_COLOR = {"sp": "tab:red", "mup-k1": "tab:orange", "mup": "tab:blue"}


def _plot_regret(ax: Any, tables: list[Table], axis: str) -> None:
    """Best loss (solid) and loss at the base-optimal LR (dashed) vs size, one colour per parameterisation."""
    sym = _AXIS_META[axis]["symbol"]
    for t in tables:
        r = transfer_regret(t)
        color = _PARAM_COLOR.get(t.parameterization)
        name = _PARAM_TITLE.get(t.parameterization, t.parameterization)
        pts = [(s, b) for s, b in zip(r["sizes"], r["best_loss"], strict=False) if isinstance(b, float)]
        last = r["regret"][-1] if r["regret"] else None
        tag = "–" if last is None else ("div" if last == "div" else f"{last:.3f}")
        if pts:
            ax.plot(*zip(*pts, strict=False), "o-", color=color, ms=3.5, lw=1.4,
                    label=f"{name}: regret at {sym}={r['sizes'][-1]}: {tag}")
        pts = [(s, v) for s, v in zip(r["sizes"], r["loss_at_base_lr"], strict=False) if isinstance(v, float)]
        if pts:
            ax.plot(*zip(*pts, strict=False), "s--", color=color, ms=3, lw=1.0, alpha=0.8)
    ax.set_xscale("log", base=2)
    if tables:
        ax.set_xticks(tables[0].sizes, [str(s) for s in tables[0].sizes])
        ax.minorticks_off()
    ax.set_xlabel(f"${sym}$")
    ax.set_ylabel("final validation loss")
    ax.set_title("best (—) vs at base-optimal η (--)", fontsize=10)
    ax.grid(alpha=0.3)
    if tables:
        ax.legend(fontsize=7, loc="best")


def write_report(out: str | Path, cfg: Any, records: list[dict[str, Any]] | None = None,
                 seeds: tuple[int, ...] | None = None, choice: Any = None,
                 warn: Callable[[str], None] | None = None, retuned: list[Any] | None = None) -> list[Path]:
    """Render ``summary.md``, ``tables.tex``, ``drift.json`` and the plots into ``out``.

    ``seeds``: the tables are the seed-mean of each seed's (default: ``cfg.seed`` alone), and
    a per-seed table shows each seed's best and regret at the largest size. ``choice``: the
    base tuning of ``--tune`` (:func:`spectral.sweep.tune.choose`), shown first and written
    to ``tuning.json``. ``warn`` hears of each damaged line of ``runs.jsonl`` (skipped).
    ``retuned``: SP re-tuned at every size (:func:`spectral.sweep.retune.retuned_rows`), shown
    after the base tuning and written to ``retuned.json``.
    """
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    if records is None:
        records = read_runs(out / RUNS_FILE, warn=warn)
    meta = read_meta(out / META_FILE, warn)
    seeds = tuple(seeds) if seeds else (cfg.seed,)
    per_seed = {s: build_tables(records, replace(cfg, seed=s)) for s in seeds}
    tables = per_seed[seeds[0]] if len(seeds) == 1 else mean_tables(list(per_seed.values()))
    drifts = [drift(t) | transfer_regret(t) | {"seeds": list(seeds)} for t in tables]
    if len(seeds) > 1:
        for i, d in enumerate(drifts):
            d["per_seed"] = {str(s): transfer_regret(per_seed[s][i]) for s in seeds}
    images = []
    for axis in ("width", "depth"):
        note = f" (mean of seeds {', '.join(map(str, seeds))})" if len(seeds) > 1 else ""
        images.append(plot(tables, axis, out / f"lr_{axis}.png", note).name)
    data = meta.get("data") if isinstance(meta.get("data"), dict) else {}
    settings = cfg.settings()
    all_settings = [replace(cfg, seed=s).settings() for s in seeds]
    hp_sources = sorted({r.get("hp_source", "?") for r in records
                         if r.get("settings") in all_settings and r.get("optimizer") == cfg.optimizer})
    summary = environment("text").get_template("sweep_summary.md.j2").render(
        optimizer=cfg.optimizer,
        token="byte" if data.get("vocab_size", 256) == 256 else "token",
        settings=settings,
        base_values=(f", base multipliers α: {label(cfg.multiplier)}" if cfg.multiplier != 1.0 else "")
        + (f", base η factors: {label(cfg.lr_scale)}" if cfg.lr_scale else "")
        + (f", base init-std factors: {label(cfg.init_scale)}" if cfg.init_scale else ""),
        seeds=", ".join(map(str, seeds)),
        n_seeds=len(seeds),
        seed_rows=seed_rows(per_seed) if len(seeds) > 1 else [],
        seed_list=list(seeds),
        tuning=None if choice is None else {"rows": tuning_rows(choice), "log2_lrs": list(choice.log2_lrs),
                                            "tuned": ", ".join(choice.keys), "winner": label(choice.chosen, choice.keys),
                                            "edges": choice.edges()} | choice.fit_text(),
        retuned=None if not retuned or choice is None else render_retuned_markdown(retuned, choice, seeds),
        data=data,
        hp_sources=hp_sources,
        command=meta.get("command"),
        regret=render_regret_markdown(tables),
        drifts=[
            d | {"argmins": ", ".join("–" if a is None else str(a) for a in d["argmin_log2_lr"]),
                 "end": "–" if d["end"] is None else f"{d['end']:+d}",
                 "spread": "–" if d["spread"] is None else d["spread"]}
            for d in drifts
        ],
        tables=[{"title": t.title, "markdown": render_markdown(t)} for t in tables],
        images=images,
    )
    tuning_tex = [] if choice is None else [environment("latex").get_template("sweep_tuning.tex.j2").render(
        optimizer=cfg.optimizer, base_width=cfg.base_width, base_depth=cfg.base_depth, n_seeds=len(seeds),
        tuned=", ".join(choice.keys), winner=label(choice.chosen, choice.keys), rows=tuning_rows(choice),
        log2_lrs=list(choice.log2_lrs), label=f"tab:sweep-{cfg.optimizer}-tuning".replace("+", "-"))]
    tex = "% generated by spectral sweep; needs \\usepackage{booktabs}\n" + "\n".join(
        [render_regret_latex(tables), *tuning_tex, *(render_latex(t) for t in tables)])
    paths = [
        write_atomic(out / "summary.md", summary, force=True),
        write_atomic(out / "tables.tex", tex, force=True),
        write_atomic(out / "drift.json", json.dumps(drifts, indent=2) + "\n", force=True),
    ]
    if retuned and choice is not None:
        rows = [asdict(r) | {"mup_minus_retuned": r.mup_minus_retuned} for r in retuned]
        paths.append(write_atomic(out / "retuned.json", json.dumps(rows, indent=2) + "\n", force=True))
    if choice is not None:
        paths.append(write_atomic(out / "tuning.json", json.dumps(choice.as_json(), indent=2) + "\n", force=True))
    return paths + [out / img for img in images]


def retuned_edges(where: str, choice: Any) -> list[str]:
    """What of SP's re-tuned cell (``output=1, log2 η -7``) lies on the edge of what was tried:
    each tuned key whose value is its candidates' smallest or largest, and η when it is the
    grid's first or last. Such a cell's loss bounds SP's tuned loss from above; it is not SP's
    optimum (its grid needs extending past that edge)."""
    cand, sep, eta = where.rpartition(", log2 η ")
    if not sep:
        return []
    out = []
    for key in choice.keys:
        values = sorted({c[key] for c in choice.candidates if isinstance(c, dict) and key in c})
        mine = [c[key] for c in choice.candidates if isinstance(c, dict) and label(c, choice.keys) == cand]
        if len(values) > 1 and mine and mine[0] in (values[0], values[-1]):
            out.append(key)
    lrs = sorted(choice.log2_lrs)
    if len(lrs) > 1 and int(eta) in (lrs[0], lrs[-1]):
        out.append("log2 η")
    return out


def _where(where: str, choice: Any) -> str:
    edges = retuned_edges(where, choice) if where else []
    if not where:
        return "–"
    return where if not edges else f"{where} (**edge**: {', '.join(edges)}; a bound)"


def render_retuned_markdown(rows: list[Any], choice: Any, seeds: tuple[int, ...]) -> str:
    """SP re-tuned at every size beside SP at the base values and μP (``templates/sweep_retuned.md.j2``)."""
    def per_seed(cells: tuple[Any, ...]) -> str:
        return " / ".join(_fmt(c) for c in cells) if cells else "–"

    items = [{"axis": r.axis, "symbol": _AXIS_META[r.axis]["symbol"], "size": r.size, "base": _fmt(r.base_values),
              "retuned": _fmt(r.retuned), "where": _where(r.retuned_label, choice),
              "per_seed": per_seed(r.retuned_per_seed),
              "mup": _fmt(r.mup), "diff": "–" if r.mup_minus_retuned is None else f"{r.mup_minus_retuned:+.3f}"}
             for r in rows]
    incomplete = ", ".join(f"{_AXIS_META[r.axis]['symbol']} = {r.size}" for r in rows if not r.complete)
    return environment("text").get_template("sweep_retuned.md.j2").render(
        rows=items, tuned=", ".join(choice.keys), winner=label(choice.chosen, choice.keys),
        seeds=", ".join(map(str, seeds)), incomplete=incomplete)


def read_meta(path: Path, warn: Callable[[str], None] | None) -> dict[str, Any]:
    """``sweep.json`` as a dict; a damaged or foreign one is ``{}`` (and ``warn`` hears so):
    it only annotates the report."""
    if not path.is_file():
        return {}
    try:
        meta = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError, RecursionError) as exc:  # ValueError: bad UTF-8 or JSON
        meta = None
        if warn is not None:
            warn(f"{path}: ignored: {getattr(exc, 'strerror', None) or type(exc).__name__}")
    return meta if isinstance(meta, dict) else {}


def write_index(root: str | Path, cfgs: list[Any]) -> Path:
    """``root/README.md``: best loss and transfer regret at the largest size, then the drift, of every optimizer's sweep under ``root``, and its plots."""
    root = Path(root)
    rows, optimizers = [], []
    for cfg in cfgs:
        folder = root / cfg.optimizer
        drifts = json.loads((folder / "drift.json").read_text(encoding="utf-8"))
        meta = read_meta(folder / META_FILE, None)
        for axis in ("width", "depth"):
            by_p = {d["parameterization"]: d for d in drifts if d["axis"] == axis}
            cells, regret_cells = [], []
            for p in ("sp", "mup-k1", "mup"):
                d = by_p.get(p)
                if d is None:
                    cells.append("not run")
                    regret_cells.append("not run")
                else:
                    end = "–" if d["end"] is None else f"{d['end']:+d}"
                    spread = "–" if d["spread"] is None else str(d["spread"])
                    cells.append(f"{end} / {spread}")
                    # drift.json written before regret was reported has no regret keys
                    best, reg = (d.get("best_loss") or [None])[-1], (d.get("regret") or [None])[-1]
                    regret_cells.append(f"{_fmt(best)} / {_fmt(reg)}")
            sym = "n" if axis == "width" else "L"
            sizes = next(iter(by_p.values()))["sizes"] if by_p else []
            rows.append({"optimizer": cfg.optimizer, "folder": cfg.optimizer, "axis": axis,
                         "sizes": f"{sym} = {', '.join(map(str, sizes))}", "cells": cells,
                         "largest": f"{sym} = {sizes[-1]}" if sizes else "–", "regret_cells": regret_cells})
        optimizers.append({"name": cfg.optimizer, "folder": cfg.optimizer, "command": meta.get("command") or "?"})
    text = environment("text").get_template("sweep_index.md.j2").render(rows=rows, optimizers=optimizers)
    return write_atomic(root / "README.md", text, force=True)
