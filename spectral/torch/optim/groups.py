"""Param groups with each role's numbers, and one torch.optim.Optimizer over the real ones."""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping
from typing import Any

import torch
from torch import nn

from spectral.errors import ConfigError, ConfigTypeError, UnsupportedModelError
from spectral.optimizers.entry import TorchImpl
from spectral.scaling import RUN_KEYS, BaseValues
from spectral.torch.apply.absorb import absorbed_values, carriers_of, scales_in_forward
from spectral.torch.apply.hooks import multipliers_applied
from spectral.torch.model.placement import Placement
from spectral.torch.model.shapes import fans
from spectral.engine.ties import tied_to_output, tied_values_agree
from spectral.torch.optim.composite import CompositeOptimizer
from spectral.torch.optim.experts import SlicedFactory, expert_fans, expert_layout
from spectral.torch.optim.momenta import place_momenta
from spectral.torch.optim.sharded import build_part
from spectral.torch.rules import TorchRules


def _compensation(
    impl: TorchImpl | None,
    module: nn.Module,
    p: torch.Tensor,
    layout: str | None = None,
) -> float:
    """Factor by which an implementation's step exceeds the declared one (1 = exact).

    layout: a fused-experts parameter stepped one expert matrix at a time (SlicedOptimizer
    hands the implementation each expert's (n_out, n_in) matrix), whose shape counts."""
    how = None if impl is None else impl.compensation
    if how is None:
        return 1.0
    shape = expert_fans(p, layout) if layout else (p.shape[0], p.shape[1])
    if how == "muon-shape":
        # torch.optim.Muon(adjust_lr_fn="original") multiplies lr by sqrt(max(1, A/B)),
        # A, B = weight.shape[:2]; the idealised Muon step U V^T has no such factor.
        return math.sqrt(max(1.0, shape[0] / shape[1]))
    if how == "sso-shape":
        # SpectralSphere steps by msign(.), spectral norm 1, so its RMS->RMS norm is
        # sqrt(n_in / n_out); the declaration idealises a unit RMS->RMS step.
        n_out, n_in = shape if layout else fans(module, p)
        return math.sqrt(n_in / n_out)
    return 1.0


def _whole_matrix(rules: TorchRules, opt_name: str) -> bool:
    """Whether an optimizer's step reads a whole matrix (not entry by entry): fused
    experts are then stepped one expert matrix at a time (spectral.torch.optim.experts)."""
    impl = rules.implementations.get(opt_name)
    if rules.matrix_only[opt_name]:
        return True
    return impl is not None and impl.sharding != "elementwise"


def role_param_groups(
    rules: TorchRules,
    placement: Placement,
    width: float,
    depth: float,
    **base: Any,
) -> list[dict[str, Any]]:
    """Torch param groups of the placed model, one per (optimizer, role, compensation),
    with scaled HPs (the public ``param_groups`` in spectral.torch.config says what each
    group carries)."""
    model = placement.model
    values = BaseValues.of(base, "param_groups")
    lr, multiplier = values.lr, values.multiplier
    lr_tensor = _tensor_lr(lr)
    hp = rules.hparams(
        width,
        depth,
        **{**values.given(), "lr": lr if lr_tensor is None else float(lr_tensor)},
    )
    factors = carriers_of(rules, placement, width, depth, multiplier)
    groups: dict[tuple[str, str, float, str | None, float], dict[str, Any]] = {}
    for name, p, role, module in placement:
        if not p.requires_grad:
            continue
        rules.covered(role, f"parameter {name!r}")
        opt_name = rules.optimizers[role]
        layout = expert_layout(module, p) if _whole_matrix(rules, opt_name) else None
        if rules.matrix_only[opt_name] and p.ndim != 2 and layout is None:
            raise UnsupportedModelError(
                f"parameter {name!r} (shape {tuple(p.shape)}) has role {role}, trained by "
                f"{opt_name}, which takes 2-D matrices only"
            )
        if role == "input_weight" and tied_to_output(model, p):
            tied_values_agree(hp, name)
        c = _compensation(rules.implementations.get(opt_name), module, p, layout)
        s = factors.get(id(p), 1.0)
        key = (opt_name, role, c, layout, s)
        if key not in groups:
            h = hp[role]
            if id(p) in factors and rules.absorbed is not None:
                h = absorbed_values(h, s, rules.absorbed[opt_name])
            group: dict[str, Any] = {
                "params": [],
                "lr": h["lr"] / c,
                "weight_decay": h["weight_decay"] * c,
                "role": role,
                "optimizer": opt_name,
            }
            if lr_tensor is not None:
                group["lr"] = lr_tensor.detach().clone().fill_(h["lr"] / c)
            if layout is not None:
                group["expert_layout"] = layout
            if "eps" in h:
                eps_key, index = rules.eps_places.get(opt_name, ("eps", None))
                if index is None:
                    group[eps_key] = h["eps"]
                else:
                    group["spectral_eps"] = h["eps"]
            groups[key] = group
        groups[key]["params"].append(p)
    _name_groups(groups)
    return list(groups.values())


def _tensor_lr(lr: Any) -> torch.Tensor | None:
    """The base lr when it is a tensor (one element), else None."""
    if not isinstance(lr, torch.Tensor):
        return None
    if lr.numel() != 1 or not lr.is_floating_point():
        raise ConfigTypeError(
            f"lr: a tensor lr must hold one floating-point number, got shape "
            f"{tuple(lr.shape)} of {lr.dtype}"
        )
    if lr.device.type == "meta":
        raise ConfigTypeError(
            "lr: a tensor lr on the meta device holds no value: put it on the device the "
            "model trains on"
        )
    return lr


