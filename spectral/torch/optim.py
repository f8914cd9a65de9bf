"""Param groups with each role's numbers, and one torch.optim.Optimizer over the real ones."""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping
from typing import Any

import torch
from torch import nn

from spectral.scaling import BaseValue
from spectral.torch.adapters import AdapterLike, Patterns, classified, fans
from spectral.torch.hooks import multipliers_applied
from spectral.optimizers.entry import TorchImpl
from spectral.torch.composite import CompositeOptimizer
from spectral.torch.rules import TorchRules
from spectral.torch.sharded import build_part


def _compensation(impl: TorchImpl | None, module: nn.Module, p: torch.Tensor) -> float:
    """Factor by which an implementation's step exceeds the declared one (1 = exact)."""
    how = None if impl is None else impl.compensation
    if how == "muon-shape":
        # torch.optim.Muon(adjust_lr_fn="original") multiplies lr by sqrt(max(1, A/B)),
        # A, B = weight.shape[:2]; the idealised Muon step U V^T has no such factor.
        return math.sqrt(max(1.0, p.shape[0] / p.shape[1]))
    if how == "sso-shape":
        # SpectralSphere steps by msign(.), spectral norm 1, so its RMS->RMS norm is
        # sqrt(n_in / n_out); the declaration idealises a unit RMS->RMS step.
        n_out, n_in = fans(module, p)
        return math.sqrt(n_in / n_out)
    return 1.0


def role_param_groups(
    rules: TorchRules,
    model: nn.Module,
    width: float,
    depth: float,
    *,
    lr: BaseValue,
    weight_decay: BaseValue = 0.0,
    eps: BaseValue | None = None,
    init_std: BaseValue | None = None,
    multiplier: BaseValue = 1.0,
    patterns: Patterns | None = None,
    adapter: AdapterLike | None = None,
) -> list[dict[str, Any]]:
    """Torch param groups, one per (optimizer, role, compensation), with scaled HPs.

    Each group carries "lr", "weight_decay", the optimizer's eps where it has one, and
    "role" / "optimizer" for bookkeeping. An eps that lives inside a tuple-valued key
    (rules.eps_places) is carried as "spectral_eps" and put in place by build_optimizers, once
    the implementation has filled in the tuple's other entries. init_std and multiplier
    are accepted (and ignored) so that one dict of base values serves every function.
    Frozen parameters (requires_grad=False) are left out.
    """
    hp = rules.hparams(
        width, depth, lr=lr, weight_decay=weight_decay, eps=eps, multiplier=multiplier
    )
    groups: dict[tuple[str, str, float], dict[str, Any]] = {}
    for name, p, role, module in classified(model, patterns, adapter):
        if not p.requires_grad:
            continue
        rules.covered(role, f"parameter {name!r}")
        kind = rules.optimizers[role]
        if rules.matrix_only[kind] and p.ndim != 2:
            raise ValueError(
                f"parameter {name!r} (shape {tuple(p.shape)}) has role {role}, trained by "
                f"{kind}, which takes 2-D matrices only"
            )
        c = _compensation(rules.implementations.get(kind), module, p)
        key = (kind, role, c)
        if key not in groups:
            h = hp[role]
            group: dict[str, Any] = {
                "params": [],
                "lr": h["lr"] / c,
                "weight_decay": h["weight_decay"] * c,
                "role": role,
                "optimizer": kind,
            }
            if "eps" in h:
                eps_key, index = rules.eps_places.get(kind, ("eps", None))
                if index is None:
                    group[eps_key] = h["eps"]
                else:
                    group["spectral_eps"] = h["eps"]
            groups[key] = group
        groups[key]["params"].append(p)
    return list(groups.values())


def _place_eps(
    optimizer: torch.optim.Optimizer, kind: str, place: tuple[str, int | None]
) -> None:
    """Write each group's eps into its place inside the implementation's tuple."""
    key, index = place
    for group in optimizer.param_groups:
        if "spectral_eps" not in group:
            continue
        value = group.get(key)
        if index is None or not isinstance(value, (tuple, list)) or index >= len(value):
            raise ValueError(
                f"{kind}: param-group key {key!r} holds {value!r}, not a tuple with an "
                f"entry {index} for eps (eps_key / eps_index of the declaration)"
            )
        entries = list(value)
        entries[index] = group["spectral_eps"]
        group[key] = tuple(entries)


def build_composite(
    rules: TorchRules,
    model: nn.Module,
    width: float,
    depth: float,
    *,
    factories: Mapping[str, Callable[..., torch.optim.Optimizer]] | None = None,
    optimizer_kwargs: Mapping[str, Mapping[str, Any]] | None = None,
    patterns: Patterns | None = None,
    adapter: AdapterLike | None = None,
    multipliers_in_forward: bool | None = None,
    **base: Any,
) -> CompositeOptimizer:
    """One torch optimizer over param_groups(model, width, depth, **base).

    The model's forward pass must carry the block multipliers (apply_multipliers, or a
    model that applies them itself: pass multipliers_in_forward=True, or give the model an
    attribute applies_mup_multipliers = True as spectral.models does); without them the
    rules do not hold, so this refuses. optimizer_kwargs = {"adamw": {"betas": (0.9,
    0.95)}} passes extra arguments to one implementation; factories = {"name": fn}
    replaces or adds one (fn(groups, **kwargs) returning a torch optimizer).
    """
    if not (multipliers_in_forward or multipliers_applied(model)):
        raise ValueError(
            "the model's forward pass does not apply the block multipliers: call "
            "apply_multipliers(model, width, depth) first, or pass "
            "multipliers_in_forward=True if the model applies them itself"
        )
    groups = role_param_groups(
        rules, model, width, depth, patterns=patterns, adapter=adapter, **base
    )
    by_kind: dict[str, list[dict[str, Any]]] = {}
    for group in groups:
        by_kind.setdefault(group["optimizer"], []).append(group)
    known = {**rules.factories(), **(factories or {})}
    parts = {}
    for kind, kind_groups in by_kind.items():
        if kind not in known:
            raise ValueError(
                f"no implementation known for {kind!r}; pass factories="
                f"{ {kind: 'fn'} }, fn(groups, **kwargs) returning a torch optimizer"
            )
        kwargs = dict((optimizer_kwargs or {}).get(kind, {}))
        impl = rules.implementations.get(kind)
        parts[kind] = build_part(model, kind, known[kind], kind_groups, kwargs, impl)
        _place_eps(parts[kind], kind, rules.eps_places.get(kind, ("eps", None)))
    return CompositeOptimizer(parts, width=width, depth=depth, base=base)
