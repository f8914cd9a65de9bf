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

from collections.abc import Mapping, Sequence
from typing import Any


from spectral.errors import ConfigError
from spectral.scaling import BaseValues
from spectral.torch.apply.absorb import absorbed_values
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
    optimizer torchtitan calls ``name`` (betas, momentum: what no rule moves). An option
    that would change a fixed argument or a ruled number is refused.
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
    out = []
    for pattern, opt, values in titan_group_values(rules, groups, width, depth, **base):
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
        out.append(
            ParamGroupConfig(
                pattern=pattern,
                optimizer_name=optimizer_names[opt],
                optimizer_kwargs=kwargs,
            )
        )
    return out
