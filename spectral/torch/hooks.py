"""Block multipliers on any model: forward hooks that scale a module's output by a float.

alpha_in scales the embedding output, alpha_hidden the end of every residual branch,
alpha_out the logits. A hook holds a plain float, so torch.compile bakes it in and DDP /
FSDP see no extra state.
"""

from __future__ import annotations

import functools
import re
from typing import Any

import torch
from torch import nn

from spectral.scaling import BaseValue, Rules
from spectral.torch.classify import (
    ADAPTERS,
    Adapter,
    AdapterLike,
    Patterns,
    as_adapter,
    classified,
)


def _scale_output(
    module: nn.Module,
    args: Any,
    output: Any,
    *,
    factor: float,
    layer: str,
    built_in: float = 1.0,
) -> Any:
    """alpha * output / built_in, with ``factor`` = alpha and ``built_in`` the factor the
    model's own forward pass multiplies in there (Gemma's sqrt(n) on the embedding output);
    plain floats, so torch.compile bakes them in and DDP/FSDP see no state."""
    scale = factor / built_in
    if scale == 1.0:
        return None
    if isinstance(output, torch.Tensor):
        return output * scale
    if isinstance(output, tuple) and output and isinstance(output[0], torch.Tensor):
        return (output[0] * scale, *output[1:])
    raise TypeError(
        f"apply_multipliers: {type(module).__name__} returned {type(output).__name__}; "
        "hook a module that returns a tensor"
    )


def our_hooks(model: nn.Module) -> list[tuple[str, nn.Module, int, functools.partial]]:
    """(module name, module, hook id, hook) of every multiplier hook in the model."""
    found = []
    for name, module in model.named_modules():
        for hook_id, hook in module._forward_hooks.items():
            if isinstance(hook, functools.partial) and hook.func is _scale_output:
                found.append((name, module, hook_id, hook))
    return found


def builtin_multipliers(model: nn.Module) -> bool:
    """True when some module says it applies the multipliers in its forward pass."""
    return any(getattr(m, "applies_mup_multipliers", False) for m in model.modules())


def multipliers_applied(model: nn.Module) -> bool:
    """True when the forward pass carries the block multipliers (hooks or built in)."""
    return builtin_multipliers(model) or bool(our_hooks(model))


def placements(
    model: nn.Module, family: Adapter
) -> dict[str, list[tuple[str, nn.Module]]]:
    """Layer -> the modules whose outputs its multiplier scales."""
    out: dict[str, list[tuple[str, nn.Module]]] = {
        "input": [],
        "hidden": [],
        "output": [],
    }
    for name, module in model.named_modules():
        for layer, patterns in (
            ("input", family.input),
            ("hidden", family.branches),
            ("output", family.output),
        ):
            if any(re.search(p, name) for p in patterns):
                out[layer].append((name, module))
                break
    return out


def built_in_scale(name: str, module: nn.Module, family: Adapter) -> float:
    """The factor the family's input module multiplies into its output itself (1 if none)."""
    if not family.input_scale:
        return 1.0
    for attr in family.input_scale:
        value = getattr(module, attr, None)
        if isinstance(value, torch.Tensor) and value.numel() == 1:
            return float(value.detach().float().cpu())
        if isinstance(value, (int, float)) and not isinstance(value, bool):
            return float(value)
    raise ValueError(
        f"the {family.name} adapter expects the input module {name} "
        f"({type(module).__name__}) to hold its built-in embedding scale in one of "
        f"{', '.join(family.input_scale)}, and it has none (an older transformers keeps the "
        "scale elsewhere); upgrade transformers or pass adapter= with input_scale=()"
    )


def placement_problems(
    placed: dict[str, list[tuple[str, nn.Module]]], family: Adapter, depth: float
) -> list[str]:
    problems = []
    for layer, what in (
        ("input", "input"),
        ("hidden", "branches"),
        ("output", "output"),
    ):
        if not placed[layer]:
            problems.append(
                f"no module matches the {family.name} adapter's {what} patterns "
                f"{list(getattr(family, what))}"
            )
    want = family.branches_per_layer * depth
    got = len(placed["hidden"])
    if got and got != want:
        problems.append(
            f"found {got} residual branch ends for depth {depth} "
            f"({family.branches_per_layer} per layer: {want} expected); depth counts layers"
        )
    return problems


