"""Block multipliers on any model: forward hooks that scale a module's output by a float.

alpha_in scales the embedding output, alpha_hidden the end of every residual branch,
alpha_out the logits. A hook holds a plain float, so torch.compile bakes it in and DDP /
FSDP see no extra state.
"""

from __future__ import annotations

import gc
import math
import re
import sys
import warnings
import weakref
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

import torch
from torch import nn

from spectral.errors import ConfigError, ConfigTypeError, UnsupportedModelError
from spectral.engine.dims import WIDTH_TO_FIXED
from spectral.scaling import BaseValue, Rules, ratios
from spectral.torch.model.classify import Adapter, model_config, unplaced_message
from spectral.torch.model.placement import Placement


@dataclass
class MultiplierHook:
    """The forward hook that applies one block multiplier: ``alpha * output / (built_in *
    outside)``. ``factor`` is alpha, ``layer`` its layer (input, hidden, output, ...),
    ``built_in`` the factor the module's own forward pass multiplies in (Gemma's sqrt(n)
    on the embedding output) and ``outside`` the one the model multiplies in after the
    module (Granite's embedding_multiplier, residual_multiplier, 1 / logits_scaling). Plain
    floats, so torch.compile bakes them in and DDP/FSDP see no state. The checks change
    ``factor`` only through :meth:`scaled` and :meth:`set_factor`."""

    factor: float
    layer: str
    built_in: float = 1.0
    outside: float = 1.0

    @property
    def own_factor(self) -> float:
        """alpha over what the module's own forward pass multiplies in."""
        return self.factor / self.built_in

    @property
    def weight_factor(self) -> float:
        """What the module's weights carry once the hook is folded into them."""
        return self.factor / (self.built_in * self.outside)

    def set_factor(self, factor: float) -> None:
        """Set alpha (the check's twins at the user's size)."""
        self.factor = float(factor)

    @contextmanager
    def scaled(self, by: float) -> Iterator[None]:
        """alpha multiplied by ``by`` inside the block, restored after it."""
        saved = self.factor
        self.factor = saved * by
        try:
            yield
        finally:
            self.factor = saved

    def __call__(self, module: nn.Module, args: Any, output: Any) -> Any:
        scale = self.factor / (self.built_in * self.outside)
        if scale == 1.0:
            return None
        if isinstance(output, torch.Tensor):
            return output * scale
        if isinstance(output, tuple) and output and isinstance(output[0], torch.Tensor):
            return (output[0] * scale, *output[1:])
        raise ConfigTypeError(
            f"apply_multipliers: {type(module).__name__} returned {type(output).__name__}; "
            "hook a module that returns a tensor"
        )


def our_hooks(model: nn.Module) -> list[tuple[str, nn.Module, int, MultiplierHook]]:
    """(module name, module, hook id, hook) of every multiplier hook in the model."""
    found = []
    for name, module in model.named_modules():
        for hook_id, hook in module._forward_hooks.items():
            if isinstance(hook, MultiplierHook):
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


def scale_after_input(model: nn.Module, family: Adapter) -> float:
    """sqrt(width) where the model's forward scales the input modules' outputs after them
    (the adapter's input_scale_sqrt flag set in its config: litgpt's scale_embeddings), else 1."""
    if not family.input_scale_sqrt:
        return 1.0
    flag, width = family.input_scale_sqrt
    config = model_config(model)
    if config is None or not getattr(config, flag, False):
        return 1.0
    return math.sqrt(float(getattr(config, width)))


def built_in_scale(
    name: str, module: nn.Module, family: Adapter, model: nn.Module | None = None
) -> float:
    """The factor the family's forward multiplies into the input module's output (1 if
    none): held by the module (input_scale), or sqrt(width) when the model's config sets a
    flag (input_scale_sqrt)."""
    after = scale_after_input(model, family) if model is not None else 1.0
    if after != 1.0:
        return after
    if not family.input_scale:
        return 1.0
    for attr in family.input_scale:
        value = getattr(module, attr, None)
        if isinstance(value, torch.Tensor) and value.numel() == 1:
            return float(value.detach().float().cpu())
        if isinstance(value, (int, float)) and not isinstance(value, bool):
            return float(value)
    raise UnsupportedModelError(
        f"the {family.name} adapter expects the input module {name} "
        f"({type(module).__name__}) to hold its built-in embedding scale in one of "
        f"{', '.join(family.input_scale)}, and it has none (an older transformers keeps the "
        "scale elsewhere); upgrade transformers or pass adapter= with input_scale=()"
    )


