"""One twin of the check across widths: set up by the rules, run, stepped once, its rows.

:func:`measure_twin` sets a twin up as the rules say (hooks, or none in the hook-free form;
init by role; the optimizer), runs it on a fixed batch with every module that matters
tracked (the input modules, the branch ends, the readout, every module with a weight, each
trained bias), takes one step and runs it again: one :class:`WidthRow` per module with its
output's RMS at init and the RMS of its one-step change, for
:mod:`spectral.torch.check.widths` to fit against the width.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator, Mapping
from typing import Any

import torch
from torch import nn

from spectral.errors import NotFiniteError, UnsupportedModelError
from spectral.measure.fit import rms
from spectral.scaling import BaseValue
from spectral.torch.apply.hooks import (
    builtin_multipliers,
    install_multipliers,
    our_hooks,
    placements,
)
from spectral.torch.apply.init import init_by_role
from spectral.torch.check.forward import (
    _first_tensor,
    _outside,
    _run,
    example_batch,
)
from spectral.torch.check.twins import twin_depth
from spectral.torch.check.verdict import (
    FAN_IN_GROWS,
    WidthRow,
)
from spectral.torch.model.classify import Adapter
from spectral.torch.model.placement import Placement
from spectral.torch.model.shapes import fans
from spectral.torch.optim.groups import build_composite
from spectral.torch.rules import TorchRules

__all__ = ["SEED", "check_finite", "measure_twin", "step_once"]

SEED = 0


def _not_finite(tensor: torch.Tensor) -> str | None:
    """ "NaN" or "inf" when the tensor holds one (NaN first), else None."""
    if bool(torch.isnan(tensor).any()):
        return "NaN"
    return "inf" if not bool(torch.isfinite(tensor).all()) else None


def _carried(twin: nn.Module, family: Adapter) -> dict[int, tuple[str, float]]:
    """The hook-free form's :func:`_hooked`: id(module) -> (layer, 1.0) of every module a
    multiplier is absorbed into (its parameters carry the factor: nothing scales after)."""
    return {
        id(module): (layer, 1.0)
        for layer, modules in placements(twin, family).items()
        for _, module in modules
    }


def _exponent(rules: TorchRules, role: str, hp: str) -> float:
    return float(rules.rules[role][hp][0]) if role in rules.rules else 0.0


def _init_exponent(rules: TorchRules, role: str, layer: str | None) -> float | None:
    """alpha (of the hook on the module, if any) x sigma x sqrt(fan_in) of the role."""
    grows = FAN_IN_GROWS.get(role)
    if grows is None or role not in rules.rules:
        return None
    alpha = _exponent(rules, f"{layer}_weight", "multiplier") if layer else 0.0
    return alpha + 0.5 * _exponent(rules, role, "init_var") + (0.5 if grows else 0.0)


def _hooked(model: nn.Module) -> dict[int, tuple[str, float]]:
    """id(module) -> (layer, factor / built-in) of the multiplier hook on it."""
    out = {}
    for _, module, _, hook in our_hooks(model):
        out[id(module)] = (hook.layer, hook.own_factor)
    return out


def _weight(module: nn.Module) -> torch.Tensor | None:
    w = getattr(module, "weight", None)
    return w if isinstance(w, nn.Parameter) and w.ndim >= 2 else None


def _map_output(module: nn.Module, args: Any, out: Any) -> torch.Tensor | None:
    """What a module's weight computes from its input: its output, or, where it returns a
    tuple (a router: Llama4's returns the sigmoid of its top-k logits first, GPT-OSS's its
    logits, scores and choices), ``x W^T + b`` on its input. A router's rules are about
    its logits; scores after a sigmoid or a softmax saturate and hide their slope."""
    w = _weight(module)
    x = args[0] if isinstance(args, tuple) and args else None
    if (
        isinstance(out, torch.Tensor)
        or w is None
        or w.ndim != 2
        or not isinstance(x, torch.Tensor)
        or x.shape[-1:] != w.shape[1:]
    ):
        return _first_tensor(out)
    bias = getattr(module, "bias", None)
    bias = (
        bias if isinstance(bias, torch.Tensor) and bias.shape == w.shape[:1] else None
    )
    with torch.no_grad():
        return nn.functional.linear(x.to(w.dtype), w, bias)


def _trained_bias(module: nn.Module) -> nn.Parameter | None:
    """The module's own bias when it is trained (its effect on the output is measured)."""
    b = getattr(module, "bias", None)
    return b if isinstance(b, nn.Parameter) and b.requires_grad else None


