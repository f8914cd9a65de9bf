"""Plots of a coordinate check: one PNG per axis (matplotlib, Agg backend).

Reads only the result dict of :func:`spectral.coordcheck.run_coord_check` (or its JSON), so
a check can be re-plotted without training; matplotlib is imported inside the function.
"""

from __future__ import annotations

import io
import math
from collections.abc import Sequence
from typing import Any

from ..io import write_atomic
from .slopes import aggregate

__all__ = ["plot_coord_check"]

_TITLES = {
    "h": "‖h_L‖_R",
    "delta_h": "‖h_L(t) − h_L(0)‖_R",
    "delta_top": "top-order update term",
    "out": "‖output‖_R",
    "delta_out": "‖Δ output‖_R",
}


def plot_coord_check(
    result: dict[str, Any],
    axis: str,
    path: str,
    *,
    metrics: Sequence[str] | None = None,
    dpi: int = 64,
    force: bool = False,
) -> str:
    """One PNG for the ``axis`` sweep: rows = metrics, columns = parameterizations; x = width
    or depth (log), one line per step (light → dark), slope at the last step in the title.

    The image is rendered in memory and written by :func:`spectral.io.write_atomic`: an
    existing ``path`` only with ``force``, never through a dangling link or into a device."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    cfg = result["config"]
    points = [p for p in result["points"] if p["axis"] == axis]
    params = [p for p in cfg["parameterizations"]]
    if metrics is None:
        metrics = ["h", "delta_h"] + (["delta_top"] if cfg["model"] == "mlp" else [])
    slopes = {
        (s["parameterization"], s["metric"]): s
        for s in result["slopes"] + result.get("extra_slopes", [])
        if s["axis"] == axis
    }
    steps = sorted({p["step"] for p in points})
    xs = sorted({p[axis] for p in points})
    fig, axes = plt.subplots(
        len(metrics),
        len(params),
        figsize=(3.0 * len(params), 2.3 * len(metrics)),
        squeeze=False,
        sharex=True,
    )
    titles = dict(_TITLES)
    if result.get("h_metric") == "logits":
        titles.update(h="‖logits‖_R (no final norm)", delta_h="‖logits(t) − logits(0)‖_R")
    cmap = plt.get_cmap("viridis")
    shown_steps = [t for t in steps if t > 0] if len(metrics) else steps
    for j, param in enumerate(params):
        for i, metric in enumerate(metrics):
            ax = axes[i][j]
            for t in steps:
                if metric.startswith("delta") and t == 0:
                    continue
                ys = [
                    aggregate(
                        p[metric]
                        for p in points
                        if p["parameterization"] == param
                        and p[axis] == x
                        and p["step"] == t
                        and metric in p
                    )
                    for x in xs
                ]
                ys = [y if (math.isfinite(y) and y > 0) else float("nan") for y in ys]
                frac = (t / max(steps)) if max(steps) else 1.0
                ax.plot(
                    xs,
                    ys,
                    marker="o",
                    ms=2.5,
                    lw=1.0,
                    color=cmap(0.1 + 0.85 * frac),
                    label=f"t={t}"
                    if (i == 0 and j == len(params) - 1 and t in (shown_steps[0], steps[-1]))
                    else None,
                )
            ax.set_xscale("log", base=2)
            ax.set_yscale("log")
            s = slopes.get((param, metric))
            if s is not None and s.get("slope") is not None:
                tag = "" if "pass" not in s else (" ✓" if s["pass"] else " ✗")
                ax.set_title(
                    f"{param}: {titles.get(metric, metric)}\nslope {s['slope']:+.2f}{tag}",
                    fontsize=8,
                )
            else:
                ax.set_title(f"{param}: {titles.get(metric, metric)}", fontsize=8)
            ax.tick_params(labelsize=7)
            if i == len(metrics) - 1:
                ax.set_xlabel(axis, fontsize=8)
    if axes[0][-1].get_legend_handles_labels()[0]:
        axes[0][-1].legend(fontsize=6, loc="best")
    opt = cfg["optimizer"] + (f"+{cfg['others']}" if cfg.get("others") else "")
    fixed = f"L={cfg['fixed_depth']}" if axis == "width" else f"n={cfg['fixed_width']}"
    model = cfg.get("model_factory") or cfg["model"]
    model += f" k={cfg['k']}" if cfg["model"] == "mlp" else ""
    fig.suptitle(
        f"coord check: {model}, {opt}, {axis} sweep ({fixed}), {cfg['steps']} steps, {cfg['seeds']} seeds",
        fontsize=9,
    )
    fig.tight_layout()
    buffer = io.BytesIO()
    try:
        fig.savefig(buffer, format="png", dpi=dpi)
    finally:
        plt.close(fig)
    write_atomic(path, buffer.getvalue(), force=force)
    return path
