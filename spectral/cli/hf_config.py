"""``spectral check --hf-config``: a Hugging Face config.json read as data, the model it
describes built as far as the check reads it, and run once before any verdict.

The check reads the model's class and config and rebuilds its twins from them with
:data:`~spectral.torch.check.twins.TWIN_LAYERS` layers, so the model is built with at most
that many layers too (on the meta device: no memory): a config of a million layers costs
what one of two does. Before the twins, the model runs one forward pass on a few token ids
(:func:`own_forward`) — on the CPU when it is small, on the meta device otherwise — so a
config its own class cannot run (4 attention heads over 3 KV heads) is refused in one
line naming what the model raised, instead of the twins, which re-derive the heads per
width, passing for it. torch and transformers are imported inside the functions.
"""

from __future__ import annotations

import copy
from typing import Any

from ..errors import MetaDeviceError, SpecError, first_line

__all__ = ["HF_CONFIG_BYTES", "MAX_CONFIG_SIZE", "OWN_RUN_PARAMETERS", "config_data", "hf_model", "own_forward"]

HF_CONFIG_BYTES = 1 << 20
"""The largest config.json read (a real one is a few KiB; /dev/zero never ends)."""

_SIZE_KEYS = (
    "hidden_size", "n_embd", "d_model", "num_attention_heads", "n_head", "num_heads",
    "num_key_value_heads", "head_dim", "num_hidden_layers", "n_layer", "num_layers",
    "intermediate_size", "n_inner", "ffn_dim", "d_ff", "vocab_size",
)
_LAYER_KEYS = ("num_hidden_layers", "n_layer", "num_layers")
"""The layer counts a config may hold (those the twins cut: spectral.torch.check.twins)."""
MAX_CONFIG_SIZE = 2**31 - 1
"""The largest size a config may give (a tensor dimension torch indexes with 32 bits)."""
OWN_RUN_PARAMETERS = 1 << 24
"""The most parameters (at the layers built) for which the model's own forward runs on the
CPU: 64 MiB in float32, built and run in about a second; a larger model runs it on the meta
device, which checks every shape but computes nothing."""
_TOKENS = 8


def _short(value: Any) -> str:
    """A long value as a few characters: a power of ten as 10**k, else its start."""
    text = repr(value)
    if isinstance(value, int) and text.rstrip("0") == "1":
        return f"10**{len(text) - 1}"
    return text[:12] + "..."


def config_data(path: str) -> dict[str, Any]:
    """config.json read as data: a regular file of at most HF_CONFIG_BYTES, JSON nested at
    most 64 deep, a model_type, and every size a whole number in range (heads dividing the
    width), each refused in one line before transformers sees it."""
    from ..io import read_user_file
    from ..text import load_json

    try:
        text = read_user_file(path, max_bytes=HF_CONFIG_BYTES).decode("utf-8")
        data = load_json(text, max_depth=64)
    except SpecError as exc:  # "PATH: no such file", "PATH: is a FIFO (named pipe), ..."
        raise SpecError(f"--hf-config {exc}") from None
    except UnicodeDecodeError:
        raise SpecError(f"--hf-config {path}: cannot read it: not UTF-8 text") from None
    except ValueError as exc:
        raise SpecError(f"--hf-config {path}: cannot read it: {exc}") from None
    if not isinstance(data, dict) or not isinstance(data.get("model_type"), str):
        raise SpecError(f"--hf-config {path}: expected a JSON object with a model_type")
    for key in _SIZE_KEYS:
        value = data.get(key)
        if value is None:
            continue
        if isinstance(value, bool) or not isinstance(value, int) or not (
            1 <= value <= MAX_CONFIG_SIZE
        ):
            shown = repr(value) if len(repr(value)) <= 12 else _short(value)
            raise SpecError(
                f"--hf-config {path}: {key} must be a whole number from 1 to "
                f"{MAX_CONFIG_SIZE}, got {shown}"
            )
    width = next((data[k] for k in ("hidden_size", "n_embd", "d_model") if k in data), None)
    heads_key = next(
        (k for k in ("num_attention_heads", "n_head", "num_heads") if data.get(k)), None
    )
    if width is not None and heads_key is not None and width % data[heads_key]:
        raise SpecError(
            f"--hf-config {path}: a width of {width} is not a whole number of heads "
            f"({heads_key} {data[heads_key]})"
        )
    return data


def _as_built(data: dict[str, Any]) -> dict[str, Any]:
    """``data`` with its layer count cut to the twins' (per-layer lists with it), as the
    twins cut theirs: the check reads no more of the model."""
    from ..torch.check.twins import TWIN_LAYERS

    out = dict(data)
    for key in _LAYER_KEYS:
        layers = data.get(key)
        if isinstance(layers, int) and layers > TWIN_LAYERS:
            out[key] = TWIN_LAYERS
            for name, value in data.items():  # Gemma2's and Qwen3's layer_types
                if isinstance(value, list) and len(value) == layers:
                    out[name] = copy.deepcopy(value[:TWIN_LAYERS])
    return out


