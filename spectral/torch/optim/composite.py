"""One torch.optim.Optimizer over the real per-family implementations."""

from __future__ import annotations

import math
import sys
import warnings
from collections.abc import Callable, Mapping
from types import FrameType
from typing import Any

import torch

from spectral.errors import ConfigError, ConfigStateError, ConfigTypeError

LR_GUARDS = ("warn", "raise", "off")
"""What step() does when the groups' learning rates no longer keep the rule's ratios."""

_WRAPPER_FRAMES = 8
"""Frames above step() searched for a wrapper's own lr_guard (accelerate: 1 or 2)."""


def _inner(wrapper: Any) -> Any:
    """The optimizer a wrapper holds as ``.optimizer``; None for no wrapper (no such
    attribute, itself, or an attribute that raises: any caller's object)."""
    try:
        inner = getattr(wrapper, "optimizer", None)
    except Exception:  # noqa: BLE001 - any caller's object: not a wrapper then
        return None
    return None if inner is wrapper else inner


def unwrap_optimizer(optimizer: Any) -> Any:
    """The optimizer inside framework wrappers: accelerate's AcceleratedOptimizer,
    Lightning's LightningOptimizer, Fabric's optimizer, any wrapper holding it as
    ``.optimizer``, through any number of them; the first CompositeOptimizer found, else
    the innermost optimizer. Wrappers that hold each other in a cycle are a ValueError."""
    seen: list[Any] = []
    while True:
        # Lightning's and Fabric's wrappers are instances of a subclass of the wrapped
        # optimizer's class (they imitate it): the composite itself holds its parts
        if isinstance(optimizer, CompositeOptimizer) and "parts" in vars(optimizer):
            return optimizer
        inner = _inner(optimizer)
        if inner is None:
            return optimizer
        seen.append(optimizer)  # kept alive: their ids stay theirs
        if any(inner is w for w in seen):
            chain = " -> ".join(type(o).__name__ for o in [*seen, inner])
            raise ConfigError(
                f"the optimizer's wrappers hold each other in a cycle ({chain} via "
                "'.optimizer'): no optimizer inside them"
            )
        optimizer = inner


def _wraps(wrapper: Any, optimizer: Any) -> bool:
    """Whether ``wrapper`` holds ``optimizer`` through one or more ``.optimizer`` layers."""
    seen: list[Any] = []
    while (inner := _inner(wrapper)) is not None:
        if inner is optimizer:
            return True
        seen.append(wrapper)
        if any(inner is w for w in seen):
            return False
        wrapper = inner
    return False


def lr_ratio_problem(
    groups: list[dict[str, Any]], *, step_time: bool = False
) -> str | None:
    """None when every group's lr is one common factor times its rule_lr (what every
    torch scheduler without a floor keeps); else what is off, naming the groups and their
    factors. step_time: skip tensor lrs (reading one would synchronise a device)."""
    factors = []
    for group in groups:
        rule, lr = group.get("rule_lr"), group.get("lr")
        if isinstance(lr, torch.Tensor) and not step_time and lr.numel() == 1:
            lr = float(lr)
        if not isinstance(rule, (int, float)) or not isinstance(lr, (int, float)):
            continue
        if rule > 0:
            factors.append((lr / rule, group))
    if len(factors) < 2:
        return None
    f0, first = factors[0]
    off = [
        (f, g)
        for f, g in factors
        if not math.isclose(f, f0, rel_tol=1e-6, abs_tol=1e-15)
    ]
    if not off:
        return None
    f1, other = off[0]
    return (
        "the param groups' learning rates no longer keep the rule's ratios: "
        f"{_group_name(first)} is at {f0:.6g} x its rule's lr ({float(first['lr']):.6g}), "
        f"{_group_name(other)} at {f1:.6g} x ({float(other['lr']):.6g}). Usual causes: a "
        "training loop setting g['lr'] = lr for every group (nanoGPT's get_lr): use "
        "opt.set_lr_factor(lr / base_lr) instead; or a scheduler's absolute floor "
        "(CosineAnnealingLR(eta_min=...), ReduceLROnPlateau(min_lr=...)), the same lr for "
        "every group: floor the factor instead, LambdaLR(opt, lambda s: floor + (1 - floor) "
        "* cosine(s)) (docs/training-stacks.md)"
    )


