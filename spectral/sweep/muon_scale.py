"""Megatron-LM's two Muon scale modes as sweep optimizers (issue 46, item 5 (iii)).

``-O muon-shape+adamw``: the hidden matrices stepped by ``sqrt(max(1, n_out/n_in)) U V^T``
(Megatron-LM's ``muon_scale_mode="shape_scaling"``, Keller Jordan's Muon): the real
``torch.optim.Muon(adjust_lr_fn="original")`` as it is. ``-O muon-unit-rms+adamw``: stepped by
``sqrt(n_out/n_in) U V^T`` (``"unit_rms_norm"``): the same class, each matrix's learning rate
times ``min(1, sqrt(n_out/n_in))`` (a per-parameter-group lr: configuration, not a new optimizer),
so the 4n -> n down-projection steps half as far as ``shape_scaling`` steps it. Every other role
is AdamW's, as in ``-O muon-kimi+adamw``.

Each hidden optimizer is declared by its update size (:data:`DECLARATIONS`, the same as
docs/sweep/variants/muon-scale/*.toml) and the engine derives its rules from that declaration;
:func:`factory` builds it. Nothing here imports torch at import time.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from functools import cache
from typing import Any

from ..errors import SpecError

__all__ = ["DECLARATIONS", "SWEEP_OPTIMIZERS", "declaration", "engine_optimizer", "factory", "lr_factor",
           "step_factor"]

DECLARATIONS: dict[str, dict[str, str]] = {
    "muon-shape-scaling": {
        "name": "muon-shape-scaling",
        "update_norm": "sqrt(n_in/n_out) * sqrt(max(1, n_out/n_in))",
        "applies_to": "matrices",
        "summary": "sqrt(max(1, n_out/n_in)) * U V^T (Megatron-LM shape_scaling)",
    },
    "muon-unit-rms": {
        "name": "muon-unit-rms",
        "update_norm": "sqrt(n_in/n_out) * sqrt(n_out/n_in)",
        "applies_to": "matrices",
        "summary": "sqrt(n_out/n_in) * U V^T (Megatron-LM unit_rms_norm)",
    },
}
"""The hidden optimizers' declarations: ``||A||_R = sqrt(n_in/n_out) x`` the mode's factor
(``U V^T`` has ``||.||_R = sqrt(n_in/n_out)``)."""

SWEEP_OPTIMIZERS = {"muon-shape+adamw": ("muon-shape-scaling", "adamw"),
                    "muon-unit-rms+adamw": ("muon-unit-rms", "adamw")}
"""Sweep optimizer name -> (hidden optimizer, the others')."""


@cache
def declaration(name: str) -> Any:
    """The :class:`~spectral.spec.OptimizerSpec` of one declared mode (parsed as a spec file is)."""
    from ..engine.spec_file import parse_spec

    if name not in DECLARATIONS:
        raise SpecError(f"no declared Muon scale mode {name!r} (known: {', '.join(DECLARATIONS)})")
    return parse_spec(dict(DECLARATIONS[name]), where=name)


def engine_optimizer(name: str) -> Any:
    """What the engine derives for one hidden or other optimizer name of a sweep: a declared
    mode's spec, else the catalog name itself."""
    return declaration(name) if name in DECLARATIONS else name


def step_factor(mode: str, n_out: int, n_in: int) -> float:
    """The factor on ``U V^T`` of an ``n_out x n_in`` matrix's step per unit learning rate."""
    if mode == "muon-shape-scaling":
        return math.sqrt(max(1.0, n_out / n_in))
    if mode == "muon-unit-rms":
        return math.sqrt(n_out / n_in)
    raise SpecError(f"no declared Muon scale mode {mode!r} (known: {', '.join(DECLARATIONS)})")


def lr_factor(mode: str, n_out: int, n_in: int) -> float:
    """What one matrix's learning rate is multiplied by so that ``torch.optim.Muon(adjust_lr_fn=
    "original")``, which multiplies it by ``sqrt(max(1, n_out/n_in))`` itself, steps by the mode's
    factor: 1 for ``shape_scaling``, ``min(1, sqrt(n_out/n_in))`` for ``unit_rms_norm``."""
    return step_factor(mode, n_out, n_in) / math.sqrt(max(1.0, n_out / n_in))


def factory(mode: str) -> Callable[..., Any]:
    """``fn(groups, **kwargs)``: the real ``torch.optim.Muon(adjust_lr_fn="original")`` over the
    derived param groups, each split by its matrices' :func:`lr_factor` (the group's lr times it,
    its weight decay divided by it: torch decays by the unadjusted lr, so ``lr x weight_decay``
    stays the derived one)."""
    step_factor(mode, 1, 1)  # an unknown mode is refused here, not at the first step

    def build(groups: list[dict[str, Any]], **kwargs: Any) -> Any:
        import torch

        split: list[dict[str, Any]] = []
        for group in groups:
            by: dict[float, list[Any]] = {}
            for p in group["params"]:
                by.setdefault(lr_factor(mode, int(p.shape[0]), int(p.shape[1])), []).append(p)
            for f, params in by.items():
                g = {**group, "params": params, "lr": group["lr"] * f, "weight_decay": group["weight_decay"] / f}
                if f != 1.0 and "name" in g:
                    g["name"] = f"{g['name']}/lr-x{f:.4g}"
                split.append(g)
        return torch.optim.Muon(split, **{**kwargs, "adjust_lr_fn": "original"})

    return build
