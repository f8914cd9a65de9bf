"""check() that measures: the rules verified on the real forward pass of the user's model.

Names can lie (Gemma's modules are called as Llama's; Gemma2 normalises a branch again after
the module the adapter hooks), so on top of reading names, check() runs the model on a small
example batch (built from the token table in its input modules, or the user's) and
measures, with the multiplier hooks' factors changed for one forward pass at a time:

* the embedding output: h_0, the input of the first residual block, is the sum of the
  hooked input modules' outputs (an extra scale such as Gemma's sqrt(n) shows as a ratio);
* every checked branch end reaches the residual stream: halving its multiplier halves its
  contribution to the block's output (a norm after the hooked module leaves it unchanged),
  and its output has the block's features (BERT's intermediate.dense does not);
* the readout: halving alpha_out halves the logits;
* every norm's effective gain, with the gain parameter at the value init_ writes, is 1
  (a norm computing x * (1 + w) has gain 2 there);
* a torch.compile'd model computes what its eager module computes (hooks added after
  compiling are not in the compiled code).

Cost: 2 + (2 branches_per_layer - 1) x (blocks checked) forward passes of a batch of
2 x 8 tokens (the first and the last block are checked: 8 for a transformer), two more for
a compiled model, and one call of each norm. What could not be run (no batch to build, a
model that raises, a sharded model) or compared is one line, never a silent [].
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import ExitStack, contextmanager
from typing import Any

import torch
from torch import nn

from spectral.errors import first_line
from spectral.measure.fit import rms
from spectral.torch.apply.hooks import (
    STALE_FIX,
    MultiplierHook,
    our_hooks,
    placements,
    scale_after_input,
    stale_compiled,
)
from spectral.torch.model.classify import Adapter
from spectral.torch.model.shapes import is_norm

BRANCH_TOLERANCE = 0.05
"""Halving a branch end's multiplier must move its block's output by half the branch's
output, within this (relative; the later branches are off while it is measured, so the
match is exact up to float rounding). A norm after the hooked module gives another ratio."""
EXACT_TOLERANCE = 1e-3
"""Largest relative error of the measurements that are exact (input, readout, gains)."""
GAIN_TOLERANCE = 0.05


def _first_tensor(out: Any) -> torch.Tensor | None:
    """The tensor a module or model returned: itself, the first of a tuple, or .logits /
    .last_hidden_state of a Hugging Face output."""
    if isinstance(out, torch.Tensor):
        return out
    for attr in ("logits", "last_hidden_state"):
        value = getattr(out, attr, None)
        if isinstance(value, torch.Tensor):
            return value
    if isinstance(out, (tuple, list)) and out and isinstance(out[0], torch.Tensor):
        return out[0]
    return None


def _features(t: torch.Tensor) -> int:
    return int(t.shape[-1]) if t.ndim else 0


def _token_table(model: nn.Module, tables: list[nn.Embedding]) -> nn.Embedding:
    """The table token ids index: the model's own get_input_embeddings() (Hugging Face)
    when it is one of ``tables``, else the largest of them (a position table is no larger
    than a real vocabulary)."""
    get = getattr(model, "get_input_embeddings", None)
    try:
        own = get() if callable(get) else None
    except (AttributeError, NotImplementedError):  # a model without one
        own = None
    if any(own is t for t in tables):
        return own  # type: ignore[return-value]
    return max(tables, key=lambda t: t.num_embeddings)


def example_batch(model: nn.Module, family: Adapter) -> Any:
    """A small input the model takes: 2 x 8 token ids below its token table, found in its
    input modules or inside them (BERT's embeddings module holds its word, position and
    type tables), fewer tokens where a hooked table is shorter; or a standard normal batch
    for a dense input layer; None when neither is recognisable (then only a user's
    ``example_input`` can be measured)."""
    inputs = placements(model, family)["input"]
    gen = torch.Generator().manual_seed(0)
    hooked = [m for _, m in inputs if isinstance(m, nn.Embedding)]
    tables = [
        sub for _, m in inputs for sub in m.modules() if isinstance(sub, nn.Embedding)
    ]
    if tables:
        table = _token_table(model, tables)
        length = min(8, *(t.num_embeddings for t in hooked)) if hooked else 8
        device = table.weight.device
        ids = torch.randint(0, table.num_embeddings, (2, length), generator=gen)
        return ids.to(device)
    dense = [m for _, m in inputs if isinstance(m, nn.Linear)]
    if dense:
        w = dense[0].weight
        return torch.randn(2, w.shape[1], generator=gen).to(
            device=w.device, dtype=w.dtype
        )
    return None


def _run(model: nn.Module, example: Any) -> Any:
    if isinstance(example, dict):
        return model(**example)
    if isinstance(example, (tuple, list)):
        return model(*example)
    return model(example)


@contextmanager
def _scaled(hooks: list[Any], factor: float) -> Iterator[None]:
    """Multiplier hooks scaled by ``factor`` inside the block."""
    with ExitStack() as stack:
        for hook in hooks:
            stack.enter_context(hook.scaled(factor))
        yield


def _blocks(
    model: nn.Module, family: Adapter
) -> list[tuple[str, nn.Module, list[tuple[str, Any]]]]:
    """(block name, block module, [(branch-end name, hook)]) for each layer whose branch
    ends share an enclosing module other than themselves (the residual block)."""
    hooks = {name: hook for name, _, _, hook in our_hooks(model)}
    ends = [name for name, _ in placements(model, family)["hidden"]]
    per = max(1, family.branches_per_layer)
    modules = dict(model.named_modules())
    out = []
    for start in range(0, len(ends), per):
        group = ends[start : start + per]
        parts = [name.split(".") for name in group]
        common: list[str] = []
        for pieces in zip(*parts, strict=False):
            if len(set(pieces)) != 1:
                break
            common.append(pieces[0])
        # one branch per layer: the block is the nearest numbered module above the branch
        # end (Mamba's layers.N around mixer.out_proj); a numbered branch end is its own
        # branch (nothing to measure inside)
        prefix = ".".join(common[:-1] if len(group) == 1 else common)
        while len(group) == 1 and prefix and not prefix.rpartition(".")[2].isdigit():
            prefix = prefix.rpartition(".")[0]
        # the enclosing block: the deepest module above every branch end of the layer
        while prefix and (prefix not in modules or prefix in group):
            prefix = prefix.rpartition(".")[0]
        if not prefix or prefix not in modules or any(g not in hooks for g in group):
            continue
        if not any(piece.isdigit() for piece in prefix.split(".")):
            # the group spans layers (an encoder's and a decoder's, of other counts of
            # branches: Whisper's 2 and 3 under ``model``): no one residual block
            continue
        out.append((prefix, modules[prefix], [(g, hooks[g]) for g in group]))
    return out


class _Recorder:
    """Forward hooks that keep, for one pass: each checked block's input and output, each
    input module's input and (multiplied) output, each checked branch end's output."""

    def __init__(self, inputs: list[tuple[str, nn.Module]], blocks: list[Any]):
        self.values: dict[str, Any] = {}
        self.handles: list[Any] = []
        for name, module in inputs:
            self._keep(f"input:{name}", module, with_args=True)
        for block_name, block, ends in blocks:
            self._keep(f"block:{block_name}", block)
            self.handles.append(
                block.register_forward_pre_hook(
                    self._pre(f"h:{block_name}"), with_kwargs=True
                )
            )
            for end_name, _ in ends:
                self._keep(
                    f"end:{end_name}",
                    dict(block.named_modules())[_rel(end_name, block_name)],
                )

    def _keep(self, key: str, module: nn.Module, with_args: bool = False) -> None:
        def hook(mod: nn.Module, args: Any, out: Any) -> None:
            y = _first_tensor(out)
            if y is not None:
                self.values[key] = y.detach().clone()
            if with_args and args and isinstance(args[0], torch.Tensor):
                self.values[key + ":args"] = args[0]

        self.handles.append(module.register_forward_hook(hook))

    def _pre(self, key: str) -> Any:
        def hook(mod: nn.Module, args: Any, kwargs: Any) -> None:
            x = args[0] if args else kwargs.get("hidden_states")
            if isinstance(x, torch.Tensor):
                self.values[key] = x.detach().clone()

        return hook

    def run(self, model: nn.Module, example: Any) -> dict[str, Any]:
        self.values = {}
        self.values["logits"] = _first_tensor(_run(model, example))
        return self.values

    def remove(self) -> None:
        for h in self.handles:
            h.remove()


def _rel(name: str, prefix: str) -> str:
    return name[len(prefix) + 1 :] if prefix else name


def _multiplier_hook(module: nn.Module) -> MultiplierHook | None:
    """The module's multiplier hook, if spectral installed one."""
    hooks = module._forward_hooks.values()
    return next((h for h in hooks if isinstance(h, MultiplierHook)), None)


