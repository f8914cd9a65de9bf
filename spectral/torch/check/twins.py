"""Small twins of a model at other widths, for the check across widths.

A Hugging Face model is rebuilt from its own config with the width changed: the residual
width (``hidden_size``, ``n_embd`` or ``d_model``), every intermediate size in proportion, and
the number of heads in proportion (each head keeps its dimensions), with the layers cut to a
few; everything else (vocabulary, latent ranks, state sizes, built-in constants) is kept. Any
other model comes from the user's ``factory(width)``. The original model is only read (its
config and class), so it may live on the meta device.
"""

from __future__ import annotations

import copy
from collections.abc import Callable
from typing import Any

from torch import nn

from spectral.errors import ConfigError, ConfigTypeError, UnsupportedModelError
from spectral.torch.model.classify import model_config

_WIDTH_KEYS = ("hidden_size", "n_embd", "d_model")
_HEAD_KEYS = ("num_attention_heads", "n_head", "num_heads")
_LAYER_KEYS = ("num_hidden_layers", "n_layer", "num_layers")
_INTERMEDIATE_KEYS = ("n_inner", "ffn_dim", "d_ff")
"""Besides every ``*intermediate_size`` attribute: the MLP widths of GPT-2, OPT and T5."""

TWIN_LAYERS = 2
"""Layers of a twin rebuilt from a config: enough for a first and a last block."""


def _count(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and value > 0


def _key(config: Any, keys: tuple[str, ...]) -> str | None:
    return next((k for k in keys if _count(getattr(config, k, None))), None)


def twin_config(config: Any, width: int, layers: int = TWIN_LAYERS) -> Any:
    """A copy of a Hugging Face ``config`` at ``width`` with ``layers`` layers.

    Intermediate sizes keep their ratio to the width, heads keep their share of it
    (``num_key_value_heads`` keeps its group size); a width that is not a whole number of
    heads is refused in one line."""
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
    head_key = _key(config, _HEAD_KEYS)
    if head_key is not None:
        heads = getattr(config, head_key)
        per_head = old // heads
        if old % heads or width % per_head:
            raise ConfigError(
                f"width {width} is not a whole number of heads: {type(config).__name__} has "
                f"{per_head} of its width per head ({old} / {heads}); pick widths that are "
                f"multiples of {per_head}"
            )
        setattr(twin, head_key, width // per_head)
        kv = getattr(config, "num_key_value_heads", None)
        if _count(kv) and head_key == "num_attention_heads":
            twin.num_key_value_heads = max(
                1, (width // per_head) // max(1, heads // kv)
            )
    layer_key = _key(config, _LAYER_KEYS)
    if layer_key is not None:
        old_layers = getattr(config, layer_key)
        setattr(twin, layer_key, layers)
        for key, value in vars(config).items():
            # per-layer lists (Gemma2's and Qwen3's layer_types) follow the layer count
            if isinstance(value, list) and len(value) == old_layers:
                setattr(twin, key, copy.deepcopy(value[:layers]))
    return twin


def twin_builder(
    model: nn.Module, factory: Callable[[int], nn.Module] | None
) -> Callable[[int], nn.Module]:
    """``width -> a fresh model``: the user's factory, or the model's class built from its
    own config at that width (a Hugging Face model); a one-line error for neither."""
    if factory is not None:
        if not callable(factory):
            raise ConfigTypeError(
                f"factory must be a function of the width, got {factory!r}"
            )
        return factory
    config = model_config(model)
    target = getattr(model, "_orig_mod", model)  # a compiled model: its module's class
    if config is None or not hasattr(type(config), "to_dict"):
        raise UnsupportedModelError(
            f"{type(target).__name__} has no Hugging Face config to rebuild it from: pass "
            "factory=lambda width: ... (a model at that width) to check across widths"
        )

    def build(width: int) -> nn.Module:
        return type(target)(twin_config(config, width))

    return build


def twin_depth(model: nn.Module, branches: int, per_layer: int) -> int:
    """The twin's depth in layers, from its branch ends (the rules' depth counts layers)."""
    config = model_config(model)
    key = _key(config, _LAYER_KEYS) if config is not None else None
    if key is not None:
        return int(getattr(config, key))
    return max(1, -(-branches // max(1, per_layer)))
