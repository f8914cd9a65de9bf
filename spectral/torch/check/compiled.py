"""check() on a torch.compile'd model: does the code it runs call the multiplier hooks?

Dynamo keeps compiled code on the code object of the model's ``forward``, which every
instance of the class shares, and its guards do not look at forward hooks. So code compiled
for one instance without hooks runs for another instance that has them: compile an unhooked
model, build a new one of the same class, ``apply_multipliers``, compile it, and its
logits come out 1 / alpha_out times the eager ones, whatever was done to the new model.
check()'s example batch (2 x 8 tokens) misses that: a shape the cache does not hold
compiles afresh, with the hooks. Here the compiled model is run on inputs of the shapes
its cached code was compiled for (read from that code's guards), with recompiling
forbidden, so that the code that runs is the code training runs; it is compared with the
eager module on the same input. Without dynamo's cache entries (a torch that keeps them
elsewhere) nothing is added to the example batch's comparison.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from typing import Any

import torch
from torch import nn

from spectral.measure.fit import rms
from spectral.torch.apply.hooks import our_hooks, placements
from spectral.torch.check.forward import _first_tensor
from spectral.torch.model.classify import Adapter

COMPILE_FIX = (
    "call torch.compiler.reset() before torch.compile(model) (dynamo keeps compiled code "
    "per class: code compiled for another instance without the hooks runs for this one)"
)

_INPUT = re.compile(
    r"check_tensor\(L\['(\w+)'\](?:\[(\d+)\]|\['(\w+)'\])?, Tensor, [^\n]*?, "
    r"torch\.(int64|int32), [^\n]*?size=\[([^\]]*)\]"
)
"""An integer input tensor's guard: the local it is (``args`` / ``kwargs`` of a decorated
forward, with the index or key, or the forward's own argument name) and its size (a
dynamic dimension as None)."""


def _cached_inputs(wrapper: nn.Module) -> list[tuple[int, list[tuple[Any, ...]]]]:
    """The integer inputs each cached compiled code of the wrapper was guarded on: one
    (positional index shift, [(kind, index or name, dims)]) per cache entry."""
    try:
        from torch._dynamo.eval_frame import _debug_get_cache_entry_list
    except ImportError:  # a private API: without it, the example batch only
        return []
    inner = getattr(wrapper, "_orig_mod", None)
    if not isinstance(inner, nn.Module):
        return []
    found: list[tuple[int, list[tuple[Any, ...]]]] = []
    for fn in _forward_chain(type(inner).forward):
        code = getattr(getattr(fn, "__func__", fn), "__code__", None)
        try:
            entries = _debug_get_cache_entry_list(code) if code else []
        except Exception:  # noqa: BLE001, S112 - not a frame dynamo caches
            continue
        for entry in entries:
            parts = "\n".join(getattr(entry.guard_manager, "code_parts", []) or [])
            inputs = []
            for local, index, key, _, size in _INPUT.findall(parts):
                dims = tuple(
                    int(d) if d.strip().isdigit() else -1 for d in size.split(",")
                )
                inputs.append((local, int(index) if index else key or None, dims))
            shift = 1 if "L['args'][0]._modules" in parts else 0  # args[0] is self
            if inputs:
                found.append((shift, inputs))
    return found


def _forward_chain(fn: Any) -> Iterator[Any]:
    """A forward and the functions its decorators wrap (Hugging Face's)."""
    for _ in range(4):
        if fn is None or isinstance(fn, nn.Module):
            return
        yield fn
        fn = getattr(fn, "__wrapped__", None)


def _vocab(model: nn.Module, family: Adapter) -> int | None:
    """How many token ids the input modules' largest table holds."""
    tables = [
        sub.num_embeddings
        for _, m in placements(model, family)["input"]
        for sub in m.modules()
        if isinstance(sub, nn.Embedding)
    ]
    return max(tables) if tables else None


def _call_of(
    shift: int, inputs: list[tuple[Any, ...]], vocab: int, device: torch.device
) -> tuple[list[Any], dict[str, Any]] | None:
    """The positional and keyword arguments of one cached call, ids drawn below vocab
    (a dynamic dimension: 8); None when the positions leave a gap."""
    gen = torch.Generator().manual_seed(0)
    args: dict[int, torch.Tensor] = {}
    kwargs: dict[str, torch.Tensor] = {}
    for local, where, dims in inputs:
        shape = tuple(d if d > 0 else 8 for d in dims)
        ids = torch.randint(0, vocab, shape, generator=gen).to(device)
        if local == "args" and isinstance(where, int):
            args[where - shift] = ids
        elif local == "kwargs" and isinstance(where, str):
            kwargs[where] = ids
        elif where in (None, ""):  # the forward's own argument, by its name
            kwargs[local] = ids
        else:
            return None
    if args and sorted(args) != list(range(len(args))):
        return None
    return [args[i] for i in range(len(args))], kwargs


def _cached_run(
    wrapper: nn.Module, args: list[Any], kwargs: dict[str, Any], grad: bool
) -> torch.Tensor | None:
    """The compiled model's output on this call from its cached code only (a call its
    guards refuse would compile afresh: None)."""
    try:
        with (
            torch.compiler.set_stance("fail_on_recompile"),
            torch.set_grad_enabled(grad),
        ):
            out = _first_tensor(wrapper(*args, **kwargs))
    except Exception:  # noqa: BLE001 - refused by the guards (or set_stance unknown)
        return None
    return None if out is None else out.detach()


def compiled_problems(
    model: nn.Module, family: Adapter | None, example_input: Any = None
) -> list[str]:
    """One line when the compiled model's cached code computes another output than its
    eager module on an input of the shape that code was compiled for; else []."""
    inner = getattr(model, "_orig_mod", None)
    if not isinstance(inner, nn.Module) or family is None or not our_hooks(inner):
        return []
    vocab = _vocab(inner, family)
    if vocab is None:
        return []
    device = next((p.device for p in inner.parameters()), torch.device("cpu"))
    for shift, inputs in _cached_inputs(model):
        call = _call_of(shift, inputs, vocab, device)
        if call is None:
            continue
        for grad in (True, False):  # the grad mode is guarded: training's, then eval's
            compiled = _cached_run(model, *call, grad)
            if compiled is None:
                continue
            with torch.no_grad():
                eager = _first_tensor(inner(*call[0], **call[1]))
            if eager is None or eager.shape != compiled.shape or rms(eager) == 0.0:
                continue
            if rms(compiled - eager) / rms(eager) > 1e-3:
                ratio = rms(compiled) / rms(eager)
                shape = "x".join(str(d) for d in compiled.shape[:-1])
                return [
                    f"the compiled model's output is {ratio:.4g} x its eager module's on a "
                    f"{shape} batch (the shape its cached code was compiled for): that "
                    "code was compiled without the multiplier hooks; " + COMPILE_FIX
                ]
    return []