def _tracked(
    model: nn.Module, family: Adapter, roles: Mapping[int, str]
) -> list[tuple[str, str, nn.Module]]:
    """(name, kind, module) of every module measured: placements, then weight modules."""
    placed = placements(model, family)
    out, seen = [], set()
    for layer, kind in (("input", "input"), ("hidden", "branch"), ("output", "output")):
        for name, module in placed[layer]:
            out.append((name, kind, module))
            seen.add(id(module))
    for name, module in model.named_modules():
        w = _weight(module)
        if id(module) not in seen and w is not None and id(w) in roles:
            out.append((name, "linear", module))
    return out


def _loss(out: torch.Tensor, own: Any = None) -> torch.Tensor:
    """The model's own loss where its output carries one (a Hugging Face model given
    labels in example_input: its shift, its masking), else cross-entropy against fixed
    labels (the same at every width: they index the output's last dimension, which does
    not grow)."""
    if isinstance(own, torch.Tensor) and own.ndim == 0 and own.requires_grad:
        return own
    classes = out.shape[-1]
    gen = torch.Generator().manual_seed(SEED + 1)
    flat = out.reshape(-1, classes).float()
    if classes == 1:
        return (flat - 1.0).pow(2).mean()
    labels = torch.randint(0, classes, (flat.shape[0],), generator=gen)
    return nn.functional.cross_entropy(flat, labels.to(flat.device))


def set_up_twin(
    rules: TorchRules,
    placement: Placement,
    width: int,
    multiplier: BaseValue,
    base: Mapping[str, Any],
) -> torch.optim.Optimizer:
    """The twin (placed as the user's model is) set up as the rules say: hooks (not in
    the hook-free form, whose init and groups carry the multipliers), init by role, the
    optimizer."""
    twin, family = placement.model, placement.family
    assert family is not None  # measure_widths refuses a twin with no family
    depth = twin_depth(
        twin, len(placements(twin, family)["hidden"]), family.branches_per_layer
    )
    builtin = builtin_multipliers(twin)
    absorbed = rules.absorbed is not None
    if not builtin and not absorbed:
        install_multipliers(rules, placement, width, depth, multiplier=multiplier)
    # the user's init: their own, scaled by the rules (init_'s default), unless they drew
    # with a base std (check passes it on from the init record)
    init_std = base.get("init_std")
    init_by_role(rules, placement, width, depth, init_std, multiplier=multiplier)
    carried: dict[str, Any] = {"multiplier": multiplier} if absorbed else {}
    return build_composite(
        rules,
        placement,
        width,
        depth,
        multipliers_in_forward=builtin or None,
        **carried,
        **{k: v for k, v in base.items() if k != "init_std"},
    )


Outputs = dict[str, torch.Tensor]
"""Module name -> its output (double), and "logits"."""


INERT = 1e-5
"""A bias whose gradient's RMS is below this times its weight's has no effect on the loss
(a key bias under a softmax, which ignores a shift of every key by one vector): its step is
an optimizer's answer to rounding noise, and is not judged."""


def _inert_biases(tracked: list[tuple[str, str, nn.Module]]) -> set[str]:
    """The tracked modules whose trained bias has a gradient at rounding level beside
    their weight's (after the backward pass, before the step)."""
    out = set()
    for name, _, module in tracked:
        b, w = _trained_bias(module), _weight(module)
        if b is None or w is None or b.grad is None or w.grad is None:
            continue
        weight_grad = rms(w.grad.detach())
        if weight_grad > 0 and rms(b.grad.detach()) <= INERT * weight_grad:
            out.add(name)
    return out


