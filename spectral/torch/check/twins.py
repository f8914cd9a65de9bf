"""Small twins of a model at other widths, for the check across widths.

A Hugging Face model is rebuilt from its own config with the width changed: the residual
width (``hidden_size``, ``n_embd`` or ``d_model``), every intermediate size in proportion, and
the number of heads in proportion (each head keeps its head_dim, and the query heads per KV
head stay the model's: :func:`head_plan`), with the layers cut to a few and the vocabulary
to TWIN_VOCAB tokens; everything else (latent ranks, state sizes, built-in constants) is
kept. Any other model comes from the user's ``factory(width)``. The original model is only read (its
config and class), so it may live on the meta device.
"""

from __future__ import annotations

import copy
import math
import warnings
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import torch
from torch import nn

from spectral.errors import ConfigError, ConfigTypeError, UnsupportedModelError
from spectral.torch.model.classify import model_config
from spectral.torch.model.shapes import head_dims

_WIDTH_KEYS = ("hidden_size", "n_embd", "d_model")
_HEAD_KEYS = ("num_attention_heads", "n_head", "num_heads")
_LAYER_KEYS = ("num_hidden_layers", "n_layer", "num_layers")
_INTERMEDIATE_KEYS = ("n_inner", "ffn_dim", "d_ff", "mamba_d_ssm", "mamba_n_heads")
"""Besides every ``*intermediate_size`` attribute: the MLP widths of GPT-2, OPT and T5,
and Falcon-H1's SSM width and head count (its head size stays)."""

TWIN_LAYERS = 2
"""Layers of a twin rebuilt from a config: enough for a first and a last block."""
TWIN_VOCAB = 1024
"""The most tokens a twin rebuilt from a config keeps (more where the user's example
input holds higher ids). The vocabulary does not grow with the width, so no slope sees
it, and it is most of a large twin's memory: a 32000-token table and readout at width
2048 hold 131M parameters, 2.1 GB with their gradients and Adam's two states."""


