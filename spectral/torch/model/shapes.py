"""Which dimensions of each parameter grow with the width, read off the model itself.

A parameter's rule depends on where it sits (the input, inside a residual branch, the
readout: names say that) and on which of its dimensions grow with the width. Names cannot
say the second: DeepSeek-V3's ``q_a_proj`` maps the width to a fixed rank, Mamba's
``x_proj`` maps the inner width to a fixed ``time_step_rank + 2 * state_size``. So the
runtime compares the model with a twin at another width, built on the meta device (no
memory is spent): a dimension whose size differs between the two grows with the width,
one that stays put is fixed (microsoft/mup's ``set_base_shapes`` decides the same way).

The twin comes from, in this order: what :func:`set_base_shapes` recorded (a
``base_model=`` at another width, or a ``factory(width)``), or, for a Hugging Face model,
the model's own config rescaled: the hidden size, every intermediate size and the head
counts doubled, the head dimension and everything else (ranks, state sizes, vocabulary,
built-in constants) kept. A model with neither has no reading, and its roles are its
names' alone.
"""

from __future__ import annotations

import copy
import math
import re
from collections.abc import Callable
from typing import Any, TypedDict

import torch
from torch import nn

from spectral.errors import ConfigError, ConfigTypeError, UnsupportedModelError
from spectral.engine.dims import GROWS
from spectral.scaling import Rules

Dims = tuple[bool, ...]
"""Per dimension of a parameter: True where its size grows with the width."""

BASE_SHAPES = "spectral_base_shapes"
"""The attribute a model keeps its :class:`BaseShapes` in (as microsoft/mup's
``set_base_shapes`` writes ``p.infshape`` on each parameter): written by
:func:`record_base_shapes` (``set_base_shapes``) or by the first reading of a Hugging Face
config; a deep copy or a pickle of the model carries it."""


class BaseShapes(TypedDict):
    """Which dimension of each parameter grows with the width, read once for a model (a
    plain dict at run time: a pickled model carries it without naming a spectral class,
    which a vendored config's module would be)."""

    dims: dict[str, Dims]
    """Parameter name -> per-dimension "grows" flags."""
    mixed: dict[str, str]
    """Parameter name -> how one of its dimensions grows out of proportion with the width
    (a fused projection whose blocks grow differently)."""
    source: str
    """"set_base_shapes" (the user's record) or "config" (a Hugging Face config rescaled)."""


def base_shapes(model: nn.Module) -> tuple[nn.Module, BaseShapes] | None:
    """(the module holding it, the record) for the first module of ``model`` (itself, or
    the one inside DDP) that holds a :class:`BaseShapes`, else None."""
    for module in model.modules():
        record: BaseShapes | None = module.__dict__.get(BASE_SHAPES)
        if isinstance(record, dict) and "dims" in record:
            return module, record
    return None


# config fields that are the width, an intermediate (MLP / expert / SSM inner) size or a
# head count; all else is kept. The head dimension stays put: heads = width / head_dim.
_WIDTH_FIELDS = re.compile(
    r"^(hidden_size|(\w+_)?intermediate_size|n_inner|(\w+_)?ffn_dim|d_ff|"
    r"num_attention_heads|num_key_value_heads|num_kv_heads|num_heads|"
    r"(encoder|decoder)_attention_heads|"
    r"attention_hidden_size|word_embed_proj_dim|mamba_d_ssm|mamba_n_heads)$"
)


def hf_model(model: nn.Module) -> nn.Module | None:
    """The outermost Hugging Face PreTrainedModel in ``model`` (under DDP or
    torch.compile the model is inside a wrapper), or None."""
    for module in model.modules():
        config = getattr(module, "config", None)
        if (
            config is not None
            and hasattr(type(module), "config_class")
            and hasattr(config, "to_dict")
        ):
            return module
    return None


