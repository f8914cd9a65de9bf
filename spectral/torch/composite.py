"""One torch.optim.Optimizer over the real per-family implementations."""

from __future__ import annotations

import math
import warnings
from collections.abc import Callable, Mapping
from typing import Any

import torch

LR_GUARDS = ("warn", "raise", "off")
"""What step() does when the groups' learning rates no longer keep the rule's ratios."""


class CompositeOptimizer(torch.optim.Optimizer):
    """One torch.optim.Optimizer over the real per-family implementations.

    param_groups is the union of the parts' groups (the same dicts, each keeping its
    "role" and "optimizer"), so every LR scheduler, gradient clipper, trainer and
    checkpoint works on it unchanged; step, zero_grad, state_dict and load_state_dict
    act on every part. parts maps optimizer name -> implementation. With a hybrid,
    OneCycleLR needs cycle_momentum=False (the parts name their momentum differently).
    OneCycleLR sets every group's lr from max_lr, so give one per group to keep the
    roles' ratios: max_lr=[g["lr"] for g in opt.param_groups].

    Each group keeps the rule's lr as "rule_lr". step() checks that the groups' lrs are
    still one common factor times their rule_lr (what every scheduler of torch does): a
    hand-written loop that writes one lr into every group (nanoGPT's get_lr) undoes the
    per-role rates, and lr_guard says what happens then: "warn" (once, the default),
    "raise" or "off". set_lr_factor(f) is that loop's fix: every lr = f * rule_lr.
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
        for group in groups:
            group.setdefault("rule_lr", group["lr"])
        self.lr_guard = "warn"
        self._warned = False
        self._ready = False
        super().__init__(groups, dict(only.defaults) if only is not None else {})
        self._ready = True

    def set_lr_factor(self, factor: float) -> None:
        """Every group's lr = factor * its rule's lr: a schedule that keeps the roles'
        ratios, for a hand-written loop (``opt.set_lr_factor(lr / base_lr)``)."""
        if isinstance(factor, bool) or not isinstance(factor, (int, float)):
            raise TypeError(f"factor must be a number, got {factor!r}")
        if not math.isfinite(factor) or factor < 0:
            raise ValueError(f"factor must be a finite number >= 0, got {factor!r}")
        for group in self.param_groups:
            group["lr"] = factor * group["rule_lr"]

    def _check_lr_ratios(self) -> None:
        if self.lr_guard == "off" or (self.lr_guard == "warn" and self._warned):
            return
        if self.lr_guard not in LR_GUARDS:
            raise ValueError(
                f"lr_guard must be one of {LR_GUARDS}, got {self.lr_guard!r}"
            )
        factors = []
        for group in self.param_groups:
            rule, lr = group.get("rule_lr"), group.get("lr")
            if not isinstance(rule, (int, float)) or not isinstance(lr, (int, float)):
                continue  # a tensor lr (capturable optimizers): not checked
            if rule > 0:
                factors.append((lr / rule, group))
        if len(factors) < 2:
            return
        f0 = factors[0][0]
        off = [
            g
            for f, g in factors
            if not math.isclose(f, f0, rel_tol=1e-6, abs_tol=1e-15)
        ]
        if not off:
            return
        first, other = factors[0][1], off[0]
        message = (
            f"the param groups' learning rates no longer keep the rule's ratios: "
            f"{first.get('role')} has lr {first['lr']:.6g} (rule {first['rule_lr']:.6g}), "
            f"{other.get('role')} {other['lr']:.6g} (rule {other['rule_lr']:.6g}). Usual "
            "cause: a training loop setting g['lr'] = lr for every group (nanoGPT's "
            "get_lr); use opt.set_lr_factor(lr / base_lr) instead, or a torch scheduler "
            "(eta_min / min lr given per group as a fraction of it)"
        )
        if self.lr_guard == "raise":
            raise ValueError(message)
        self._warned = True
        warnings.warn(message, RuntimeWarning, stacklevel=3)

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
        self._check_lr_ratios()
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
        return {
            "parts": {name: opt.state_dict() for name, opt in self.parts.items()},
            "size": [self.width, self.depth],
        }

    def load_state_dict(self, state_dict: Mapping[str, Any]) -> None:
        """Load every part, or nothing: the state is checked against this optimizer (its
        parts, their groups' roles and sizes, each state tensor's shape against its
        parameter, the width and depth it was saved at) before anything changes, and a
        part that still fails puts the ones loaded before it back."""
        parts = state_dict.get("parts") if isinstance(state_dict, Mapping) else None
        if not isinstance(parts, Mapping) or set(parts) != set(self.parts):
            have = sorted(parts) if isinstance(parts, Mapping) else "no 'parts'"
            raise ValueError(
                f"optimizer state holds {have}; this optimizer has {sorted(self.parts)}"
            )
        size = state_dict.get("size")
        if size is not None and list(size) != [self.width, self.depth]:
            raise ValueError(
                f"optimizer state was saved at width, depth = {tuple(size)}; this optimizer "
                f"was built for {(self.width, self.depth)}"
            )
        for name, opt in self.parts.items():
            _check_part_state(name, opt, parts[name])
        before = {name: opt.state_dict() for name, opt in self.parts.items()}
        loaded = []
        try:
            for name, opt in self.parts.items():
                opt.load_state_dict(parts[name])
                loaded.append(name)
        except Exception:
            for name in loaded:
                self.parts[name].load_state_dict(before[name])
            raise
        finally:
            # the parts' load_state_dict made new group dicts; keep ours the same objects
            self.param_groups[:] = [
                g for opt in self.parts.values() for g in opt.param_groups
            ]

    def __getstate__(self) -> dict[str, Any]:
        # torch.optim.Optimizer pickles defaults, state and param_groups only; a composite
        # is its parts (pickle, copy.deepcopy and torch.save keep them, shared groups too)
        return dict(self.__dict__)

    def __setstate__(self, state: dict[str, Any]) -> None:
        super().__setstate__(state)

    def __repr__(self) -> str:
        inner = ", ".join(f"{n}: {type(o).__name__}" for n, o in self.parts.items())
        return f"CompositeOptimizer({inner}; {len(self.param_groups)} param groups)"


def _check_part_state(name: str, opt: torch.optim.Optimizer, saved: Any) -> None:
    """Refuse a part's saved state that does not fit ``opt``, before anything is loaded."""
    groups = saved.get("param_groups") if isinstance(saved, Mapping) else None
    if not isinstance(groups, list):
        raise TypeError(f"optimizer state of {name}: no param_groups")
    mine = opt.param_groups
    if len(groups) != len(mine):
        raise ValueError(
            f"optimizer state of {name} has {len(groups)} param groups; this one has "
            f"{len(mine)} (another model or other roles?)"
        )
    params: dict[Any, torch.Tensor] = {}
    for saved_group, group in zip(groups, mine, strict=True):
        ids = saved_group.get("params", []) if isinstance(saved_group, Mapping) else []
        if len(ids) != len(group["params"]):
            raise ValueError(
                f"optimizer state of {name}: group {group.get('role')} holds {len(ids)} "
                f"parameters, this optimizer's {len(group['params'])}"
            )
        role = saved_group.get("role")
        if role is not None and role != group.get("role"):
            raise ValueError(
                f"optimizer state of {name}: group of role {role} where this optimizer "
                f"has {group.get('role')}"
            )
        params.update(zip(ids, group["params"], strict=True))
    state = saved.get("state", {})
    for key, values in state.items() if isinstance(state, Mapping) else ():
        p = params.get(key)
        if p is None or not isinstance(values, Mapping):
            continue
        for what, value in values.items():
            if (
                isinstance(value, torch.Tensor)
                and value.ndim == p.ndim
                and value.ndim > 0
                and tuple(value.shape) != tuple(p.shape)
            ):
                raise ValueError(
                    f"optimizer state of {name}: {what} of a {tuple(value.shape)} "
                    f"parameter where this model's is {tuple(p.shape)} (saved from a "
                    "model of another size?)"
                )