def _outside(module: nn.Module) -> float:
    """The factor the model multiplies into a hooked module's output after it (1 if
    none): the adapter's config_scales, which the hook divides out."""
    for hook in module._forward_hooks.values():
        if isinstance(hook, MultiplierHook):
            return hook.outside
    return 1.0


def _inside(inputs: list[tuple[str, nn.Module]], block: str) -> bool:
    """Whether an input module sits inside the first block (RWKV's pre_ln makes h_0
    there): the block's input is then no h_0 to compare with."""
    return any(name.startswith(block + ".") for name, _ in inputs)


def _aligned(x: torch.Tensor, y: torch.Tensor) -> bool:
    """Whether two tensors are proportional (cosine above 0.999)."""
    a, b = x.double().flatten(), y.double().flatten()
    return float(a @ b) > 0.999 * max(float(a.norm() * b.norm()), 1e-300)


def _input_problems(
    inputs: list[tuple[str, nn.Module]],
    blocks: list[Any],
    base: dict[str, Any],
    after: float = 1.0,
    measured: list[str] | None = None,
) -> list[str]:
    """An embedding's output is alpha_in times its lookup, and h_0 (the first block's
    input) the sum of the input modules' outputs. after: a factor the model's forward
    multiplies in after the input modules (litgpt's scale_embeddings), which their hooks
    divide out beforehand. measured: what was compared is appended to it."""
    measured = [] if measured is None else measured
    problems = []
    outs = []
    for name, module in inputs:
        out, ids = base.get(f"input:{name}"), base.get(f"input:{name}:args")
        if out is None:
            return []
        outs.append(out)
        hook = _multiplier_hook(module)
        if (
            isinstance(module, nn.Embedding)
            and hook is not None
            and isinstance(ids, torch.Tensor)
            and not ids.is_floating_point()
            and ids.numel() > 0
            and 0 <= int(ids.min())
            and int(ids.max()) < module.num_embeddings
        ):
            lookup = (
                torch.nn.functional.embedding(ids, module.weight)
                * hook.factor
                / after
                / hook.outside
            )
            if lookup.shape != out.shape:
                continue
            ratio = rms(out) / max(rms(lookup), 1e-30)
            # only an output proportional to the lookup is judged: a module that looks up
            # other rows (OPT's positions, offset by 2) says nothing about a scale
            if _aligned(out, lookup):
                measured.append(f"{name}'s lookup")
                if abs(ratio - 1.0) > EXACT_TOLERANCE:
                    problems.append(
                        f"{name}: its output is {ratio:.4g} x alpha_in times its table's "
                        "rows: the embedding scales its lookup (e.g. Gemma's "
                        "sqrt(hidden_size)), so h_0 grows with the width; use the adapter "
                        "of this family, which divides it out"
                    )
    first = blocks[0][0] if blocks else ""
    if problems or not first or f"h:{first}" not in base or _inside(inputs, first):
        return problems
    h0 = base[f"h:{first}"]
    if any(o.shape[-1] != h0.shape[-1] for o in outs):
        return []  # a narrower table projected up to the width (OPT): no sum to compare
    expected = outs[0]
    for o in outs[1:]:
        expected = expected + o
    # the model's factors after the input modules: litgpt's scale_embeddings (after) and a
    # family's config_scales (Granite's embedding_multiplier), both divided out by the hooks
    expected = expected * after * _outside(inputs[0][1])
    if expected.shape != h0.shape:
        return []
    if not _aligned(h0, expected):
        return []  # h_0 is no multiple of the input modules' sum (a stem: Whisper's)
    ratio = rms(h0) / max(rms(expected), 1e-30)
    measured.append("h_0")
    if abs(ratio - 1.0) <= EXACT_TOLERANCE:
        return []
    names = ", ".join(n for n, _ in inputs)
    return [
        (
            f"{blocks[0][0]}: its input h_0 is {ratio:.4g} x the multiplied embedding output "
            f"({names}): the model scales the embedding again after the hooked module (e.g. "
            "Gemma's sqrt(hidden_size)); use the adapter of this family, which divides it out"
        )
    ]