def rescaled_config(config: Any, factor: int = 2) -> Any:
    """A copy of a Hugging Face config at ``factor`` times the width: the hidden size,
    every intermediate size and the head counts multiplied, everything else kept."""
    new = copy.deepcopy(config)
    hidden = getattr(config, "hidden_size", None)
    if isinstance(hidden, bool) or not isinstance(hidden, int):
        raise UnsupportedModelError(
            f"{type(config).__name__} has no integer hidden_size to rescale; pass "
            "set_base_shapes(model, factory=...) or base_model="
        )
    # the standard names too: GPT-2's and GPTBigCode's n_head is num_attention_heads
    # through the config's attribute_map, which to_dict does not list
    fields = {"hidden_size", "num_attention_heads", *config.to_dict()}
    for key in sorted(fields):
        value = getattr(config, key, None)
        if (
            _WIDTH_FIELDS.match(key)
            and isinstance(value, int)
            and not isinstance(value, bool)
        ):
            setattr(new, key, value * factor)
    return new


_FUSED_ATTENTION = re.compile(r"(attn|attention|qkv|query_key_value)[^.]*\.[^.]+$")
"""A parameter of an attention module's own projection (c_attn, qkv_proj,
query_key_value), where a multi-query key/value block may sit beside the queries."""


def _mixed(small: nn.Module, large: nn.Module) -> dict[str, str]:
    """Parameter name -> a description, for each dimension that grows with the width but
    not in proportion to it (n + 2 * head_dim: GPTBigCode's multi-query c_attn holds the
    queries, which grow, and one key and one value head, which do not). The width's own
    ratio is the one most dimensions that grow share."""
    larger = dict(large.named_parameters())
    pairs = [
        (name, d, a, b)
        for name, p in small.named_parameters()
        if name in larger and p.ndim == larger[name].ndim
        for d, (a, b) in enumerate(zip(p.shape, larger[name].shape, strict=True))
        if a != b and a > 0
    ]
    if not pairs:
        return {}
    ratios = [b / a for _, _, a, b in pairs]
    ratio = max(set(ratios), key=ratios.count)
    out: dict[str, str] = {}
    for name, d, a, b in pairs:
        # attention's fused projections only: a fused SSM projection (Mamba2's in_proj,
        # its B and C blocks of a fixed state size) measures on its rules across widths
        if not _FUSED_ATTENTION.search(name):
            continue
        if abs(b / a - ratio) > 1e-9 and name not in out:
            fixed = (ratio * a - b) / (
                ratio - 1.0
            )  # a = grows + fixed, b = ratio * grows + fixed
            out[name] = (
                f"dimension {d}: {a} at one width, {b} at {ratio:g}x, a block of {fixed:g} that does not grow"
            )
    return out


def fused_blocks(model: nn.Module) -> dict[int, str]:
    """id(parameter) -> how a dimension of it grows out of proportion with the width, for
    the parameters the reading (:func:`width_dims`) covers; read it first."""
    found = base_shapes(model)
    if found is None:
        return {}
    module, record = found
    mixed = record["mixed"]
    return {
        id(p): mixed[name]
        for name, p in module.named_parameters(remove_duplicate=False)
        if name in mixed
    }


def _dims(small: torch.Tensor, large: torch.Tensor) -> Dims | None:
    if small.ndim != large.ndim:
        return None
    return tuple(a != b for a, b in zip(small.shape, large.shape, strict=True))


def _compare(small: nn.Module, large: nn.Module) -> dict[str, Dims]:
    """Parameter name -> which dims differ between two instances of one model."""
    larger = dict(large.named_parameters())
    out = {}
    for name, p in small.named_parameters():
        if name in larger:
            dims = _dims(p, larger[name])
            if dims is not None:
                out[name] = dims
    return out