def _name_groups(
    groups: Mapping[tuple[str, str, float, str | None, float], dict[str, Any]],
) -> None:
    """Each group's "name": role/optimizer; a role's other groups say how they differ
    (loggers such as LearningRateMonitor refuse two groups of one name)."""
    taken: set[str] = set()
    for (opt_name, role, c, layout, carried), group in groups.items():
        name = f"{role}/{opt_name}"
        if carried != 1.0:  # hook-free form: a module's multiplier held in its numbers
            name += f"/carries-x{carried:.4g}"
        if layout is not None:
            name += "/experts"
        if c != 1.0:
            name += f"/lr-x{1 / c:.4g}"
        unique, n = name, 1
        while unique in taken:
            n += 1
            unique = f"{name}#{n}"
        taken.add(unique)
        group["name"] = unique


def _place_eps(
    optimizer: torch.optim.Optimizer, opt_name: str, place: tuple[str, int | None]
) -> None:
    """Write each group's eps into its place inside the implementation's tuple."""
    key, index = place
    for group in optimizer.param_groups:
        if "spectral_eps" not in group:
            continue
        value = group.get(key)
        if index is None or not isinstance(value, (tuple, list)) or index >= len(value):
            raise ConfigError(
                f"{opt_name}: param-group key {key!r} holds {value!r}, not a tuple with an "
                f"entry {index} for eps (eps_key / eps_index of the declaration)"
            )
        entries = list(value)
        entries[index] = group["spectral_eps"]
        group[key] = tuple(entries)


def build_composite(
    rules: TorchRules,
    placement: Placement,
    width: float,
    depth: float,
    *,
    factories: Mapping[str, Callable[..., torch.optim.Optimizer]] | None = None,
    optimizer_kwargs: Mapping[str, Mapping[str, Any]] | None = None,
    multipliers_in_forward: bool | None = None,
    **base: Any,
) -> CompositeOptimizer:
    """One torch optimizer over the placed model's param groups (the public
    ``build_optimizers`` in spectral.torch.config says what it refuses)."""
    model = placement.model
    _check_options(rules, factories, optimizer_kwargs, multipliers_in_forward)
    if rules.absorbed is not None:
        if multipliers_in_forward or scales_in_forward(model):
            raise ConfigError(
                "this config absorbs the block multipliers into the parameters' numbers, "
                "and the model's forward pass applies them too (hooks or built in): remove "
                "the hooks (handle.remove()) or use the config without --absorb-multipliers"
            )
    elif not (multipliers_in_forward or multipliers_applied(model)):
        raise ConfigError(
            "the model's forward pass does not apply the block multipliers: call "
            "apply_multipliers(model, width, depth) first, or pass "
            "multipliers_in_forward=True if the model applies them itself"
        )
    groups = role_param_groups(rules, placement, width, depth, **base)
    by_optimizer: dict[str, list[dict[str, Any]]] = {}
    for group in groups:
        by_optimizer.setdefault(group["optimizer"], []).append(group)
    known = {**rules.factories(), **(factories or {})}
    parts = {}
    momenta = rules.momentum_factors(**{k: base.get(k) for k in RUN_KEYS})
    for opt_name, opt_groups in by_optimizer.items():
        if opt_name not in known:
            raise ConfigError(
                f"no implementation known for {opt_name!r}; pass factories="
                f"{ {opt_name: 'fn'} }, fn(groups, **kwargs) returning a torch optimizer"
            )
        kwargs = dict((optimizer_kwargs or {}).get(opt_name, {}))
        impl = rules.implementations.get(opt_name)
        factory = known[opt_name]
        if any("expert_layout" in group for group in opt_groups):
            factory = SlicedFactory(factory)  # each expert's matrix its own
        part = build_part(model, opt_name, factory, opt_groups, kwargs, impl)
        if not isinstance(part, torch.optim.Optimizer):
            raise ConfigTypeError(
                f"factories[{opt_name!r}] returned {type(part).__name__}, not a "
                "torch.optim.Optimizer"
            )
        parts[opt_name] = part
        _place_eps(part, opt_name, rules.eps_places.get(opt_name, ("eps", None)))
        place_momenta(part, opt_name, momenta)
    return CompositeOptimizer(parts, width=width, depth=depth, base=base)


def _check_options(
    rules: TorchRules,
    factories: Any,
    optimizer_kwargs: Any,
    multipliers_in_forward: Any,
) -> None:
    """build_optimizers' options, refused by name before anything is built: a typo in a
    key ({"adam": ...} for "adamw") would otherwise be ignored."""
    if multipliers_in_forward is not None and not isinstance(
        multipliers_in_forward, bool
    ):
        raise ConfigTypeError(
            f"multipliers_in_forward must be True, False or None, got {multipliers_in_forward!r}"
        )
    for what, value in (
        ("factories", factories),
        ("optimizer_kwargs", optimizer_kwargs),
    ):
        if value is not None and not isinstance(value, Mapping):
            raise ConfigTypeError(
                f"{what} must be a dict keyed by optimizer name, got {value!r}"
            )
    for name, fn in (factories or {}).items():
        if not callable(fn):
            raise ConfigTypeError(f"factories[{name!r}] must be callable, got {fn!r}")
    names = set(rules.optimizers.values()) | set(factories or {})
    for name, kwargs in (optimizer_kwargs or {}).items():
        if name not in names:
            raise ConfigError(
                f"optimizer_kwargs: unknown optimizer {name!r}; this config's optimizers: "
                f"{', '.join(sorted(set(rules.optimizers.values())))}"
            )
        if not isinstance(kwargs, Mapping):
            raise ConfigTypeError(
                f"optimizer_kwargs[{name!r}] must be a dict, got {kwargs!r}"
            )
