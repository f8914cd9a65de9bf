"""The traced graph read: constants stripped, residual additions, streams, sites.

:class:`TraceReader` walks the graph of :mod:`spectral.torch.model.trace_graph`
backwards: from the readout to the last residual addition, then along the stream through
every addition ``h + f(h)`` (also ``h + c * f(h)`` and parallel branches) and every norm
on it (post-norm) to h_0; each branch's end is the innermost module whose output reaches
the added term changed by constants only. What the rules do not cover is refused in one
line that names it and where it is.
"""

from __future__ import annotations

import math
from typing import NamedTuple

from torch import nn

from spectral.errors import UnsupportedModelError
from spectral.torch.model.trace_graph import (
    TRACE_ADD,
    TRACE_DIV,
    TRACE_MUL,
    TRACE_PASS,
    TRACE_SPLIT,
    TraceCall,
    TraceGraph,
    TraceKey,
    trace_norm,
)


UNTRACEABLE = "could not run"
"""Starts the trace's refusal of a model it could not run at all (no forward pass, an input
it cannot build): no reading of the structure, unlike its other refusals."""

NO_ADAPTER_HELPS = "no adapter can place it either"
"""Ends a trace refusal that names a construct no adapter can place (a skip that passes
no module): the advice to pass one is then left out (classify.unplaced_message)."""


class TraceStream(NamedTuple):
    """One residual stream read backwards: its additions, norms and ends."""

    adds: list[tuple[TraceKey, TraceKey, TraceKey]]
    """(sum, stream operand, branch operand), last addition first."""
    norms: list[tuple[str, bool]]
    """(norm, True when it sits on h_0 rather than after an addition)."""
    keys: set[TraceKey]
    """Every tensor the stream is, stripped chains included."""
    end: TraceKey
    """h_L: the stream after its last addition (and its norm, post-norm)."""