def _group_name(group: Mapping[str, Any]) -> str:
    return str(group.get("name") or group.get("role") or "a param group")


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
    Each group is named "role/optimizer" ("name", as Lightning's LearningRateMonitor shows).

    Under a framework's wrapper (accelerate, Lightning, Fabric) the composite is
    unwrap_optimizer(opt); lr_guard set on the wrapper is honoured, and Lightning's and
    Fabric's wrappers (which subclass this class) take set_lr_factor and parts directly.
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
            raise ConfigError("CompositeOptimizer needs at least one optimizer")
        self.parts = dict(parts)
        self.width, self.depth = width, depth
        self.base = dict(base or {})
        """The base values it was built with (check() compares the groups against them)."""
        groups = [g for opt in self.parts.values() for g in opt.param_groups]
        # One part: its defaults, so schedulers that read them (OneCycleLR) work as usual.
        only = next(iter(self.parts.values())) if len(self.parts) == 1 else None
        for group in groups:
            group.setdefault("rule_lr", float(group["lr"]))
        self.__dict__["_lr_guard"] = "warn"
        self._warned = False
        self._ready = False
        super().__init__(groups, dict(only.defaults) if only is not None else {})
        self._ready = True

    @property
    def lr_guard(self) -> str:
        """What step() does when the groups' lrs no longer keep the rule's ratios: "warn"
        (once, the default), "raise" or "off". Set on a framework's wrapper too (Lightning's
        and Fabric's subclass this class, so the property reaches the composite inside)."""
        return unwrap_optimizer(self).__dict__["_lr_guard"]

    @lr_guard.setter
    def lr_guard(self, value: str) -> None:
        if value not in LR_GUARDS:
            raise ConfigError(f"lr_guard must be one of {LR_GUARDS}, got {value!r}")
        unwrap_optimizer(self).__dict__["_lr_guard"] = value

    def set_lr_factor(self, factor: float) -> None:
        """Every group's lr = factor * its rule's lr: a schedule that keeps the roles'
        ratios, for a hand-written loop (``opt.set_lr_factor(lr / base_lr)``). A tensor
        lr (torch's recipe for a compiled step) is filled in place."""
        if isinstance(factor, bool) or not isinstance(factor, (int, float)):
            raise ConfigTypeError(f"factor must be a number, got {factor!r}")
        if not math.isfinite(factor) or factor < 0:
            raise ConfigError(f"factor must be a finite number >= 0, got {factor!r}")
        for group in unwrap_optimizer(self).param_groups:
            if isinstance(group["lr"], torch.Tensor):
                group["lr"].fill_(factor * group["rule_lr"])
            else:
                group["lr"] = factor * group["rule_lr"]

    def _guard_in_force(self) -> str:
        """lr_guard, or the one a user set on a wrapper that keeps its own attributes
        (accelerate's AcceleratedOptimizer): step() is called from the wrapper's step, so
        the wrapper is a caller's ``self`` a few frames up."""
        frame: FrameType | None = sys._getframe(2)
        for _ in range(_WRAPPER_FRAMES):
            if frame is None:
                break
            caller = frame.f_locals.get("self")
            own = vars(caller).get("lr_guard") if hasattr(caller, "__dict__") else None
            if own in LR_GUARDS and caller is not self and _wraps(caller, self):
                return own
            frame = frame.f_back
        return self.__dict__["_lr_guard"]

    def _check_lr_ratios(self) -> None:
        guard = self._guard_in_force()
        if guard == "off" or (guard == "warn" and self._warned):
            return
        message = lr_ratio_problem(self.param_groups, step_time=True)
        if message is None:
            return
        if guard == "raise":
            raise ConfigError(message)
        self._warned = True
        warnings.warn(message, RuntimeWarning, stacklevel=4)

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
            raise ConfigStateError(
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
            raise ConfigError(
                f"optimizer state holds {have}; this optimizer has {sorted(self.parts)}"
            )
        size = state_dict.get("size")
        if size is not None and list(size) != [self.width, self.depth]:
            raise ConfigError(
                f"optimizer state was saved at width, depth = {tuple(size)}; this optimizer "
                f"was built for {(self.width, self.depth)}"
            )
        for name, opt in self.parts.items():
            _check_part_state(name, opt, parts[name])
        before = {name: opt.state_dict() for name, opt in self.parts.items()}
        names = [g.get("name") for g in self.param_groups]
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
            # a state saved before groups were named: keep the names (same order)
            if len(names) == len(self.param_groups):
                for group, group_name in zip(self.param_groups, names, strict=True):
                    if group_name is not None:
                        group.setdefault("name", group_name)

    def __getstate__(self) -> dict[str, Any]:
        # torch.optim.Optimizer pickles defaults, state and param_groups only; a composite
        # is its parts (pickle, copy.deepcopy and torch.save keep them, shared groups too)
        return dict(self.__dict__)

    def __setstate__(self, state: dict[str, Any]) -> None:
        # pickled before lr_guard was a property: it was a plain attribute then
        state.setdefault("_lr_guard", state.pop("lr_guard", "warn"))
        super().__setstate__(state)

    def __repr__(self) -> str:
        inner = ", ".join(f"{n}: {type(o).__name__}" for n, o in self.parts.items())
        return f"CompositeOptimizer({inner}; {len(self.param_groups)} param groups)"


def _check_part_state(name: str, opt: torch.optim.Optimizer, saved: Any) -> None:
    """Refuse a part's saved state that does not fit ``opt``, before anything is loaded."""
    groups = saved.get("param_groups") if isinstance(saved, Mapping) else None
    if not isinstance(groups, list):
        raise ConfigTypeError(f"optimizer state of {name}: no param_groups")
    mine = opt.param_groups
    if len(groups) != len(mine):
        raise ConfigError(
            f"optimizer state of {name} has {len(groups)} param groups; this one has "
            f"{len(mine)} (another model or other roles?)"
        )
    params: dict[Any, torch.Tensor] = {}
    for saved_group, group in zip(groups, mine, strict=True):
        ids = saved_group.get("params", []) if isinstance(saved_group, Mapping) else []
        if len(ids) != len(group["params"]):
            raise ConfigError(
                f"optimizer state of {name}: group {group.get('role')} holds {len(ids)} "
                f"parameters, this optimizer's {len(group['params'])}"
            )
        role = saved_group.get("role")
        if role is not None and role != group.get("role"):
            raise ConfigError(
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
                raise ConfigError(
                    f"optimizer state of {name}: {what} of a {tuple(value.shape)} "
                    f"parameter where this model's is {tuple(p.shape)} (saved from a "
                    "model of another size?)"
                )
