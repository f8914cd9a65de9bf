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
(:mod:`spectral.torch.apply.absorb`): the model is not changed. A mixture of experts is
covered: the routers are router_weight (put at their init std by megatron_scale_output_),
every expert's linear_fc2 carries alpha_hidden. megatron is imported only when the objects
are built.
"""

from __future__ import annotations

import math
import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import torch
from torch import nn

from spectral.errors import ConfigError, ConfigTypeError
from spectral.scaling import RUN_KEYS, BaseValue, BaseValues
from spectral.torch.apply.absorb import absorbed_values
from spectral.torch.optim.momenta import moved_beta
from spectral.engine.ties import tie_differences, tied_values_agree
from spectral.torch.rules import TorchRules

MegatronGroup = tuple[tuple[str, ...], str, str | None]
"""(fnmatch globs on the parameter name, role, layer whose multiplier it carries or None)."""


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


UNTIE = "--untie-embeddings-and-output-weights"
"""Megatron-LM's flag (``share_embeddings_and_output_weights=False`` on GPTModel)."""


def megatron_tie_refusal(rules: TorchRules) -> str | None:
    """Why the rules forbid a tied embedding and head (spectral.engine.ties decides), or None."""
    differences = tie_differences(rules)
    if not differences:
        return None
    opt = rules.optimizers.get("input_weight", "?")
    return (
        f"share_embeddings_and_output_weights=True: under {opt} the input and output "
        f"embedding rules differ in {'; '.join(differences)}, so one matrix cannot have "
        f"both; untie them ({UNTIE})"
    )


def _check_tie(rules: TorchRules, hp: Mapping[str, Mapping[str, float]]) -> None:
    """Refuse a tie the rules forbid, or base values that give the matrix two numbers."""
    why = megatron_tie_refusal(rules)
    if why is not None:
        raise ConfigError(why)
    tied_values_agree(hp, "embedding.word_embeddings.weight")