def _branch_problems(
    model: nn.Module,
    example: Any,
    blocks: list[Any],
    rec: _Recorder,
    base: dict[str, Any],
    measured: list[str],
) -> list[str]:
    """Halving one branch end's multiplier moves its block's output by half the branch's
    output (or, behind a gate, by the same tensor as halving it again to 0):
    its contribution reaches the residual stream. A norm after the hooked module
    (Gemma2's post-norms) leaves the block's output unchanged instead. The branches after
    it in the block are switched off (multiplier 0) while it is measured, so that they do
    not answer its change through their inputs. A branch end whose output has other
    features than its block's (it is not on the residual stream) is named; what was
    measured is appended to ``measured``."""
    problems = []
    for block_name, _, ends in blocks:
        for i, (end_name, hook) in enumerate(ends):
            later = [h for _, h in ends[i + 1 :]]
            if later:
                with _scaled(later, 0.0):
                    values = dict(rec.run(model, example))
            else:
                values = base
            full, branch = (
                values.get(f"block:{block_name}"),
                values.get(f"end:{end_name}"),
            )
            if full is None or branch is None:
                continue
            if branch.shape[-1:] != full.shape[-1:]:
                problems.append(
                    f"{end_name}: hooked as a branch end (alpha_hidden), but its output "
                    f"has {_features(branch)} features, not {block_name}'s "
                    f"{_features(full)}: alpha_hidden belongs on the last module before "
                    "the residual addition (the adapter's branches)"
                )
                continue
            if branch.shape != full.shape:
                continue  # the same features otherwise laid out (an MoE's flat tokens)
            with _scaled(later, 0.0), _scaled([hook], 0.5):
                half = rec.run(model, example).get(f"block:{block_name}")
            expected = rms(0.5 * branch) * hook.outside
            if half is None or expected == 0.0:
                continue
            measured.append(end_name)
            ratio = rms(full - half) / expected
            if abs(ratio - 1.0) > BRANCH_TOLERANCE:
                with _scaled(later, 0.0), _scaled([hook], 0.0):
                    off = rec.run(model, example).get(f"block:{block_name}")
                # behind a gate (DiT's gate * proj(a)): linear (1 -> 1/2 moves it as
                # 1/2 -> 0) but not a constant times the output (Granite's constant is)
                step, const = full - half, ratio * 0.5 * hook.outside * branch
                linear = off is not None and rms(step - half + off) <= 1e-3 * rms(step)
                if linear and rms(step - const) > 1e-3 * rms(step):
                    continue
                problems.append(
                    f"{end_name}: halving alpha_hidden moved {block_name}'s output by "
                    f"{ratio:.3g} x half the branch's output, not 1 x: something after the "
                    "hooked module (a norm?) undoes the multiplier; hook the last module "
                    "before the residual addition (an adapter of this family)"
                )
    return problems