def config_scale(model: nn.Module, family: Adapter, layer: str) -> float:
    """The factor the model's forward pass multiplies into ``layer``'s output outside the
    hooked module, from its config (the family's config_scales; 1 if none)."""
    factor = 1.0
    for where, attribute, power in family.config_scales:
        if where != layer:
            continue
        value = getattr(model_config(model), attribute, None)
        if isinstance(value, bool) or not isinstance(value, (int, float)) or value <= 0:
            raise UnsupportedModelError(
                f"the {family.name} adapter reads the model config's {attribute} (a factor "
                f"its forward pass applies to the {layer} layer), and it is {value!r}"
            )
        factor *= float(value) ** power
    return factor


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


_COMPILED_BEFORE: weakref.WeakKeyDictionary[nn.Module, list[Any]] = (
    weakref.WeakKeyDictionary()
)
"""torch.compile wrapper -> its compiled code objects from before apply_multipliers
hooked the module inside it (that code does not call the hooks)."""


def _compiled_code(wrapper: nn.Module) -> list[Any]:
    """The code objects dynamo holds for a torch.compile wrapper's calls (all wrappers
    share the frame it compiles, so this may hold other wrappers' code too); [] when this
    torch keeps them elsewhere."""
    try:
        from torch._dynamo.eval_frame import _debug_get_cache_entry_list
    except ImportError:  # a private API: without it, check() measures only
        return []
    # dynamo caches code on the first frame it compiles: wrap_inline's inner or the
    # module's _wrapped_call_impl (under the wrapper's forward), or the model's forward
    # (a decorated one, such as Hugging Face's, on the decorator's frame): every function
    # down both __wrapped__ chains
    found: dict[int, Any] = {}
    inner = getattr(wrapper, "_orig_mod", None)
    for fn in (
        getattr(wrapper, "forward", None),
        getattr(type(inner), "forward", None),
    ):
        for _ in range(4):
            code = getattr(getattr(fn, "__func__", fn), "__code__", None)
            if code is not None:
                try:
                    entries = _debug_get_cache_entry_list(code)
                except Exception:  # noqa: BLE001 - not a frame dynamo caches
                    entries = []
                found.update((id(e.code), e.code) for e in entries)
            fn = getattr(fn, "__wrapped__", None)
            if fn is None or isinstance(fn, nn.Module):
                break
    return list(found.values())


def _compile_wrappers(model: nn.Module) -> list[nn.Module]:
    """The live torch.compile wrappers (OptimizedModule) around ``model``: none unless
    dynamo has compiled a frame in this process; else one scan of the heap, once per
    apply_multipliers (a wrapper that never compiled holds no stale code)."""
    if not _dynamo_compiled_something():
        return []
    return [
        o
        for o in gc.get_objects()
        if type(o).__name__ == "OptimizedModule"
        and getattr(o, "_orig_mod", None) is model
    ]


def _dynamo_compiled_something() -> bool:
    """Whether dynamo has compiled any frame in this process. The heap scan costs about
    0.2 s per million live objects, and transformers imports dynamo without compiling
    anything; its frame counter (a private API) lets apply_multipliers skip the scan
    then. Without that counter: assume it has."""
    dynamo = sys.modules.get("torch._dynamo")
    if dynamo is None:
        return False
    counters = getattr(getattr(dynamo, "utils", None), "counters", None)
    if counters is None:
        return True
    try:
        return bool(counters["frames"]["ok"] or counters["frames"]["total"])
    except (KeyError, TypeError):
        return True


def stale_compiled(model: nn.Module) -> bool:
    """Whether ``model`` is a torch.compile wrapper that still runs code compiled before
    apply_multipliers hooked its module (torch.compiler.reset() drops that code)."""
    before = _COMPILED_BEFORE.get(model)
    if not before:
        return False
    now = {id(code) for code in _compiled_code(model)}
    return any(id(code) in now for code in before)


STALE_FIX = (
    "call torch.compiler.reset() (the next call compiles again, with the hooks), or "
    "apply_multipliers before torch.compile"
)


def _note_compiled_wrappers(model: nn.Module) -> None:
    """Hooks added under a live torch.compile wrapper that already compiled: its code does
    not call them (dynamo does not guard on hooks). Resetting dynamo here would drop every
    compiled model's code in the process, so this says how, and check() catches it."""
    for wrapper in _compile_wrappers(model):
        code = _compiled_code(wrapper)
        if not code:
            continue
        _COMPILED_BEFORE[wrapper] = code
        warnings.warn(
            "apply_multipliers: this model is wrapped by torch.compile and was compiled "
            "before these hooks, so the compiled model runs without the multipliers; "
            + STALE_FIX,
            RuntimeWarning,
            stacklevel=4,  # the user's apply_multipliers call (through Config's method)
        )


EPS_NAMES = ("eps", "variance_epsilon", "epsilon")
"""Where a norm keeps its epsilon: torch's norms, Hugging Face's RMSNorms."""
_BASE_EPS: weakref.WeakKeyDictionary[nn.Module, float] = weakref.WeakKeyDictionary()
"""Norm -> its own epsilon, as the model built it (before any scale_norm_eps)."""


