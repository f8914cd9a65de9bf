"""The check across widths anchored on the user's model: is the model trained the one checked?

The twins of :mod:`spectral.torch.check.widths` are rebuilt from the model's class and set up
by the library (``apply_multipliers``, ``init_``, ``build_optimizers``), so what the user did
to their own model (a forward hook of their own, ``init_`` forgotten) is not in them. Before
the twins across widths, one twin is built at the user's own width, set up the same way, and
compared with the user's model:

* parameter statistics: every parameter the two share (same name and shape), the user's
  root mean square against the twin's, the twin's moved to the user's depth by the rules'
  ratio (a twin has a few layers); judged only while the user's model is at its init;
* the forward pass: the user's weights are copied into the twin (its multiplier hooks set
  to the factors the rules give at the user's size), both run on the same batch, and every
  module the two share is compared: a module with parameters of its own is run in the twin
  on the input the user's received (so an upstream difference does not hide it), any other
  where both received the same input. A module whose output differs is named with the
  ratio and what the user's module has that the twin's has not (a hook, another factor);
* forward hooks on the user's modules that are not spectral's are listed (a note when the
  forward pass shows no effect of theirs).

The cost is one twin at the user's width (a few layers) and two forward passes.
"""

from __future__ import annotations

import functools
import math
from collections.abc import Callable, Mapping
from typing import Any

import torch
from torch import nn

from spectral.errors import ConfigError, UnsupportedModelError
from spectral.measure.fit import rms
from spectral.scaling import BaseValue
from spectral.torch.apply.absorb import carriers_of
from spectral.torch.apply.init import init_record
from spectral.torch.apply.hooks import MultiplierHook, our_hooks, placements
from spectral.torch.check.forward import _first_tensor, _run, example_batch
from spectral.torch.check.params import FLOOR, MAX_TOLERANCE, Z, not_at_init
from spectral.torch.check.twin_rows import set_up_twin
from spectral.torch.check.twins import twin_depth
from spectral.torch.check.verdict import group_name
from spectral.torch.model.placement import Placement, placed_alike
from spectral.torch.rules import TorchRules

OUTPUT_TOLERANCE = 1e-4
"""Relative difference between two float32 runs of one module on one input that counts as
another output (rounding is about 1e-7)."""


def _hook_label(hook: Any) -> str:
    """A forward hook as the user wrote it: its function's qualified name."""
    fn = hook.func if isinstance(hook, functools.partial) else hook
    return getattr(fn, "__qualname__", None) or type(fn).__name__


def foreign_hooks(model: nn.Module) -> dict[str, list[str]]:
    """Module name -> the forward hooks and pre-hooks on it that are not spectral's."""
    found: dict[str, list[str]] = {}
    for name, module in model.named_modules():
        labels = [
            _hook_label(h)
            for h in module._forward_hooks.values()
            if not isinstance(h, MultiplierHook)
        ]
        labels += [
            f"{_hook_label(h)} (pre)" for h in module._forward_pre_hooks.values()
        ]
        if labels:
            found[name or "the model"] = labels
    return found


def _factors(model: nn.Module) -> dict[str, float]:
    """Module name -> the factor of spectral's multiplier hook on it."""
    return {name: hook.own_factor for name, _, _, hook in our_hooks(model)}


def _rule_ratio(
    rules: TorchRules,
    role: str,
    width: int,
    depths: tuple[float, float],
    carriers: tuple[float, float],
) -> float | None:
    """The std init_ gives a role at the user's depth over the twin's (carrier factors
    included); None where the twin's is 0."""
    try:
        mine = rules.init_std_of(role, width, depths[0], 1.0) * carriers[0]
        twin = rules.init_std_of(role, width, depths[1], 1.0) * carriers[1]
    except (ConfigError, UnsupportedModelError):
        return None
    return mine / twin if twin else None


def _parameter_lines(
    rules: TorchRules,
    model: nn.Module,
    size: tuple[int, float, float],
    multiplier: BaseValue,
    placed: tuple[Placement, Placement],
) -> list[str]:
    """The user's parameters' RMS against the twin's (set up by the rules at the user's
    width), where both have the parameter and the pool is large enough to judge.
    ``placed``: the user's model's placement and the twin's."""
    width, depth, depth_twin = size
    mine = dict(model.named_parameters())
    try:
        carried = carriers_of(rules, placed[0], width, depth, multiplier)
        carried_twin = carriers_of(rules, placed[1], width, depth_twin, multiplier)
    except UnsupportedModelError:  # the hook-free form's check names it
        return []
    lines = []
    for name, q, role, _ in placed[1]:
        p = mine.get(name)
        if p is None or p.shape != q.shape or p.ndim < 2 or p.device.type == "meta":
            continue
        factors = (carried.get(id(p), 1.0), carried_twin.get(id(q), 1.0))
        ratio = _rule_ratio(rules, role, width, (depth, depth_twin), factors)
        want = rms(q.detach()) * ratio if ratio is not None else 0.0
        if want == 0.0:
            continue
        got = rms(p.detach())
        # two independent draws: the ratio of their RMS has a relative sd of 1/sqrt(N)
        tolerance = max(FLOOR, Z / math.sqrt(p.numel()))
        if tolerance <= MAX_TOLERANCE and abs(got / want - 1.0) > tolerance:
            lines.append(
                f"your model's {name} has init std {got:.4g}, the checked twin's (set up "
                f"by the rules at width {width}) {want:.4g}: the twins across widths are "
                "not your model; call init_(model, width, depth, ...) after the model's "
                "own init"
            )
    return lines