def _on_meta(build: Callable[[], nn.Module], what: str) -> nn.Module:
    try:
        with torch.device("meta"):
            twin = build()
    except Exception as exc:  # noqa: BLE001 - the user's or transformers' code: one line
        first = (str(exc).splitlines() or [""])[0]
        raise UnsupportedModelError(
            f"could not build {what} on the meta device to read which dimensions grow "
            f"with the width: {type(exc).__name__}: {first}"
        ) from None
    if not isinstance(twin, nn.Module):
        raise ConfigTypeError(
            f"{what} returned {type(twin).__name__}, not an nn.Module"
        )
    return twin


def record_base_shapes(
    model: nn.Module,
    base_model: nn.Module | None = None,
    *,
    factory: Callable[[int], nn.Module] | None = None,
    widths: tuple[int, int] = (64, 128),
) -> dict[str, Dims]:
    """Record which dimension of each parameter grows with the width, for a model whose
    config cannot be rescaled (anything but Hugging Face): ``base_model`` is the same
    model at another width (build it under ``torch.device("meta")``: no memory is
    spent), or ``factory(width)`` builds one, called here at two ``widths`` on the meta
    device. Returns parameter name -> per-dimension "grows" flags."""
    if not isinstance(model, nn.Module):
        raise ConfigTypeError(
            f"set_base_shapes: model must be a torch.nn.Module, got {type(model).__name__}"
        )
    if (base_model is None) == (factory is None):
        raise ConfigError(
            "set_base_shapes: pass exactly one of base_model= or factory="
        )
    if factory is not None:
        if not callable(factory):
            raise ConfigTypeError(f"factory must be callable, got {factory!r}")
        small = _on_meta(lambda: factory(widths[0]), f"factory({widths[0]})")
        large = _on_meta(lambda: factory(widths[1]), f"factory({widths[1]})")
    else:
        if not isinstance(base_model, nn.Module):
            raise ConfigTypeError(
                f"base_model must be an nn.Module, got {type(base_model)}"
            )
        small, large = base_model, model
    dims = _compare(small, large)
    missing = sorted(n for n, _ in model.named_parameters() if n not in dims)
    if missing:
        raise UnsupportedModelError(
            f"set_base_shapes: {len(missing)} parameter(s) of the model have no "
            f"counterpart of the same rank in the other width: {', '.join(missing[:5])}"
        )
    model.__dict__[BASE_SHAPES] = BaseShapes(
        dims=dims, mixed=_mixed(small, large), source="set_base_shapes"
    )
    return dims


def width_dims(model: nn.Module) -> dict[int, Dims]:
    """id(parameter) -> which of its dims grow with the width, for every parameter the
    reading covers (empty when the model has neither a record nor a HF config)."""
    found = base_shapes(model)  # a record on the model or on the one inside DDP
    if found is not None:
        return _by_id(*found)
    top = hf_model(model)
    if top is None:
        return {}
    config = rescaled_config(top.config)
    twin = _on_meta(
        lambda: type(top)(config), f"{type(top).__name__} at twice the width"
    )
    record = BaseShapes(
        dims=_compare(top, twin), mixed=_mixed(top, twin), source="config"
    )
    top.__dict__[BASE_SHAPES] = record
    return _by_id(top, record)


def _by_id(module: nn.Module, record: BaseShapes) -> dict[int, Dims]:
    dims = record["dims"]
    return {
        id(p): dims[name]
        for name, p in module.named_parameters(remove_duplicate=False)
        if name in dims
    }


# ---------------------------------------------------------------------------------------
# the role a parameter's shape reads, given where its name places it
# ---------------------------------------------------------------------------------------
# The engine's roles for a matrix inside a residual branch whose one side stays fixed
# (docs/your-model.md, "How spectral decides each parameter's rule"); a per-channel vector
# that is neither a bias nor a norm gain (SSM A_log, D, dt_bias; a depthwise kernel).
FIXED_DOWN = "rank_down_weight"
"""width -> fixed size, inside a branch (DeepSeek-V3's q_a_proj, Mamba's x_proj)."""
NORMED_DOWN = "normed_rank_down_weight"
"""width -> fixed size whose output a norm reads (DeepSeek-V3's q_a_proj under
q_a_layernorm, Jamba's x_proj under its dt, B and C norms): the norm's output is what the
block sees, so its init keeps the output Theta(1) (docs/roles.md)."""
FIXED_UP = "rank_up_weight"
"""fixed size -> width, inside a branch (DeepSeek-V3's q_b_proj, Mamba's dt_proj)."""
VECTOR = "hidden_vector"
"""A per-channel vector, or a depthwise kernel: one entry (or one small filter) per
channel, never mixed across channels."""