def megatron_group_values(
    rules: TorchRules,
    groups: Sequence[MegatronGroup],
    width: float,
    depth: float,
    *,
    tied: bool = False,
    **base: Any,
) -> list[tuple[tuple[str, ...], str, dict[str, Any]]]:
    """(globs, optimizer, numbers) per group: the role's lr, weight decay and eps, moved by
    the symmetry where the group carries its layer's multiplier. ``tied``: the head's
    globs join the embeddings' group (one matrix, the input role's numbers carrying
    alpha_in; the head's forward carries alpha_out / alpha_in, :func:`megatron_scale_output_`)."""
    if rules.absorbed is None:
        raise ConfigError(
            "Megatron takes the hook-free form: absorb the multipliers first"
        )
    given = BaseValues.of(base, "Megatron config overrides")
    hp = rules.hparams(width, depth, **given.given())
    _router_multiplier_is_one(rules, width, depth, given.multiplier)
    if tied:
        _check_tie(rules, hp)
        head = tuple(
            g for globs, role, _ in groups if role == "output_weight" for g in globs
        )
        groups = [
            (
                globs + head if (role, layer) == ("input_weight", "input") else globs,
                role,
                layer,
            )
            for globs, role, layer in groups
            if role != "output_weight"
        ]
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
    share_embeddings_and_output_weights: bool = False,
    betas: Sequence[float] = (0.9, 0.999),
    **base: Any,
) -> dict[Any, dict[str, Any]]:
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

    ``betas``: the ``OptimizerConfig``'s ``(adam_beta1, adam_beta2)`` (--adam-beta1,
    --adam-beta2; Megatron's defaults). Where a law moves the momenta at the run's batch
    (Adam's: ``1 - beta`` times r_B), each group gets them moved (``"betas"``, which
    Megatron hands the group as it is); at the base run no group gets any.

    ``share_embeddings_and_output_weights``: as given to GPTModel (Megatron-LM's default
    unless ``--untie-embeddings-and-output-weights``). True puts the head's name in the
    embeddings' key (a last pipeline stage's copy of the shared matrix gets its numbers),
    and refuses, in one line, rules under which the two roles differ (spectral.engine.ties).
    """
    from megatron.core.optimizer import ParamKey

    lr_ = _megatron_number(lr, "lr", positive=True)
    min_lr_ = _megatron_number(min_lr, "min_lr")
    if min_lr_ > lr_:
        raise ConfigError(f"min_lr must be at most lr, got {min_lr!r} > {lr!r}")
    wd = _megatron_number(weight_decay, "weight_decay")
    if not isinstance(share_embeddings_and_output_weights, bool):
        raise ConfigTypeError(
            "share_embeddings_and_output_weights must be True or False, got "
            f"{share_embeddings_and_output_weights!r}"
        )
    beta_pair = _megatron_betas(betas)
    momenta = {
        rules.optimizers[role]: f
        for role, f in rules.momentum_factors(
            **{k: base.get(k) for k in RUN_KEYS}
        ).items()
    }
    out: dict[Any, dict[str, Any]] = {}
    for globs, opt, values in megatron_group_values(
        rules,
        groups,
        width,
        depth,
        tied=share_embeddings_and_output_weights,
        lr=lr_,
        weight_decay=wd,
        **base,
    ):
        override = {"max_lr": values["lr"], "min_lr": values["lr"] * (min_lr_ / lr_)}
        override["wd_mult"] = values["weight_decay"] / wd if wd else 0.0
        if "eps" in values:
            override[rules.eps_places.get(opt, ("eps", None))[0]] = values["eps"]
        factor = momenta.get(opt, 1.0)
        # Megatron's --adam-beta1/2 moved; at the base run none written
        if factor != 1.0:
            override["betas"] = tuple(
                moved_beta(b, factor, f"{opt} {globs[0]} betas") for b in beta_pair
            )
        out[ParamKey(name=tuple(globs))] = override
    return out


def _megatron_betas(betas: object) -> tuple[float, float]:
    """(adam_beta1, adam_beta2), checked: two numbers in [0, 1)."""
    if not isinstance(betas, (tuple, list)) or len(betas) != 2:
        raise ConfigTypeError(f"betas must be (adam_beta1, adam_beta2), got {betas!r}")
    for b in betas:
        if isinstance(b, bool) or not isinstance(b, (int, float)):
            raise ConfigTypeError(f"betas must be two numbers, got {betas!r}")
        if not 0.0 <= b < 1.0:
            raise ConfigError(f"betas must each be in [0, 1), got {betas!r}")
    return float(betas[0]), float(betas[1])


def _positive_stds(stds: Mapping[str, float]) -> dict[str, float]:
    for where, std in stds.items():
        if not (std > 0 and math.isfinite(std)):
            raise ConfigError(
                f"init_std gives Megatron's {where} the std {std!r}: it draws N(0, std^2), "
                "so every init_std must be a finite number > 0"
            )
    return dict(stds)


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
    linear_proj, linear_fc2: their base std times alpha_hidden), ``embedding_init_method``
    (word and position embeddings: the input std times alpha_in), ``output_layer`` (the
    head: the output std times alpha_out) and, where the rules have a router role,
    ``router`` (a mixture of experts' ``mlp.router.weight`` and ``shared_experts.gate_weight``,
    E x n and 1 x n: the router's std, std / r_n; Megatron draws them with ``init_method``,
    so :func:`megatron_scale_output_` puts them there).

    At the base width and depth these are Megatron's own (with base multipliers 1): every
    one ``init_std`` but the branch ends, ``branch_end_std``, by default Megatron's
    ``scaled_init_method_normal``, the hidden std / sqrt(2 * BASE_DEPTH) computed as it
    does. Away from the base each moves by its rule (the branch ends as the hidden
    matrices). Raises ConfigError unless every std is finite and > 0."""
    if (
        init_std is None
    ):  # Megatron draws every matrix from its init_method: a std is needed
        raise ConfigTypeError(
            "init_std must be a number > 0 (Megatron's init_method std), got None"
        )
    hp = rules.hparams(
        width, depth, lr=1.0, init_std=init_std, multiplier=multiplier
    )  # lr unused
    folded = rules.folded_multipliers(width, depth, multiplier)
    hidden = hp["hidden_weight"]["init_std"]
    at_base = rules.hparams(
        rules.base_width,
        rules.base_depth,
        lr=1.0,
        init_std=init_std,
        multiplier=multiplier,
    )["hidden_weight"]["init_std"]
    if (
        branch_end_std is None
    ):  # megatron.core.utils.scaled_init_method_normal's formula
        base_end = at_base / math.sqrt(2.0 * rules.base_depth)
    else:
        base_end = _megatron_number(branch_end_std, "branch_end_std", positive=True)
    _positive_stds({"init_method": at_base})  # before dividing by it
    branch = base_end * (hidden / at_base)  # exactly base_end at the base
    stds = {
        "init_method": hidden,
        "output_layer_init_method": branch * folded["hidden"],
        "embedding_init_method": hp["input_weight"]["init_std"] * folded["input"],
        "output_layer": hp["output_weight"]["init_std"] * folded["output"],
    }
    if "router_weight" in hp:
        _router_multiplier_is_one(rules, width, depth, multiplier)
        stds["router"] = hp["router_weight"]["init_std"]
    return _positive_stds(stds)