class _Capture:
    """Forward hooks that keep each named module's inputs and first output tensor."""

    def __init__(self, modules: Mapping[str, nn.Module]):
        self.values: dict[str, tuple[Any, Any, torch.Tensor | None]] = {}
        self.handles = [
            module.register_forward_hook(self._keep(name), with_kwargs=True)
            for name, module in modules.items()
        ]

    def _keep(self, name: str) -> Callable[..., None]:
        def hook(module: nn.Module, args: Any, kwargs: Any, out: Any) -> None:
            if name not in self.values:  # a module called twice: its first call
                y = _first_tensor(out)
                self.values[name] = (args, kwargs, None if y is None else y.detach())

        return hook

    def remove(self) -> None:
        for handle in self.handles:
            handle.remove()


def _differs(a: torch.Tensor | None, b: torch.Tensor | None) -> float | None:
    """rms(a) / rms(b) where the two differ by more than rounding, else None."""
    if a is None or b is None or a.shape != b.shape:
        return None
    scale = max(rms(b), 1e-30)
    if rms(a.double() - b.double()) / scale <= OUTPUT_TOLERANCE:
        return None
    return rms(a) / scale


def _why(
    name: str, mine: dict[str, float], twins: dict[str, float], foreign: Any
) -> str:
    """What the user's module has that the twin's has not."""
    if foreign.get(name):
        return f"a hook the twins do not have ({', '.join(foreign[name])})"
    if name in mine and name not in twins:
        return f"a multiplier hook ({mine[name]:.4g}) the twins do not have"
    if name in twins and name not in mine:
        return f"the twins' multiplier hook ({twins[name]:.4g}) is missing on it"
    if name in mine and not math.isclose(mine[name], twins[name], rel_tol=1e-6):
        return f"its multiplier is {mine[name]:.4g}, the twins' {twins[name]:.4g}"
    return "its forward pass differs from the twins' (a subclass, a patched forward?)"


def _holds_cache(call: tuple[Any, Any, Any]) -> bool:
    """Whether a captured call's arguments hold a cache its first run changed (Hugging
    Face's DynamicCache: run again, the module would read the states it wrote)."""
    args, kwargs, _ = call
    values = [*args, *(kwargs or {}).values()]
    return any(type(v).__name__.endswith("Cache") for v in values)


def _same_input(a: Any, b: Any) -> bool:
    x, y = _first_tensor(a[0]) if a[0] else None, _first_tensor(b[0]) if b[0] else None
    return x is not None and y is not None and _differs(x, y) is None


def _forward_lines(
    model: nn.Module, twin: nn.Module, batch: Any, foreign: dict[str, list[str]]
) -> tuple[list[str], set[str]]:
    """Every module both models have, run on the same batch with the same weights: the
    lines for those whose output differs (one per name pattern across layers), and the
    names compared."""
    theirs = dict(twin.named_modules())
    common = {n: m for n, m in model.named_modules() if n and n in theirs}
    mine_factors, twin_factors = _factors(model), _factors(twin)
    caught = [_Capture(common), _Capture({n: theirs[n] for n in common})]
    try:
        _run(model, batch)
        _run(twin, batch)
    finally:
        for capture in caught:
            capture.remove()
    mine, ours = caught[0].values, caught[1].values
    flagged: dict[str, float] = {}
    for name in reversed(list(common)):  # a module's children before it
        if name not in mine or name not in ours:
            continue
        if any(f.startswith(name + ".") for f in flagged):
            continue  # a module inside it already named: its difference carries on
        if next(theirs[name].parameters(recurse=False), None) is not None and not (
            _holds_cache(mine[name])
        ):
            args, kwargs, out = mine[name]
            ratio = _differs(out, _first_tensor(theirs[name](*args, **kwargs)))
        elif _same_input(mine[name], ours[name]):
            ratio = _differs(mine[name][2], ours[name][2])
        else:
            continue
        if ratio is not None:
            flagged[name] = ratio
    lines: dict[str, str] = {}
    groups = [group_name(name) for name in flagged]
    for name in common:
        if name in flagged:
            why = _why(name, mine_factors, twin_factors, foreign)
            # layers.N where several layers differ; the module itself where one does
            label = group_name(name) if groups.count(group_name(name)) > 1 else name
            text = (
                f"your model's {label} output is {flagged[name]:.4g}x the "
                f"checked twin's on the same input and weights: {why}; the check across "
                "widths certifies the twins, not this model"
            )
            lines.setdefault(f"{label} {text}", text)
    return list(lines.values()), set(mine)