_MATRIX_MODULES = ("Linear", "Embedding", "Conv1D", "Conv1d", "Conv2d", "Conv3d")
ROUTER = "router_weight"
_ROUTER = re.compile(r"(^|\.)(router|gate)\.weight$")
"""A width -> fixed matrix named as a router or a gate: router_weight, not rank-down."""


def _is_matrix(module: nn.Module, p: torch.Tensor, name: str) -> bool:
    """Whether ``p`` is the module's weight matrix: a Linear's, an Embedding's, a conv's,
    HF Conv1D's; a subclass of those only when named as a router (Llama4's router is an
    nn.Linear; other subclasses, such as FalconLinear, keep their patterns' roles as
    before); or any other module's 2-D ``weight`` outside a norm, read as F.linear takes
    it, (out, in): GPT-OSS's router holds one and calls F.linear itself."""
    if p is not getattr(module, "weight", None):
        return False
    if type(module).__name__ in _MATRIX_MODULES:
        return True
    if isinstance(module, (nn.Linear, nn.Embedding, nn.modules.conv._ConvNd)):
        return _ROUTER.search(name) is not None
    return p.ndim == 2 and not is_norm(module)


def fans(module: nn.Module, p: torch.Tensor) -> tuple[int, int]:
    """(n_out, n_in) of a weight: nn.Embedding and HF Conv1D store (in, out); a conv
    kernel counts its receptive field in the fan-in."""
    if isinstance(module, nn.Embedding) or type(module).__name__ == "Conv1D":
        return p.shape[1], p.shape[0]
    return p.shape[0], math.prod(p.shape[1:])


def is_norm(module: nn.Module) -> bool:
    return isinstance(module, (nn.LayerNorm, nn.RMSNorm, nn.GroupNorm)) or type(
        module
    ).__name__.endswith("Norm")