def _readout_problems(
    model: nn.Module,
    example: Any,
    rec: _Recorder,
    base: dict[str, Any],
    measured: list[str],
) -> list[str]:
    hooks = [
        (name, hook) for name, _, _, hook in our_hooks(model) if hook.layer == "output"
    ]
    full = base.get("logits")
    if not hooks or full is None or rms(full) == 0.0:
        return []
    with _scaled([h for _, h in hooks], 0.5):
        half = rec.run(model, example).get("logits")
    if half is None:
        return []
    ratio = rms(half) / rms(full)
    measured.append("alpha_out")
    if abs(ratio - 0.5) <= EXACT_TOLERANCE * 10:
        return []
    names = ", ".join(n for n, _ in hooks)
    return [
        (
            f"{names}: halving alpha_out changed the model's output by x{ratio:.3g}, not x0.5: "
            "something after the readout (a final norm, logit soft-capping) undoes alpha_out"
        )
    ]


@torch.no_grad()
def _norm_problems(model: nn.Module, family: Adapter) -> list[str]:
    """Each norm's gain with its weight at the value init_ writes (1 - norm_offset)."""
    offset = float(getattr(family, "norm_offset", 0.0))
    problems = []
    for name, module in model.named_modules():
        weight = getattr(module, "weight", None)
        if (
            not is_norm(module)
            or not isinstance(weight, nn.Parameter)
            or weight.ndim != 1
        ):
            continue
        if isinstance(module, nn.GroupNorm):
            continue
        n = weight.shape[0]
        x = torch.randn(4, n, generator=torch.Generator().manual_seed(1))
        x = (x - x.mean(-1, keepdim=True)).to(device=weight.device, dtype=weight.dtype)
        saved = weight.detach().clone()
        bias = getattr(module, "bias", None)
        saved_bias = bias.detach().clone() if isinstance(bias, torch.Tensor) else None
        try:
            weight.fill_(1.0 - offset)
            if saved_bias is not None:
                bias.zero_()  # type: ignore[union-attr]
            y = module.forward(x)  # not module(x): its own multiplier hook would count
        except Exception:  # noqa: BLE001, S112 - a norm that needs other inputs: not measured
            continue
        finally:
            weight.copy_(saved)
            if saved_bias is not None:
                bias.copy_(saved_bias)  # type: ignore[union-attr]
        if not isinstance(y, torch.Tensor) or y.shape != x.shape:
            continue
        normalized = x / x.pow(2).mean(-1, keepdim=True).add(1e-6).sqrt()
        gain = rms(y) / rms(normalized)
        if abs(gain - 1.0) > GAIN_TOLERANCE:
            problems.append(
                f"{name}: effective gain {gain:.3g} at init, not 1: it computes its output "
                f"with the weight at {1.0 - offset:g} differently (e.g. x * (1 + w)); use the "
                "adapter of this family, which initialises such norms to gain 1"
            )
    return problems