def _matched(model: nn.Module, twin: nn.Module) -> None:
    """The user's weights and buffers copied into the twin where names and shapes agree."""
    theirs = twin.state_dict()
    same = {
        k: v
        for k, v in model.state_dict().items()
        if k in theirs and theirs[k].shape == v.shape and v.device.type != "meta"
    }
    twin.load_state_dict(same, strict=False)


def _hooks_at(
    rules: TorchRules, twin: nn.Module, size: tuple[int, float], mult: BaseValue
) -> None:
    """The twin's multiplier hooks set to the factors the rules give at the user's size."""
    want = rules.multipliers(*size, mult)
    for _, _, _, hook in our_hooks(twin):
        hook.set_factor(want[hook.layer])


def _outside_in(model: nn.Module) -> nn.Module:
    """The module a torch.compile or DDP wrapper holds (its names carry no prefix)."""
    inner = getattr(model, "_orig_mod", None)
    if isinstance(inner, nn.Module):
        return inner
    inner = getattr(model, "module", None)
    wrapped = type(model).__name__ in ("DistributedDataParallel", "DataParallel")
    return inner if wrapped and isinstance(inner, nn.Module) else model


def _compare_forward(
    model: nn.Module, twin: nn.Module, batch: Any
) -> tuple[list[str], list[str]]:
    """(problems, notes) of the forward pass against the twin's, and the user's own hooks."""
    foreign = foreign_hooks(model)
    modes = (model.training, twin.training)
    model.eval()
    twin.eval()
    try:
        with torch.no_grad():
            found, compared = _forward_lines(model, twin, batch, foreign)
    finally:
        model.train(modes[0])
    if not compared:
        note = (
            "the forward pass was not compared with the twin at your width: they share no "
            "module name"
        )
        return found, [note]
    named = " ".join(found)
    notes = [
        f"your model's {name} has forward hooks that are not spectral's "
        f"({', '.join(labels)}), which the twins do not have; "
        + (
            "the forward pass showed no effect of theirs"
            if name in compared
            else "not compared (the twin at your width has fewer layers)"
        )
        for name, labels in foreign.items()
        if f"{group_name(name)} " not in named
    ]
    return found, notes


def anchor_problems(
    rules: TorchRules,
    model: nn.Module,
    twin: nn.Module,
    size: tuple[int, float],
    placement: Placement,
    multiplier: BaseValue,
    example_input: Any,
    base: Mapping[str, Any],
) -> tuple[list[str], list[str]]:
    """(problems, notes) of the user's model (read through its ``placement``) against the
    twin at its width (``twin``, freshly built; ``size``: the user's width and depth)."""
    width, depth = size
    unreadable = any(
        p.device.type == "meta" or type(p).__name__ == "DTensor"
        for p in model.parameters()
    )
    if unreadable:
        note = (
            "the model is on the meta device or sharded: the check across widths is not "
            "anchored on it (no values here to compare)"
        )
        return [], [note]
    twin_placement = placed_alike(placement, twin)
    twin_family = twin_placement.family
    if twin_family is None:
        return [], []  # the twins across widths say that no adapter recognises it
    set_up_twin(rules, twin_placement, width, multiplier, base)
    depth_twin = twin_depth(
        twin,
        len(placements(twin, twin_family)["hidden"]),
        twin_family.branches_per_layer,
    )
    eager = _outside_in(model)
    problems: list[str] = []
    # init_ never ran: check's one line at this width says so (and names nothing at the
    # base width, where the twin's init is the model's own); one line, not one per matrix
    if not_at_init(placement, None) is None and init_record(model) is not None:
        problems += _parameter_lines(
            rules,
            eager,
            (width, depth, depth_twin),
            multiplier,
            (placement, twin_placement),
        )
    _matched(eager, twin)
    _hooks_at(rules, twin, (width, depth), multiplier)
    if example_input is not None:
        batch = example_input
    else:
        batch = example_batch(eager, placement.family or twin_family)
    if batch is None:
        return problems, ["the forward pass was not compared with the twin's: no batch"]
    found, notes = _compare_forward(eager, twin, batch)
    return problems + found, notes