def head_dims(model: nn.Module) -> set[int]:
    """Head dimensions found on attention modules: head_dim (HF Llama, GPT-2, OPT, timm,
    torchtitan), head_size (HF GPT-NeoX), or n_embd // n_head (nanoGPT, which keeps no
    head dimension)."""

    def count(value: Any) -> bool:
        return isinstance(value, int) and not isinstance(value, bool) and value > 0

    dims: set[int] = set()
    for module in model.modules():
        for attr in ("head_dim", "head_size", "attention_head_size"):
            value = getattr(module, attr, None)
            if isinstance(value, int) and count(value):
                dims.add(value)
                break
        else:
            n_embd, n_head = (getattr(module, a, None) for a in ("n_embd", "n_head"))
            if (
                isinstance(n_embd, int)
                and isinstance(n_head, int)
                and count(n_embd)
                and count(n_head)
            ):
                dims.add(n_embd // n_head)
    return dims


def is_depthwise(module: nn.Module, p: torch.Tensor) -> bool:
    """A depthwise convolution's kernel: each channel filtered on its own (groups equal
    to the channels), so it is vector-like, not a matrix."""
    groups = getattr(module, "groups", 1)
    return (
        isinstance(module, nn.modules.conv._ConvNd)
        and p is module.weight
        and groups > 1
        and groups == module.in_channels == module.out_channels
    )


def _reading(grows_out: bool, grows_in: bool) -> str:
    side = {True: "width", False: "fixed"}
    return f"{side[grows_in]} -> {side[grows_out]}"


def shaped_role(
    name: str,
    p: torch.Tensor,
    module: nn.Module,
    role: str,
    dims: Dims | None,
    known: Any,
    normed: bool = False,
) -> str:
    """The role of parameter ``name`` from where its name places it (``role``) and which
    of its dimensions grow (``dims``; None: no reading, the name's role stands).
    ``normed``: a norm reads the module's output (a width -> fixed map then takes the
    normed rank-down role).

    A matrix inside a branch (hidden_weight by name) whose fan-in or fan-out stays fixed
    takes the fixed-rank down- or up-projection role; a depthwise kernel is vector-like.
    Where the name's role cannot hold for the shape (an input weight whose fan-in grows,
    a readout whose fan-out grows, a bias that is a matrix), one line names the
    parameter and both readings. ``known``: the config (None: any role), which refuses a
    role it has no rule for (one generated without --all-roles)."""
    if dims is None:
        return role
    weight = _is_matrix(module, p, name)
    shape = tuple(p.shape)

    def refuse(reads: str) -> ValueError:
        return ValueError(
            f"parameter {name!r} {shape}: its name reads {role}, its shape reads {reads}; "
            "fix the adapter's role for it (patterns=) or the model"
        )

    if weight and is_depthwise(module, p):
        if role in ("input_weight", "output_weight", "router_weight"):
            raise refuse("a depthwise kernel (vector-like)")
        return _available(VECTOR, name, known) if role == "hidden_weight" else role
    if not weight:
        if (
            p.ndim >= 2
            and role.endswith("_bias")
            and type(module).__name__ in _MATRIX_MODULES
        ):
            raise refuse("a matrix")
        return role
    out_dims, in_dims = (
        (dims[1:], dims[:1])
        if isinstance(module, nn.Embedding) or type(module).__name__ == "Conv1D"
        else (dims[:1], dims[1:2])  # a conv kernel's receptive field never grows
    )
    grows_out, grows_in = any(out_dims), any(in_dims)
    reads = _reading(grows_out, grows_in)
    if role in ("input_weight", "output_weight", "router_weight"):
        if (grows_out, grows_in) != GROWS[role]:
            raise refuse(reads)
        return role
    if role == "hidden_weight":
        if grows_out and grows_in:
            return role
        if grows_in:
            # the gated case of width -> fixed: a router (GPT-OSS's mlp.router, a gate)
            gated = _ROUTER.search(name) is not None
            down = NORMED_DOWN if normed else FIXED_DOWN
            return _available(ROUTER if gated else down, name, known)
        if grows_out:
            return _available(FIXED_UP, name, known)
        raise UnsupportedModelError(
            f"parameter {name!r} {shape}: a matrix inside a block whose dimensions do not "
            "grow with the width (fixed -> fixed); every role's rules are about a matrix "
            "with a dimension that grows, so none fits it (patterns= cannot help): make "
            "one of its sizes follow the width"
        )
    if role.endswith("_bias") or role == VECTOR:
        raise refuse(f"a matrix ({reads})")
    return role


def _available(role: str, name: str, rules: Any) -> str:
    """``role``, refused in one line where the config (``rules``) has no rule for it."""
    if rules is not None:
        rules.covered(role, f"parameter {name!r}")
    return role


def record_shapes_at_base(
    rules: Rules,
    model: nn.Module,
    base_model: nn.Module | None = None,
    *,
    factory: Callable[[int], nn.Module] | None = None,
) -> dict[str, Dims]:
    """:func:`record_base_shapes` at the config's base width and twice it (as
    microsoft/mup's ``set_base_shapes``): which dimensions of each parameter of ``model``
    grow with the width, read from ``base_model`` or from ``factory``. Roles then follow
    from shapes where names and shapes disagree."""
    return record_base_shapes(
        model,
        base_model,
        factory=factory,
        widths=(rules.base_width, 2 * rules.base_width),
    )
