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
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any, NamedTuple

import torch
from torch import nn
from torch.overrides import TorchFunctionMode

from spectral.errors import UnsupportedModelError
from spectral.families.adapter import Adapter
from spectral.torch.model.shapes import hf_model, is_norm

TraceKey = tuple[int, int]
"""A tensor as it was at one moment: (id, version); an in-place op makes a new key."""

_ADD_OPS = frozenset({"add", "__add__", "__radd__", "__iadd__", "add_"})
_MUL_OPS = frozenset({"mul", "__mul__", "__rmul__", "__imul__", "mul_"})
_DIV_OPS = frozenset({"div", "__truediv__", "__itruediv__", "div_", "true_divide"})
_PASS_OPS = frozenset(
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
_MATMUL_OPS = frozenset(
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


class _TraceGraph:
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
                invert = op in _DIV_OPS and i == 1 and value != 0
                factor *= 1.0 / value if invert else value
            elif id(t) in self.params:
                params.append(id(t))
                self.param_ops.setdefault(id(t), set()).add(op)
            else:
                parents.append(k)
        self.seq += 1
        scope = self.stack[-1] if self.stack else ""
        node = TraceNode(op, tuple(parents), tuple(params), factor, scope, self.seq)
        for t in _trace_tensors(out):
            k = self.key(t)
            if k not in parents:  # an op that returned its input unchanged adds nothing
                self.nodes[k] = node


def _trace_norm(module: nn.Module) -> bool:
    """A norm (LayerNorm, RMSNorm, GroupNorm, BatchNorm, InstanceNorm, *Norm)."""
    return is_norm(module) or isinstance(module, nn.modules.batchnorm._NormBase)


def _trace_tensors(obj: Any) -> Iterator[torch.Tensor]:
    if isinstance(obj, torch.Tensor):
        yield obj
    elif isinstance(obj, (list, tuple)):
        for item in obj:
            yield from _trace_tensors(item)
    elif isinstance(obj, dict):
        for item in obj.values():
            yield from _trace_tensors(item)


def _trace_operands(obj: Any) -> Iterator[Any]:
    """Tensors and plain numbers among a call's arguments (bools are no constants)."""
    number = isinstance(obj, (int, float)) and not isinstance(obj, bool)
    if isinstance(obj, torch.Tensor) or number:
        yield obj
    elif isinstance(obj, (list, tuple)):
        for item in obj:
            yield from _trace_operands(item)
    elif isinstance(obj, dict):
        for item in obj.values():
            yield from _trace_operands(item)


class _TraceRecorder(TorchFunctionMode):
    def __init__(self, graph: _TraceGraph) -> None:
        super().__init__()
        self.graph = graph

    def __torch_function__(
        self, func: Any, types: Any, args: Any = (), kwargs: Any = None
    ) -> Any:
        kwargs = kwargs or {}
        op = getattr(func, "__name__", "")
        if op in ("__get__", "__set__", "size", "dim", "numel", "__len__"):
            return func(*args, **kwargs)
        before = list(_trace_operands((args, kwargs)))
        keys = [
            self.graph.key(t) if isinstance(t, torch.Tensor) else None for t in before
        ]
        out = func(*args, **kwargs)
        self.graph.record(op, before, keys, out)
        return out


def _trace_first(obj: Any) -> torch.Tensor | None:
    if isinstance(obj, dict) or hasattr(obj, "to_tuple"):
        obj = tuple(obj.values()) if isinstance(obj, dict) else obj.to_tuple()
    return next(iter(_trace_tensors(obj)), None)


def _trace_hooks(model: nn.Module, graph: _TraceGraph) -> list[Any]:
    def pre(module: nn.Module, args: Any, kwargs: Any) -> None:
        graph.stack.append(graph.names.get(id(module), ""))

    def post(module: nn.Module, args: Any, kwargs: Any, output: Any) -> None:
        name = graph.stack.pop() if graph.stack else ""
        inp = _trace_first(args) if args else None
        inp = _trace_first(kwargs) if inp is None else inp
        out = _trace_first(output)
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


class _TraceStream(NamedTuple):
    """One residual stream read backwards: its additions, norms and ends."""

    adds: list[tuple[TraceKey, TraceKey, TraceKey]]
    """(sum, stream operand, branch operand), last addition first."""
    norms: list[tuple[str, bool]]
    """(norm, True when it sits on h_0 rather than after an addition)."""
    keys: set[TraceKey]
    """Every tensor the stream is, stripped chains included."""
    end: TraceKey
    """h_L: the stream after its last addition (and its norm, post-norm)."""


class _TraceReader:
    """Reads a traced graph: strips constants, finds additions, streams and sites."""

    def __init__(self, graph: _TraceGraph) -> None:
        self.g = graph
        self.outs: dict[TraceKey, list[TraceCall]] = {}
        for call in graph.calls:
            if call.out is not None:
                self.outs.setdefault(call.out, []).append(call)

    def strip(self, k: TraceKey) -> list[TraceKey]:
        """``k`` and what it was made from through layout ops and constant factors."""
        chain = [k]
        while True:
            node = self.g.nodes.get(k)
            if node is None or node.params or len(node.parents) != 1:
                return chain
            if node.op not in _PASS_OPS | _MUL_OPS | _DIV_OPS:
                return chain
            k = node.parents[0]
            chain.append(k)

    def factor(self, chain: list[TraceKey]) -> float:
        nodes = [self.g.nodes.get(k) for k in chain]
        return math.prod(
            n.factor for n in nodes if n is not None and n.op in _MUL_OPS | _DIV_OPS
        )

    def site(self, k: TraceKey) -> tuple[str | None, float, tuple[str, ...]]:
        """(the innermost module whose output reaches ``k`` changed by constants only,
        the constant it is multiplied by on the way, every module with that output)."""
        chain = self.strip(k)
        every = tuple(n for c in chain for n in self.g.made_by.get(c, ()))
        for i, c in enumerate(chain):
            if c in self.g.made_by:
                return self.g.made_by[c][0], self.factor(chain[: i + 1]), every
        return None, 1.0, every

    def same(self, k: TraceKey) -> tuple[str, ...]:
        """Every module whose output scaled scales ``k`` alike: those with ``k``'s output
        up to constants, the parts of a sum of them, the inputs of a linear map with no
        bias (scaling its input scales its output)."""
        out: list[str] = []
        todo, seen = [k], set()
        while todo:
            chain = self.strip(todo.pop())
            if chain[-1] in seen:
                continue
            seen.add(chain[-1])
            out += [n for c in chain for n in self.g.made_by.get(c, ())]
            for c in chain:
                for call in self.outs.get(c, ()):
                    linear = isinstance(
                        call.module, (nn.Linear, nn.modules.conv._ConvNd)
                    )
                    if linear and call.module.bias is None and call.inp is not None:
                        todo.append(call.inp)
            terms = self.terms(chain[-1], split=True)
            if len(terms) > 1:
                todo += terms
        return tuple(dict.fromkeys(out))

    def reaches(self, x: TraceKey, y: TraceKey) -> bool:
        """Whether tensor ``x`` is among the tensors ``y`` was computed from."""
        floor = self.g.nodes[x].seq if x in self.g.nodes else 0
        todo, seen = [y], {y}
        while todo:
            k = todo.pop()
            if k == x:
                return True
            node = self.g.nodes.get(k)
            if node is None or node.seq < floor:
                continue
            for parent in node.parents:
                if parent not in seen:
                    seen.add(parent)
                    todo.append(parent)
        return False

    def residual(self, k: TraceKey) -> tuple[TraceKey, TraceKey] | None:
        """(stream, branch) when ``k`` is an addition of a tensor and something computed
        from it, else None."""
        node = self.g.nodes.get(k)
        if node is None or node.op not in _ADD_OPS or node.params:
            return None
        if len(node.parents) != 2 or node.parents[0] == node.parents[1]:
            return None
        a, b = node.parents
        for stream, branch in ((a, b), (b, a)):
            if self.reaches(stream, branch):
                return stream, branch
        for stream, branch in ((a, b), (b, a)):
            # parallel branches summed one at a time: (h + f(h)) + g(h)
            inner = self.residual(self.strip(stream)[-1])
            if inner is not None and self.reaches(inner[0], branch):
                return stream, branch
        return None

    def terms(self, k: TraceKey, split: bool = False) -> list[TraceKey]:
        """The terms of a sum of independent parts (parallel branches, h_0's parts); a
        module's output is one term unless ``split``."""
        chain = self.strip(k)
        if not split and any(c in self.g.made_by for c in chain):
            return [k]
        node = self.g.nodes.get(chain[-1])
        if node is None or node.op not in _ADD_OPS or len(node.parents) != 2:
            return [k]
        if node.params or self.residual(chain[-1]) is not None:
            return [k]
        return [t for parent in node.parents for t in self.terms(parent)]

    def norm_call(self, chain: list[TraceKey]) -> TraceCall | None:
        for c in chain:
            for call in self.outs.get(c, ()):
                if _trace_norm(call.module) and call.inp is not None:
                    return call
        return None

    def where(self, k: TraceKey) -> str:
        node = self.g.nodes.get(k)
        return node.scope if node is not None and node.scope else "the model"

    def refuse_gated(self, k: TraceKey) -> None:
        """``g * h + f(h)``: an addition whose one operand is the stream multiplied by
        something it computed or learned, the other a branch that reads the stream."""
        node = self.g.nodes.get(k)
        if node is None or node.op not in _ADD_OPS or len(node.parents) != 2:
            return
        for a, b in (node.parents, node.parents[::-1]):
            gate = self.g.nodes.get(self.strip(a)[-1])
            if gate is None or gate.op not in _MUL_OPS | _DIV_OPS:
                continue
            if len(gate.parents) + len(gate.params) < 2:
                continue
            branch = all(self.site(t)[0] is not None for t in self.terms(b))
            if branch and any(self.reaches(p, b) for p in gate.parents):
                self.refuse_gate(a)

    def refuse_gate(self, stream: TraceKey) -> None:
        """A stream multiplied by something computed (a learned gate) before the add."""
        k = self.strip(stream)[-1]
        node = self.g.nodes.get(k)
        if node is None or node.op not in _MUL_OPS | _DIV_OPS:
            return
        if len(node.parents) + len(node.params) < 2 or self.norm_call([k]):
            return
        what = "a learned gate" if node.params else "a computed tensor"
        raise UnsupportedModelError(
            f"the stream is multiplied by {what} before the add at `{self.where(k)}`: "
            "no rule for a multiplicative residual"
        )

    def refuse_between(self, k: TraceKey) -> None:
        """A function the stream passes through between two additions (a ReLU after
        the add, as in the first ResNets) is no residual the rules cover."""
        node = self.g.nodes.get(k)
        if node is None or k in self.g.made_by or not node.parents:
            return
        todo, seen = list(node.parents), set(node.parents)
        while todo:
            parent = todo.pop()
            if self.residual(parent) is not None:
                raise UnsupportedModelError(
                    f"the stream passes through `{node.op}` at `{self.where(k)}` "
                    "between two additions: no rule for a function applied to the "
                    "residual stream itself"
                )
            up = self.g.nodes.get(parent)
            for grand in up.parents if up is not None else ():
                if grand not in seen:
                    seen.add(grand)
                    todo.append(grand)

    def walk(self, end: TraceKey) -> _TraceStream:
        """The stream that ``end`` (a sum, or a norm of one) is on, read backwards."""
        adds: list[tuple[TraceKey, TraceKey, TraceKey]] = []
        found: list[tuple[str, int]] = []
        keys: set[TraceKey] = set()
        k = end
        while True:
            chain = self.strip(k)
            keys.update(chain)
            res = self.residual(chain[-1])
            if res is not None:
                self.refuse_gate(res[0])
                adds.append((chain[-1], *res))
                k = res[0]
                continue
            call = self.norm_call(chain)
            if call is None or call.inp is None:
                self.refuse_gated(chain[-1])
                self.refuse_between(chain[-1])
                break
            found.append((call.name, len(adds)))
            k = call.inp
        # norms met after the earliest addition (walking back) sit on h_0
        norms = [(name, bool(adds) and seen == len(adds)) for name, seen in found]
        return _TraceStream(adds, norms, keys, end)

    def ancestors(self, starts: list[TraceKey], stop: set[TraceKey]) -> set[int]:
        """id() of every parameter the tensors ``starts`` were computed from, not
        looking past the tensors in ``stop``."""
        found: set[int] = set()
        todo, seen = list(starts), set(starts)
        while todo:
            node = self.g.nodes.get(todo.pop())
            if node is None:
                continue
            found.update(node.params)
            for parent in node.parents:
                if parent not in seen and parent not in stop:
                    seen.add(parent)
                    todo.append(parent)
        return found

    def readout(self) -> TraceCall:
        """The last module with parameters of its own to run: it makes the logits."""
        for call in reversed(self.g.calls):
            if call.name and any(True for _ in call.module.parameters(recurse=False)):
                if call.inp is None:
                    break
                return call
        raise UnsupportedModelError(
            "no residual stream found: no module with parameters reads a tensor last "
            "(the logits are no module's output)"
        )

    def head(self, start: TraceKey) -> tuple[TraceKey, list[TraceKey]]:
        """(the last residual addition before the readout, the tensors from it to the
        readout's input, nearest the addition first)."""
        path: list[TraceKey] = []
        k = start
        while True:
            chain = self.strip(k)
            path += chain
            if self.residual(chain[-1]) is not None:
                return chain[-1], path[::-1]
            self.refuse_gated(chain[-1])
            node = self.g.nodes.get(chain[-1])
            if node is None or not node.parents:
                raise UnsupportedModelError(
                    "no residual stream found: the readout's input is computed from no "
                    "addition h + f(h) (a model without residual branches has no "
                    "alpha_hidden to place)"
                )
            k = max(node.parents, key=lambda p: (self.g.sizes.get(p, 0), self._seq(p)))

    def _seq(self, k: TraceKey) -> int:
        node = self.g.nodes.get(k)
        return node.seq if node is not None else 0

    def streams(
        self,
    ) -> tuple[_TraceStream, list[_TraceStream], TraceCall, list[TraceKey]]:
        """(the stream the readout reads, other streams its branches read, the readout,
        the tensors from h_L to the readout's input)."""
        out = self.readout()
        assert out.inp is not None
        last, path = self.head(out.inp)
        end = last
        stream = self.residual(last)
        if stream is not None and self.norm_call(self.strip(stream[0])) is not None:
            for k in path[1:]:  # post-norm: h_L is the norm of the last sum
                if self.norm_call([k]) is not None:
                    end = k
                    break
        main = self.walk(end)
        scopes = [self.where(a) for a, _, _ in main.adds]
        done = {a for a, _, _ in main.adds}
        others: list[_TraceStream] = []
        for k in sorted(self.g.nodes, key=self._seq, reverse=True):
            if k in done or self.g.nodes[k].op not in _ADD_OPS:
                continue
            scope = self.where(k)
            if any(scope.startswith(s + ".") for s in scopes) or "" in scopes:
                continue
            if self.residual(k) is None:
                continue
            try:
                other = self.walk(k)
                for _, _, branch in other.adds:
                    self.ends(branch)
            except UnsupportedModelError:
                continue
            done.update(a for a, _, _ in other.adds)
            if len(other.adds) >= 2:
                others.append(other)
                scopes += [self.where(a) for a, _, _ in other.adds]
        return main, others, out, path

    def ends(self, branch: TraceKey) -> list[tuple[str, float, tuple[str, ...]]]:
        """The site of every term of a branch: where its alpha_hidden goes."""
        found = []
        for term in self.terms(branch):
            name, factor, every = self.site(term)
            if name is None:
                last = self.strip(term)[-1]
                node = self.g.nodes.get(last)
                op = node.op if node is not None else "an input"
                raise UnsupportedModelError(
                    f"the branch added at `{self.where(branch)}` ends in `{op}`, not in a "
                    "module's output: no place for alpha_hidden (wrap the last step of "
                    "the branch in a module)"
                )
            found.append((name, factor, every))
        return found

    def inputs(self, st: _TraceStream) -> list[tuple[str, float, tuple[str, ...]]]:
        """The site of h_0 (or of each of its parts): where alpha_in goes."""
        h0 = st.adds[-1][1]
        name, factor, _ = self.site(h0)
        if name is not None:
            return [(name, factor, self.same(h0))]
        found = []
        for term in self.terms(h0):
            name, factor, _ = self.site(term)
            if name is None:
                node = self.g.nodes.get(self.strip(term)[-1])
                op = node.op if node is not None else "the model's input"
                raise UnsupportedModelError(
                    f"h_0 of the stream at `{self.where(st.adds[-1][0])}` is made by "
                    f"`{op}`, not by a module's output: no place for alpha_in"
                )
            found.append((name, factor, self.same(term)))
        return found

    def readers(self, k: TraceKey) -> list[TraceCall]:
        """Every module call whose input is ``k`` up to constants, innermost first."""
        chain = set(self.strip(k))
        return [c for c in self.g.calls if c.inp is not None and c.inp in chain]

    def after(self, k: TraceKey) -> float:
        """The constant the model multiplies ``k`` by before anything else reads it."""
        factor = 1.0
        while True:
            users = [
                (key, n)
                for key, n in self.g.nodes.items()
                if k in n.parents
                and n.op in _MUL_OPS | _DIV_OPS
                and len(n.parents) == 1
                and not n.params
            ]
            if len(users) != 1:
                # read further (a soft-cap: c * tanh(x / c)): no constant factor
                used = any(k in n.parents for n in self.g.nodes.values())
                return 1.0 if used and factor != 1.0 else factor
            k, node = users[0]
            factor *= node.factor


def _trace_region(
    reader: _TraceReader, main: _TraceStream, others: list[_TraceStream], out: TraceCall
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

    for st in (main, *others):
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
    name: str, p: nn.Parameter, owner: nn.Module, where: str, ops: set[str]
) -> str:
    """A parameter's role from where its data flows and how it is used."""
    matrix = p.ndim >= 2 and (
        p is getattr(owner, "weight", None) or bool(ops & _MATMUL_OPS)
    )
    if where == "input":
        return "input_weight" if p.ndim >= 2 else "input_bias"
    if where == "stream":
        return "hidden_bias"
    if _trace_norm(owner) or p is getattr(owner, "bias", None):
        return "hidden_bias"
    if matrix:
        return "hidden_weight"
    return "hidden_bias" if name.endswith("bias") else "hidden_vector"


def _trace_roles(
    model: nn.Module,
    graph: _TraceGraph,
    region: dict[int, str],
    out: TraceCall,
    head: list[str],
) -> tuple[tuple[tuple[str, str], ...], tuple[str, ...]]:
    """(parameter name, role) for every parameter the trace places, and the input
    parameters used as tables by no nn.Embedding."""
    roles: list[tuple[str, str]] = []
    tables: list[str] = []
    before_matrix = set()
    for name in head:
        module = model.get_submodule(name)
        if not _trace_norm(module):
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
        elif region[id(p)] == "head":
            if owner_name in before_matrix:
                role = "input_bias"
            else:
                role = "outer_weight" if p.ndim >= 2 else "outer_bias"
        else:
            ops = graph.param_ops.get(id(p), set())
            role = _trace_role(name, p, owner, region[id(p)], ops)
            plain = not isinstance(owner, nn.Embedding)
            if (
                role == "input_weight"
                and plain
                and p is not getattr(owner, "weight", None)
            ):
                tables.append(name)
        roles.append((name, role))
    return tuple(roles), tuple(tables)


def _trace_per_layer(branches: tuple[str, ...]) -> int:
    """Residual branches per layer, from the branch ends' names: a layer is one index of
    a module list (``layers.3``); lists of one length (an encoder's and a decoder's)
    count that length."""
    lengths: dict[str, set[str]] = {}
    for name in branches:
        found = re.match(r"^(.*?)\.?(\d+)(\.|$)", name)
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


def _trace_read(model: nn.Module, graph: _TraceGraph) -> Structure:
    reader = _TraceReader(graph)
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
    roles, tables = _trace_roles(model, graph, region, out, head)
    norms = tuple(n for st in (main, *others) for n, _ in st.norms)
    ends = tuple(dict.fromkeys(branches))
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
    )


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
    batch = trace_batch(model) if example is None else example
    device = next((p.device for p in model.parameters()), torch.device("cpu"))
    if device.type != "cpu":
        batch = _trace_to(batch, device)
    runner = model
    inner = getattr(model, "_orig_mod", None)  # torch.compile: run the eager model
    if isinstance(inner, nn.Module):
        runner = inner
    graph = _TraceGraph(model)
    buffers = [(b, b.detach().clone()) for b in model.buffers()]
    handles = _trace_hooks(model, graph)
    try:
        with torch.random.fork_rng(devices=[]), torch.no_grad(), _TraceRecorder(graph):
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
            f"could not run {type(model).__name__} once to trace its structure: "
            f"{type(exc).__name__}: {first}; pass example_input= or adapter="
        ) from None
    finally:
        for handle in handles:
            handle.remove()
        with torch.no_grad():
            for buffer, saved in buffers:
                buffer.copy_(saved)
    return _trace_read(model, graph)


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
    )


_TRACED: weakref.WeakKeyDictionary[nn.Module, tuple[Any, Structure | Exception]] = (
    weakref.WeakKeyDictionary()
)
"""Model -> (its parameters when traced, the structure or the refusal)."""


def traced_structure(model: nn.Module) -> Structure:
    """:func:`trace_structure` on the batch built from the model, once per model while
    its parameters stay the same objects."""
    state = tuple((n, id(p)) for n, p in model.named_parameters(remove_duplicate=False))
    kept = _TRACED.get(model)
    if kept is None or kept[0] != state:
        try:
            kept = state, trace_structure(model)
        except UnsupportedModelError as exc:
            kept = state, exc
        _TRACED[model] = kept
    if isinstance(kept[1], Exception):
        raise kept[1]
    return kept[1]


def structure_disagreements(
    model: nn.Module, family: Adapter, structure: Structure
) -> list[str]:
    """One line per place where ``family`` (an adapter) and the traced ``structure``
    put a multiplier or the final module differently; a module counts as the traced one
    when its output (for the final module: its input) is the same tensor up to
    constants. [] when they agree."""
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
        if not patterns or not any(found):
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
