"""check() at one width on forward hooks spectral did not install: does one change a module?

A forward hook of the user's on a module that holds placed parameters (a stray ``x2`` on
``down_proj`` or ``lm_head``) scales that module's output on top of the rules' multiplier.
Its factor is constant across widths, so no slope sees it; only the anchor of the check
across widths did. Here every such module is run once on the input it receives in one
forward pass of the model, with spectral's own hooks and then with every hook; an output
that differs is named with the ratio and the hook.
"""

from __future__ import annotations

from typing import Any

import torch
from torch import nn

from spectral.measure.fit import rms
from spectral.torch.apply.hooks import MultiplierHook
from spectral.torch.check.anchor import OUTPUT_TOLERANCE, _hook_label
from spectral.torch.check.forward import _first_tensor, _run


def _ours(hook: Any) -> bool:
    return isinstance(hook, MultiplierHook)


def _changes(hook: Any, module: nn.Module, args: tuple[Any, ...], output: Any) -> bool:
    """Whether ``hook`` alone returns another output for ``output`` (None: unchanged)."""
    try:
        result = hook(module, args, output)
    except Exception:  # noqa: BLE001 - a hook that needs more than this: said to change it
        return True
    if result is None:
        return False
    mine, theirs = _first_tensor(output), _first_tensor(result)
    if mine is None or theirs is None or mine.shape != theirs.shape:
        return True
    return rms(theirs - mine) > OUTPUT_TOLERANCE * max(rms(mine), 1e-30)


@torch.no_grad()
def foreign_hook_problems(
    model: nn.Module, owners: dict[str, nn.Module], example: Any
) -> list[str]:
    """One line per module of ``owners`` (name -> a module holding placed parameters)
    whose forward hooks that are not spectral's change its output on ``example``."""
    suspects = {
        name: module
        for name, module in owners.items()
        if any(not _ours(h) for h in module._forward_hooks.values())
    }
    if not suspects or example is None:
        return []
    inputs: dict[str, tuple[Any, ...]] = {}
    handles = [
        module.register_forward_pre_hook(
            lambda _m, args, name=name: inputs.setdefault(name, args)
        )
        for name, module in suspects.items()
    ]
    try:
        _run(model, example)
    except Exception:  # noqa: BLE001 - the model's own errors are measured elsewhere
        return []
    finally:
        for handle in handles:
            handle.remove()
    lines = []
    for name, module in suspects.items():
        args = inputs.get(name)
        if args is None:
            continue
        expected = module.forward(*args)
        for hook in module._forward_hooks.values():
            if _ours(hook):
                result = hook(module, args, expected)
                expected = expected if result is None else result
        full, mine = _first_tensor(module(*args)), _first_tensor(expected)
        if full is None or mine is None or full.shape != mine.shape:
            continue
        base = rms(mine)
        if base == 0.0 or rms(full - mine) <= OUTPUT_TOLERANCE * base:
            continue
        hooks = ", ".join(
            _hook_label(h)
            for h in module._forward_hooks.values()
            if not _ours(h) and _changes(h, module, args, expected)
        ) or ", ".join(
            _hook_label(h) for h in module._forward_hooks.values() if not _ours(h)
        )
        lines.append(
            f"{name}: a forward hook spectral did not install ({hooks}) changes its output "
            f"by x{rms(full) / base:.3g}: the rules' multiplier is spectral's own hook; "
            "remove the hook, or make what it does part of the model"
        )
    return lines