def _router_multiplier_is_one(
    rules: TorchRules, width: float, depth: float, multiplier: BaseValue
) -> None:
    """The router's multiplier is its base value (1 unless given, docs/router.md): Megatron's
    router has no place for another, and this target does not absorb it (the hook-free
    hparams report every multiplier as 1, so the hooked form's is read)."""
    if "router_weight" not in rules.optimizers:
        return
    hooked = super(TorchRules, rules).hparams(
        width, depth, lr=1.0, multiplier=multiplier
    )
    alpha = hooked["router_weight"]["multiplier"]
    if alpha != 1.0:
        raise ConfigError(
            f"multiplier: the router's base multiplier {alpha!r} is not absorbed by the "
            "Megatron target (its rule has no width or depth factor): leave it at 1"
        )


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


@dataclass
class OutputMultiplier:
    """The forward hook on a tied head (``output_layer``, a ColumnParallelLinear returning
    ``(logits, bias)``): the shared matrix carries alpha_in (it is the embedding's), so the
    logits are multiplied by ``factor`` = alpha_out / alpha_in, what the hooked form's
    alpha_out is on the unscaled matrix. A plain float product: nothing for DDP, FSDP or
    torch.compile to trace but a multiply."""

    factor: float

    def __call__(self, module: nn.Module, args: Any, output: Any) -> Any:
        if isinstance(output, tuple):
            return (output[0] * self.factor, *output[1:])
        return output * self.factor


OUTPUT_SCALE = "_spectral_output_scale"
"""The attribute of an untied ``output_layer`` module in which megatron_scale_output_ keeps
the factor it multiplied the head by, so that a second call does not scale it again (an
attribute: a deepcopy keeps it; a model rebuilt, or loaded from a state_dict into a fresh
model, starts without it)."""


def megatron_language_models(chunk: nn.Module) -> list[tuple[str, nn.Module]]:
    """(name prefix, module) of each module of ``chunk`` that has Megatron's
    ``share_embeddings_and_output_weights`` (GPTModel, inside DDP / Float16Module)."""
    return [
        (name + "." if name else "", module)
        for name, module in chunk.named_modules()
        if isinstance(
            getattr(module, "share_embeddings_and_output_weights", None), bool
        )
    ]


def megatron_chunks(model: nn.Module | Iterable[nn.Module]) -> list[nn.Module]:
    """The model chunks: one module, or an iterable of modules (one line otherwise)."""
    if isinstance(model, nn.Module):
        return [model]
    chunks = list(model) if isinstance(model, Iterable) else None
    if chunks is None or not all(isinstance(c, nn.Module) for c in chunks):
        raise ConfigTypeError(
            "expected a Megatron model (an nn.Module) or a list of model chunks, got "
            f"{type(model).__name__}"
        )
    return chunks


def megatron_output_multiplier(head: nn.Module) -> OutputMultiplier | None:
    hooks = [h for h in head._forward_hooks.values() if isinstance(h, OutputMultiplier)]
    return hooks[0] if hooks else None


ROUTER_SCALE = "_spectral_router_scale"
"""The attribute of a router module (``mlp.router``; ``mlp.shared_experts`` for its gate) in
which megatron_scale_output_ keeps the factor it multiplied the matrix by, as OUTPUT_SCALE."""

_ROUTERS = (
    (re.compile(r"(^|\.)mlp\.router$"), "weight"),
    (re.compile(r"(^|\.)mlp\.shared_experts$"), "gate_weight"),
)
"""(module name, parameter): the router matrices of megatron-core's MoE layer, the
TopKRouter's E x n weight and the shared experts' 1 x n gate (router_weight, docs/router.md).
Megatron draws both with ``init_method``, the hidden matrices' std."""


