"""The report of ``spectral sweep --fit-exponent``: tables, JSON and plots of the measured exponents.

:func:`write_exponent_report` renders one optimizer's fits (:class:`~spectral.sweep.exponent.AxisFit`)
into ``exponents.md``, ``exponents.json`` and one plot per key and axis; :func:`write_exponent_index`
gathers every optimizer's rows under ``--out``. Everything is rendered from ``runs.jsonl`` by
the caller, so ``--report-only`` reproduces these files byte for byte.
"""

from __future__ import annotations

import io
import json
import math
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from ..io import write_atomic
from ..measure.fit import fit_line
from ..templating import environment
from .power import TARGET
from .exponent import AxisFit, parse_fit_key

__all__ = [
    "EXPONENTS_FILE",
    "fit_row",
    "plot_fit",
    "without_one_seed",
    "write_exponent_index",
    "write_exponent_report",
]

EXPONENTS_FILE = "exponents.json"
_SYMBOL = {"width": "n", "depth": "L"}


def _num(v: float | None, digits: int = 2) -> str:
    if v is None:
        return "–"
    text = f"{v:+.{digits}f}"
    return "+0." + "0" * digits if text == "-0." + "0" * digits else text  # no "−0.00"


def fit_row(fit: dict[str, Any]) -> dict[str, Any]:
    """One table row from a fit's JSON record (:func:`_as_json`, or read back from
    ``exponents.json`` for the index): derived exponent, measured [95 % interval], verdict."""
    interval = fit["interval_95"]
    return {
        "key": fit["key"],
        "quantity": parse_fit_key(fit["key"]).quantity,
        "axis": fit["axis"],
        "sizes": ", ".join(str(s) for s in fit["sizes"]),
        "seeds": ", ".join(str(s) for s in fit["seeds"]),
        "symbol": _SYMBOL[fit["axis"]],
        "derived": _num(fit["derived"]),
        "measured": _num(fit["measured"]),
        "interval": "–" if interval is None else f"[{_num(interval[0])}, {_num(interval[1])}]",
        "verdict": fit["verdict"],
        "power": _power(interval),
        "one_seed": _one_seed(fit.get("without_one_seed")),
    }


def _one_seed(without: dict[str, dict[str, Any]] | None) -> str:
    """Whether the verdict survives leaving out any one seed: ``holds`` or the seeds whose
    removal changes it (``without seed 2: agrees``)."""
    if not without:
        return "–"
    changed = [f"without seed {s}: {w['verdict']}" for s, w in without.items() if w["changed"]]
    return "holds" if not changed else "**depends on one seed** (" + "; ".join(changed) + ")"


def _verdict(derived: float, measured: float, half: float) -> str:
    """``agrees``/``differs`` by the 95 % interval; ``not informative`` where the derived
    exponent lies in an interval wider than ±:data:`~spectral.sweep.power.TARGET`."""
    if not measured - half <= derived <= measured + half:
        return "differs"
    return "agrees" if half <= TARGET else "not informative"


def without_one_seed(fit: AxisFit) -> dict[str, dict[str, Any]] | None:
    """The fit again with each seed left out in turn (the same optima, one seed fewer):
    its measured exponent, half-width and verdict, and whether the verdict changed. ``None``
    where the full fit has no agrees/differs verdict (edge, incomplete) or one seed."""
    if (
        fit.verdict not in ("agrees", "differs")
        or len(fit.seeds) < 2
        or fit.measured is None
        or fit.half_width is None
    ):
        return None
    full = _verdict(fit.derived, fit.measured, fit.half_width)
    out = {}
    for k, seed in enumerate(fit.seeds):
        xs = [
            math.log2(size / fit.base_size)
            for size, row in zip(fit.sizes, fit.optima, strict=True)
            for j, o in enumerate(row)
            if j != k and o is not None
        ]
        ys = [o[0] for row in fit.optima for j, o in enumerate(row) if j != k and o is not None]
        line = fit_line(xs, ys) if len(set(xs)) >= 2 else None
        half = None if line is None else line.half_width
        if line is None or half is None:
            out[str(seed)] = {
                "measured": None,
                "half_width": None,
                "verdict": "incomplete",
                "changed": True,
            }
            continue
        measured = fit.derived + line.slope
        verdict = _verdict(fit.derived, measured, half)
        out[str(seed)] = {
            "measured": measured,
            "half_width": half,
            "verdict": verdict,
            "changed": verdict != full,
        }
    return out