def _model_class(path: str, data: dict[str, Any], config: Any) -> Any:
    """The transformers model class ``architectures[0]`` names, of the config's family."""
    import transformers

    names = data.get("architectures")
    name = names[0] if isinstance(names, list) and names else None
    example = "(e.g. [\"LlamaForCausalLM\"])"
    if not isinstance(name, str) or not name.isidentifier() or len(name) > 100:
        raise SpecError(
            f"--hf-config {path}: architectures must name a transformers model class {example}"
        )
    try:
        cls = getattr(transformers, name, None)
    except Exception:  # noqa: BLE001 - a lazy attribute whose import fails
        cls = None
    if isinstance(cls, type) and name.startswith("Auto"):
        raise SpecError(
            f"--hf-config {path}: architectures names {name}, an Auto class that picks a "
            f"class from the config: name the model class itself {example}"
        )
    if not (isinstance(cls, type) and issubclass(cls, transformers.PreTrainedModel)):
        raise SpecError(
            f"--hf-config {path}: architectures names {name}, which is not a transformers "
            f"model class {example}"
        )
    own = getattr(cls, "config_class", None)
    if isinstance(own, type) and not isinstance(config, own):
        family = getattr(own, "model_type", "") or own.__name__
        raise SpecError(
            f"--hf-config {path}: architectures names {name}, a {family} model, but "
            f"model_type is {data['model_type']!r}"
        )
    return cls


def _unknown_model_type(path: str, model_type: str, known: list[str]) -> SpecError:
    """One short line: the type, and the known types closest to it (not all of them)."""
    import difflib

    close = difflib.get_close_matches(model_type, known, n=3, cutoff=0.6) or known[:3]
    shown = model_type if len(model_type) <= 40 else model_type[:40] + "..."
    return SpecError(
        f"--hf-config {path}: transformers knows no model_type {shown!r} "
        f"({len(known)} known, e.g. {', '.join(close)})"
    )


def hf_model(path: str) -> tuple[Any, list[str]]:
    """The model a config.json describes, built on the meta device (no memory) with the
    twins' layers, after its own forward pass ran (:func:`own_forward`); and the notes to
    print (a forward the meta device could not run)."""
    data = _as_built(config_data(path))
    import torch
    import transformers
    from transformers.models.auto.configuration_auto import CONFIG_MAPPING

    known = sorted(CONFIG_MAPPING.keys())
    if data["model_type"] not in known:
        raise _unknown_model_type(path, data["model_type"], known)
    fields = {k: v for k, v in data.items() if k != "model_type"}
    try:
        config = transformers.AutoConfig.for_model(data["model_type"], **fields)
    except Exception as exc:  # noqa: BLE001 - transformers' checks of the fields
        raise SpecError(f"--hf-config {path}: {first_line(exc)}") from None
    cls = _model_class(path, data, config)
    try:
        with torch.device("meta"):
            model = cls(config)
    except Exception as exc:  # noqa: BLE001 - transformers' own refusal, in one line
        raise SpecError(
            f"--hf-config {path}: {cls.__name__} cannot be built from it: {first_line(exc)}"
        ) from None
    return model, own_forward(path, cls, model)


def own_forward(path: str, cls: Any, model: Any) -> list[str]:
    """Run ``model`` (built on the meta device) forward once on a few token ids: rebuilt on
    the CPU when it has at most OWN_RUN_PARAMETERS parameters, else on the meta device (every
    shape checked, nothing computed). What the model raises is one line (exit code 2);
    a forward the meta device cannot run (an op without a meta kernel) is a note."""
    import torch

    size = sum(p.numel() for p in model.parameters())
    name = cls.__name__
    try:
        if size <= OWN_RUN_PARAMETERS:
            torch.manual_seed(0)
            _forward(cls(copy.deepcopy(model.config)), torch.device("cpu"))
        else:
            _forward_on_meta(model)
    except MetaDeviceError as exc:
        return [f"--hf-config {path}: {name}'s own forward pass was not run (on the meta device: "
                f"{first_line(exc.__cause__ or exc)}); the check runs its twins only"]
    except Exception as exc:  # noqa: BLE001 - the user's config, run by its own class
        raise SpecError(f"--hf-config {path}: {name} cannot run this config: {first_line(exc)}") from None
    return []


def _forward(model: Any, device: Any) -> None:
    import torch

    model.eval()
    ids = torch.zeros((1, _TOKENS), dtype=torch.long, device=device)
    with torch.no_grad():
        model(ids)


def _forward_on_meta(model: Any) -> None:
    """The forward on the meta device, the experts (if any) as one batched matmul: the
    grouped kernel's meta function wants bfloat16 and the eager loop's indexing depends on
    the data, while the batched one has fixed shapes and computes the same."""
    import torch

    config = model.config
    before = getattr(config, "_experts_implementation", None)
    swapped = False
    try:
        config._experts_implementation = "batched_mm"
        swapped = True
    except Exception:  # noqa: BLE001 - a config that has no such setting
        pass
    try:
        _forward(model, torch.device("meta"))
    except NotImplementedError as exc:
        raise MetaDeviceError(str(exc)) from exc
    except RuntimeError as exc:
        if "meta" in str(exc).lower():  # e.g. Tensor.item() on a meta tensor
            raise MetaDeviceError(str(exc)) from exc
        raise
    finally:
        if swapped:
            config._experts_implementation = before