def megatron_routers(chunk: nn.Module) -> list[tuple[str, nn.Module, nn.Parameter]]:
    """(parameter name, module, parameter) of every router matrix in ``chunk``."""
    out = []
    for name, module in chunk.named_modules():
        for pattern, attribute in _ROUTERS:
            p = getattr(module, attribute, None)
            if pattern.search(name) and isinstance(p, nn.Parameter):
                out.append((f"{name}.{attribute}", module, p))
    return out


def _scaled_before(
    module: nn.Module, attribute: str, where: str, factor: float
) -> bool:
    """Whether ``module`` was scaled by ``factor`` already; refuses another factor."""
    before = module.__dict__.get(attribute)
    if before is not None and before != factor:
        raise ConfigError(
            f"scale_output_layer_ already multiplied {where} by {before!r}; scaling it "
            f"again (by {factor!r}) would compound: build the model again to change width, "
            "depth or init_std"
        )
    return before is not None


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
    """Puts the head (and a mixture of experts' routers) at its rule, once, after the model
    is built and before training (or loading a checkpoint). Returns how many heads are at
    their rule (0 on a pipeline stage without one).

    Untied: GPTModel draws ``output_layer.weight`` with ``init_method`` (the hidden std),
    so it is multiplied by (output std * alpha_out) / hidden std, a deterministic scale
    that keeps every tensor-parallel shard's draw (1 at the base: Megatron's own head). A
    second call with the same arguments changes nothing; one with other arguments is
    refused (the head would be scaled twice). Tied (``share_embeddings_and_output_weights``):
    the shared matrix is the embedding's, so the head's forward gets an
    :class:`OutputMultiplier` of alpha_out / alpha_in (one, updated by a later call), and a
    tie the rules forbid is refused in one line naming --untie-embeddings-and-output-weights.
    Routers (``mlp.router.weight``, ``mlp.shared_experts.gate_weight``), drawn by Megatron
    with ``init_method`` too, are multiplied by the router std / hidden std (std / r_n over
    std / sqrt(r_n): 1 at the base), once, as the untied head. Everything is checked before
    anything is changed."""
    std = megatron_init_stds(rules, width, depth, init_std, multiplier=multiplier)
    factor = std["output_layer"] / std["init_method"]
    # checked first, applied after: (tied head, forward factor), (tensor, module, mark, factor)
    hooks: list[tuple[nn.Module, float]] = []
    scales: list[tuple[nn.Parameter, nn.Module, str, float]] = []
    done = 0
    for chunk in megatron_chunks(model):
        routers = megatron_routers(chunk)
        if routers and "router" not in std:
            raise ConfigError(
                f"{routers[0][0]}: a router, and the rules have no router_weight role "
                "(regenerate the module with this spectral)"
            )
        for where, module, p in routers:
            ratio = std.get("router", 0.0) / std["init_method"]
            if not _scaled_before(module, ROUTER_SCALE, where, ratio):
                scales.append((p, module, ROUTER_SCALE, ratio))
        for prefix, lm in megatron_language_models(chunk):
            head = getattr(lm, "output_layer", None)
            if not isinstance(head, nn.Module):
                continue
            if lm.share_embeddings_and_output_weights:
                hp = rules.hparams(
                    width, depth, lr=1.0, init_std=init_std, multiplier=multiplier
                )
                _check_tie(rules, hp)
                folded = rules.folded_multipliers(width, depth, multiplier)
                hooks.append((head, folded["output"] / folded["input"]))
                done += 1
                continue
            weight = getattr(head, "weight", None)
            if weight is None:
                continue
            where = f"{prefix}output_layer.weight"
            if not _scaled_before(head, OUTPUT_SCALE, where, factor):
                scales.append((weight, head, OUTPUT_SCALE, factor))
            done += 1
    for head, ratio in hooks:
        hook = megatron_output_multiplier(head)
        if hook is None:
            head.register_forward_hook(OutputMultiplier(ratio))
        else:
            hook.factor = ratio
    for p, module, attribute, by in scales:
        if attribute not in module.__dict__:  # a module seen twice (a shared one)
            p.mul_(by)
            module.__dict__[attribute] = by
    return done
