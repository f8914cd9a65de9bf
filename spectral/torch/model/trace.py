"""A model's structure from one traced forward pass: no adapter needed.

:func:`trace_structure` runs the model once on a tiny batch (the caller's, or one built
from the model: token ids for a model that starts with an embedding, an image-shaped
tensor for a conv net) with a forward hook on every module and a
:class:`torch.overrides.TorchFunctionMode` that records every torch function, its tensor
operands and what it returned. From that graph it reads the residual stream backwards
from the readout (the last module with parameters to run): each addition ``h + f(h)``
(also ``h + g * f(h)`` for a constant ``g``, and parallel branches added together), the
branch end of each addition (the innermost module whose output reaches the added term
changed by constants only: where alpha_hidden goes), the input (the module whose output
is h_0), norms on the stream, the final module (whose input is h_L), other streams that
branches read (an encoder's) and the constants multiplied in on the way. The result is a
frozen :class:`Structure`; :func:`structure_adapter` turns it into an
:class:`~spectral.families.adapter.Adapter` with exact-name patterns, so hooks, init,
param groups and checks read it as they read a family's. A construct the rules do not
cover (a multiplicative residual, a branch that ends in no module) is refused in one line
that names it and where it is.
"""

from __future__ import annotations

import math
import re
import weakref
from typing import Any

import torch
from torch import nn

from spectral.errors import ConfigTypeError, UnsupportedModelError
from spectral.families.adapter import Adapter
from spectral.torch.model.shapes import hf_model
from spectral.torch.model.trace_graph import (
    TRACE_MATMUL,
    Structure,
    TraceCall,
    TraceGraph,
    TraceRecorder,
    trace_hooks,
    trace_norm,
)
from spectral.torch.model.trace_read import UNTRACEABLE, TraceReader, TraceStream


def _trace_region(
    reader: TraceReader, main: TraceStream, others: list[TraceStream], out: TraceCall
) -> tuple[dict[int, str], list[str]]:
    """id(parameter) -> where its data flows (input, head, stream, hidden), and the
    modules on the head path (between h_L and the readout's input), in call order."""
    stops = set().union(main.keys, *(o.keys for o in others))
    finals = []
    for other in others:
        readers = reader.readers(other.end)
        if readers and readers[0].out is not None:
            stops.update(reader.strip(readers[0].out))
            finals.append(readers[0])
    region: dict[int, str] = {}

    def claim(ids: set[int], where: str) -> None:
        for i in ids:
            region.setdefault(i, where)

    modules = {c.name: c.module for c in reader.g.calls}
    for st in (main, *others):
        for name in reader.outer(st):
            claim({id(p) for p in modules[name].parameters()}, "outer")
        claim(reader.ancestors([st.adds[-1][1]], set()), "input")
    assert out.inp is not None
    head = reader.ancestors([out.inp], stops)
    claim(head, "head")
    for call in finals:
        claim({id(p) for p in call.module.parameters()}, "input")
    names = {name for st in (main, *others) for name, _ in st.norms}
    for call in reader.g.calls:
        if call.name in names:
            claim({id(p) for p in call.module.parameters()}, "stream")
    for st in (main, *others):
        for _, _, branch in st.adds:
            claim(reader.ancestors([branch], stops), "hidden")
    order = [
        c.name
        for c in reader.g.calls
        if any(id(p) in head for p in c.module.parameters(recurse=False))
    ]
    return region, list(dict.fromkeys(order))


