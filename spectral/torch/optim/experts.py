"""Fused experts as matrices: a whole-matrix optimizer steps each expert's matrix on its own.

Mixtures of experts store their experts fused, one 3-D parameter per projection
(Hugging Face's ``gate_up_proj (E, 2I, n)``, ``down_proj (E, n, I)``). The hidden rules hold
per expert matrix, so an optimizer whose step reads the whole matrix (Muon's
orthogonalisation, Shampoo's and SOAP's preconditioners, SSO's radius, LAMB's trust ratio,
Adafactor's factored moments) must see E matrices, never a flattened stack.
:class:`SlicedOptimizer` hands the real implementation one leaf tensor per expert that
shares storage with the 3-D parameter (``p[e]``, or ``p[e].T`` for the (E, in, out)
layout, so each matrix is read as (n_out, n_in)), points its gradient at ``p.grad[e]``
before each step and steps them all in one call of the real optimizer. Element-wise
optimizers (AdamW, Lion, SGD, ...) step the 3-D tensor as it is: the same update.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Mapping
from typing import Any

import torch
from torch import nn

from spectral.errors import ConfigError
from spectral.torch.optim.sharded import InnerOptimizer

TRANSPOSED_EXPERTS = frozenset({"Llama4TextExperts"})
"""Expert modules that compute x @ W[e] (weights (E, in, out)) without saying so; the
others in transformers 5 say it with ``is_transposed`` (GPT-OSS, Aria) or use F.linear."""


def expert_layout(module: nn.Module, p: torch.Tensor) -> str | None:
    """ "out_in" (E, n_out, n_in), "in_out" (E, n_in, n_out), or None: not fused experts.

    A 3-D parameter of a module whose class name contains "Experts" (Hugging Face's fused
    experts) is E expert matrices; every other 3-D parameter (a Conv1d kernel) is not.
    """
    if p.ndim != 3 or "Experts" not in type(module).__name__:
        return None
    transposed = getattr(module, "is_transposed", False) is True
    if transposed or type(module).__name__ in TRANSPOSED_EXPERTS:
        return "in_out"
    return "out_in"


def expert_fans(p: torch.Tensor, layout: str) -> tuple[int, int]:
    """(n_out, n_in) of one expert matrix."""
    if layout == "in_out":
        return int(p.shape[2]), int(p.shape[1])
    return int(p.shape[1]), int(p.shape[2])


def _slot(p: torch.Tensor, e: int, transposed: bool) -> torch.Tensor:
    """Expert e's matrix of p as (n_out, n_in), sharing p's storage (no copy)."""
    view = p.detach()[e]
    return view.t() if transposed else view


class SlicedOptimizer(InnerOptimizer):
    """A whole-matrix optimizer over parameters some of which are fused experts.

    factory(groups) builds the real implementation. A parameter of a group that carries
    "expert_layout" (3-D, (E, ., .)) becomes E leaf tensors, one per expert matrix, each a
    view of the parameter read as (n_out, n_in); every other parameter is handed over as
    it is. step() points each view's gradient at its slice of the parameter's gradient and
    steps the real optimizer once over all of them: each expert is updated exactly as a
    separate nn.Linear of that shape would be.

    param_groups hold the model's parameters (schedulers, check() and checkpoints see an
    ordinary optimizer); hyperparameters are copied to the implementation's groups before
    each step and back after it. state_dict() keys the state by those parameters' indices;
    a fused parameter's per-expert states are stacked along a first dimension E (a state
    of the matrix's shape comes back in the parameter's layout), so torch.distributed
    .checkpoint and CheckpointState save and load it as tensors.
    """

    def __init__(
        self,
        factory: Callable[[list[dict[str, Any]]], torch.optim.Optimizer],
        groups: list[dict[str, Any]],
    ):
        self._slots: list[tuple[torch.Tensor, list[torch.Tensor] | None, bool]] = []
        self._inner_index: list[list[int]] = []
        inner_groups, count = [], 0
        for group in groups:
            layout = group.get("expert_layout")
            mine: list[torch.Tensor] = []
            for p in group["params"]:
                if layout is None or p.ndim != 3:
                    self._slots.append((p, None, False))
                    self._inner_index.append([count])
                    mine.append(p)
                    count += 1
                    continue
                transposed = layout == "in_out"
                views = [
                    _slot(p, e, transposed).requires_grad_(p.requires_grad)
                    for e in range(p.shape[0])
                ]
                self._slots.append((p, views, transposed))
                self._inner_index.append(list(range(count, count + len(views))))
                mine += views
                count += len(views)
            inner_groups.append({**group, "params": mine})
        self.inner = factory(inner_groups)
        """The real implementation, over the expert matrices and the other parameters."""
        outer = [
            {**inner, "params": list(group["params"])}
            for inner, group in zip(self.inner.param_groups, groups, strict=True)
        ]
        self._ready = False
        super().__init__(outer, dict(self.inner.defaults))
        self._ready = True

    def _views(self) -> list[tuple[torch.Tensor, list[torch.Tensor], bool]]:
        return [(p, v, t) for p, v, t in self._slots if v is not None]

    @property  # type: ignore[override]  # a view of the inner state, not a defaultdict
    def state(self) -> dict[torch.Tensor, Any]:
        """Model parameter -> its state (a fused parameter's: stacked over its experts)."""
        inner = self.inner.state
        out: dict[torch.Tensor, Any] = {}
        for p, views, transposed in self._slots:
            if views is None:
                if inner.get(p):
                    out[p] = inner[p]
            elif any(inner.get(v) for v in views):
                out[p] = _stack([inner.get(v, {}) for v in views], p, transposed)
        return out

    @state.setter
    def state(self, value: Any) -> None:
        pass  # torch.optim.Optimizer.__init__ assigns one; the real one is the inner's

    @torch.no_grad()
    def step(self, closure: Callable[[], Any] | None = None) -> Any:
        loss = None
        if closure is not None:
            with torch.enable_grad():
                loss = closure()
        self._copy_groups(to_inner=True)
        for p, views, transposed in self._views():
            grad = p.grad
            for e, view in enumerate(views):
                view.data = _slot(p, e, transposed)  # p may have moved (model.to(...))
                view.grad = None if grad is None else _slot(grad, e, transposed)
        self.inner.step()
        self._copy_groups(to_inner=False)
        for p, views, transposed in self._views():
            for e, view in enumerate(views):
                target = _slot(p, e, transposed)
                if view.data_ptr() != target.data_ptr():
                    # an implementation that assigned p.data: put its result in place
                    target.copy_(view)
                    view.data = target
                view.grad = None
        return loss

    def state_dict(self) -> dict[str, Any]:
        saved = self.inner.state_dict()
        inner_state = saved["state"]
        state: dict[int, Any] = {}
        for i, (p, views, transposed) in enumerate(self._slots):
            per = [inner_state.get(j, {}) for j in self._inner_index[i]]
            if not any(per):
                continue
            state[i] = per[0] if views is None else _stack(per, p, transposed)
        groups, start = [], 0
        for group, inner in zip(self.param_groups, saved["param_groups"], strict=True):
            values = {k: v for k, v in inner.items() if k != "params"}
            values.update({k: v for k, v in group.items() if k != "params"})
            values["params"] = list(range(start, start + len(group["params"])))
            start += len(group["params"])
            groups.append(values)
        return {"state": state, "param_groups": groups}

    def load_state_dict(self, state_dict: Mapping[str, Any]) -> None:
        saved = list(state_dict["param_groups"])
        sizes = [len(g["params"]) for g in self.param_groups]
        if [len(g["params"]) for g in saved] != sizes:
            raise ConfigError(
                f"optimizer state has groups of {[len(g['params']) for g in saved]} "
                f"parameters; this optimizer has {sizes}"
            )
        ids = [i for g in saved for i in g["params"]]
        state = state_dict["state"]
        inner_state: dict[int, Any] = {}
        for i, (p, views, transposed) in enumerate(self._slots):
            value = state.get(ids[i])
            if not value:
                continue
            if views is None:
                inner_state[self._inner_index[i][0]] = value
                continue
            for e, j in enumerate(self._inner_index[i]):
                inner_state[j] = _unstack(value, e, p, transposed)
        inner_groups, start = [], 0
        for group, inner in zip(saved, self.inner.param_groups, strict=True):
            values = {k: v for k, v in group.items() if k != "params"}
            values["params"] = list(range(start, start + len(inner["params"])))
            start += len(inner["params"])
            inner_groups.append(values)
        self.inner.load_state_dict({"state": inner_state, "param_groups": inner_groups})
        for outer, inner in zip(
            self.param_groups, self.inner.param_groups, strict=True
        ):
            outer.update({k: v for k, v in inner.items() if k != "params"})

    def __repr__(self) -> str:
        return f"SlicedOptimizer({self.inner!r})"


def _stack(
    per: list[Mapping[str, Any]], p: torch.Tensor, transposed: bool
) -> dict[str, Any]:
    """One expert state per matrix -> one state: tensors stacked on a first dimension E
    (a matrix-shaped one in p's layout), anything else as a list."""
    out: dict[str, Any] = {}
    for key in dict.fromkeys(k for state in per for k in state):
        values = [state.get(key) for state in per]
        tensors = [v for v in values if isinstance(v, torch.Tensor)]
        if len(tensors) == len(values) and len({tuple(t.shape) for t in tensors}) == 1:
            stacked = torch.stack([t.detach() for t in tensors])
            if (
                transposed
                and stacked.ndim == 3
                and tuple(stacked.shape[1:]) == tuple(p.shape[1:][::-1])
            ):
                stacked = stacked.transpose(1, 2).contiguous()
            out[key] = stacked
        else:
            out[key] = values
    return out


def _unstack(
    state: Mapping[str, Any], e: int, p: torch.Tensor, transposed: bool
) -> dict[str, Any]:
    """Expert e's state out of a stacked one (the inverse of _stack)."""
    out: dict[str, Any] = {}
    for key, value in state.items():
        if isinstance(value, torch.Tensor):
            piece = value[e]
            if transposed and value.ndim == 3 and tuple(value.shape) == tuple(p.shape):
                piece = piece.t()
            out[key] = piece.clone()
        elif isinstance(value, (list, tuple)):
            if value[e] is not None:
                out[key] = value[e]
        else:
            out[key] = value
    return out


class SlicedFactory:
    """factory(groups, **kwargs) -> SlicedOptimizer over factory's implementation.

    A class rather than a closure, so the optimizer that holds it pickles and deep-copies.
    """

    def __init__(self, factory: Callable[..., torch.optim.Optimizer]):
        self.factory = factory

    def __call__(
        self, groups: list[dict[str, Any]], **kwargs: Any
    ) -> torch.optim.Optimizer:
        return SlicedOptimizer(functools.partial(self.factory, **kwargs), groups)

    def __repr__(self) -> str:
        return f"SlicedFactory({self.factory!r})"