def _power(interval: list[float] | None) -> str:
    """Whether the interval is narrow enough to tell exponents ½ apart (half-width ≤ 0.25,
    :data:`spectral.sweep.power.TARGET`); a wider one cannot reject a rule ½ off."""
    if interval is None:
        return "–"
    half = (interval[1] - interval[0]) / 2
    return f"±{half:.2f}" if half <= TARGET else f"±{half:.2f}: **not informative**"


def _optimum_rows(fit: AxisFit) -> list[dict[str, Any]]:
    rows = []
    for size, optima in zip(fit.sizes, fit.optima, strict=True):
        cells = ["–" if o is None else f"{o[0]:+.2f}" + (" (edge)" if o[1] else "") for o in optima]
        rows.append({"size": size, "cells": cells})
    return rows


def _as_json(fit: AxisFit) -> dict[str, Any]:
    def clean(v: float | None) -> float | str | None:
        return "inf" if v is not None and math.isinf(v) else v

    informative = fit.interval is not None and (fit.interval[1] - fit.interval[0]) / 2 <= TARGET
    verdict = fit.verdict
    if verdict == "agrees" and not informative:  # an interval this wide holds rules ½ apart too
        verdict = "not informative"
    without = without_one_seed(fit)
    return {
        "key": fit.key.text,
        "axis": fit.axis,
        "sizes": list(fit.sizes),
        "base_size": fit.base_size,
        "log2_lr": fit.log2_lr,
        "log2_factors": list(fit.log2_factors),
        "seeds": list(fit.seeds),
        "derived": fit.derived,
        "slope": fit.slope,
        "measured": fit.measured,
        "interval_95": None if fit.interval is None else list(fit.interval),
        "verdict": verdict,
        "informative": informative,
        "without_one_seed": without,
        "edges": fit.edges,
        "optimal_log2_factor": [[None if o is None else o[0] for o in row] for row in fit.optima],
        "val_loss": [[[clean(v) for v in seed] for seed in size] for size in fit.losses],
    }


def _plot_losses(right: Any, fit: AxisFit, sym: str, cmap: Any) -> None:
    """The right panel: the seed-mean loss vs the factor at each size, the optima starred."""
    for i, (size, per_seed) in enumerate(zip(fit.sizes, fit.losses, strict=True)):
        color = cmap(0.85 * i / max(1, len(fit.sizes) - 1))
        pts = []
        for j, e in enumerate(fit.log2_factors):
            vals = [row[j] for row in per_seed]
            if all(v is not None and math.isfinite(v) for v in vals):
                pts.append((e, sum(vals) / len(vals)))  # type: ignore[arg-type]
        if pts:
            right.plot(
                [p[0] for p in pts],
                [p[1] for p in pts],
                "o-",
                color=color,
                ms=3.5,
                label=f"{sym}={size}",
            )
            best = min(pts, key=lambda p: p[1])
            right.plot([best[0]], [best[1]], "*", color=color, ms=11, mec="black", mew=0.5)
    right.set_xlabel(f"log2 factor on the rule's {fit.key.quantity}")
    right.set_ylabel("final validation loss (seed mean)")
    right.set_title(f"μP at log2 η_base = {fit.log2_lr}")
    right.grid(alpha=0.3)
    right.legend(fontsize=7)


