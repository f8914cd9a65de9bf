"""``spectral codegen --framework megatron``: Megatron-core's optimizer overrides and init.

The module written holds the numbers of the torch config in the hook-free form (every
multiplier absorbed, :mod:`spectral.engine.absorb`; Megatron has no depth multiplier) and
the fnmatch globs of Megatron-core's GPTModel parameter names, one ``ParamKey`` per role and
per carrier of a multiplier. Megatron merges the overrides of every key that matches a
parameter, so the keys must be disjoint: :func:`group_globs` checks that each name of
:data:`GPT_PARAMETERS` (bare and under a wrapper's prefix) matches exactly one. The runtime
:mod:`spectral.torch.optim.megatron` builds the ``ParamKey`` map and the ``TransformerConfig``
values. Neither torch nor megatron is imported here.
"""

from __future__ import annotations

import fnmatch
import re
from collections.abc import Mapping
from typing import Any

from ..errors import SpecError
from ..spec import OptimizerSpec
from ..templating import environment
from ..transfer import Plan
from .context import build
from .torch_records import absorbed_context, torch_kinds

__all__ = ["CARRIED_PARAMETERS", "GPT_PARAMETERS", "OPTIMIZERS", "check_options", "group_globs", "render"]

GPT_PARAMETERS = (
    "embedding.word_embeddings.weight",
    "embedding.position_embeddings.weight",
    "decoder.layers.0.input_layernorm.weight",
    "decoder.layers.0.input_layernorm.bias",
    "decoder.layers.0.self_attention.linear_qkv.layer_norm_weight",
    "decoder.layers.0.self_attention.linear_qkv.layer_norm_bias",
    "decoder.layers.0.self_attention.linear_qkv.weight",
    "decoder.layers.0.self_attention.linear_qkv.bias",
    "decoder.layers.0.self_attention.linear_proj.weight",
    "decoder.layers.0.self_attention.linear_proj.bias",
    "decoder.layers.0.self_attention.q_layernorm.weight",
    "decoder.layers.0.self_attention.q_layernorm.bias",
    "decoder.layers.0.self_attention.k_layernorm.weight",
    "decoder.layers.0.self_attention.k_layernorm.bias",
    "decoder.layers.0.pre_mlp_layernorm.weight",
    "decoder.layers.0.pre_mlp_layernorm.bias",
    "decoder.layers.0.mlp.linear_fc1.layer_norm_weight",
    "decoder.layers.0.mlp.linear_fc1.layer_norm_bias",
    "decoder.layers.0.mlp.linear_fc1.weight",
    "decoder.layers.0.mlp.linear_fc1.bias",
    "decoder.layers.0.mlp.linear_fc2.weight",
    "decoder.layers.0.mlp.linear_fc2.bias",
    # a mixture of experts (num_moe_experts) in place of mlp.linear_fc1 / linear_fc2
    "decoder.layers.0.mlp.router.weight",
    "decoder.layers.0.mlp.router.bias",
    "decoder.layers.0.mlp.experts.local_experts.0.linear_fc1.weight",
    "decoder.layers.0.mlp.experts.local_experts.0.linear_fc1.bias",
    "decoder.layers.0.mlp.experts.local_experts.0.linear_fc2.weight",
    "decoder.layers.0.mlp.experts.local_experts.0.linear_fc2.bias",
    "decoder.layers.0.mlp.experts.linear_fc1.weight0",
    "decoder.layers.0.mlp.experts.linear_fc2.weight0",
    "decoder.layers.0.mlp.experts.weight1",
    "decoder.layers.0.mlp.experts.weight2",
    "decoder.layers.0.mlp.shared_experts.gate_weight",
    "decoder.layers.0.mlp.shared_experts.linear_fc1.weight",
    "decoder.layers.0.mlp.shared_experts.linear_fc2.weight",
    "decoder.final_layernorm.weight",
    "decoder.final_layernorm.bias",
    "output_layer.weight",
)
"""The parameter names of megatron-core 0.16.1's GPTModel, one block shown (learned
absolute positions, linear biases, QK-layernorm's head-sized gains with
``qk_layernorm=True``, untied head): the local spec's names (tests/codegen/test_megatron.py
checks them against the package, with and without QK-layernorm) and Transformer Engine's
fused norms (``linear_qkv.layer_norm_weight``, ``linear_fc1.layer_norm_weight``; that spec
needs Transformer Engine, so those names are from megatron-core's
``gpt_layer_specs.get_gpt_layer_with_transformer_engine_spec`` and TE's
``LayerNormLinear`` parameter names, tested on a stand-in with those names), and a mixture
of experts' (``num_moe_experts``): the router, the experts as SequentialMLP
(``local_experts.E``, checked against the package), TEGroupedMLP (``linear_fc1.weight0`` ..
``weight{E-1}``) and the legacy GroupedMLP (``weight1`` / ``weight2``; both need packages
not installable here, tested on stand-ins), and the shared experts with their gate."""

CARRIED_PARAMETERS = ((r"(^|\.)decoder\.layers\.\d+\.mlp\.experts\.weight2$", "hidden"),)
"""(parameter-name pattern, layer): parameters that carry a layer's multiplier although
their module is no branch end: the legacy GroupedMLP holds every expert's linear_fc1 and
linear_fc2 as ``weight1`` and ``weight2`` of one module, and the MoE layer's output (where
alpha_hidden goes) is linear in ``weight2``."""