def _trace_role(
    name: str, p: nn.Parameter, owner: nn.Module, where: str, ops: set[str], ran: bool
) -> str:
    """A parameter's role from where its data flows and how it is used; ``ran``: its
    module was called (a bias of one that was not is used on its own: Mamba's
    dt_proj.bias added to the time step inside the scan, a per-channel vector)."""
    # a 3-D tensor is fused experts' matrices, even when each is sliced out (p[e])
    # before its matmul (Jamba's experts)
    experts = p.ndim == 3 and min(p.shape) > 1  # not RWKV's (1, 1, n) time_mix
    matrix = experts or (
        p.ndim >= 2
        and (p is getattr(owner, "weight", None) or bool(ops & TRACE_MATMUL))
    )
    if where == "input":
        return "input_weight" if p.ndim >= 2 else "input_bias"
    if where == "outer":  # a stem's map after the input layer (Whisper's conv2)
        return "outer_weight" if p.ndim >= 2 else "outer_bias"
    if where == "stream":
        return "hidden_bias"
    if trace_norm(owner) or (ran and p is getattr(owner, "bias", None)):
        return "hidden_bias"
    if matrix:
        return "hidden_weight"
    used = ran or bool(ops & TRACE_MATMUL)  # nn.MultiheadAttention's out_proj.bias
    return "hidden_bias" if used and name.endswith("bias") else "hidden_vector"


def _trace_roles(
    model: nn.Module,
    graph: TraceGraph,
    region: dict[int, str],
    out: TraceCall,
    head: list[str],
    conditioning: dict[int, str] | None = None,
) -> tuple[tuple[tuple[str, str], ...], tuple[str, ...]]:
    """(parameter name, role) for every parameter the trace places, and the input
    parameters used as tables by no nn.Embedding; ``conditioning``: id() -> role of the
    conditioning path's parameters outside the layers (:func:`_trace_conditioning`)."""
    conditioning = conditioning or {}
    roles: list[tuple[str, str]] = []
    tables: list[str] = []
    before_matrix = set()
    for name in head:
        module = model.get_submodule(name)
        if not trace_norm(module):
            break
        before_matrix.add(name)
    for name, p in model.named_parameters(remove_duplicate=False):
        owner_name = name.rpartition(".")[0]
        owner = model.get_submodule(owner_name)
        if owner is out.module:
            role = (
                "output_weight"
                if p is getattr(owner, "weight", None)
                else "output_bias"
            )
        elif id(p) not in region:
            continue
        elif region[id(p)] == "hidden" and id(p) in conditioning:
            role = conditioning[id(p)]
        elif region[id(p)] == "head":
            if owner_name in before_matrix:
                role = "input_bias"
            else:
                role = "outer_weight" if p.ndim >= 2 else "outer_bias"
        else:
            ops = graph.param_ops.get(id(p), set())
            ran = any(call.module is owner for call in graph.calls)
            role = _trace_role(name, p, owner, region[id(p)], ops, ran)
            plain = not isinstance(owner, nn.Embedding)
            if (
                role == "input_weight"
                and plain
                and p is not getattr(owner, "weight", None)
            ):
                tables.append(name)
        roles.append((name, role))
    return tuple(roles), tuple(tables)


_TRACE_LAYER = re.compile(r"^(.*?)\.?(\d+)(\.|$)")
"""A branch end's layer: the module list before its first index and the index
(``layers.3``)."""


def _trace_conditioning(
    model: nn.Module, off_stream: set[int], branches: list[str]
) -> dict[int, str]:
    """id() -> role of each parameter of a conditioning path outside the layers: it
    reads no residual stream (``off_stream``) and sits in no layer that holds a branch end
    (a DiT's timestep MLP and label table; each block's adaLN map stays in its branch).
    Applied once, outside the stream, its roles are the ones its shapes say: a map from a
    fixed size (the timestep's frequencies, a label table) is an input layer
    (input_weight, input_bias), a width -> width map is an outer one (outer_weight,
    outer_bias). Whether the fan-in grows is read against the readout's fan-in."""
    layers = set()
    for name in branches:
        found = _TRACE_LAYER.match(name)
        if found is not None:
            layers.add(name[: found.end(2)] + ".")
    readout_in = _readout_fan_in(model)
    if not off_stream or readout_in is None:
        return {}
    out: dict[int, str] = {}
    for module_name, module in model.named_modules():
        if any((module_name + ".").startswith(layer) for layer in layers):
            continue
        weight = getattr(module, "weight", None)
        fixed_in = isinstance(module, nn.Embedding) or not (
            isinstance(weight, torch.Tensor)
            and weight.ndim == 2
            and weight.shape[1] % readout_in == 0
        )
        for p in module.parameters(recurse=False):
            if id(p) not in off_stream:
                continue
            matrix = p.ndim >= 2
            if fixed_in:
                out[id(p)] = "input_weight" if matrix else "input_bias"
            else:
                out[id(p)] = "outer_weight" if matrix else "outer_bias"
    return out