def plot_fit(fit: AxisFit, path: Path, optimizer: str) -> Path:
    """Left: the optimal value vs size (log2 of its ratio to the base value: the rule's
    exponent × log2 r plus the best factor), per seed, with the fitted and the derived slope.
    Right: the seed-mean loss vs the factor at each size, the optima starred."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    sym = _SYMBOL[fit.axis]
    fig, (left, right) = plt.subplots(1, 2, figsize=(9.0, 3.6))
    xs_all = [math.log2(s / fit.base_size) for s in fit.sizes]
    markers = "os^vD<>"
    for k, seed in enumerate(fit.seeds):
        xs, ys = [], []
        for x, row in zip(xs_all, fit.optima, strict=True):
            if row[k] is not None:
                xs.append(x)
                ys.append(fit.derived * x + row[k][0])
        left.plot(
            xs,
            ys,
            markers[k % len(markers)],
            color="tab:blue",
            alpha=0.8,
            label=f"optimum, seed {seed}",
        )
    if fit.slope is not None and fit.intercept is not None:
        lo, hi = min(xs_all), max(xs_all)
        measured = fit.derived + fit.slope
        left.plot(
            [lo, hi],
            [measured * lo + fit.intercept, measured * hi + fit.intercept],
            "-",
            color="tab:blue",
            label=f"fitted: {measured:+.2f}",
        )
        mid = sum(xs_all) / len(xs_all)
        c = measured * mid + fit.intercept  # the derived line through the fit's centre
        left.plot(
            [lo, hi],
            [fit.derived * (lo - mid) + c, fit.derived * (hi - mid) + c],
            "--",
            color="tab:gray",
            label=f"derived: {fit.derived:+.2f}",
        )
    left.set_xticks(xs_all, [str(s) for s in fit.sizes])
    left.set_xlabel(f"{sym} (log scale)")
    left.set_ylabel(f"log2 optimal {fit.key.quantity} / base value")
    left.set_title(f"{fit.key.text}: exponent in {sym}")
    left.grid(alpha=0.3)
    left.legend(fontsize=7)
    _plot_losses(right, fit, sym, plt.get_cmap("viridis"))
    fig.suptitle(f"{optimizer}: measured exponent of {fit.key.text} ({fit.axis})")
    fig.tight_layout()
    buffer = io.BytesIO()
    try:
        fig.savefig(buffer, format="png", dpi=110)
    finally:
        plt.close(fig)
    return write_atomic(path, buffer.getvalue(), force=True)


def write_exponent_report(
    out: Path,
    optimizer: str,
    fits: Sequence[AxisFit],
    *,
    settings: dict[str, Any],
    base_choice: dict[str, Any],
    command: str | None,
    data: dict[str, Any] | None,
) -> list[Path]:
    """``exponents.md``, ``exponents.json`` and the plots of one optimizer's fits into ``out``."""
    images = []
    for fit in fits:
        name = f"exponent_{fit.key.text.replace('.', '_')}_{fit.axis}.png"
        images.append(plot_fit(fit, out / name, optimizer).name)
    records = [_as_json(f) for f in fits]
    rows = [fit_row(r) for r in records]
    text = (
        environment("text")
        .get_template("exponent_summary.md.j2")
        .render(
            optimizer=optimizer,
            settings=settings,
            base_choice=base_choice,
            command=command,
            data=data or {},
            rows=rows,
            fits=[
                {
                    "row": row,
                    "optima": _optimum_rows(f),
                    "seeds": list(f.seeds),
                    "factors": ", ".join(str(e) for e in f.log2_factors),
                    "edges": f.edges,
                    "log2_lr": f.log2_lr,
                    "image": img,
                }
                for f, row, img in zip(fits, rows, images, strict=True)
            ],
        )
    )
    payload = {"optimizer": optimizer, "base": base_choice, "fits": records}
    return [
        write_atomic(out / "exponents.md", text, force=True),
        write_atomic(out / EXPONENTS_FILE, json.dumps(payload, indent=2) + "\n", force=True),
        *(out / img for img in images),
    ]


def write_exponent_index(root: Path, optimizers: Sequence[str]) -> Path | None:
    """``root/exponents.md``: every optimizer's rows, read back from its ``exponents.json``."""
    rows = []
    for name in optimizers:
        path = root / name / EXPONENTS_FILE
        if not path.is_file():
            continue
        payload = json.loads(path.read_text(encoding="utf-8"))
        rows += [fit_row(f) | {"optimizer": name} for f in payload["fits"]]
    if not rows:
        return None
    text = environment("text").get_template("exponent_index.md.j2").render(rows=rows)
    return write_atomic(root / "exponents.md", text, force=True)
