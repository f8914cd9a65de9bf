"""Megatron-core: what the generated module sets up with the overrides and init values of
:mod:`spectral.torch.optim.megatron`: the check of a model's optimizer overrides, the
parameters' hparams read from a Megatron GPT, the optimizer setup hook and
``configure_`` (the model provider's one call), for Megatron-LM's ``pretrain_gpt.py``.
megatron is imported only when the objects are built.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from fractions import Fraction
from typing import Any, cast

from torch import nn

from spectral.errors import ConfigError
from spectral.scaling import BaseValue
from spectral.torch.apply.absorb import hparams_by_parameter
from spectral.torch.model.placement import place
from spectral.torch.rules import TorchRules
from spectral.families.megatron import MEGATRON
from spectral.torch.optim.megatron import (
    OUTPUT_SCALE,
    ROUTER_SCALE,
    UNTIE,
    MegatronGroup,
    megatron_chunks,
    megatron_config_values,
    megatron_language_models,
    megatron_output_multiplier,
    megatron_overrides,
    megatron_routers,
    megatron_tie_refusal,
)


def _keys(overrides: Mapping[Any, Any], p: nn.Parameter, name: str) -> list[Any]:
    return [key for key in overrides if key.matches(p, name)]


def override_problems(
    rules: TorchRules,
    model: nn.Module | Iterable[nn.Module],
    overrides: Mapping[Any, Any],
) -> list[str]:
    """One line per problem, ``[]`` when the overrides cover the model: a trained
    parameter that no key of ``overrides`` matches (Megatron would train it with the
    global lr and weight decay) or that more than one key matches; a head
    scale_output_layer_ has not put at its rule; and with a tied embedding and head, a
    tie the rules forbid, or overrides built without share_embeddings_and_output_weights
    (the head's name in another key than the embedding's)."""
    problems = []
    for chunk in megatron_chunks(model):
        named = dict(chunk.named_parameters())
        for name, p in named.items():
            if not p.requires_grad:
                continue
            hits = _keys(overrides, p, name)
            if not hits:
                problems.append(
                    f"{name}: no override matches it (Megatron trains it with the global lr "
                    "and weight decay, not its rule's)"
                )
            elif len(hits) > 1:
                problems.append(f"{name}: {len(hits)} overrides match it, not one")
        for where, module, _ in megatron_routers(chunk):
            if ROUTER_SCALE not in module.__dict__:
                problems.append(
                    f"{where}: scale_output_layer_ has not run (the router starts at the "
                    "hidden matrices' std, not its rule's)"
                )
        for prefix, lm in megatron_language_models(chunk):
            head = getattr(lm, "output_layer", None)
            if not isinstance(head, nn.Module):
                continue
            if not lm.share_embeddings_and_output_weights:
                if named.get(prefix + "output_layer.weight") is not None and (
                    OUTPUT_SCALE not in head.__dict__
                ):
                    problems.append(
                        f"{prefix}output_layer.weight: scale_output_layer_ has not run (the "
                        "head starts at the hidden matrices' std, not its rule's)"
                    )
                continue
            why = megatron_tie_refusal(rules)
            if why is not None:
                problems.append(f"{prefix}embedding.word_embeddings.weight: {why}")
                continue
            if megatron_output_multiplier(head) is None:
                problems.append(
                    f"{prefix}output_layer: a tied head whose forward does not carry "
                    "alpha_out / alpha_in: call scale_output_layer_(model, width, depth) once"
                )
            shared = named.get(prefix + "embedding.word_embeddings.weight")
            shared = (
                shared
                if shared is not None
                else named.get(prefix + "output_layer.weight")
            )
            if shared is None:
                continue
            as_input = _keys(
                overrides, shared, prefix + "embedding.word_embeddings.weight"
            )
            as_head = _keys(overrides, shared, prefix + "output_layer.weight")
            if [id(k) for k in as_input] != [id(k) for k in as_head]:
                problems.append(
                    f"{prefix}output_layer.weight: the embedding and head are tied "
                    "(share_embeddings_and_output_weights=True) but the overrides give the "
                    "head's name another key: build them with config_overrides(..., "
                    f"share_embeddings_and_output_weights=True), or untie them ({UNTIE})"
                )
    return problems


def _megatron_adapter(model: nn.Module) -> Any:
    """The megatron family, with as many branch ends per layer as the model's transformer
    layers hold, read from their structure (not from the names the family's patterns
    match, so the placement's count still checks them): 2 in a dense layer (linear_proj,
    linear_fc2); in a MoE layer linear_proj, every SequentialMLP expert's linear_fc2 and the
    shared experts' (alpha_hidden scales the gated sum, linear in each of them). Refuses
    grouped experts in one line: every expert's matrices are one parameter, and the torch
    runtime places a multiplier on a module."""
    layers = ends = 0
    for name, module in model.named_modules():
        mlp = getattr(module, "mlp", None)
        if not isinstance(getattr(module, "self_attention", None), nn.Module):
            continue
        if not isinstance(mlp, nn.Module):
            continue
        layers += 1
        experts = getattr(mlp, "experts", None)
        if experts is None:
            ends += 2
            continue
        local = getattr(experts, "local_experts", None)
        if not isinstance(local, nn.ModuleList):
            raise ConfigError(
                f"parameter_hparams: {name}.mlp.experts ({type(experts).__name__}) holds every "
                "expert in one parameter per projection, where the torch runtime places a "
                "multiplier on a module: it lists SequentialMLP's experts only (the grouped "
                "experts' overrides go by name, docs/megatron.md)"
            )
        shared = isinstance(getattr(mlp, "shared_experts", None), nn.Module)
        ends += 1 + len(local) + int(shared)
    if layers == 0 or ends == 2 * layers:
        return MEGATRON
    # a Fraction, exact: the placement compares it times the depth with the count
    return MEGATRON._replace(branches_per_layer=cast(int, Fraction(ends, layers)))


def megatron_parameter_hparams(
    rules: TorchRules, model: nn.Module, width: float, depth: float, **base: Any
) -> dict[str, dict[str, Any]]:
    """Parameter name -> role, optimizer, carrier factor and numbers, as the torch runtime
    places them (:func:`spectral.torch.apply.absorb.hparams_by_parameter`, the reference the
    overrides are tested against) on a Megatron GPTModel, dense or with SequentialMLP
    experts (every expert's linear_fc2 carries alpha_hidden)."""
    placement = place(model, rules, adapter=_megatron_adapter(model))
    return hparams_by_parameter(rules, placement, width, depth, **base)


def _gpt_models(model: nn.Module | Iterable[nn.Module]) -> list[nn.Module]:
    """The language models (GPTModel) inside the chunks, wrappers and all."""
    return [
        lm
        for chunk in megatron_chunks(model)
        for _, lm in megatron_language_models(chunk)
    ]


def megatron_optimizer_overrides(
    rules: TorchRules,
    groups: Sequence[MegatronGroup],
    config: Any,
    model: nn.Module | Iterable[nn.Module],
) -> dict[Any, dict[str, float]]:
    """``config_overrides`` for ``get_megatron_optimizer(config, model_chunks, ...)`` read
    from what Megatron-LM's training script has at that call: the ``OptimizerConfig``
    (``lr``, ``min_lr``, ``weight_decay``, ``adam_eps``, ``adam_beta1``, ``adam_beta2``:
    --lr, --min-lr, --weight-decay, --adam-eps, --adam-beta1, --adam-beta2) and the model chunks (width ``hidden_size``, depth ``num_layers``, the tie
    ``share_embeddings_and_output_weights``). Refused in one line: --clip-grad above 0
    (Megatron would clip the hook-free gradients' norm), --decoupled-lr (every group's lr is
    its rule's), a non-Adam optimizer, and chunks that disagree or hold no GPTModel."""
    models = _gpt_models(model)
    if not models:
        raise ConfigError(
            "optimizer_overrides: no GPTModel in the model chunks (a module with "
            "share_embeddings_and_output_weights and config)"
        )
    sizes: set[tuple[int, int, bool]] = set()
    for lm in models:
        transformer: Any = getattr(lm, "config", None)
        tie: Any = getattr(lm, "share_embeddings_and_output_weights", False)
        sizes.add((transformer.hidden_size, transformer.num_layers, bool(tie)))
    if len(sizes) != 1:
        raise ConfigError(
            f"optimizer_overrides: the model chunks disagree: {sorted(sizes)}"
        )
    ((width, depth, tied),) = sizes
    if getattr(config, "optimizer", "adam") != "adam":
        raise ConfigError(
            f"--optimizer {config.optimizer}: this module's overrides are for Megatron's "
            "adam (AdamW), --optimizer adam"
        )
    if getattr(config, "clip_grad", 0.0):
        raise ConfigError(
            f"--clip-grad {config.clip_grad}: Megatron would clip the norm of the hook-free "
            "gradients, not the hooked form's (docs/megatron.md, Clipping); pass --clip-grad 0"
        )
    if getattr(config, "decoupled_lr", None) is not None:
        raise ConfigError(
            "--decoupled-lr: every group's lr is its rule's here (the embedding's and the "
            "head's too); leave --decoupled-lr and --decoupled-min-lr unset"
        )
    min_lr = config.min_lr if config.min_lr is not None else 0.0
    return megatron_overrides(
        rules,
        groups,
        width,
        depth,
        lr=config.lr,
        min_lr=min_lr,
        weight_decay=config.weight_decay,
        eps=config.adam_eps,
        betas=(config.adam_beta1, config.adam_beta2),
        share_embeddings_and_output_weights=tied,
    )


def megatron_configure_(
    rules: TorchRules,
    config: Any,
    init_std: BaseValue,
    *,
    multiplier: BaseValue = 1.0,
    branch_end_std: float | None = None,
) -> Any:
    """Sets the init fields of a built ``TransformerConfig`` (as Megatron-LM's
    ``core_transformer_config_from_args`` returns it) to :func:`megatron_config_values` at
    its own ``hidden_size`` and ``num_layers``; returns it. ``init_std`` is the base std
    (--init-method-std), given rather than read, because this overwrites
    ``init_method_std``."""
    values = megatron_config_values(
        rules,
        config.hidden_size,
        config.num_layers,
        init_std,
        multiplier=multiplier,
        branch_end_std=branch_end_std,
    )
    for key, value in values.items():
        setattr(config, key, value)
    return config