def _run_and_step(
    twin: nn.Module,
    batch: Any,
    tracked: list[tuple[str, str, nn.Module]],
    opt: torch.optim.Optimizer,
    width: int,
) -> tuple[Outputs, Outputs, dict[str, tuple[Any, Any]], set[str]]:
    """Every tracked module's output before and after one step on ``batch``, the inputs
    of those with a weight from before the step, and the modules whose bias is inert."""
    outputs: Outputs = {}

    def keep(name: str) -> Callable[..., None]:
        def hook(module: nn.Module, args: Any, out: Any) -> None:
            y = _map_output(module, args, out)
            if y is not None:
                # what the model uses: a factor its forward applies after the module (a
                # family's config_scales, which the multiplier hook divides out) put back
                outputs[name] = y.detach().double().clone() * _outside(module)

        return hook

    inputs: dict[str, tuple[Any, Any]] = {}

    def keep_input(name: str) -> Callable[..., None]:
        def hook(module: nn.Module, args: Any, kwargs: Any) -> None:
            if name not in inputs:  # the input from before the step
                inputs[name] = (_detached(args), _detached(kwargs))

        return hook

    handles = [m.register_forward_hook(keep(n)) for n, _, m in tracked]
    handles += [
        m.register_forward_pre_hook(keep_input(n), with_kwargs=True)
        for n, _, m in tracked
        if _weight(m) is not None
    ]
    twin.eval()  # dropout off: the same function before and after the step
    try:
        out = _run(twin, batch)
        logits = _first_tensor(out)
        if logits is None:
            raise UnsupportedModelError(
                "the model's output holds no tensor to take a loss of"
            )
        check_finite(logits, outputs, width, "at init")
        before = {**outputs, "logits": logits.detach().double().clone()}
        _loss(logits, getattr(out, "loss", None)).backward()
        del out, logits  # the graph's activations: freed before the step
        inert = _inert_biases(tracked)
        step_once(opt)
        opt.zero_grad(set_to_none=True)
        with torch.no_grad():
            after_logits = _first_tensor(_run(twin, batch))
        if after_logits is None:
            raise UnsupportedModelError(
                "the model's output holds no tensor after the step"
            )
        check_finite(after_logits, outputs, width, "after one step")
        after = {**outputs, "logits": after_logits.detach().double()}
    finally:
        for h in handles:
            h.remove()
    return before, after, inputs, inert


def _per_parameter(opt: torch.optim.Optimizer) -> list[torch.optim.Optimizer] | None:
    """The optimizers inside ``opt`` (a composite's parts, or itself) when every one is
    one of torch.optim's own classes, each of which keeps its state per parameter and
    reads nothing across parameters (a parameter stepped alone steps exactly as in a
    step of all of them); else None."""
    parts = getattr(opt, "parts", None)
    inner = list(parts.values()) if isinstance(parts, Mapping) else [opt]
    own = all(
        isinstance(part, torch.optim.Optimizer)
        and (type(part).__module__ + ".").startswith("torch.optim.")
        for part in inner
    )
    return inner if own and inner else None


def newton_schulz_float32(
    grad: torch.Tensor,
    ns_coefficients: tuple[float, float, float],
    ns_steps: int,
    eps: float,
) -> torch.Tensor:
    """torch.optim.Muon's Newton-Schulz iteration (its private
    ``_zeropower_via_newtonschulz``) computed in float32 instead of bfloat16."""
    a, b, c = ns_coefficients
    x = grad.float()
    tall = grad.size(0) > grad.size(1)
    x = x.T if tall else x
    x = x / x.norm().clamp(min=eps)
    for _ in range(ns_steps):
        gram = x @ x.T
        x = torch.addmm(x, torch.addmm(gram, gram, gram, beta=b, alpha=c), x, beta=a)
    return x.T if tall else x


@contextlib.contextmanager
def float32_newton_schulz_on_cpu(params: list[torch.Tensor]) -> Iterator[None]:
    """For a twin on the CPU, torch.optim.Muon's Newton-Schulz iteration in float32 while
    it steps. torch runs it in bfloat16, which a CPU without bfloat16 matrix units computes
    many times slower: the Llama-7B config's twin at width 2048 had not stepped after an
    hour on a 2-core AVX2 machine, in float32 the whole check takes minutes. The check
    measures width exponents, which the iteration's precision does not move. On a GPU, or
    a torch without that function, torch's own iteration runs."""
    module = getattr(torch.optim, "_muon", None)
    own = getattr(module, "_zeropower_via_newtonschulz", None)
    if own is None or not params or params[0].device.type != "cpu":
        yield
        return
    module._zeropower_via_newtonschulz = newton_schulz_float32  # type: ignore[union-attr]
    try:
        yield
    finally:
        module._zeropower_via_newtonschulz = own  # type: ignore[union-attr]