def _compiled_problems(model: nn.Module, example: Any) -> list[str]:
    """A torch.compile wrapper's own call against its module's, on the same input; and
    code compiled before apply_multipliers hooked the module, which a call of another
    signature than training's (it compiles afresh) would not show."""
    inner = getattr(model, "_orig_mod", None)
    if not isinstance(inner, nn.Module):
        return []
    if stale_compiled(model):
        return [
            "the compiled model runs code compiled before apply_multipliers hooked its "
            "module: torch.compile does not call hooks added later, so it trains without "
            "the multipliers; " + STALE_FIX
        ]
    with torch.enable_grad():
        compiled = _first_tensor(_run(model, example))
        eager = _first_tensor(_run(inner, example))
    if compiled is not None and eager is not None:
        compiled, eager = compiled.detach(), eager.detach()
    if compiled is None or eager is None:
        return []
    scale = max(rms(eager), 1e-30)
    if rms(compiled - eager) / scale <= 1e-3:
        return []
    return [
        (
            "the compiled model computes another output than its module (relative difference "
            f"{rms(compiled - eager) / scale:.3g}): multipliers applied after torch.compile "
            "are not in the compiled code; " + STALE_FIX
        )
    ]


def _example_or_why_not(
    model: nn.Module, family: Adapter | None, example_input: Any
) -> tuple[Any, str | None]:
    """The batch to run the model on, or the one line that says why it cannot be run."""
    if family is None:
        return None, (
            "check did not run the model: no adapter recognises it, so its hooked "
            "modules cannot be placed; pass adapter=... (as given to "
            "apply_multipliers) or measure=False"
        )
    if any(type(p).__name__ == "DTensor" for p in model.parameters()):
        # a forward pass of a sharded model is a collective: one rank's check would hang
        return None, (
            "check did not run the sharded model (DTensor parameters: its forward "
            "pass is a collective every rank would have to join): check the unsharded "
            "model after apply_multipliers, or pass measure=False"
        )
    example = (
        example_input if example_input is not None else example_batch(model, family)
    )
    if example is None:
        names = ", ".join(n for n, _ in placements(model, family)["input"]) or "none"
        return None, (
            f"check did not run the model: its input modules ({names}) hold no "
            "token table (nn.Embedding) or dense layer (nn.Linear) to build an "
            f"example batch from; {MEASURE_FIX}"
        )
    return example, None