def _norm_eps(norm: nn.Module) -> tuple[str, float]:
    """(attribute, value) of a norm's epsilon (torch's RMSNorm's None: the float32
    machine epsilon it uses); one-line refusal for a norm that keeps none we know."""
    for attribute in EPS_NAMES:
        value = getattr(norm, attribute, False)
        if value is None:
            return attribute, float(torch.finfo(torch.float32).eps)
        if isinstance(value, float):
            return attribute, value
    raise UnsupportedModelError(
        f"{type(norm).__name__} normalises a width -> fixed map's output and keeps its "
        f"epsilon in none of {', '.join(EPS_NAMES)}: its epsilon cannot follow that "
        "output's scale"
    )


def scale_norm_eps(
    rules: Rules, placement: Placement, width: float, depth: float
) -> None:
    """Set the epsilon of every norm that reads a width -> fixed map's output (the
    family's ``normed`` pairs; Jamba's dt, B and C norms on ``x_proj``) to its own value
    times that output's squared init scale relative to the base, r_n * init_ratio^2
    (1/r_n for the rules' 1/n^2 variance). A norm divides by sqrt(mean x^2 + eps): with
    the rules' Theta(n^-1/2) input and a fixed eps it divides by sqrt(eps) once the width
    is large enough, and its output shrinks as n^-1/2; with eps scaled it is the same
    function of the normalised input at every width. At the base width nothing moves."""
    family = placement.family
    if family is None or not family.normed:
        return
    model = placement.model
    r_n = ratios(width, depth, rules.base_width, rules.base_depth)[0]
    roles = {id(m): role for _, p, role, m in placement if p.ndim >= 2}
    modules = dict(model.named_modules())
    for norm_pattern, source_pattern in family.normed:
        for name, norm in modules.items():
            if not re.search(norm_pattern, name):
                continue
            sources = [m for n, m in modules.items() if re.search(source_pattern, n)]
            role = next((roles[id(m)] for m in sources if id(m) in roles), None)
            if role not in WIDTH_TO_FIXED:
                continue
            attribute, eps = _norm_eps(norm)
            base = _BASE_EPS.setdefault(norm, eps)
            factor = r_n * rules.init_ratio(role, width, depth) ** 2
            setattr(norm, attribute, base * factor)


def install_multipliers(
    rules: Rules,
    placement: Placement,
    width: float,
    depth: float,
    *,
    multiplier: BaseValue = 1.0,
) -> MultiplierHandle:
    """The block multipliers as forward hooks on the placed model's modules (the public
    ``apply_multipliers`` in spectral.torch.config says what they do)."""
    model = placement.model
    if builtin_multipliers(model):
        raise ConfigError(
            "this model applies the block multipliers in its forward pass already "
            "(applies_mup_multipliers); build it with multipliers= instead"
        )
    if getattr(rules, "absorbed", None) is not None:
        raise ConfigError(
            "this config absorbs the block multipliers (--absorb-multipliers): init_ and "
            "build_optimizers put them into the parameters' numbers, so no hook is needed; "
            "hooks would apply them twice"
        )
    family = placement.family
    if family is None:
        raise UnsupportedModelError(
            unplaced_message(
                model,
                "pass adapter=Adapter(...) or adapter={'input': [...], 'branches': "
                "[...], 'output': [...], 'roles': {...}} to place it by hand",
            )
        )
    placement.roles()  # every parameter placed, ties allowed (read once per model)
    placed = placements(model, family)
    problems = placement_problems(placed, family, depth)
    if problems:
        raise UnsupportedModelError("apply_multipliers: " + "; ".join(problems))
    for _, module, hook_id, _ in our_hooks(model):
        del module._forward_hooks[hook_id]
    scale_norm_eps(rules, placement, width, depth)  # also here: a reloaded model
    values = rules.multipliers(width, depth, multiplier)
    built_in = {id(m): built_in_scale(n, m, family, model) for n, m in placed["input"]}
    outside = {layer: config_scale(model, family, layer) for layer in placed}
    handles = [
        module.register_forward_hook(
            MultiplierHook(
                factor=values[layer],
                layer=layer,
                built_in=built_in.get(id(module), 1.0),
                outside=outside[layer],
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
    else:
        _note_compiled_wrappers(model)
    return MultiplierHandle(handles, names, values)


def final_of(model: nn.Module, family: Adapter | None) -> nn.Module | None:
    """The module whose input is h_L (the residual stream after the last block), for
    coordinate checks; None when the family does not say."""
    if family is None or not family.final:
        return None
    for name, module in model.named_modules():
        if re.search(family.final, name):
            return module
    return None
