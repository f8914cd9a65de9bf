"""Optimizers sharded by FSDP2: whole-matrix optimizers step on whole matrices.

fully_shard turns every parameter into a DTensor that holds a slice of the matrix on
each rank; names, global shapes (DTensor.shape) and hence roles and scale factors stay
as they were. An element-wise optimizer steps on the slices and gets the one-process
update. Newton-Schulz, Kronecker preconditioners and SSO's radius need the whole
matrix: run on slices they either crash or silently compute another update, so their
matrices are gathered and stepped whole (GatheredOptimizer). Which optimizer is which
is the ``sharding`` of its implementation record (spectral.optimizers.entry.TorchImpl).
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Mapping
from typing import Any

import torch
from torch import nn

from spectral.errors import ConfigError, ConfigStateError, UnsupportedModelError
from spectral.optimizers.entry import TorchImpl
from spectral.torch.optim.factories import TorchFactory

Groups = list[dict[str, Any]]
DTensorLike = Any
"""A DTensor (torch ships no stubs for its attributes: to_local, device_mesh, ...)."""

ENTRY_MIXING_OPTIONS = frozenset(
    {"cautious", "adanorm", "use_gc", "stable_adamw", "sn"}
)
"""pytorch-optimizer options that mix the entries of a tensor (a mean or norm over it):
an ELEMENTWISE optimizer given one (in optimizer_kwargs) steps gathered matrices."""


def _dtensor_type() -> type | None:
    """torch's DTensor class; None where torch.distributed is not built in."""
    if not torch.distributed.is_available():
        return None
    from torch.distributed.tensor import DTensor

    return DTensor


def is_sharded(p: torch.Tensor) -> bool:
    dtensor = _dtensor_type()
    return dtensor is not None and isinstance(p, dtensor)