def step_once(opt: torch.optim.Optimizer) -> None:
    """The twin's one step, taken one parameter at a time where :func:`_per_parameter`
    says that is the same step: each parameter is stepped with only its own gradient
    present, then its gradient and its optimizer state are dropped (the twin is stepped
    once; nothing reads them after), and on a CPU Muon's Newton-Schulz runs in float32
    (:func:`float32_newton_schulz_on_cpu`). A large twin then holds one parameter's state (Muon's
    momentum, Adam's moments) at a time instead of every one, and its gradients go as its
    parameters step (issue 36: at width 2048 the Llama-7B config's twin has 0.4 GB of
    hidden matrices, as much again in gradients and in Muon momentum). Any other optimizer
    (pytorch_optimizer's keep counters per group, which a step per parameter would advance
    once per parameter) takes one ordinary step."""
    params_all = [p for g in opt.param_groups for p in g["params"]]
    with float32_newton_schulz_on_cpu(params_all):
        _step_each(opt)


def _step_each(opt: torch.optim.Optimizer) -> None:
    parts = _per_parameter(opt)
    if parts is None:
        opt.step()
        return
    params = [
        p
        for part in parts
        for group in part.param_groups
        for p in group["params"]
        if p.grad is not None
    ]
    grads = [p.grad for p in params]
    for p in params:
        p.grad = None
    for i, p in enumerate(params):
        p.grad, grads[i] = grads[i], None
        opt.step()  # the other parameters have no gradient: they are left as they are
        p.grad = None
        for part in parts:
            part.state.pop(p, None)


def _module_row(
    rules: TorchRules,
    twin: nn.Module,
    name: str,
    kind: str,
    module: nn.Module,
    roles: Mapping[int, str],
    hooked: Mapping[int, tuple[str | None, float]],
    values: tuple[torch.Tensor, torch.Tensor, torch.Tensor],
) -> WidthRow:
    """One module's row: its output's RMS at init, its change after the step (in all, and
    from its own parameters alone: ``moved``), its fans."""
    before, after, moved = values
    w = _weight(module)
    layer = hooked.get(id(module), (None, 1.0))[0]
    role = roles.get(id(w), "") if w is not None else f"{layer}_weight"
    if kind == "output" and role == "input_weight":
        # a tied embedding where it reads out: judged by its readout role (a tie is
        # placed once, as input_weight, and allowed only where both roles' rules agree)
        role = "output_weight"
    row = WidthRow(name, kind, role, owns_weight=w is not None or kind == "logits")
    # a conv's output holds its channels in dim 1 (N, C, ...), every other module's last
    channels = isinstance(module, nn.modules.conv._ConvNd) and before.ndim >= 3
    row.features.append(int(before.shape[1 if channels else -1]) if before.ndim else 0)
    row.init_predicted = _init_exponent(rules, role, layer)
    row.init.append(rms(before))
    row.total.append(rms(after - before))
    row.step.append(rms(moved - before))
    if w is not None:
        n_out, n_in = fans(module, w)
        row.fan_in.append(n_in)
        row.fan_out.append(n_out)
    if not any(row.init + row.step):
        row.zeroed = [
            n
            for n, p in module.named_parameters()
            if not n.endswith("bias") and not bool(p.detach().any())
        ] or _zeroed_around(twin, name)
    return row


def _logits_row(
    rows: Mapping[str, WidthRow], before: Outputs, after: Outputs
) -> WidthRow | None:
    """The logits' row, with the readout's role and init exponent (None: no readout)."""
    out_rows = [r for r in rows.values() if r.kind == "output"]
    if not out_rows:
        return None
    row = WidthRow(
        "logits", "logits", out_rows[0].role, init_predicted=out_rows[0].init_predicted
    )
    row.init.append(rms(before["logits"]))
    row.step.append(rms(after["logits"] - before["logits"]))
    row.total.append(row.step[-1])
    return row


