"""``spectral codegen --framework torchtitan``: torchtitan's optimizer param_groups and init.

The module written holds the numbers of the torch config in the hook-free form (every
multiplier absorbed, :mod:`spectral.engine.absorb`) and the parameter-name patterns of
torchtitan's Llama3, one per role and per carrier of a multiplier (carriers first, since
torchtitan gives a parameter to the first pattern that matches). The patterns come from the
``torchtitan`` adapter (:mod:`spectral.families`), kept only where they match a
parameter torchtitan 0.3.0's Llama3 has (:data:`LLAMA3_PARAMETERS`): torchtitan raises on a
pattern that matches nothing. The runtime :mod:`spectral.torch.optim.torchtitan` turns them into
``ParamGroupConfig`` objects. Neither torch nor torchtitan is imported here.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

from ..errors import SpecError
from ..spec import OptimizerSpec
from ..templating import environment
from ..transfer import Plan
from .context import build
from .torch_records import absorbed_context, torch_kinds

__all__ = [
    "LLAMA3_PARAMETERS",
    "OPTIMIZER_NAMES",
    "check_options",
    "group_patterns",
    "render",
]

LLAMA3_PARAMETERS = (
    "tok_embeddings.weight",
    "layers.0.attention.qkv_linear.wqkv.weight",
    "layers.0.attention.wo.weight",
    "layers.0.feed_forward.w1.weight",
    "layers.0.feed_forward.w2.weight",
    "layers.0.feed_forward.w3.weight",
    "layers.0.attention_norm.weight",
    "layers.0.ffn_norm.weight",
    "norm.weight",
    "lm_head.weight",
)
"""The parameter names of one block and the rest of torchtitan 0.3.0's Llama3
(``torchtitan.models.llama3``; tests/codegen/test_torchtitan.py checks them against the package)."""

OPTIMIZER_NAMES = {"adamw": "AdamW", "adam": "Adam", "muon-kimi": "Muon"}
"""Catalog optimizer -> the name torchtitan builds it by: Adam and AdamW are torchtitan
0.3.0's own (``OptimizersContainer._resolve_optimizer_factory``, which also knows DistMuon,
which needs FlexShard's sharding metadata); "Muon" is torch.optim.Muon, which
:class:`spectral.frameworks.torchtitan.SpectralOptimizers` adds (Muon-Kimi: ``adjust_lr_fn=
"match_rms_adamw"``, no per-shape compensation, so one group per role serves every shape)."""

_LAYERS = (("input", "input"), ("hidden", "branches"), ("output", "output"))


def _adapter() -> Any:
    """The torchtitan adapter (spectral.families is data only: importing it imports no
    torch)."""
    from spectral.families.torchtitan import TORCHTITAN

    return TORCHTITAN


def group_patterns(names: tuple[str, ...] = LLAMA3_PARAMETERS) -> list[tuple[str, str, str | None]]:
    """(pattern, role, carried layer or None) for the parameters ``names``, carriers first:
    each name matches its own group's pattern before any other."""
    adapter = _adapter()
    carriers: dict[str, tuple[str, str, str | None]] = {}
    plain: dict[str, tuple[str, str, str | None]] = {}
    want: dict[str, tuple[str, str | None]] = {}
    for name in names:
        pattern, role = next((p, r) for p, r in adapter.roles if re.search(p, name))
        module, leaf = name.rsplit(".", 1)
        placed = [
            (lay, mp) for lay, field in _LAYERS for mp in getattr(adapter, field) if re.search(mp, module)
        ]
        if placed:
            layer, mp = placed[0]
            pattern = mp.removesuffix("$") + r"\." + leaf + "$"
            carriers.setdefault(pattern, (pattern, role, layer))
        else:
            layer = None
            plain.setdefault(pattern, (pattern, role, None))
        want[name] = (role, layer)
    order = [p for p, _ in adapter.roles]
    groups = [*carriers.values(), *sorted(plain.values(), key=lambda g: order.index(g[0]))]
    for name in names:  # first match wins: each name must land in a group of its own kind
        first = next(g for g in groups if re.search(g[0], name))
        if (first[1], first[2]) != want[name]:
            raise SpecError(f"torchtitan patterns: {name} would match {first[0]} first")
    return groups


def check_options(*, vendor: bool | None, absorb: bool) -> None:
    """Refuses ``vendor=True``: the module imports the runtime :mod:`spectral.torch`
    (``vendor=None`` writes that importing form, whatever
    :data:`~spectral.codegen.context.VENDOR_DEFAULT` says)."""
    if vendor:
        raise SpecError(
            "--vendor applies to --framework torch and jax only: the torchtitan module "
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
    """The torchtitan module's source, always hook-free (``absorb`` is implied); arguments
    as :func:`spectral.codegen.render`'s."""
    check_options(vendor=vendor, absorb=absorb)
    p, context = build(
        hidden, others, k, base_width=base_width, base_depth=base_depth,
        framework="torchtitan", catalog=catalog, command=command, all_roles=all_roles,
        absorb=absorb, base_run=base_run,
    )  # fmt: skip
    context["kinds"] = torch_kinds(context["kinds"], p)
    context["absorbed"] = absorbed_context(p)
    unknown = sorted(set(p.optimizers.values()) - set(OPTIMIZER_NAMES))
    if unknown:
        raise SpecError(
            f"--framework torchtitan builds {', '.join(OPTIMIZER_NAMES)} "
            f"(torchtitan's Adam and AdamW, torch.optim.Muon), not {', '.join(unknown)}"
        )
    groups = [g for g in group_patterns() if g[1] in p.optimizers]
    names = [{"name": n, "titan": OPTIMIZER_NAMES[n]} for n in dict.fromkeys(p.optimizers.values())]
    template = environment().get_template("torchtitan_config.py.j2")
    return template.render(**context, groups=groups, titan_names=names)
