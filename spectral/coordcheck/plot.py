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


def _draw_panel(
    ax: Any,
    points: list[dict[str, Any]],
    *,
    param: str,
    metric: str,
    axis: str,
    steps: list[int],
    legend_steps: tuple[int, ...],
    color: Any,
) -> None:
    """One metric of one parameterization: a line per step (light → dark) across ``axis``."""
    xs = sorted({p[axis] for p in points})
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
            color=color(0.1 + 0.85 * frac),
            label=f"t={t}" if t in legend_steps else None,
        )
    ax.set_xscale("log", base=2)
    ax.set_yscale("log")


def _panel_title(param: str, title: str, slope: dict[str, Any] | None) -> str:
    """``param: metric`` and, where one was fitted, the slope at the last step with its
    verdict."""
    if slope is None or slope.get("slope") is None:
        return f"{param}: {title}"
    tag = "" if "pass" not in slope else (" ✓" if slope["pass"] else " ✗")
    return f"{param}: {title}\nslope {slope['slope']:+.2f}{tag}"


def _suptitle(cfg: dict[str, Any], axis: str) -> str:
    opt = cfg["optimizer"] + (f"+{cfg['others']}" if cfg.get("others") else "")
    fixed = f"L={cfg['fixed_depth']}" if axis == "width" else f"n={cfg['fixed_width']}"
    model = cfg.get("model_factory") or cfg["model"]
    model += f" k={cfg['k']}" if cfg["model"] == "mlp" else ""
    return (
        f"coord check: {model}, {opt}, {axis} sweep ({fixed}), {cfg['steps']} steps, "
        f"{cfg['seeds']} seeds"
    )


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
    params = list(cfg["parameterizations"])
    if metrics is None:
        metrics = ["h", "delta_h"] + (["delta_top"] if cfg["model"] == "mlp" else [])
    slopes = {
        (s["parameterization"], s["metric"]): s
        for s in result["slopes"] + result.get("extra_slopes", [])
        if s["axis"] == axis
    }
    steps = sorted({p["step"] for p in points})
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
    shown_steps = [t for t in steps if t > 0] if len(metrics) else steps
    for j, param in enumerate(params):
        for i, metric in enumerate(metrics):
            ax = axes[i][j]
            legend = i == 0 and j == len(params) - 1
            _draw_panel(
                ax,
                points,
                param=param,
                metric=metric,
                axis=axis,
                steps=steps,
                legend_steps=(shown_steps[0], steps[-1]) if legend else (),
                color=plt.get_cmap("viridis"),
            )
            title = titles.get(metric, metric)
            ax.set_title(_panel_title(param, title, slopes.get((param, metric))), fontsize=8)
            ax.tick_params(labelsize=7)
            if i == len(metrics) - 1:
                ax.set_xlabel(axis, fontsize=8)
    if axes[0][-1].get_legend_handles_labels()[0]:
        axes[0][-1].legend(fontsize=6, loc="best")
    fig.suptitle(_suptitle(cfg, axis), fontsize=9)
    fig.tight_layout()
    buffer = io.BytesIO()
    try:
        fig.savefig(buffer, format="png", dpi=dpi)
    finally:
        plt.close(fig)
    write_atomic(path, buffer.getvalue(), force=force)
    return path