def measure_twin(
    rules: TorchRules,
    placement: Placement,
    width: int,
    multiplier: BaseValue,
    example_input: Any,
    base: Mapping[str, Any],
) -> tuple[dict[str, WidthRow], Any]:
    """One twin (placed as the user's model is) set up, run, stepped once and run again:
    its rows (one value each)."""
    twin, family = placement.model, placement.family
    assert family is not None  # measure_widths refuses a twin with no family
    roles_list = placement.entries
    opt = set_up_twin(rules, placement, width, multiplier, base)
    roles = {id(p): role for _, p, role, _ in roles_list}
    hooked = _carried(twin, family) if rules.absorbed is not None else _hooked(twin)
    tracked = _tracked(twin, family, roles)
    # the user's input, or one built as check() builds it: 2 x 8 token ids below the
    # token table (the same at every width), or a normal batch for a dense input layer
    batch = example_input if example_input is not None else example_batch(twin, family)
    if batch is None:
        raise UnsupportedModelError(
            "no token table (nn.Embedding) or dense layer (nn.Linear) in the input modules "
            "to build a batch from: pass example_input=... (what the model's forward "
            "takes, the same at every width)"
        )
    biases = {
        name: b.detach().double().clone()
        for name, _, m in tracked
        if (b := _trained_bias(m)) is not None
    }
    before, after, inputs, inert = _run_and_step(twin, batch, tracked, opt, width)
    own = _own_outputs(tracked, inputs)
    rows: dict[str, WidthRow] = {}
    for name, kind, module in tracked:
        if (
            name not in before
            or name not in after
            or before[name].shape != after[name].shape
        ):
            continue
        mine = own.get(name)
        moved = (
            mine
            if mine is not None and mine.shape == before[name].shape
            else after[name]
        )
        values = (before[name], after[name], moved)
        rows[name] = _module_row(rules, twin, name, kind, module, roles, hooked, values)
        bias = _trained_bias(module)
        if name in biases and bias is not None and name not in inert:
            factor = hooked.get(id(module), (None, 1.0))[1]
            b_role = next((r for _, p, r, _ in roles_list if p is bias), "")
            b_row = WidthRow(f"{name}.bias", "bias", b_role, init_predicted=None)
            b_row.scaled = id(module) in hooked
            b_row.init.append(rms(biases[name] * factor))
            b_row.step.append(rms((bias.detach().double() - biases[name]) * factor))
            rows[b_row.name] = b_row
    logits = _logits_row(rows, before, after)
    if logits is not None:
        rows["logits"] = logits
    return rows, batch


def check_finite(
    logits: torch.Tensor, outputs: Mapping[str, torch.Tensor], width: int, when: str
) -> None:
    """Raise NotFiniteError when the output is NaN or inf, naming the first module measured
    (in the order the forward pass ran them) whose output already was."""
    kind = _not_finite(logits.detach())
    if kind is None:
        return
    first = next((n for n, y in outputs.items() if _not_finite(y) is not None), None)
    where = (
        f"first in the output of {first}"
        if first is not None
        else "every module measured is finite: it comes after them"
    )
    raise NotFiniteError(
        f"the model's output is {kind} at width {width} {when} ({where}): no slope can be "
        "fitted; fix the model (or the base values) until it is finite"
    )


def _detached(value: Any) -> Any:
    """Tensors in (nested) args and kwargs detached, so the step does not change them."""
    if isinstance(value, torch.Tensor):
        return value.detach().clone()
    if isinstance(value, tuple):
        return tuple(_detached(v) for v in value)
    if isinstance(value, list):
        return [_detached(v) for v in value]
    if isinstance(value, dict):
        return {k: _detached(v) for k, v in value.items()}
    return value


@torch.no_grad()
def _own_outputs(
    tracked: list[tuple[str, str, nn.Module]], inputs: Mapping[str, tuple[Any, Any]]
) -> dict[str, torch.Tensor]:
    """Each weight module's output after the step on its input from before it: the change
    its own parameters made (what its role's rules set), apart from what its input brought
    (the modules before it answer for that). A module that cannot be called alone again is
    left out: its whole change counts."""
    out = {}
    for name, _, module in tracked:
        if name not in inputs:
            continue
        args, kwargs = inputs[name]
        try:
            y = _map_output(module, args, module(*args, **kwargs))
        except Exception:  # noqa: BLE001, S112 - a module that needs more than its inputs
            continue
        if y is not None:
            out[name] = y.detach().double() * _outside(module)
    return out


def _zeroed_around(model: nn.Module, name: str) -> list[str]:
    """All-zero parameters (not biases) in the block around a dead module."""
    parent = name.rpartition(".")[0]
    block = model.get_submodule(parent) if parent else model
    return [
        f"{parent + '.' if parent else ''}{n}"
        for n, p in block.named_parameters()
        if not n.endswith("bias") and not bool(p.detach().any())
    ]
