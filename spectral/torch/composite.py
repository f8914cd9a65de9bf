"""One torch.optim.Optimizer over the real per-family implementations."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

import torch


class CompositeOptimizer(torch.optim.Optimizer):
    """One torch.optim.Optimizer over the real per-family implementations.

    param_groups is the union of the parts' groups (the same dicts, each keeping its
    "role" and "optimizer"), so every LR scheduler, gradient clipper, trainer and
    checkpoint works on it unchanged; step, zero_grad, state_dict and load_state_dict
    act on every part. parts maps optimizer name -> implementation. With a hybrid,
    OneCycleLR needs cycle_momentum=False (the parts name their momentum differently).
    OneCycleLR sets every group's lr from max_lr, so give one per group to keep the
    roles' ratios: max_lr=[g["lr"] for g in opt.param_groups].
    """

    def __init__(
        self,
        parts: Mapping[str, torch.optim.Optimizer],
        *,
        width: float | None = None,
        depth: float | None = None,
        base: Mapping[str, Any] | None = None,
    ):
        if not parts:
            raise ValueError("CompositeOptimizer needs at least one optimizer")
        self.parts = dict(parts)
        self.width, self.depth = width, depth
        self.base = dict(base or {})
        """The base values it was built with (check() compares the groups against them)."""
        groups = [g for opt in self.parts.values() for g in opt.param_groups]
        # One part: its defaults, so schedulers that read them (OneCycleLR) work as usual.
        only = next(iter(self.parts.values())) if len(self.parts) == 1 else None
        self._ready = False
        super().__init__(groups, dict(only.defaults) if only is not None else {})
        self._ready = True

    # torch.optim.Optimizer.__init__ assigns an empty state; the real one is the parts'.
    @property  # type: ignore[override]  # the parts' states merged, not a defaultdict
    def state(self) -> dict[torch.Tensor, Any]:
        merged: dict[torch.Tensor, Any] = {}
        for opt in self.parts.values():
            merged.update(opt.state)
        return merged

    @state.setter
    def state(self, value: Any) -> None:
        pass

    def add_param_group(self, param_group: dict[str, Any]) -> None:
        if getattr(self, "_ready", False):
            raise RuntimeError(
                "add the parameters to the model and call build_optimizers again: each "
                "group's values come from its role"
            )
        super().add_param_group(param_group)

    def step(self, closure: Callable[[], Any] | None = None) -> Any:
        loss = None
        if closure is not None:
            with torch.enable_grad():
                loss = closure()
        for opt in self.parts.values():
            opt.step()
        return loss

    def zero_grad(self, set_to_none: bool = True) -> None:
        for opt in self.parts.values():
            opt.zero_grad(set_to_none=set_to_none)

    def state_dict(self) -> dict[str, Any]:
        return {"parts": {name: opt.state_dict() for name, opt in self.parts.items()}}

    def load_state_dict(self, state_dict: Mapping[str, Any]) -> None:
        parts = state_dict.get("parts") if isinstance(state_dict, Mapping) else None
        if not isinstance(parts, Mapping) or set(parts) != set(self.parts):
            have = sorted(parts) if isinstance(parts, Mapping) else "no 'parts'"
            raise ValueError(
                f"optimizer state holds {have}; this optimizer has {sorted(self.parts)}"
            )
        for name, opt in self.parts.items():
            opt.load_state_dict(parts[name])
        # the parts' load_state_dict made new group dicts; keep ours the same objects
        self.param_groups[:] = [
            g for opt in self.parts.values() for g in opt.param_groups
        ]

    def __repr__(self) -> str:
        inner = ", ".join(f"{n}: {type(o).__name__}" for n, o in self.parts.items())
        return f"CompositeOptimizer({inner}; {len(self.param_groups)} param groups)"
