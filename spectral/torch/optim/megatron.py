"""Megatron-core: per-parameter optimizer overrides and TransformerConfig init values.

megatron-core (0.16.1) builds its optimizer with ``get_megatron_optimizer(config,
model_chunks, config_overrides)``: ``config_overrides`` maps a ``ParamKey`` (fnmatch globs
on the parameter name) to a ``ParamGroupOverride`` dict; the overrides of every key that
matches a parameter are merged (conflicting values raise) and the parameters with equal
merged overrides share a group. Its ``OptimizerParamScheduler`` writes each group's ``lr``
from the group's ``max_lr`` / ``min_lr`` and its ``weight_decay`` as the scheduled weight
decay times the group's ``wd_mult`` on every step; any other key (``eps``) goes to the
optimizer's group as it is. A module written by ``spectral codegen --framework megatron``
holds one key per role and per carrier of a multiplier (disjoint globs) and binds
:func:`megatron_overrides` to them. Megatron has no block multipliers of its own (0.16.1
none; later versions a width-only ``use_mup``), so the multipliers are absorbed
(:mod:`spectral.torch.apply.absorb`): the model is not changed. megatron is imported only
when the objects are built.
"""

from __future__ import annotations

import math
import re
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

import torch
from torch import nn

from spectral.errors import ConfigError, ConfigTypeError
from spectral.scaling import BaseValue, BaseValues
from spectral.torch.apply.absorb import absorbed_values
from spectral.torch.rules import TorchRules

MegatronGroup = tuple[tuple[str, ...], str, str | None]
"""(fnmatch globs on the parameter name, role, layer whose multiplier it carries or None)."""

OUTPUT_LAYER = r"(^|\.)output_layer\.weight$"
"""The head's weight in Megatron's GPTModel: drawn with ``config.init_method`` (the hidden
matrices' init), so its own std is set by :func:`megatron_scale_output_`."""


def _megatron_number(value: object, what: str, *, positive: bool = False) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise ConfigTypeError(
            f"{what} must be a number (Megatron schedules one global value), "
            f"got {type(value).__name__}"
        )
    if value < 0 or (positive and value == 0) or math.isnan(value):
        raise ConfigError(
            f"{what} must be a number {'> 0' if positive else '>= 0'}, got {value!r}"
        )
    return float(value)


def megatron_group_values(
    rules: TorchRules,
    groups: Sequence[MegatronGroup],
    width: float,
    depth: float,
    **base: Any,
) -> list[tuple[tuple[str, ...], str, dict[str, Any]]]:
    """(globs, optimizer, numbers) per group: the role's lr, weight decay and eps, moved by
    the symmetry where the group carries its layer's multiplier."""
    if rules.absorbed is None:
        raise ConfigError(
            "Megatron takes the hook-free form: absorb the multipliers first"
        )
    given = BaseValues.of(base, "Megatron config overrides")
    hp = rules.hparams(width, depth, **given.given())
    folded = rules.folded_multipliers(width, depth, given.multiplier)
    out = []
    for globs, role, layer in groups:
        opt = rules.optimizers[role]
        values = hp[role]
        if layer is not None:
            values = absorbed_values(values, folded[layer], rules.absorbed[opt])
        out.append((globs, opt, values))
    return out


def megatron_overrides(
    rules: TorchRules,
    groups: Sequence[MegatronGroup],
    width: float,
    depth: float,
    *,
    lr: float,
    min_lr: float = 0.0,
    weight_decay: float = 0.0,
    **base: Any,
) -> dict[Any, dict[str, float]]:
    """``config_overrides`` for ``get_megatron_optimizer``: ``ParamKey(name=globs)`` ->
    ``{"max_lr", "min_lr", "wd_mult"[, "eps"]}`` per group.

    ``lr``, ``min_lr`` and ``weight_decay`` are the numbers given to Megatron's
    ``OptimizerConfig`` (``--lr``, ``--min-lr``, ``--weight-decay``): each group's max_lr
    is its rule's lr, its min_lr that lr times ``min_lr / lr`` (so every ratio holds along
    the whole schedule), and its wd_mult its rule's weight decay over ``weight_decay`` (0
    for the biases and norm gains, whose rule has none unless their role is named: the
    no-decay Megatron applies to 1-D parameters and biases by default, which passing
    overrides switches off, is kept this way). ``eps`` and ``multiplier`` as in
    ``hparams``; an optimizer with an eps rule gets each group's eps.
    """
    from megatron.core.optimizer import ParamKey

    lr_ = _megatron_number(lr, "lr", positive=True)
    min_lr_ = _megatron_number(min_lr, "min_lr")
    if min_lr_ > lr_:
        raise ConfigError(f"min_lr must be at most lr, got {min_lr!r} > {lr!r}")
    wd = _megatron_number(weight_decay, "weight_decay")
    out: dict[Any, dict[str, float]] = {}
    for globs, opt, values in megatron_group_values(
        rules, groups, width, depth, lr=lr_, weight_decay=wd, **base
    ):
        override = {"max_lr": values["lr"], "min_lr": values["lr"] * (min_lr_ / lr_)}
        override["wd_mult"] = values["weight_decay"] / wd if wd else 0.0
        if "eps" in values:
            override[rules.eps_places.get(opt, ("eps", None))[0]] = values["eps"]
        out[ParamKey(name=tuple(globs))] = override
    return out