class MultiplierHandle:
    """What apply_multipliers installed; remove() takes every hook off again."""

    def __init__(
        self, handles: list, placed: dict[str, list[str]], values: dict[str, float]
    ):
        self._handles = handles
        self.modules = placed
        """Layer -> names of the modules whose outputs are scaled."""
        self.multipliers = values
        """{"input": a_in, "hidden": a_hidden, "output": a_out}."""

    def remove(self) -> None:
        for handle in self._handles:
            handle.remove()
        self._handles = []

    def __repr__(self) -> str:
        counts = ", ".join(f"{k}: {len(v)}" for k, v in self.modules.items())
        return f"MultiplierHandle({self.multipliers}; modules per layer: {counts})"


def install_multipliers(
    rules: Rules,
    model: nn.Module,
    width: float,
    depth: float,
    *,
    multiplier: BaseValue = 1.0,
    adapter: AdapterLike | None = None,
    patterns: Patterns | None = None,
) -> MultiplierHandle:
    """Install the block multipliers on any nn.Module without editing its source.

    alpha_in scales the embedding output, alpha_hidden the end of every residual branch
    (attention output and MLP down projection: two per layer, so `depth` counts layers),
    alpha_out the logits, each as a forward hook holding a plain float (on an input module
    that multiplies its output by a built-in factor, Gemma's sqrt(n), the hook divides that
    out: the adapter's input_scale). The family is recognised by module names and types
    (ADAPTERS) or given as adapter=Adapter(...) / a dict of its fields. Calling it again replaces the hooks (never scales twice). Every parameter must
    have a role: one error names each one that has none.
    """
    if builtin_multipliers(model):
        raise ValueError(
            "this model applies the block multipliers in its forward pass already "
            "(applies_mup_multipliers); build it with multipliers= instead"
        )
    if getattr(rules, "absorbed", None) is not None:
        raise ValueError(
            "this config absorbs the block multipliers (--absorb-multipliers): init_ and "
            "build_optimizers put them into the parameters' numbers, so no hook is needed; "
            "hooks would apply them twice"
        )
    family = as_adapter(adapter, model)
    if family is None:
        sample = [n for n, _ in model.named_modules() if n][:6]
        raise ValueError(
            "no adapter recognises this model (modules "
            f"{', '.join(sample)}, ...); known families: "
            f"{', '.join(a.name for a in ADAPTERS)}. Pass adapter=Adapter(...) or "
            "adapter={'input': [...], 'branches': [...], 'output': [...], 'roles': {...}}"
        )
    classified(model, patterns, family, rules)  # every parameter placed, ties allowed
    placed = placements(model, family)
    problems = placement_problems(placed, family, depth)
    if problems:
        raise ValueError("apply_multipliers: " + "; ".join(problems))
    for _, module, hook_id, _ in our_hooks(model):
        del module._forward_hooks[hook_id]
    values = rules.multipliers(width, depth, multiplier)
    built_in = {id(m): built_in_scale(n, m, family) for n, m in placed["input"]}
    handles = [
        module.register_forward_hook(
            functools.partial(
                _scale_output,
                factor=values[layer],
                layer=layer,
                built_in=built_in.get(id(module), 1.0),
            )
        )
        for layer, modules in placed.items()
        for _, module in modules
    ]
    names = {layer: [n for n, _ in modules] for layer, modules in placed.items()}
    if isinstance(getattr(model, "_orig_mod", None), nn.Module):
        # torch.compile'd: code compiled before the hooks existed does not call them (no
        # guard on hooks), so drop the compiled code; the next call compiles with them
        torch.compiler.reset()
    return MultiplierHandle(handles, names, values)


def final_module(
    model: nn.Module, adapter: AdapterLike | None = None
) -> nn.Module | None:
    """The module whose input is h_L (the residual stream after the last block), for
    coordinate checks; None when the family does not say."""
    family = as_adapter(adapter, model)
    if family is None or not family.final:
        return None
    for name, module in model.named_modules():
        if re.search(family.final, name):
            return module
    return None