OPTIMIZERS = {"adamw": "adam", "adam": "adam"}
"""Catalog optimizer -> Megatron's ``OptimizerConfig.optimizer``: its Adam with
``decoupled_weight_decay=True`` (the default) is AdamW (torch.optim.AdamW, or Transformer
Engine's / Apex's FusedAdam with ``adam_w_mode``); torch.optim.Adam with
decoupled_weight_decay=True, the catalog's adam, is the same step. One optimizer trains
every parameter here: megatron-core 0.16.1's Muon (``get_megatron_muon_optimizer``: Muon
for 2-D non-embedding weights, Adam for the rest) needs NVIDIA's emerging-optimizers,
whose only release (0.3.0) needs Python >= 3.12 (it imports typing.override), so Muon is
refused rather than written untested."""

_LAYERS = (("input", "input"), ("hidden", "branches"), ("output", "output"))


def _adapter() -> Any:
    from spectral.families.megatron import MEGATRON

    return MEGATRON


def _glob(name: str) -> str:
    """``layers.0.`` and ``local_experts.0.`` -> any index; TEGroupedMLP's ``weight0`` ->
    ``weight*`` (weight0 .. weight{E-1})."""
    glob = name.replace("layers.0.", "layers.*.").replace("local_experts.0.", "local_experts.*.")
    return re.sub(r"\.experts\.(linear_fc[12])\.weight0$", r".experts.\1.weight*", glob)


def group_globs(
    names: tuple[str, ...] = GPT_PARAMETERS,
) -> list[tuple[tuple[str, ...], str, str | None]]:
    """(globs, role, carried layer or None) for the parameters ``names``, one entry per
    role and carrier; each name matches its own entry's globs and no other's, bare or
    under a prefix (``module.`` of Megatron's DDP)."""
    adapter = _adapter()
    groups: dict[tuple[str, str | None], list[str]] = {}
    for name in names:
        role = next(r for p, r in adapter.roles if re.search(p, name))
        module = name.rsplit(".", 1)[0]
        layer = next(
            (
                lay
                for lay, field in _LAYERS
                for mp in getattr(adapter, field)
                if re.search(mp, module)
            ),
            next((lay for p, lay in CARRIED_PARAMETERS if re.search(p, name)), None),
        )
        glob = _glob(name)
        groups.setdefault((role, layer), []).extend([glob, "*." + glob])
    out = [(tuple(globs), role, layer) for (role, layer), globs in groups.items()]
    for name in names:
        for full in (name, "module." + name, "module.module." + name):
            hits = [g for g in out if any(fnmatch.fnmatchcase(full, x) for x in g[0])]
            if len(hits) != 1:
                raise SpecError(f"Megatron globs: {full} matches {len(hits)} keys, not one")
    return out


def check_options(*, vendor: bool | None, absorb: bool) -> None:
    """Refuses ``vendor=True``: the module imports the runtime :mod:`spectral.torch`."""
    if vendor:
        raise SpecError(
            "--vendor applies to --framework torch and jax only: the megatron module "
            "imports spectral.torch (pip install spectral-mup)"
        )


def render(
    hidden: str | OptimizerSpec | Plan,
    others: str | OptimizerSpec | None = None,
    k: int = 2,
    *,
    base_width: int,
    base_depth: int,
    catalog: Mapping[str, OptimizerSpec] | None = None,
    command: str | None = None,
    vendor: bool | None = None,
    all_roles: bool = False,
    absorb: bool = False,
    base_run: Mapping[str, float] | None = None,
) -> str:
    """The Megatron module's source, always hook-free (``absorb`` is implied); arguments
    as :func:`spectral.codegen.render`'s."""
    check_options(vendor=vendor, absorb=absorb)
    p, context = build(
        hidden, others, k, base_width=base_width, base_depth=base_depth,
        framework="megatron", catalog=catalog, command=command, all_roles=all_roles,
        absorb=absorb, base_run=base_run,
    )  # fmt: skip
    used = sorted(set(p.optimizers.values()))
    unknown = [o for o in used if o not in OPTIMIZERS]
    if any(o.startswith("muon") for o in unknown):
        raise SpecError(
            f"--framework megatron: not {', '.join(unknown)}: megatron-core 0.16.1's "
            "get_megatron_muon_optimizer needs NVIDIA's emerging-optimizers, whose only "
            "release (0.3.0) needs Python >= 3.12, so this target could not run it and does "
            "not write it; use --framework torch "
            "(docs/megatron.md, Optimizers)"
        )
    if unknown:
        raise SpecError(
            f"--framework megatron: Megatron-core trains every parameter with one optimizer "
            f"and builds its Adam (AdamW) by this target: {', '.join(OPTIMIZERS)}, "
            f"not {', '.join(unknown)}"
        )
    if len(used) > 1:
        raise SpecError(
            "--framework megatron: Megatron-core trains every parameter with one optimizer, "
            f"got {' and '.join(used)}"
        )
    context["kinds"] = torch_kinds(context["kinds"], p)
    context["absorbed"] = absorbed_context(p)
    groups = [g for g in group_globs() if g[1] in p.optimizers]
    template = environment().get_template("megatron_config.py.j2")
    return template.render(**context, groups=groups, megatron_optimizer=OPTIMIZERS[used[0]])