def megatron_init_stds(
    rules: TorchRules,
    width: float,
    depth: float,
    init_std: BaseValue = 0.02,
    *,
    multiplier: BaseValue = 1.0,
    branch_end_std: float | None = None,
) -> dict[str, float]:
    """The stds Megatron's GPTModel draws, by where it draws them: ``init_method`` (the
    hidden matrices linear_qkv, linear_fc1), ``output_layer_init_method`` (the branch ends
    linear_proj, linear_fc2: the hidden std times alpha_hidden), ``embedding_init_method``
    (word and position embeddings: the input std times alpha_in) and ``output_layer`` (the
    head: the output std times alpha_out).

    ``branch_end_std``: the branch ends' std at the base width and depth, moved from there
    as the hidden std is (default: the hidden role's, as the rules have it). Megatron's own
    default is ``init_method_std / sqrt(2 * num_layers)``: pass
    ``0.02 / math.sqrt(2 * BASE_DEPTH)`` to keep it at the base."""
    hp = rules.hparams(
        width, depth, lr=1.0, init_std=init_std, multiplier=multiplier
    )  # lr unused
    folded = rules.folded_multipliers(width, depth, multiplier)
    hidden = hp["hidden_weight"]["init_std"]
    branch = hidden
    if branch_end_std is not None:
        at_base = rules.hparams(
            rules.base_width,
            rules.base_depth,
            lr=1.0,
            init_std=init_std,
            multiplier=multiplier,
        )["hidden_weight"]["init_std"]
        branch = (
            hidden
            * _megatron_number(branch_end_std, "branch_end_std", positive=True)
            / at_base
        )
    return {
        "init_method": hidden,
        "output_layer_init_method": branch * folded["hidden"],
        "embedding_init_method": hp["input_weight"]["init_std"] * folded["input"],
        "output_layer": hp["output_weight"]["init_std"] * folded["output"],
    }


def megatron_config_values(
    rules: TorchRules,
    width: float,
    depth: float,
    init_std: BaseValue = 0.02,
    *,
    multiplier: BaseValue = 1.0,
    branch_end_std: float | None = None,
) -> dict[str, Any]:
    """Keyword arguments for Megatron's ``TransformerConfig``: the init methods (Megatron's
    own ``init_method_normal``) with the stds of :func:`megatron_init_stds`, and
    ``softmax_scale=None`` (Megatron's 1/sqrt(kv_channels): the rules assume a fixed head
    dimension, heads = width / kv_channels, so the scale does not move with the width)."""
    from megatron.core.utils import init_method_normal

    std = megatron_init_stds(
        rules,
        width,
        depth,
        init_std,
        multiplier=multiplier,
        branch_end_std=branch_end_std,
    )
    return {
        "init_method_std": std["init_method"],
        "init_method": init_method_normal(std["init_method"]),
        "output_layer_init_method": init_method_normal(std["output_layer_init_method"]),
        "embedding_init_method_std": std["embedding_init_method"],
        "embedding_init_method": init_method_normal(std["embedding_init_method"]),
        "softmax_scale": None,
    }


@torch.no_grad()
def megatron_scale_output_(
    rules: TorchRules,
    model: nn.Module | Iterable[nn.Module],
    width: float,
    depth: float,
    init_std: BaseValue = 0.02,
    *,
    multiplier: BaseValue = 1.0,
) -> int:
    """Moves the head's init to its rule: GPTModel draws ``output_layer.weight`` with
    ``init_method`` (the hidden std), so it is multiplied by (output std * alpha_out) /
    hidden std, a deterministic scale that keeps every tensor-parallel shard's draw. Call
    once, after the model is built and before training (or loading a checkpoint). Returns
    how many tensors it scaled (0 on a pipeline stage without the head)."""
    std = megatron_init_stds(rules, width, depth, init_std, multiplier=multiplier)
    factor = std["output_layer"] / std["init_method"]
    chunks = [model] if isinstance(model, nn.Module) else list(model)
    done = 0
    for chunk in chunks:
        for name, p in chunk.named_parameters():
            if re.search(OUTPUT_LAYER, name):
                p.mul_(factor)
                done += 1
    return done


def override_problems(
    model: nn.Module | Iterable[nn.Module], overrides: Mapping[Any, Any]
) -> list[str]:
    """One line per trained parameter that no key of ``overrides`` matches (Megatron would
    train it with the global lr and weight decay) or that more than one key matches; ``[]``
    when every parameter has exactly one key."""
    chunks = [model] if isinstance(model, nn.Module) else list(model)
    problems = []
    for chunk in chunks:
        for name, p in chunk.named_parameters():
            if not p.requires_grad:
                continue
            hits = [key for key in overrides if key.matches(p, name)]
            if not hits:
                problems.append(
                    f"{name}: no override matches it (Megatron trains it with the global lr "
                    "and weight decay, not its rule's)"
                )
            elif len(hits) > 1:
                problems.append(f"{name}: {len(hits)} overrides match it, not one")
    return problems