def _count(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and value > 0


def _key(config: Any, keys: tuple[str, ...]) -> str | None:
    return next((k for k in keys if _count(getattr(config, k, None))), None)


@dataclass(frozen=True)
class HeadPlan:
    """How the twins' attention heads follow the width: ``per_head`` of the width per query
    head (heads = width / per_head), ``group`` query heads per KV head (the model's own);
    the config's head_dim is kept."""

    per_head: int
    group: int
    note: str | None = None
    """Set when the twins cannot keep the model's own head size at the widths asked."""


def _heads(config: Any) -> tuple[str, int, int, int | None] | None:
    """(head-count key, heads, query heads per KV head, the config's head_dim) or None."""
    head_key = _key(config, _HEAD_KEYS)
    if head_key is None:
        return None
    heads = getattr(config, head_key)
    kv = getattr(config, "num_key_value_heads", None)
    group = 1
    if head_key == "num_attention_heads" and _count(kv) and heads % kv == 0:
        group = heads // kv
    head_dim = getattr(config, "head_dim", None)
    return head_key, heads, group, head_dim if _count(head_dim) else None


def head_plan(config: Any, widths: list[int]) -> HeadPlan | None:
    """The twins' heads at ``widths``: the model's own width per head where every width
    holds a whole number of its heads in whole groups (one KV head per ``group`` query
    heads); else the largest width per head, below the model's, that does (a note says
    so). Either way the group size and the config's head_dim are the model's: only the
    number of heads per unit of width changes. A one-line ConfigError when no width per
    head keeps the group; None for a config with no head count."""
    width_key, found = _key(config, _WIDTH_KEYS), _heads(config)
    if width_key is None or found is None or not widths:
        return None
    old, (_, heads, group, head_dim) = getattr(config, width_key), found
    per_head = old // heads if old % heads == 0 else None
    if per_head is not None and all(w % (per_head * group) == 0 for w in widths):
        return HeadPlan(per_head, group)
    common = math.gcd(*widths)
    own = head_dim or old // heads
    top = min(per_head or own, common // group)
    fits = next((s for s in range(top, 0, -1) if common % (s * group) == 0), None)
    name, listed = type(config).__name__, ", ".join(map(str, widths))
    shape = f"{heads} heads of head_dim {own}" + (
        f", {heads // group} KV heads" if group > 1 else ""
    )
    keeps = f"multiples of {per_head * group}" if per_head else "other widths"
    if fits is None:
        raise ConfigError(
            f"widths {listed} cannot keep {name}'s heads ({shape}: {group} query heads "
            f"per KV head): pick widths that are multiples of {group}; {keeps} keep its "
            "width per head too"
        )
    # a config with no head_dim of its own (GPT-2's) has width / heads per head: the
    # twins' heads are then narrower than the model's
    dim = f"head_dim {head_dim}" if head_dim else f"head_dim {fits}, not {own}"
    if group > 1:
        dim += f", {group} query heads per KV head"
    note = (
        f"the twins have a head per {fits} of the width ({dim}), not {name}'s one per "
        f"{old / heads:g} ({shape}): at widths {listed} its own leaves no whole group "
        f"of heads; {keeps} keep it"
    )
    return HeadPlan(fits, group, note)


def _cut_vocabulary(twin: Any, vocab: int) -> None:
    """The twin's vocabulary cut to ``vocab`` tokens, and the special token ids the config
    names (bos, eos, pad) that would fall outside it dropped."""
    size = getattr(twin, "vocab_size", None)
    if not isinstance(size, int) or not _count(size) or size <= vocab:
        return
    twin.vocab_size = vocab
    for key, value in vars(twin).items():
        if not key.endswith("_token_id"):
            continue
        if isinstance(value, list):
            kept = [v for v in value if not _count(v) or v < vocab]
            setattr(twin, key, kept or None)
        elif _count(value) and value >= vocab:
            setattr(twin, key, None)


def twin_config(
    config: Any,
    width: int,
    layers: int = TWIN_LAYERS,
    plan: HeadPlan | None = None,
    vocab: int | None = None,
) -> Any:
    """A copy of a Hugging Face ``config`` at ``width`` with ``layers`` layers.

    Intermediate sizes keep their ratio to the width, heads keep their share of it
    (``num_key_value_heads`` keeps its group size); ``plan`` (:func:`head_plan` over every
    width checked) sets the heads instead. Without one, a width that is not a whole number
    of the model's heads is refused in one line naming its head_dim. ``vocab``: the most
    tokens the twin keeps (None: the model's vocabulary)."""
    width_key = _key(config, _WIDTH_KEYS)
    if width_key is None:
        raise UnsupportedModelError(
            f"{type(config).__name__} has none of {', '.join(_WIDTH_KEYS)}: pass "
            "factory=lambda width: ... to build the model at other widths"
        )
    old = getattr(config, width_key)
    twin = copy.deepcopy(config)
    setattr(twin, width_key, width)
    ratio = width / old
    for key, value in vars(config).items():
        if (key.endswith("intermediate_size") or key in _INTERMEDIATE_KEYS) and _count(
            value
        ):
            setattr(twin, key, max(1, round(value * ratio)))
    found = _heads(config)
    if found is not None:
        head_key, heads, group, head_dim = found
        if plan is None and (old % heads or width * heads % old):
            raise ConfigError(
                f"width {width} is not a whole number of heads: {type(config).__name__} "
                f"has {heads} heads (head_dim {head_dim or old // heads}) over a width of "
                f"{old}; pick widths that are multiples of {old // math.gcd(old, heads)}"
            )
        plan = plan or HeadPlan(old // heads, group)
        setattr(twin, head_key, width // plan.per_head)
        kv = getattr(config, "num_key_value_heads", None)
        if head_key == "num_attention_heads" and _count(kv):
            twin.num_key_value_heads = max(1, width // plan.per_head // group)
    if vocab is not None:
        _cut_vocabulary(twin, vocab)
    layer_key = _key(config, _LAYER_KEYS)
    if layer_key is not None:
        old_layers = getattr(config, layer_key)
        setattr(twin, layer_key, layers)
        for key, value in vars(config).items():
            # per-layer lists (Gemma2's and Qwen3's layer_types) follow the layer count
            if isinstance(value, list) and len(value) == old_layers:
                setattr(twin, key, copy.deepcopy(value[:layers]))
    return twin


class TwinBuilder:
    """``width -> a fresh twin``: the user's factory, or the model's class built from its
    own config at that width. :meth:`problems` names what the built twins show that the
    rules do not cover (a head count that stays fixed as the width grows)."""

    def __init__(self, build: Callable[[int], nn.Module], note: str | None = None):
        self._build = build
        self.note = note
        self.dims: dict[int, tuple[set[int], bool]] = {}
        """width -> (the twin's head dimensions, whether its attention scales by 1/d)"""

    def __call__(self, width: int) -> nn.Module:
        twin = self._build(width)
        if isinstance(twin, nn.Module) and width not in self.dims:
            self.dims[width] = (head_dims(twin), _one_over_d(twin))
        return twin

    def problems(self) -> list[str]:
        """A head dimension that grows with the width (the head count fixed), unless the
        attention scales its logits by 1/head_dim (then a fixed count is fine)."""
        dims = {w: d for w, (d, _) in sorted(self.dims.items()) if len(d) == 1}
        if len(dims) < 2 or len({min(d) for d in dims.values()}) == 1:
            return []
        if all(over_d for _, over_d in self.dims.values()):
            return []
        seen = ", ".join(f"{min(d)} at width {w}" for w, d in dims.items())
        heads = ", ".join(f"{w // min(d)}" for w, d in dims.items())
        line = (
            f"the head count stays fixed as the width grows (heads {heads}; head_dim "
            f"{seen}): the rules assume a fixed head_dim (heads = width / head_dim) or "
            "1/head_dim attention scaling; build the model with a fixed head_dim and "
            "width // head_dim heads"
        )
        return [line]


def _one_over_d(model: nn.Module) -> bool:
    """Whether every attention module with a head_dim scales its logits by 1/head_dim
    (its ``scaling`` attribute, as Hugging Face's attention keeps it)."""
    found = False
    for module in model.modules():
        dim, scaling = (
            getattr(module, "head_dim", None),
            getattr(module, "scaling", None),
        )
        if isinstance(dim, int) and _count(dim) and isinstance(scaling, float):
            if not math.isclose(scaling, 1.0 / dim, rel_tol=1e-6):
                return False
            found = True
    return found


def _highest_id(value: Any) -> int:
    """The highest integer in the integer tensors of (nested) ``value``; -1 for none."""
    if isinstance(value, torch.Tensor):
        if value.is_floating_point() or value.is_complex() or value.numel() == 0:
            return -1
        return int(value.max())
    if isinstance(value, (tuple, list)):
        return max((_highest_id(v) for v in value), default=-1)
    if isinstance(value, dict):
        return max((_highest_id(v) for v in value.values()), default=-1)
    return -1


def twin_builder(
    model: nn.Module,
    factory: Callable[[int], nn.Module] | None,
    widths: list[int] | None = None,
    example_input: Any = None,
) -> TwinBuilder:
    """``width -> a fresh model``: the user's factory, or the model's class built from its
    own config at that width (a Hugging Face model; its heads by :func:`head_plan` over
    ``widths``, which warns when the twins cannot keep the model's head size; at most
    TWIN_VOCAB tokens, or as many as ``example_input``'s ids need); a one-line error for
    neither."""
    if factory is not None:
        if not callable(factory):
            raise ConfigTypeError(
                f"factory must be a function of the width, got {factory!r}"
            )
        return TwinBuilder(factory)
    config = model_config(model)
    target = getattr(model, "_orig_mod", model)  # a compiled model: its module's class
    if config is None or not hasattr(type(config), "to_dict"):
        raise UnsupportedModelError(
            f"{type(target).__name__} has no Hugging Face config to rebuild it from: pass "
            "factory=lambda width: ... (a model at that width) to check across widths"
        )
    plan = head_plan(config, list(widths or []))
    if plan is not None and plan.note is not None:
        warnings.warn(plan.note, UserWarning, stacklevel=3)

    vocab = max(TWIN_VOCAB, _highest_id(example_input) + 1)

    def build(width: int) -> nn.Module:
        return type(target)(twin_config(config, width, plan=plan, vocab=vocab))

    return TwinBuilder(build, plan.note if plan is not None else None)


def twin_depth(model: nn.Module, branches: int, per_layer: int) -> int:
    """The twin's depth in layers, from its branch ends (the rules' depth counts layers)."""
    config = model_config(model)
    key = _key(config, _LAYER_KEYS) if config is not None else None
    if key is not None:
        return int(getattr(config, key))
    return max(1, -(-branches // max(1, per_layer)))
