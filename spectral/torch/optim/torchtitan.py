"""torchtitan: its optimizer ``param_groups`` and its init from a hook-free config.

torchtitan (0.3.0) builds its optimizers from ``OptimizersContainer.Config.param_groups``,
a list of ``ParamGroupConfig(pattern, optimizer_name, optimizer_kwargs)``: each parameter
goes to the first pattern that matches its name, and a pattern that matches nothing raises.
A module written by ``spectral codegen --framework torchtitan`` holds the patterns (one per
role and per carrier of a multiplier, carriers first) and binds :func:`param_group_configs`
to them; the multipliers are absorbed (:mod:`spectral.torch.apply.absorb`), so the model is not
changed. torchtitan is imported only when the configs are built.
"""

from __future__ import annotations

import importlib
import inspect
from collections.abc import Mapping, Sequence
from typing import Any


from spectral.errors import ConfigError
from spectral.scaling import RUN_KEYS, BaseValues
from spectral.torch.apply.absorb import absorbed_values
from spectral.torch.optim.momenta import MOMENTUM_KEYS, moved_momentum
from spectral.torch.rules import TorchRules

GroupPattern = tuple[str, str, str | None]
"""(parameter-name pattern, role, layer whose multiplier it carries or None)."""


def titan_group_values(
    rules: TorchRules,
    groups: Sequence[GroupPattern],
    width: float,
    depth: float,
    **base: Any,
) -> list[tuple[str, str, dict[str, Any]]]:
    """(pattern, optimizer, numbers) per group: the role's lr, weight decay and eps, moved
    by the symmetry where the group carries its layer's multiplier."""
    if rules.absorbed is None:
        raise ConfigError(
            "torchtitan takes the hook-free form: absorb the multipliers first"
        )
    given = BaseValues.of(base, "torchtitan param groups")
    multiplier = given.multiplier
    hp = rules.hparams(width, depth, **given.given())
    folded = rules.folded_multipliers(width, depth, multiplier)
    out = []
    for pattern, role, layer in groups:
        opt = rules.optimizers[role]
        values = hp[role]
        if layer is not None:
            values = absorbed_values(values, folded[layer], rules.absorbed[opt])
        out.append((pattern, opt, values))
    return out


def param_group_configs(
    rules: TorchRules,
    groups: Sequence[GroupPattern],
    optimizer_names: Mapping[str, str],
    width: float,
    depth: float,
    *,
    options: Mapping[str, Mapping[str, Any]] | None = None,
    **base: Any,
) -> list[Any]:
    """torchtitan's ``ParamGroupConfig`` list for ``OptimizersContainer.Config.param_groups``.

    ``optimizer_names``: optimizer -> the name torchtitan builds it by (``"AdamW"``). Each
    group's kwargs: lr, weight_decay, the eps of an optimizer that has an eps rule, the
    arguments its implementation fixes (torch.optim.Adam's decoupled_weight_decay=True,
    torch.optim.Muon's adjust_lr_fn="match_rms_adamw"), and ``options[name]`` for the
    optimizer torchtitan calls ``name`` (betas, momentum). An option that would change a
    fixed argument or a ruled number is refused. Where a law moves the momenta at the
    run's batch (Adam's: ``1 - beta`` times r_B), each group's betas / momentum are
    ``options``' or, without them, the implementation's defaults, moved; at the base run
    nothing is added (the groups as before, bit for bit).
    """
    from torchtitan.components.optimizer import ParamGroupConfig

    options = options or {}
    built = sorted(set(optimizer_names.values()))
    unknown = sorted(set(options) - set(built))
    if unknown:
        raise ConfigError(
            f"torchtitan param groups: options for {', '.join(unknown)}, which this "
            f"config does not build (it builds {', '.join(built)})"
        )
    momenta = rules.momentum_factors(**{k: base.get(k) for k in RUN_KEYS})
    out = []
    values_of = titan_group_values(rules, groups, width, depth, **base)
    for (_, role, _), (pattern, opt, values) in zip(groups, values_of, strict=True):
        impl = rules.implementations.get(opt)
        kwargs: dict[str, Any] = dict(impl.fixed) if impl is not None else {}
        extra = dict(options.get(optimizer_names[opt], {}))
        ruled = {
            "lr",
            "weight_decay",
            *kwargs,
            rules.eps_places.get(opt, ("eps", None))[0],
        }
        clash = sorted(k for k in extra if k in ruled)
        if clash:
            raise ConfigError(
                f"torchtitan param groups: {', '.join(clash)} for {optimizer_names[opt]} "
                "is set by the rules (pass the base values as lr=, weight_decay=, eps=)"
            )
        kwargs.update(extra)
        kwargs.update(lr=values["lr"], weight_decay=values["weight_decay"])
        if "eps" in values:
            kwargs[rules.eps_places.get(opt, ("eps", None))[0]] = values["eps"]
        where = f"{optimizer_names[opt]} {role}"
        kwargs.update(_titan_moved_momenta(impl, kwargs, momenta.get(role, 1.0), where))
        out.append(
            ParamGroupConfig(
                pattern=pattern,
                optimizer_name=optimizer_names[opt],
                optimizer_kwargs=kwargs,
            )
        )
    return out


def _titan_moved_momenta(
    impl: Any, kwargs: Mapping[str, Any], factor: float, where: str
) -> dict[str, Any]:
    """The momenta a batch law moves: each ``1 - beta`` (``kwargs``' value, else the
    implementation class's default) times ``factor``; nothing at factor 1.0."""
    if factor == 1.0:
        return {}
    defaults: dict[str, Any] = {}
    if impl is not None:
        module_name, _, class_name = impl.cls.rpartition(".")
        cls = getattr(importlib.import_module(module_name), class_name)
        defaults = {
            k: v.default
            for k, v in inspect.signature(cls).parameters.items()
            if v.default is not inspect.Parameter.empty
        }
    out: dict[str, Any] = {}
    for key in MOMENTUM_KEYS:
        value = kwargs.get(key, defaults.get(key))
        moved = moved_momentum(value, factor, f"{where} {key}")
        if moved is not None:
            out[key] = moved
    return out