def _readout_fan_in(model: nn.Module) -> int | None:
    """The width: the fan-in of the last nn.Linear (the readout), None if there is none."""
    last = None
    for module in model.modules():
        if isinstance(module, nn.Linear):
            last = module
    return None if last is None else last.in_features


def _trace_per_layer(branches: tuple[str, ...]) -> int:
    """Residual branches per layer, from the branch ends' names: a layer is one index of
    a module list (``layers.3``); lists of one length (an encoder's and a decoder's)
    count that length."""
    lengths: dict[str, set[str]] = {}
    for name in branches:
        found = _TRACE_LAYER.match(name)
        if found is not None:
            lengths.setdefault(found.group(1), set()).add(found.group(2))
    sizes = {len(v) for v in lengths.values()}
    if len(sizes) == 1:
        depth = sizes.pop()
    else:
        depth = sum(len(v) for v in lengths.values())
    if depth and len(branches) % depth == 0:
        return len(branches) // depth
    return 1


def _trace_read(model: nn.Module, graph: TraceGraph) -> Structure:
    reader = TraceReader(graph)
    main, others, out, _ = reader.streams()
    scales: dict[str, float] = {}
    sites: dict[str, tuple[str, ...]] = {}
    inputs: list[str] = []
    for st in (main, *others):
        for name, factor, every in reader.inputs(st):
            inputs.append(name)
            sites[name] = tuple(dict.fromkeys((*sites.get(name, ()), *every)))
            if factor != 1.0:
                scales[name] = factor
    branches: list[str] = []
    for st in (main, *others):
        for _, _, branch in reversed(st.adds):
            for name, factor, every in reader.ends(branch):
                branches.append(name)
                sites[name] = every
                if factor != 1.0:
                    scales[name] = factor
    order = {c.name: i for i, c in enumerate(graph.calls)}
    branches.sort(key=lambda n: order.get(n, 0))
    readers = reader.readers(main.end)
    final = readers[0].name if readers else ""
    sites[final] = tuple(c.name for c in readers)
    assert out.inp is not None
    logit_scale = reader.factor(reader.strip(out.inp))
    logit_scale *= reader.after(out.out) if out.out is not None else 1.0
    if logit_scale != 1.0:
        scales[out.name] = logit_scale
    sites[out.name] = tuple(graph.made_by.get(out.out, (out.name,)) if out.out else ())
    region, head = _trace_region(reader, main, others, out)
    conditioning = _trace_conditioning(
        model, reader.off_stream([main, *others]), branches
    )
    roles, tables = _trace_roles(model, graph, region, out, head, conditioning)
    norms = tuple(n for st in (main, *others) for n, _ in st.norms)
    ends = tuple(dict.fromkeys(branches))
    normed = reader.normed([main, *others])
    return Structure(
        input=tuple(dict.fromkeys(inputs)),
        branches=ends,
        output=(out.name,),
        final=final,
        norms=norms,
        roles=roles,
        embeddings=tables,
        scales=tuple(sorted(scales.items())),
        sites=tuple(sorted(sites.items())),
        branches_per_layer=_trace_per_layer(ends),
        aliases=_trace_aliases(model, graph),
        normed=tuple(normed),
    )


def _trace_aliases(model: nn.Module, graph: TraceGraph) -> tuple[str, ...]:
    """Parameter names under a module that never ran whose tensor a module that ran
    holds too."""
    ran = {id(call.module) for call in graph.calls}
    used = {
        id(p)
        for m in model.modules()
        if id(m) in ran
        for p in m.parameters(recurse=False)
    }
    out = []
    for name, p in model.named_parameters(remove_duplicate=False):
        owner = model.get_submodule(name.rpartition(".")[0])
        if id(owner) not in ran and id(p) in used:
            out.append(name)
    return tuple(out)


def _trace_values(shape: tuple[int, ...]) -> torch.Tensor:
    n = math.prod(shape)
    return torch.linspace(-1.0, 1.0, n).reshape(shape)


