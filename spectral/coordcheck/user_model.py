"""Your own model in a coordinate check: ``model_factory(width, depth)`` through the hooks.

Every point goes through the generated module as a user's training script would
(``apply_multipliers``, ``init_``, ``build_optimizers``); :func:`inspect_user_model` checks
the factory before anything is trained, :func:`user_batch` makes the fixed batch (or asks
``batch_factory``), and :func:`train_user` trains one point with ``h_L`` caught at the final
norm's input. Every failure of the user's code is a one-line
:class:`~spectral.errors.SpecError` naming the factory.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from ..errors import SpecError, first_line
from ..measure.fit import rms
from .config import CoordCheckConfig
from .generated import base_init_std, config_module
from .slopes import record_step

__all__ = ["build_user", "inspect_user_model", "make_user_model", "train_user", "user_batch"]


def make_user_model(cfg: CoordCheckConfig, width: int, depth: int) -> Any:
    """``cfg.model_factory(width, depth)``, checked: an exception it raises or a result that
    is no ``nn.Module`` is a one-line :class:`~spectral.errors.SpecError`."""
    import torch

    call = f"model factory {cfg.factory_name('model')}({width}, {depth})"
    try:
        model = cfg.model_factory(width, depth)
    except Exception as exc:  # the user's code: any failure is bad input
        raise SpecError(f"{call} raised {first_line(exc)}") from None
    if not isinstance(model, torch.nn.Module):
        raise SpecError(f"{call} returned {type(model).__name__}, not a torch.nn.Module")
    return model


def _generated(cfg: CoordCheckConfig, what: str, fn: Callable[..., Any], *args, **kwargs):
    """A call into the generated module; its ``ValueError`` (an unrecognised model, a
    parameter with no role, tied embeddings) becomes a one-line error naming the factory."""
    try:
        return fn(*args, **kwargs)
    except SpecError:
        raise
    except (ValueError, TypeError) as exc:
        raise SpecError(
            f"model factory {cfg.factory_name('model')}: {what}: {first_line(exc)}"
        ) from None


def inspect_user_model(cfg: CoordCheckConfig) -> dict[str, Any]:
    """Check the factory before training anything; returns what the result reports.

    Builds one model per width of the sweeps (at the smallest depth) and refuses a
    head dimension that changes with width: the rules keep attention logits at Θ(1) only
    with a fixed head dimension (heads = width / head_dim) or 1/d attention scaling. Also
    installs the multipliers once (so an unrecognised model fails here, not mid-sweep) and
    finds h_L: the input of ``final_module(model)``, else the logits, and the vocabulary of
    the random token batch.
    """
    from spectral.torch.check.model import head_dims

    mod = config_module(cfg, "mup")
    depth = cfg.base_depth
    dims: dict[int, list[int]] = {}
    widths = sorted({*cfg.widths, cfg.fixed_width})
    for width in widths:
        model = make_user_model(cfg, width, depth)
        if width == widths[0]:
            handle = _generated(
                cfg,
                "apply_multipliers",
                mod.apply_multipliers,
                model,
                width,
                depth,
                adapter=cfg.adapter,
            )
            vocab = None
            if cfg.batch_factory is None:
                vocab = _vocab_size(cfg, model, handle.modules["output"])
            final = mod.final_module(model, cfg.adapter)
            final_name = next((n for n, m in model.named_modules() if m is final), None)
        dims[width] = sorted(head_dims(model))  # the runtime's reading of the model
    if len({tuple(d) for d in dims.values()}) > 1:
        seen = ", ".join(f"width {w}: {d or 'none'}" for w, d in dims.items())
        raise SpecError(
            f"model factory {cfg.factory_name('model')}: the head dimension changes with "
            f"width ({seen}). The rules assume a fixed head dimension (heads = width / "
            "head_dim) or 1/d attention scaling; build the model with a fixed head_dim and "
            "width // head_dim heads"
        )
    head_dims = next(iter(dims.values()))
    if final_name is None:
        metric = "logits"
        note = "logits: the model has no final norm (final_module found none)"
    else:
        metric = "final-norm input"
        note = f"input of {final_name or 'the model'} (the final norm): the residual stream h_L"
    return {"h_metric": metric, "h_source": note, "head_dims": head_dims, "vocab_size": vocab}


def _to(obj: Any, device: str) -> Any:
    if hasattr(obj, "to") and callable(obj.to):
        return obj.to(device)
    if isinstance(obj, dict):
        return {k: _to(v, device) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return type(obj)(_to(v, device) for v in obj)
    return obj


def user_batch(cfg: CoordCheckConfig, seed: int, vocab_size: int | None) -> tuple[Any, Any, bool]:
    """``(inputs, targets, shift)``: the fixed batch of one seed for a factory model.

    Without a batch factory: ``batch × (seq_len + 1)`` random token ids below
    ``vocab_size`` (generator seeded ``1000 + seed``, as for the GPT); the model sees the
    first ``seq_len``, the targets are the next tokens.

    With ``batch_factory(batch, seed)``, it returns ``inputs`` or ``(inputs, targets)``:

    * ``inputs``: a tensor (``model(inputs)``), a dict (``model(**inputs)``, e.g. Hugging
      Face's ``input_ids`` / ``attention_mask`` / ``pixel_values``) or a list
      (``model(*inputs)``); it must not depend on anything but ``(batch, seed)``;
    * ``targets``: integer class indices (cross entropy over the output's last dimension;
      shape ``output.shape[:-1]``), a float tensor of the output's shape (mean squared
      error), or ``None`` / left out: next-token cross entropy on ``inputs``, a 2-D integer
      tensor of token ids (or a dict with ``input_ids``) — then ``shift`` is True and the
      loss compares ``logits[:, :-1]`` with ``ids[:, 1:]``.
    """
    import torch

    if cfg.batch_factory is None:
        gen = torch.Generator().manual_seed(1_000 + seed)
        x = torch.randint(0, vocab_size, (cfg.batch, cfg.seq_len + 1), generator=gen)
        x = x.to(cfg.device)
        return x[:, :-1], x[:, 1:], False
    call = f"batch factory {cfg.factory_name('batch')}({cfg.batch}, {seed})"
    try:
        got = cfg.batch_factory(cfg.batch, seed)
    except Exception as exc:  # the user's code: any failure is bad input
        raise SpecError(f"{call} raised {first_line(exc)}") from None
    inputs, targets = got if isinstance(got, tuple) and len(got) == 2 else (got, None)
    if not isinstance(inputs, (torch.Tensor, dict, list, tuple)):
        raise SpecError(
            f"{call} returned {type(inputs).__name__} as the inputs; return a tensor, a dict "
            "of keyword arguments or a list of positional ones (optionally with targets: "
            "(inputs, targets))"
        )
    if targets is not None and not isinstance(targets, torch.Tensor):
        raise SpecError(f"{call}: the targets are a {type(targets).__name__}, not a tensor")
    inputs, targets = _to(inputs, cfg.device), _to(targets, cfg.device)
    if targets is not None:
        return inputs, targets, False
    ids = inputs.get("input_ids") if isinstance(inputs, dict) else inputs
    if not (
        isinstance(ids, torch.Tensor)
        and ids.ndim == 2
        and not ids.is_floating_point()
        and ids.shape[1] >= 2
    ):
        raise SpecError(
            f"{call} returned no targets, so the loss is next-token cross entropy, which "
            "needs token ids (a 2-D integer tensor, or a dict with input_ids, at least 2 "
            "tokens long); return (inputs, targets) for any other input"
        )
    return inputs, ids[:, 1:], True


def _where(exc: BaseException) -> str:
    """`` (at FILE:LINE in FUNC)``: the innermost frame of the traceback outside torch and
    spectral (the user's line that called into torch), else the innermost."""
    import os
    import traceback

    import torch

    frames = traceback.extract_tb(exc.__traceback__)
    ours = (os.path.dirname(torch.__file__), os.path.dirname(os.path.dirname(__file__)))
    theirs = [f for f in frames if not f.filename.startswith(ours)] or frames
    if not theirs:
        return ""
    frame = theirs[-1]
    return f" (at {frame.filename}:{frame.lineno} in {frame.name})"


def _run_model(cfg: CoordCheckConfig, what: str, fn: Callable[[], Any]) -> Any:
    """``fn()``, which runs the factory's model: whatever it raises is a one-line
    :class:`~spectral.errors.SpecError` with the exception's first line and where."""
    try:
        return fn()
    except SpecError:
        raise
    except Exception as exc:  # the user's model: any failure is bad input
        raise SpecError(
            f"model factory {cfg.factory_name('model')}: {what} raised "
            f"{first_line(exc)}{_where(exc)}"
        ) from None


def _forward(model: Any, inputs: Any) -> Any:
    if isinstance(inputs, dict):
        out = model(**inputs)
    elif isinstance(inputs, (list, tuple)):
        out = model(*inputs)
    else:
        out = model(inputs)
    return _logits(out)


def _logits(out: Any) -> Any:
    """The output tensor: itself, ``.logits`` (Hugging Face), ``["logits"]`` or the first
    element of a tuple."""
    import torch

    if isinstance(out, torch.Tensor):
        return out
    logits = getattr(out, "logits", None)
    if logits is None and isinstance(out, dict):
        logits = out.get("logits")
    if logits is None and isinstance(out, (tuple, list)) and out:
        logits = out[0]
    if not isinstance(logits, torch.Tensor):
        raise SpecError(
            f"the model returned {type(out).__name__}; the check needs a tensor of logits or "
            "an object with .logits"
        )
    return logits


def _user_loss(out: Any, targets: Any, shift: bool) -> Any:
    import torch.nn.functional as F

    if shift:
        out = out[:, :-1]
    if targets.is_floating_point():
        return F.mse_loss(out, targets)
    return F.cross_entropy(out.reshape(-1, out.shape[-1]).float(), targets.reshape(-1))


def _vocab_size(cfg: CoordCheckConfig, model: Any, readout: list[str]) -> int:
    """The token ids' range: ``cfg.vocab_size``, the model's ``config.vocab_size``, or the
    readout's ``out_features`` (the modules ``apply_multipliers`` put alpha_out on)."""
    if cfg.vocab_size is not None:
        return cfg.vocab_size
    found = getattr(getattr(model, "config", None), "vocab_size", None)
    if isinstance(found, int) and found > 0:
        return found
    for name in readout:
        found = getattr(model.get_submodule(name), "out_features", None)
        if isinstance(found, int) and found > 0:
            return found
    raise SpecError(
        f"model factory {cfg.factory_name('model')}: cannot tell the vocabulary size (no "
        "config.vocab_size, no readout with out_features); pass --vocab-size"
    )


@dataclass
class _UserSetup:
    model: Any
    optimizers: list
    final: Any
    """The module whose input is h_L (None: measure the logits)."""
    vocab_size: int


def build_user(cfg: CoordCheckConfig, param: str, width: int, depth: int, seed: int) -> _UserSetup:
    """The factory's model at ``(width, depth)``, through the generated module.

    ``apply_multipliers(model, width, depth, multiplier=base)`` installs the hooks (it checks
    that the model has ``2·depth`` residual branch ends, so it is called at the model's own
    size) with base values chosen so that the multipliers are the module's at ``(w, d)``
    times ``α_base`` on the hidden blocks; ``(w, d) = (width, depth)`` for μP and
    ``(BASE_WIDTH, BASE_DEPTH)`` for ``sp``, where every ratio is 1. ``init_`` and
    ``build_optimizers`` are evaluated at ``(w, d)``.
    """
    import torch

    mod = config_module(cfg, param)
    w, d = (mod.BASE_WIDTH, mod.BASE_DEPTH) if param == "sp" else (width, depth)
    want = dict(mod.multipliers(w, d))
    want["hidden"] *= cfg.alpha
    ratio = mod.multipliers(width, depth)  # base 1: the ratios' factors alone
    base = {layer: want[layer] / ratio[layer] for layer in want}
    torch.manual_seed(seed)
    model = make_user_model(cfg, width, depth)
    handle = _generated(
        cfg,
        "apply_multipliers",
        mod.apply_multipliers,
        model,
        width,
        depth,
        multiplier=base,
        adapter=cfg.adapter,
    )
    torch.manual_seed(10_007 * seed + 17)
    _generated(cfg, "init_", mod.init_, model, w, d, base_init_std(cfg), adapter=cfg.adapter)
    model.to(cfg.device)
    lr: Any = cfg.main_lr()
    if cfg.hybrid:
        lr = {cfg.optimizer: cfg.main_lr(), cfg.others: cfg.other_lr()}
    factories = cfg.factories()
    extra = {"factories": factories} if factories else {}
    opt = _generated(
        cfg,
        "build_optimizers",
        mod.build_optimizers,
        model,
        w,
        d,
        lr=lr,
        weight_decay=cfg.weight_decay,
        adapter=cfg.adapter,
        **extra,
    )
    vocab = 0
    if cfg.batch_factory is None:
        vocab = _vocab_size(cfg, model, handle.modules["output"])
    return _UserSetup(model, [opt], mod.final_module(model, cfg.adapter), vocab)


def train_user(
    cfg: CoordCheckConfig, param: str, axis: str, width: int, depth: int, seed: int
) -> list[dict[str, Any]]:
    """:func:`train_one` for a factory model: h_L caught at the final norm's input."""
    import torch

    s = build_user(cfg, param, width, depth, seed)
    model = s.model
    inputs, targets, shift = user_batch(cfg, seed, s.vocab_size)
    caught: list = []

    def catch(module, args, kwargs):
        x = args[0] if args else next(v for v in kwargs.values() if isinstance(v, torch.Tensor))
        caught.append(x.detach())

    hook = s.final.register_forward_pre_hook(catch, with_kwargs=True) if s.final else None
    points = []
    out0 = h0 = None
    try:
        for t in range(cfg.steps + 1):
            caught.clear()
            with torch.no_grad():
                out = _run_model(cfg, "the forward pass", lambda: _forward(model, inputs))
                try:
                    loss = float(_user_loss(out, targets, shift))
                except (RuntimeError, ValueError, IndexError) as exc:
                    raise SpecError(
                        f"the loss on the output of model factory {cfg.factory_name('model')} "
                        f"(shape {tuple(out.shape)}) failed: {first_line(exc)}"
                    ) from None
            h = caught[-1] if s.final is not None else out
            if t == 0:
                out0, h0 = out.detach().clone(), h.detach().clone()
            values = {
                "h": rms(h),
                "delta_h": rms(h - h0),
                "out": rms(out),
                "delta_out": rms(out - out0),
                "loss": loss,
            }
            if record_step(points, (param, axis, width, depth, seed), t, cfg.steps, values):
                break
            for opt in s.optimizers:
                opt.zero_grad(set_to_none=True)
            _run_model(
                cfg,
                "the training step",
                lambda: _user_loss(_forward(model, inputs), targets, shift).backward(),
            )
            for opt in s.optimizers:
                opt.step()
    finally:
        if hook is not None:
            hook.remove()
    return points
