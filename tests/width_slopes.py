"""One helper shared by the width tests: log-log slopes, over widths, of what muP keeps flat.

For a model family, ``measure(cfg, build, batch, widths, depth)`` builds the model at each
width (``build(width, depth)``), applies the config's multipliers, init and optimizer,
takes one optimizer step on a fixed batch and records:

* ``h0``: the RMS of the residual stream's input (the first input module's output, after
  the alpha_in hook);
* ``logits``: the RMS of the model's logits at init (what the model returns: capped
  logits where the model caps them);
* ``dlogits``: the RMS of the logits' change after the step, on the same batch;
* ``branch:<name>``: the RMS of each residual branch's one-step change (the output of the
  module alpha_hidden scales, after its hook).

A slope is the least-squares fit of log(value) on log(width). A family is sound when each
slope is within a tolerance of the same slope on a Llama control measured the same way
(each branch against the control's mean branch slope).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping
from typing import Any

import torch
from torch import nn

WIDTHS = (64, 128, 256)
DEPTH = 2
TOLERANCE = 0.15


def rms(t: torch.Tensor) -> float:
    return t.detach().float().pow(2).mean().sqrt().item()


def slope(widths: tuple[int, ...], values: list[float]) -> float:
    xs = [math.log(w) for w in widths]
    ys = [math.log(v) for v in values]
    mx, my = sum(xs) / len(xs), sum(ys) / len(ys)
    return sum((x - mx) * (y - my) for x, y in zip(xs, ys, strict=True)) / sum((x - mx) ** 2 for x in xs)


def _first_tensor(output: Any) -> torch.Tensor:
    return output[0] if isinstance(output, tuple) else output


def one_step(
    cfg: Any,
    model: nn.Module,
    width: int,
    depth: int,
    batch: Mapping[str, torch.Tensor],
    *,
    lr: float = 1e-2,
    **kwargs: Any,
) -> dict[str, float]:
    """The RMS values above for one model at one width (``kwargs``: adapter=, patterns=)."""
    handle = cfg.apply_multipliers(model, width, depth, **kwargs)
    cfg.init_(model, width, depth, 0.02, **kwargs)
    opt = cfg.build_optimizers(model, width, depth, lr=lr, **kwargs)
    modules = dict(model.named_modules())
    seen: dict[str, torch.Tensor] = {}
    watched = [handle.modules["input"][0], *handle.modules["hidden"]]
    hooks = [
        modules[name].register_forward_hook(
            lambda m, a, out, name=name: seen.__setitem__(name, _first_tensor(out).detach().clone())
        )
        for name in watched
    ]
    try:
        out = model(**batch)
        before, logits = dict(seen), out.logits.detach().clone()
        out.loss.backward()
        opt.step()
        opt.zero_grad()
        with torch.no_grad():
            after = model(**batch).logits
    finally:
        for hook in hooks:
            hook.remove()
    values = {
        "h0": rms(before[watched[0]]),
        "logits": rms(logits),
        "dlogits": rms(after - logits),
    }
    for name in handle.modules["hidden"]:
        values[f"branch:{name}"] = rms(seen[name] - before[name])
    return values


def measure(
    cfg: Any,
    build: Callable[[int, int], nn.Module],
    batch: Mapping[str, torch.Tensor],
    widths: tuple[int, ...] = WIDTHS,
    depth: int = DEPTH,
    **kwargs: Any,
) -> dict[str, float]:
    """Quantity -> its slope over ``widths``."""
    rows = []
    for width in widths:
        torch.manual_seed(0)
        rows.append(one_step(cfg, build(width, depth), width, depth, batch, **kwargs))
    return {key: slope(widths, [row[key] for row in rows]) for key in rows[0]}


def off_control(slopes: dict[str, float], control: dict[str, float]) -> dict[str, float]:
    """Quantity -> slope minus the control's (branches against the control's mean)."""
    branches = [v for k, v in control.items() if k.startswith("branch:")]
    mean_branch = sum(branches) / len(branches)
    return {
        key: value - (mean_branch if key.startswith("branch:") else control[key])
        for key, value in slopes.items()
    }