def measured_problems(
    model: nn.Module, family: Adapter | None, example_input: Any = None
) -> list[str]:
    """What the forward pass shows: [] only when it ran, measured, and everything holds.
    When the model could not be run (no adapter places its hooks, a sharded model, no
    example batch to build, the model raised) or a run measured nothing, one line says what
    was not measured and how to measure it. A model without multiplier hooks has nothing
    here to perturb (its multipliers are built in: check reads their values): []."""
    if not our_hooks(model):
        return []
    example, unmeasured = _example_or_why_not(model, family, example_input)
    if unmeasured is not None:
        return [unmeasured]
    assert family is not None  # _example_or_why_not says why not without one
    eager = getattr(model, "_orig_mod", model)  # a compiled model: perturb its module
    try:
        # in the model's own mode, gradients on: the compiled code training runs (a call
        # in another mode would compile afresh, with the hooks, and show nothing)
        compiled = _compiled_problems(model, example)
    except Exception as exc:  # noqa: BLE001 - the user's model: one line, not a traceback
        return [_could_not_run(exc)]
    was_training = model.training
    model.eval()
    rec: _Recorder | None = None
    measured: list[str] = []
    try:
        with torch.no_grad():
            inputs = placements(eager, family)["input"]
            blocks = _blocks(eager, family)
            if len(blocks) > 2:
                blocks = [blocks[0], blocks[-1]]
            rec = _Recorder(inputs, blocks)
            base = rec.run(eager, example)
            after = scale_after_input(eager, family)
            problems = _input_problems(inputs, blocks, base, after, measured)
            problems += _branch_problems(eager, example, blocks, rec, base, measured)
            problems += _readout_problems(eager, example, rec, base, measured)
            rec.remove()
            rec = None
        problems += _norm_problems(eager, family)
    except Exception as exc:  # noqa: BLE001 - the user's model: one line, not a traceback
        return [_could_not_run(exc)]
    finally:
        if rec is not None:
            rec.remove()
        model.train(was_training)
    if not measured and not problems:
        # it ran, but nothing was comparable: no embedding lookup, no residual block
        # around a branch end (a whole block hooked), an output that holds no tensor
        hooked = ", ".join(name or "the model" for name, _, _, _ in our_hooks(eager))
        problems.append(
            "check ran the model on an example batch but could verify none of its "
            f"multipliers (hooked: {hooked}): no input module is an embedding to compare "
            "with its rows, no residual block encloses a branch end, and the model's "
            "output holds no tensor to halve alpha_out on; measure=False reads names and "
            "values only"
        )
    return compiled + problems


MEASURE_FIX = "pass example_input=... (what the model's forward takes) or measure=False"


def _could_not_run(exc: Exception) -> str:
    return (
        f"check could not run the model on an example batch ({first_line(exc)}); "
        f"{MEASURE_FIX}"
    )