def trace_batch(model: nn.Module) -> dict[str, torch.Tensor] | torch.Tensor:
    """A tiny batch for one forward pass, built from the model: token ids (and decoder
    ids) for a Hugging Face model or one that starts with an embedding, audio features
    for one that reads them, an image for a conv net, a vector for an MLP."""
    top = hf_model(model)
    if top is not None:
        config: Any = top.config
        vocab = int(getattr(config, "vocab_size", 0) or 16)
        ids = torch.arange(8).remainder(vocab).reshape(1, 8)
        main = getattr(top, "main_input_name", "input_ids")
        batch: dict[str, torch.Tensor] = {}
        if main == "input_features":
            bins = int(config.num_mel_bins)
            frames = 2 * int(config.max_source_positions)
            batch[main] = _trace_values((1, bins, frames))
        elif main == "pixel_values":
            size = int(getattr(config, "image_size", 32))
            channels = int(getattr(config, "num_channels", 3))
            batch[main] = _trace_values((1, channels, size, size))
        else:
            batch[main] = ids
        if getattr(config, "is_encoder_decoder", False):
            batch["decoder_input_ids"] = ids[:, :4]
        return batch
    for module in model.modules():
        if not isinstance(module, (nn.Embedding, nn.Linear, nn.modules.conv._ConvNd)):
            continue
        if isinstance(module, nn.Embedding):
            return torch.arange(8).remainder(module.num_embeddings).reshape(1, 8)
        if isinstance(module, nn.modules.conv._ConvNd):
            dims = len(module.kernel_size)
            return _trace_values((1, module.in_channels, *([16] * dims)))
        if isinstance(module, nn.Linear):
            return _trace_values((2, module.in_features))
        break
    raise UnsupportedModelError(
        f"cannot build an input for {type(model).__name__} to trace its structure: "
        "pass example_input= (a batch it takes) or adapter="
    )


def trace_structure(model: nn.Module, example: Any = None) -> Structure:
    """The model's :class:`Structure` from one forward pass on ``example`` (a tensor, a
    tuple of positional arguments or a dict of keyword arguments; None: built by
    :func:`trace_batch`). The model's random state, buffers and modes are left as they
    were; one line refuses what the rules do not cover."""
    if not isinstance(model, nn.Module):
        raise ConfigTypeError(
            f"trace_structure takes a torch.nn.Module, got {type(model).__name__}"
        )
    batch = trace_batch(model) if example is None else example
    device = next((p.device for p in model.parameters()), torch.device("cpu"))
    if device.type != "cpu":
        batch = _trace_to(batch, device)
    runner = model
    inner = getattr(model, "_orig_mod", None)  # torch.compile: run the eager model
    if isinstance(inner, nn.Module):
        runner = inner
    graph = TraceGraph(model)
    buffers = [(b, b.detach().clone()) for b in model.buffers()]
    handles = trace_hooks(model, graph)
    try:
        with torch.random.fork_rng(devices=[]), torch.no_grad(), TraceRecorder(graph):
            if isinstance(batch, dict):
                runner(**batch)
            elif isinstance(batch, tuple):
                runner(*batch)
            else:
                runner(batch)
    except UnsupportedModelError:
        raise
    except Exception as exc:  # noqa: BLE001 - the user's model: one line
        first = (str(exc).splitlines() or [""])[0]
        raise UnsupportedModelError(
            f"{UNTRACEABLE} {type(model).__name__} once to trace its structure: "
            f"{type(exc).__name__}: {first}; pass example_input= or adapter="
        ) from None
    finally:
        for handle in handles:
            handle.remove()
        with torch.no_grad():
            for buffer, saved in buffers:
                buffer.copy_(saved)
    structure = _trace_read(model, graph)
    runs: dict[str, int] = {}
    for call in graph.calls:
        runs[call.name] = runs.get(call.name, 0) + 1
    looped = [name for name in structure.branches if runs.get(name, 0) > 1]
    if looped:
        raise UnsupportedModelError(
            f"the branch end `{looped[0]}` runs {runs[looped[0]]} times in one forward pass "
            "(a shared block applied in a loop): the rules count each residual block once "
            "(depth counts layers, each with its own parameters); give each application its "
            "own module"
        )
    return structure


