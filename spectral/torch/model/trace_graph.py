"""One forward pass recorded: the graph the structure is read from (issue 38).

:class:`TraceRecorder` (a :class:`torch.overrides.TorchFunctionMode`) records every torch
function the model calls, its tensor operands, parameters and constants, and what it
returned; :func:`trace_hooks` records every module call (its input and output tensors).
A tensor is keyed by its id and version (an in-place op makes a new key).
:mod:`spectral.torch.model.trace_read` reads the graph; :mod:`spectral.torch.model.trace`
runs the pass and gives the :class:`Structure`.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any, NamedTuple

import torch
from torch import nn
from torch.overrides import TorchFunctionMode

from spectral.torch.model.shapes import is_norm

TraceKey = tuple[int, int]
"""A tensor as it was at one moment: (id, version); an in-place op makes a new key."""

TRACE_ADD = frozenset({"add", "__add__", "__radd__", "__iadd__", "add_"})
TRACE_MUL = frozenset({"mul", "__mul__", "__rmul__", "__imul__", "mul_"})
TRACE_DIV = frozenset({"div", "__truediv__", "__itruediv__", "div_", "true_divide"})
TRACE_PASS = frozenset(
    {
        "dropout",
        "alpha_dropout",
        "feature_alpha_dropout",
        "dropout1d",
        "dropout2d",
        "dropout3d",
        "view",
        "reshape",
        "contiguous",
        "to",
        "type",
        "type_as",
        "float",
        "half",
        "bfloat16",
        "clone",
        "permute",
        "transpose",
        "squeeze",
        "unsqueeze",
        "flatten",
        "view_as",
        "reshape_as",
    }
)
TRACE_SPLIT = frozenset(
    {"split", "chunk", "tensor_split", "unbind", "narrow", "__getitem__"}
)
"""Ops that hand on a part of one tensor (the norm reading a part of a module's output)."""
TRACE_MATMUL = frozenset(
    {
        "linear",
        "matmul",
        "__matmul__",
        "mm",
        "bmm",
        "addmm",
        "baddbmm",
        "einsum",
        "conv1d",
        "conv2d",
        "conv3d",
        "embedding",
        "_grouped_mm",
        "grouped_mm",
        "multi_head_attention_forward",  # nn.MultiheadAttention's packed in_proj_weight
    }
)


class TraceNode(NamedTuple):
    """One torch function call that made a tensor."""

    op: str
    parents: tuple[TraceKey, ...]
    """The non-constant tensor operands that are no parameter."""
    params: tuple[int, ...]
    """id() of the parameters among the operands."""
    factor: float
    """The product of the constant operands (scalars, one-element tensors); 1 if none."""
    scope: str
    """The innermost module running when the call ran."""
    seq: int


class TraceCall(NamedTuple):
    """One module call: its name, the key of its first tensor input and output."""

    name: str
    module: nn.Module
    inp: TraceKey | None
    out: TraceKey | None


@dataclass(frozen=True)
class Structure:
    """Where the rules meet a model, read from one traced forward pass."""

    input: tuple[str, ...]
    """The modules whose outputs make h_0 (alpha_in)."""
    branches: tuple[str, ...]
    """The branch end of every residual addition, in forward order (alpha_hidden)."""
    output: tuple[str, ...]
    """The readout (alpha_out)."""
    final: str
    """The module whose input is h_L, the stream after the last branch ("": none)."""
    norms: tuple[str, ...]
    """Norms on a stream: after each addition (post-norm), on h_0, an encoder's last."""
    roles: tuple[tuple[str, str], ...]
    """(parameter name, role) by where its data flows; shapes decide the rest."""
    embeddings: tuple[str, ...]
    """Input parameters used as tables though no nn.Embedding holds them."""
    scales: tuple[tuple[str, float], ...]
    """(module, factor): a constant the model multiplies into that module's output on
    its way to the stream or the logits (Gemma's sqrt(n), Granite's multipliers)."""
    sites: tuple[tuple[str, tuple[str, ...]], ...]
    """(module placed, every module whose output is the same tensor up to constants)."""
    branches_per_layer: int = 1
    aliases: tuple[str, ...] = ()
    """Parameter names under a module the pass never called, whose tensor a module
    that ran holds too (T5's ``shared.weight``)."""
    normed: tuple[tuple[str, str], ...] = ()
    """(norm, module): a norm off the streams whose input is that module's output, up
    to layout ops, constants and a split (Jamba's ``b_layernorm`` on ``x_proj``): its
    epsilon follows the init scale of that output (spectral.torch.apply.init)."""


class TraceGraph:
    """Everything one forward pass did: tensor key -> the call that made it, module
    calls in the order they finished, which modules output which tensor."""

    def __init__(self, model: nn.Module) -> None:
        self.nodes: dict[TraceKey, TraceNode] = {}
        self.calls: list[TraceCall] = []
        self.made_by: dict[TraceKey, list[str]] = {}
        self.param_ops: dict[int, set[str]] = {}
        self.alive: list[Any] = []
        self.stack: list[str] = []
        self.seq = 0
        self.sizes: dict[TraceKey, int] = {}
        self.names = {id(m): n for n, m in model.named_modules()}
        self.params = {id(p) for p in model.parameters()}
        self.buffers = {id(b) for b in model.buffers()}

    def key(self, t: torch.Tensor) -> TraceKey:
        self.alive.append(t)
        k = id(t), t._version
        self.sizes[k] = t.numel()
        return k

    def constant(self, t: Any, k: TraceKey | None) -> float | None:
        """The value of a constant operand (a number, or a one-element tensor made from
        nothing the forward pass computed), else None."""
        if isinstance(t, (int, float)):
            return float(t)
        if id(t) in self.params or t.numel() != 1:
            return None
        node = self.nodes.get(k) if k is not None else None
        if node is not None and (node.parents or node.params):
            return None
        return float(t.detach().float().reshape(()).cpu())

    def record(self, op: str, before: list[Any], keys: list[Any], out: Any) -> None:
        parents: list[TraceKey] = []
        params: list[int] = []
        factor = 1.0
        for i, (t, k) in enumerate(zip(before, keys, strict=True)):
            value = self.constant(t, k)
            if value is not None:
                invert = op in TRACE_DIV and i == 1 and value != 0
                factor *= 1.0 / value if invert else value
            elif id(t) in self.params:
                params.append(id(t))
                self.param_ops.setdefault(id(t), set()).add(op)
            else:
                parents.append(k)
        self.seq += 1
        scope = self.stack[-1] if self.stack else ""
        node = TraceNode(op, tuple(parents), tuple(params), factor, scope, self.seq)
        made = list(trace_tensors(out))
        for t, k in zip(before, keys, strict=True):
            # an operand changed in place and not returned (x[i] = y, copy_): a new
            # version made from every operand
            changed = isinstance(t, torch.Tensor) and (id(t), t._version) != k
            if changed and not any(t is m for m in made):
                made.append(t)
        for t in made:
            k = self.key(t)
            if k not in parents:  # an op that returned its input unchanged adds nothing
                self.nodes[k] = node


def trace_norm(module: nn.Module) -> bool:
    """A norm (LayerNorm, RMSNorm, GroupNorm, BatchNorm, InstanceNorm, *Norm)."""
    return is_norm(module) or isinstance(module, nn.modules.batchnorm._NormBase)


def trace_tensors(obj: Any) -> Iterator[torch.Tensor]:
    if isinstance(obj, torch.Tensor):
        yield obj
    elif isinstance(obj, (list, tuple)):
        for item in obj:
            yield from trace_tensors(item)
    elif isinstance(obj, dict):
        for item in obj.values():
            yield from trace_tensors(item)


def trace_operands(obj: Any) -> Iterator[Any]:
    """Tensors and plain numbers among a call's arguments (bools are no constants)."""
    number = isinstance(obj, (int, float)) and not isinstance(obj, bool)
    if isinstance(obj, torch.Tensor) or number:
        yield obj
    elif isinstance(obj, (list, tuple)):
        for item in obj:
            yield from trace_operands(item)
    elif isinstance(obj, dict):
        for item in obj.values():
            yield from trace_operands(item)


class TraceRecorder(TorchFunctionMode):
    def __init__(self, graph: TraceGraph) -> None:
        super().__init__()
        self.graph = graph

    def __torch_function__(
        self, func: Any, types: Any, args: Any = (), kwargs: Any = None
    ) -> Any:
        kwargs = kwargs or {}
        op = getattr(func, "__name__", "")
        if op in ("__get__", "__set__", "size", "dim", "numel", "__len__"):
            return func(*args, **kwargs)
        before = list(trace_operands((args, kwargs)))
        keys = [
            self.graph.key(t) if isinstance(t, torch.Tensor) else None for t in before
        ]
        out = func(*args, **kwargs)
        self.graph.record(op, before, keys, out)
        return out


def trace_first(obj: Any) -> torch.Tensor | None:
    if isinstance(obj, dict) or hasattr(obj, "to_tuple"):
        obj = tuple(obj.values()) if isinstance(obj, dict) else obj.to_tuple()
    return next(iter(trace_tensors(obj)), None)


def trace_hooks(model: nn.Module, graph: TraceGraph) -> list[Any]:
    def pre(module: nn.Module, args: Any, kwargs: Any) -> None:
        graph.stack.append(graph.names.get(id(module), ""))

    def post(module: nn.Module, args: Any, kwargs: Any, output: Any) -> None:
        name = graph.stack.pop() if graph.stack else ""
        inp = trace_first(args) if args else None
        inp = trace_first(kwargs) if inp is None else inp
        out = trace_first(output)
        out_key = graph.key(out) if out is not None else None
        if out_key is not None:
            graph.made_by.setdefault(out_key, []).append(name)
        in_key = graph.key(inp) if inp is not None else None
        graph.calls.append(TraceCall(name, module, in_key, out_key))

    handles = []
    for module in model.modules():
        handles.append(module.register_forward_pre_hook(pre, with_kwargs=True))
        handles.append(module.register_forward_hook(post, with_kwargs=True))
    return handles