def _row_chunk(t: DTensorLike) -> int | None:
    """Rows per rank where t has fully_shard's default layout, else None.

    That layout: rows split over a 1-D mesh in torch.chunk sizes, ceil(rows / world)
    on every rank but the last ones (which may hold fewer, or none).
    """
    placements = t.placements
    if t.device_mesh.ndim != 1 or len(placements) != 1 or not placements[0].is_shard(0):
        return None
    return -(-t.shape[0] // t.device_mesh.size())


def full_tensor(t: DTensorLike) -> torch.Tensor:
    """The whole of a DTensor on every rank (a collective).

    fully_shard's layout takes one plain all-gather of the padded row blocks: several
    times faster per call than DTensor.full_tensor (which plans a redistribution each
    time), the one used for any other layout.
    """
    chunk = _row_chunk(t)
    if chunk is None:
        return t.full_tensor()
    local = t.to_local()
    if local.shape[0] != chunk or not local.is_contiguous():
        padded = local.new_zeros((chunk, *t.shape[1:]))
        padded[: local.shape[0]] = local
        local = padded
    out = local.new_empty((chunk * t.device_mesh.size(), *t.shape[1:]))
    dist = torch.distributed
    # all_gather_single: the new name (torch 2.13 deprecates the old one)
    gather = getattr(dist, "all_gather_single", None) or dist.all_gather_into_tensor
    gather(out, local, group=t.device_mesh.get_group())
    return out[: t.shape[0]]


def _local_shard(full: torch.Tensor, like: DTensorLike) -> torch.Tensor:
    """This rank's slice of a full tensor, laid out as the DTensor `like` (no traffic)."""
    chunk = _row_chunk(like)
    if chunk is not None:
        start = like.device_mesh.get_local_rank() * chunk
        return full[start : start + like.to_local().shape[0]]
    from torch.distributed.tensor import distribute_tensor

    return distribute_tensor(
        full, like.device_mesh, like.placements, src_data_rank=None
    ).to_local()


@torch.no_grad()
def normal_(p: DTensorLike, std: float) -> None:
    """p.normal_(0, std); a DTensor gets the one-process draw, sliced.

    DTensor's own random ops on a CPU mesh draw the same numbers on every rank, so the
    slices of a matrix would repeat one another. Drawing the whole matrix on every rank
    and keeping this rank's slice gives, from a shared seed, exactly the one-process
    initialisation on any device (and independent entries even when the ranks' seeds
    differ), at the cost of one full-size temporary at a time.
    """
    if p.is_meta:  # no values to draw (torch's meta normal_ costs ~2.5 ms a call)
        return
    if not is_sharded(p):
        p.normal_(0.0, std)
        return
    local = p.to_local()
    full = torch.empty(p.shape, dtype=p.dtype, device=local.device).normal_(0.0, std)
    local.copy_(_local_shard(full, p))


def _owners(params: list[DTensorLike]) -> list[int | None]:
    """Owner (rank within its mesh) of each parameter that is stepped whole on one rank.

    DTensors on a 1-D mesh (fully_shard's) are spread largest first onto the
    least-loaded rank, the same on every rank; None where every rank steps the
    parameter itself: a plain tensor, or a DTensor on a mesh of more dimensions (HSDP),
    whose ranks all step every matrix.
    """
    owners: list[int | None] = [None] * len(params)
    load: dict[Any, list[int]] = {}
    order = sorted(range(len(params)), key=lambda i: -params[i].numel())
    for i in order:
        p = params[i]
        if not is_sharded(p) or p.device_mesh.ndim != 1:
            continue
        ranks = load.setdefault(p.device_mesh, [0] * p.device_mesh.size())
        owner = ranks.index(min(ranks))
        ranks[owner] += p.numel()
        owners[i] = owner
    return owners


class InnerOptimizer(torch.optim.Optimizer):
    """An Optimizer whose steps are taken by ``self.inner``, a real implementation over
    other tensors (gathered replicas, per-expert views): its param_groups are the model's,
    and their hyperparameters are copied to the inner groups before a step and back
    after it, so schedulers and check() see an ordinary optimizer."""

    inner: torch.optim.Optimizer

    def add_param_group(self, param_group: dict[str, Any]) -> None:
        if getattr(self, "_ready", False):
            raise ConfigStateError("build the optimizer again to add parameters")
        super().add_param_group(param_group)

    def _copy_groups(self, to_inner: bool) -> None:
        for outer, inner in zip(
            self.param_groups, self.inner.param_groups, strict=True
        ):
            src, dst = (outer, inner) if to_inner else (inner, outer)
            dst.update({k: v for k, v in src.items() if k != "params"})


class GatheredOptimizer(InnerOptimizer):
    """A whole-matrix optimizer stepped on whole matrices of an FSDP2-sharded model.

    factory(groups) builds the real implementation; it steps full-size replicas of the
    DTensor parameters. Each matrix has one owner rank (see _owners). step() all-gathers
    every matrix and its gradient, the owner copies them into its replica, the
    implementation steps the replicas this rank owns, so each update is the one-process
    update, and the owner broadcasts the new matrix; every rank keeps its slice. The
    implementation's state (momentum, preconditioners) lives with the owner only: about
    1/world of it per rank. Per matrix and step that costs two all-gathers and one
    broadcast of the full matrix. Plain tensors are stepped where they are.

    param_groups hold the model's own parameters, so LR schedulers, check() and
    torch.distributed.checkpoint see an ordinary optimizer; hyperparameters are copied
    to the implementation's groups before each step and back after it. state_dict()
    keys the state by those parameters' indices and holds each matrix's state, full
    size, on its owner only (CheckpointState saves and loads it with DCP).
    """

    def __init__(
        self,
        factory: Callable[[Groups], torch.optim.Optimizer],
        groups: Groups,
    ):
        params = [p for group in groups for p in group["params"]]
        owners = _owners(params)
        self._slots: list[tuple[DTensorLike, torch.Tensor | None, Any, int | None]] = []
        self._outer_index: list[int] = []
        inner_groups, index = [], 0
        for group in groups:
            mine = []
            for p in group["params"]:
                owner = owners[index]
                replica, group_of, src = p, None, None
                if is_sharded(p):
                    mesh = p.device_mesh
                    replica = None
                    if owner is None or owner == mesh.get_local_rank():
                        local = p.to_local()
                        replica = torch.empty(
                            p.shape, dtype=p.dtype, device=local.device
                        )
                        replica.requires_grad_(p.requires_grad)
                    if owner is not None:
                        group_of = mesh.get_group()
                        src = torch.distributed.get_global_rank(group_of, owner)
                self._slots.append((p, replica, group_of, src))
                if replica is not None:
                    mine.append(replica)
                    self._outer_index.append(index)
                index += 1
            inner_groups.append({**group, "params": mine})
        self.inner = factory(inner_groups)
        """The real implementation, over the replicas this rank steps."""
        outer = [
            {**inner, "params": list(group["params"])}
            for inner, group in zip(self.inner.param_groups, groups, strict=True)
        ]
        self._ready, self._started = False, False
        super().__init__(outer, dict(self.inner.defaults))
        self._ready = True

    @property  # type: ignore[override]  # a view of the inner state, not a defaultdict
    def state(self) -> dict[torch.Tensor, Any]:
        """Model parameter -> the implementation's state for it ({} on non-owners).

        Empty on every rank until the first step or load, and then filled on every rank,
        so that code which tests `if optimizer.state` (DCP's get_state_dict) takes the
        same branch, and the same collectives, on all ranks.
        """
        if not self._started:
            return {}
        return {
            p: self.inner.state.get(replica, {}) if replica is not None else {}
            for p, replica, _, _ in self._slots
        }

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
        stepped = []
        for p, replica, group, src in self._slots:
            if replica is p:
                continue
            if p.grad is None:
                if replica is not None:
                    replica.grad = None
                continue
            grad, value = full_tensor(p.grad), full_tensor(p.detach())  # collectives
            if replica is not None:
                replica.copy_(value)
                replica.grad = grad
            stepped.append((p, replica, group, src))
        self.inner.step()
        self._copy_groups(to_inner=False)
        for p, replica, group, src in stepped:
            full = replica
            if group is not None:
                if full is None:
                    full = torch.empty(
                        p.shape, dtype=p.dtype, device=p.to_local().device
                    )
                torch.distributed.broadcast(full, src=src, group=group)
            assert full is not None  # the owner's replica, or the broadcast into it
            p.to_local().copy_(_local_shard(full.detach(), p))
            if replica is not None:
                replica.grad = None
        self._started = True
        return loss

    def state_dict(self) -> dict[str, Any]:
        state: dict[int, Any] = {}
        if self._started:
            # {} for the matrices other ranks own: DCP's set_state_dict wants an entry
            # for every trained parameter on every rank (and loads nothing into {})
            state = {i: {} for i in range(len(self._slots))}
            for i, value in self.inner.state_dict()["state"].items():
                state[self._outer_index[i]] = value
        groups, start = [], 0
        for group in self.param_groups:
            saved = {k: v for k, v in group.items() if k != "params"}
            saved["params"] = list(range(start, start + len(group["params"])))
            start += len(group["params"])
            groups.append(saved)
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
        for outer, group in zip(self.param_groups, saved, strict=True):
            outer.update({k: v for k, v in group.items() if k != "params"})
        state = state_dict["state"]
        inner_state = {
            i: state[ids[outer]]
            for i, outer in enumerate(self._outer_index)
            if state.get(ids[outer])
        }
        inner_groups, start = [], 0
        for outer, inner in zip(
            self.param_groups, self.inner.param_groups, strict=True
        ):
            values = {k: v for k, v in outer.items() if k != "params"}
            count = len(inner["params"])
            inner_groups.append({**values, "params": list(range(start, start + count))})
            start += count
        self.inner.load_state_dict({"state": inner_state, "param_groups": inner_groups})
        self._started = True

    def __repr__(self) -> str:
        return f"GatheredOptimizer({self.inner!r})"


def build_part(
    model: nn.Module,
    opt_name: str,
    factory: Callable[..., torch.optim.Optimizer],
    groups: Groups,
    kwargs: Mapping[str, Any],
    impl: TorchImpl | None,
) -> torch.optim.Optimizer:
    """factory(groups, **kwargs); on DTensor parameters, the same stepped whole.

    Optimizers whose implementation record says "elementwise", built by their own
    factory, step on the shards; "refused" ones, and a coupling option turned on, are
    refused, naming a parameter; every other one (a user's factory too) becomes a
    GatheredOptimizer.
    """
    sharded = [p for group in groups for p in group["params"] if is_sharded(p)]
    if not sharded:
        return factory(groups, **kwargs)
    why = (
        impl.sharding_note if impl is not None and impl.sharding == "refused" else None
    )
    coupling = impl.coupling_option if impl is not None else None
    if coupling and kwargs.get(coupling):
        why = f"its option {coupling}= takes one norm over all parameters"
    if why is not None:
        names = {id(p): name for name, p in model.named_parameters()}
        raise UnsupportedModelError(
            f"parameter {names.get(id(sharded[0]), '?')!r} is sharded (FSDP2 DTensor) "
            f"and trained by {opt_name}, which cannot step sharded parameters: {why}. Train "
            "these roles with another optimizer or leave their modules unsharded."
        )
    mixing = any(kwargs.get(option) for option in ENTRY_MIXING_OPTIONS)
    own = isinstance(factory, TorchFactory) and factory.impl == impl
    if impl is not None and impl.sharding == "elementwise" and own and not mixing:
        return factory(groups, **kwargs)
    return GatheredOptimizer(functools.partial(factory, **kwargs), groups)


class CheckpointState:
    """Model and optimizer state for torch.distributed.checkpoint (DCP), any sharding.

        dcp.save({"train": CheckpointState(model, opt)}, checkpoint_id=path)
        dcp.load({"train": CheckpointState(model, opt)}, checkpoint_id=path)

    DCP calls state_dict() (load also calls load_state_dict()). The state is keyed by
    parameter name (torch's get_state_dict / set_state_dict, one entry per part of a
    CompositeOptimizer); the optimizer's state is allocated before the first step, so
    that a fresh optimizer has tensors for dcp.load to fill. Tested on plain and FSDP2
    models, and with a checkpoint saved by two FSDP2 ranks loaded into one process.
    """

    def __init__(self, model: nn.Module, optimizer: torch.optim.Optimizer):
        self.model, self.optimizer = model, optimizer

    def _parts(self) -> list[torch.optim.Optimizer]:
        parts = getattr(self.optimizer, "parts", None)
        return list(parts.values()) if parts is not None else [self.optimizer]

    def state_dict(self) -> dict[str, Any]:
        from torch.distributed.checkpoint.state_dict import get_state_dict

        model, optim = get_state_dict(self.model, self._parts())
        return {"model": model, "optimizer": optim}

    def load_state_dict(self, state_dict: Mapping[str, Any]) -> None:
        from torch.distributed.checkpoint.state_dict import set_state_dict

        set_state_dict(
            self.model,
            self._parts(),
            model_state_dict=state_dict["model"],
            optim_state_dict=state_dict["optimizer"],
        )
        if hasattr(self.optimizer, "parts"):
            # the parts made new group dicts; the composite's must be the same objects
            self.optimizer.param_groups[:] = [
                g for part in self._parts() for g in part.param_groups
            ]