class TraceReader:
    """Reads a traced graph: strips constants, finds additions, streams and sites."""

    def __init__(self, graph: TraceGraph) -> None:
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
            if node.op not in TRACE_PASS | TRACE_MUL | TRACE_DIV:
                return chain
            k = node.parents[0]
            chain.append(k)

    def factor(self, chain: list[TraceKey]) -> float:
        nodes = [self.g.nodes.get(k) for k in chain]
        return math.prod(
            n.factor for n in nodes if n is not None and n.op in TRACE_MUL | TRACE_DIV
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
        if node is None or node.op not in TRACE_ADD or node.params:
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
        if node is None or node.op not in TRACE_ADD or len(node.parents) != 2:
            return [k]
        if node.params or self.residual(chain[-1]) is not None:
            return [k]
        return [t for parent in node.parents for t in self.terms(parent)]

    def norm_call(self, chain: list[TraceKey]) -> TraceCall | None:
        for c in chain:
            for call in self.outs.get(c, ()):
                if trace_norm(call.module) and call.inp is not None:
                    return call
        return None

    def where(self, k: TraceKey) -> str:
        node = self.g.nodes.get(k)
        return node.scope if node is not None and node.scope else "the model"

    def refuse_gated(self, k: TraceKey) -> None:
        """``g * h + f(h)``: an addition whose one operand is the stream multiplied by
        something it computed or learned, the other a branch that reads the stream."""
        node = self.g.nodes.get(k)
        if node is None or node.op not in TRACE_ADD or len(node.parents) != 2:
            return
        for a, b in (node.parents, node.parents[::-1]):
            gate = self.g.nodes.get(self.strip(a)[-1])
            if gate is None or gate.op not in TRACE_MUL | TRACE_DIV:
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
        if node is None or node.op not in TRACE_MUL | TRACE_DIV:
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

    def walk(self, end: TraceKey) -> TraceStream:
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
        return TraceStream(adds, norms, keys, end)

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

    def off_stream(self, streams: list[TraceStream]) -> set[int]:
        """id() of the parameters computed with data that no residual stream feeds: every
        call using them has tensor operands, none computed from a stream (a DiT's timestep
        MLP and label table, and each block's adaLN map, read the conditioning only). A
        parameter used on its own (Mamba's ``exp(A_log)``) is not among them."""
        children: dict[TraceKey, list[TraceKey]] = {}
        for key, node in self.g.nodes.items():
            for parent in node.parents:
                children.setdefault(parent, []).append(key)
        todo = [k for st in streams for k in st.keys]
        fed = set(todo)
        while todo:
            for child in children.get(todo.pop(), ()):
                if child not in fed:
                    fed.add(child)
                    todo.append(child)
        data: set[int] = set()
        reading: set[int] = set()
        for node in self.g.nodes.values():
            if not node.parents:
                continue
            data.update(node.params)
            if any(parent in fed for parent in node.parents):
                reading.update(node.params)
        return data - reading

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
    ) -> tuple[TraceStream, list[TraceStream], TraceCall, list[TraceKey]]:
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
        others: list[TraceStream] = []
        for k in sorted(self.g.nodes, key=self._seq, reverse=True):
            if k in done or self.g.nodes[k].op not in TRACE_ADD:
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
                name, factor, every = self.gated(term)
            if name is None:
                last = self.strip(term)[-1]
                node = self.g.nodes.get(last)
                op = node.op if node is not None else "an input"
                earlier = self.residual(last)
                if earlier is not None:  # an earlier sum h + f(h): a skip
                    after = self.site(earlier[1])[0] or self.where(last)
                    raise UnsupportedModelError(
                        f"an addition at `{self.where(branch)}` adds two values of the "
                        f"residual stream itself (one is the sum after `{after}`): an "
                        "additive skip, as a U-net's, not a branch that ends in a module; "
                        "alpha_hidden goes on a branch's last module and this skip has none "
                        "(a skip that passes a module, a Linear, is placed as a branch end; "
                        f"one joined by concatenation is no addition): {NO_ADAPTER_HELPS}"
                    )
                raise UnsupportedModelError(
                    f"the branch added at `{self.where(branch)}` ends in `{op}`, not in a "
                    "module's output: no place for alpha_hidden (wrap the last step of "
                    "the branch in a module)"
                )
            found.append((name, factor, every))
        return found

    def gated(self, k: TraceKey) -> tuple[str | None, float, tuple[str, ...]]:
        """A branch that ends in ``gate * proj(a)`` (DiT's adaLN-Zero gate, broadcast over
        the tokens): the site of the map's output, the larger operand, which can carry
        alpha_hidden as well (the product is linear in it); no site when the operands are
        as large (which one is the gate cannot be told)."""
        node = self.g.nodes.get(self.strip(k)[-1])
        if node is None or node.op not in TRACE_MUL or len(node.parents) != 2:
            return None, 1.0, ()
        sized = sorted(node.parents, key=lambda p: self.g.sizes.get(p, 0))
        if self.g.sizes.get(sized[0], 0) >= self.g.sizes.get(sized[1], 0):
            return None, 1.0, ()
        return self.site(sized[1])

    def inputs(self, st: TraceStream) -> list[tuple[str, float, tuple[str, ...]]]:
        """The site of h_0 (or of each of its parts): where alpha_in goes."""
        h0 = st.adds[-1][1]
        name, factor, _ = self.site(h0)
        if name is not None:
            return [(name, factor, self.same(h0))]
        found: list[tuple[str, float, tuple[str, ...]]] = []
        for term in self.terms(h0):
            name, factor, _ = self.site(term)
            if name is None and self.strip(term)[-1][0] in self.g.buffers:
                continue  # a constant table (DiT's sin-cos positions): not the input
            if name is None:
                stem = self.stem(term)
                if not stem:
                    self.refuse_h0(st, term)
                found.append((stem[0], 1.0, (stem[0],)))
                continue
            found.append((name, factor, self.same(term)))
        return found

    def refuse_h0(self, st: TraceStream, term: TraceKey) -> None:
        """A part of h_0 that no input layer makes: the model's input itself, or a
        function of two tensors or of a parameter outside any module."""
        where = self.where(st.adds[-1][0])
        node = self.g.nodes.get(self.strip(term)[-1])
        if node is None:
            raise UnsupportedModelError(
                f"h_0 of the stream at `{where}` holds the model's input itself, through "
                "no input layer: no place for alpha_in"
            )
        what = "a parameter outside any module" if node.params else "two tensors"
        raise UnsupportedModelError(
            f"h_0 of the stream at `{where}` is made by `{node.op}` of {what}, not by an "
            "input layer's output: no place for alpha_in"
        )

    def stem(self, term: TraceKey) -> list[str]:
        """The modules of a stem that makes a part of h_0 through functions of one
        tensor (Whisper's conv1 -> gelu -> conv2 -> gelu), from the one that reads the
        model's input (the input layer: alpha_in) to the last (width -> width maps
        outside the stream: outer layers); [] when the part is made otherwise (from
        two tensors, or by a parameter used outside a module)."""
        modules: list[str] = []
        k = self.strip(term)[-1]
        while True:
            calls = [c for c in self.outs.get(k, ()) if c.inp is not None]
            if calls:
                modules.append(calls[-1].name)
                k = self.strip(calls[-1].inp)[-1]  # type: ignore[arg-type]
                continue
            node = self.g.nodes.get(k)
            if node is None:  # the model's input: the last module met reads it
                return modules[::-1]
            if node.params or len(node.parents) != 1:
                return []
            k = self.strip(node.parents[0])[-1]

    def outer(self, st: TraceStream) -> list[str]:
        """The stem modules after the input layer on the way to h_0 (outer layers)."""
        h0 = st.adds[-1][1]
        if self.site(h0)[0] is not None:
            return []
        return [
            m
            for term in self.terms(h0)
            if self.site(term)[0] is None
            for m in self.stem(term)[1:]
        ]

    def normed(self, streams: list[TraceStream]) -> list[tuple[str, str]]:
        """(norm, module) for every norm inside a branch whose input is the module's
        output up to layout ops, constant factors and a split into parts (not a norm
        that reads a stream: a pre-norm, a final norm)."""
        on = set().union(*(st.keys for st in streams))
        on.update(a for st in streams for add in st.adds for a in add[:2])
        found = []
        for call in self.g.calls:
            if call.inp is None or set(self.strip(call.inp)) & on:
                continue
            if not trace_norm(call.module):
                continue
            k: TraceKey | None = call.inp
            while k is not None and k not in self.g.made_by:
                node = self.g.nodes.get(k)
                ops = TRACE_PASS | TRACE_MUL | TRACE_DIV | TRACE_SPLIT
                if node is None or node.params or node.op not in ops:
                    k = None
                elif len(node.parents) == 1:
                    k = node.parents[0]
                else:
                    k = None
            if k is not None and k not in on:
                found.append((call.name, self.g.made_by[k][0]))
        return list(dict.fromkeys(found))

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
                and n.op in TRACE_MUL | TRACE_DIV
                and len(n.parents) == 1
                and not n.params
            ]
            if len(users) != 1:
                # read further (a soft-cap: c * tanh(x / c)): no constant factor
                used = any(k in n.parents for n in self.g.nodes.values())
                return 1.0 if used and factor != 1.0 else factor
            k, node = users[0]
            factor *= node.factor
