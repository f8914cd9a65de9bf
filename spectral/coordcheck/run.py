"""A whole coordinate check: every run of the sweep, then the slopes and the verdict.

:func:`run_coord_check` trains each run (:func:`train_one`: a reference model or the
user's), reports progress through a callback, and returns the JSON-ready result.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from ..measure.guard import DEFAULT_TIMEOUT, user_code
from ..measure.common import factory_label
from .config import CoordCheckConfig
from .reference import train_reference
from .slopes import judge
from .user_model import inspect_user_model, train_user

__all__ = ["run_coord_check", "sweep_runs", "train_one"]


def train_one(
    cfg: CoordCheckConfig, param: str, axis: str, width: int, depth: int, seed: int
) -> list[dict[str, Any]]:
    """Train one model; one point per step ``t = 0..steps`` (``t`` updates taken)."""
    if cfg.model_factory is not None:
        return train_user(cfg, param, axis, width, depth, seed)
    return train_reference(cfg, param, axis, width, depth, seed)


def sweep_runs(cfg: CoordCheckConfig) -> list[tuple[str, str, int, int, int]]:
    runs = []
    for param in cfg.parameterizations:
        for w in cfg.widths:
            for seed in range(cfg.seeds):
                runs.append((param, "width", w, cfg.fixed_depth, seed))
        for d in cfg.depths:
            for seed in range(cfg.seeds):
                runs.append((param, "depth", cfg.fixed_width, d, seed))
    return runs


def run_coord_check(
    cfg: CoordCheckConfig,
    *,
    progress: Callable[[str], None] | None = None,
    timeout: float | None = DEFAULT_TIMEOUT,
) -> dict[str, Any]:
    """Every run of the sweep; returns the JSON-ready result (config, points, slopes, and
    ``diverged``: where a run first went NaN or infinite, :func:`~.slopes.diverged`).

    ``timeout``: seconds one run (building a model and training it) may take
    (:func:`spectral.measure.guard.user_code`: the factories are the user's code)."""
    import torch

    torch.set_num_threads(max(1, torch.get_num_threads()))
    user = None
    if cfg.model_factory is not None:
        with user_code(f"model factory {cfg.factory_name('model')}", timeout):
            user = inspect_user_model(cfg)
    points: list[dict[str, Any]] = []
    users = [cfg.factory_name(w) for w, fn in (("model", cfg.model_factory), ("batch", cfg.batch_factory)) if fn]
    users += [factory_label(cfg.factory)] if cfg.factory is not None else []
    by = f" of {', '.join(users)}" if users else ""
    for param, axis, w, d, seed in sweep_runs(cfg):
        with user_code(f"the coord-check run{by} ({param}, n = {w}, L = {d}, seed {seed})", timeout):
            points.extend(train_one(cfg, param, axis, w, d, seed))
        if progress:
            progress(f"{param} {axis} n={w} L={d} seed={seed}")
    config = cfg.to_dict()
    if user is not None:  # factory models: the vocabulary used, where h_L was measured
        config["vocab_size"] = user.pop("vocab_size")
    return {"config": config, **(user or {}), **judge(points), "points": points}