def _trace_to(batch: Any, device: torch.device) -> Any:
    if isinstance(batch, torch.Tensor):
        return batch.to(device)
    if isinstance(batch, dict):
        return {k: _trace_to(v, device) for k, v in batch.items()}
    if isinstance(batch, tuple):
        return tuple(_trace_to(v, device) for v in batch)
    return batch


def _trace_exact(names: tuple[str, ...] | list[str]) -> tuple[str, ...]:
    return tuple(f"^{re.escape(name)}$" for name in names)


def structure_adapter(structure: Structure, name: str = "traced") -> Adapter:
    """An :class:`Adapter` that places exactly what ``structure`` found: every pattern
    is one module or parameter name, anchored at both ends."""
    return Adapter(
        name=name,
        detect="",
        roles=tuple((f"^{re.escape(p)}$", role) for p, role in structure.roles),
        input=_trace_exact(structure.input),
        branches=_trace_exact(structure.branches),
        output=_trace_exact(structure.output),
        final=f"^{re.escape(structure.final)}$" if structure.final else "",
        branches_per_layer=structure.branches_per_layer,
        embeddings=_trace_exact(structure.embeddings),
        aliases=_trace_exact(structure.aliases),
        normed=tuple(
            (f"^{re.escape(norm)}$", f"^{re.escape(module)}$")
            for norm, module in structure.normed
        ),
    )


_TRACED: weakref.WeakKeyDictionary[nn.Module, tuple[Any, Structure | Exception]] = (
    weakref.WeakKeyDictionary()
)
"""Model -> (its parameters when traced, the structure or the refusal)."""


def traced_structure(model: nn.Module, example: Any = None) -> Structure:
    """:func:`trace_structure` on ``example`` (None: the batch built from the model), once
    per model while its parameters stay the same objects (an example given later traces
    again where the first trace could not run)."""
    state = tuple((n, id(p)) for n, p in model.named_parameters(remove_duplicate=False))
    kept = _TRACED.get(model)
    failed = kept is not None and isinstance(kept[1], Exception)
    if kept is None or kept[0] != state or (example is not None and failed):
        try:
            kept = state, trace_structure(model, example)
        except UnsupportedModelError as exc:
            kept = state, exc
        _TRACED[model] = kept
    assert kept is not None
    if isinstance(kept[1], Exception):
        raise kept[1]
    return kept[1]


def structure_disagreements(
    model: nn.Module,
    family: Adapter,
    structure: Structure,
    only: tuple[str, ...] | None = None,
) -> list[str]:
    """One line per place where ``family`` (an adapter) and the traced ``structure``
    put a multiplier or the final module differently; a module counts as the traced one
    when its output (for the final module: its input) is the same tensor up to
    constants. [] when they agree. ``only``: the places compared ("alpha_in",
    "alpha_hidden", "alpha_out", "the final module"; None: all)."""
    names = [name for name, _ in model.named_modules()]
    sites = dict(structure.sites)
    out = []
    for what, patterns, found in (
        ("alpha_in", family.input, structure.input),
        ("alpha_hidden", family.branches, structure.branches),
        ("alpha_out", family.output, structure.output),
        (
            "the final module",
            (family.final,) if family.final else (),
            (structure.final,),
        ),
    ):
        if not patterns or not any(found) or (only is not None and what not in only):
            continue
        placed = [n for n in names if any(re.search(p, n) for p in patterns)]
        same = {t: set(sites.get(t, (t,))) | {t} for t in found}
        extra = [n for n in placed if not any(n in s for s in same.values())]
        missing = [t for t, s in same.items() if not s & set(placed)]
        if extra or missing:
            shown = ", ".join(f"`{n}`" for n in (extra or placed)[:3]) or "nothing"
            traced_at = ", ".join(f"`{n}`" for n in (missing or found)[:3])
            out.append(
                f"{family.name}: the adapter puts {what} on {shown}, the traced "
                f"structure on {traced_at}"
            )
    return out
