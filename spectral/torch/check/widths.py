"""The check across widths: small twins of a model, one step each, slopes against the rules.

check() on one model at one width can only read names and measure ratios; a parameter whose
dimensions are not the ones its role assumes (a fixed-rank projection treated as width by
width), a built-in constant that grows with the width, or a mixer that init_ zeroed look right
there. Here the model is rebuilt at three or more widths (:mod:`spectral.torch.check.twins`), each
twin set up the documented way (apply_multipliers, init_, build_optimizers from the same
rules and base values), run on one fixed batch, stepped once and run again. For every module
that matters (the input modules: h_0; every branch end; the readout and the logits; every
other module with a weight matrix; the effect of each bias) the output RMS at init and the RMS
of its one-step change are fitted against the width on log-log axes, and each slope is
compared with the exponent the rules predict:

* at init, ``alpha · sigma · sqrt(fan_in)`` of the module's role (a random matrix times a
  Theta(1) input), each from the rules' exponents and the role's dimensions: 0 for input and
  hidden matrices, -1/2 for the readout and a router under muP (a random readout is not
  aligned with h_L);
* after one step, 0 for every module: every condition term's target is Theta(1) in the width
  (spectral.engine.conditions: targets differ in their depth power only).

Cost: three or more twins of a few layers, one forward, backward, step and forward each.
"""

from __future__ import annotations

import math
import operator
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

import torch
from torch import nn

from spectral.errors import (
    ConfigError,
    ConfigTypeError,
    NotFiniteError,
    UnsupportedModelError,
)
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
    _exception_line,
    _first_tensor,
    _outside,
    _run,
    example_batch,
    measured_problems,
)
from spectral.torch.check.twins import twin_builder, twin_depth
from spectral.torch.check.verdict import (
    FAN_IN_GROWS,
    FAN_OUT_GROWS,
    STEP_EXPONENT,
    WidthReport,
    WidthRow,
    group_name,
    off_rules,
)
from spectral.torch.model.classify import (
    Adapter,
    AdapterLike,
    Patterns,
)
from spectral.torch.model.placement import place
from spectral.torch.model.shapes import fans
from spectral.torch.optim.groups import build_composite
from spectral.torch.rules import TorchRules

__all__ = [
    "FAN_IN_GROWS",
    "FAN_OUT_GROWS",
    "STEP_EXPONENT",
    "WidthReport",
    "WidthRow",
    "check_widths",
    "group_name",
]

MIN_WIDTHS = 3
MAX_SEEDS = 1000
"""The most twins drawn per width (each draw costs a twin's build and step)."""
SEED = 0


def _whole(value: Any) -> int:
    """A width as an int: an integer, or a float or one-element tensor holding a whole
    number; a bool, a fraction (64.5), inf, NaN or text is refused (ValueError)."""
    if isinstance(value, (bool, str, bytes)) or (
        isinstance(value, torch.Tensor) and value.dtype == torch.bool
    ):
        raise ValueError
    try:
        return operator.index(value)
    except TypeError:
        pass
    number = float(value)  # TypeError or ValueError for what holds no number
    if not math.isfinite(number) or number != int(number):
        raise ValueError
    return int(number)


def _not_finite(tensor: torch.Tensor) -> str | None:
    """"NaN" or "inf" when the tensor holds one (NaN first), else None."""
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
        kw = hook.keywords
        out[id(module)] = (kw["layer"], kw["factor"] / kw.get("built_in", 1.0))
    return out


def _weight(module: nn.Module) -> torch.Tensor | None:
    w = getattr(module, "weight", None)
    return w if isinstance(w, nn.Parameter) and w.ndim >= 2 else None


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


def _set_up_twin(
    rules: TorchRules,
    twin: nn.Module,
    width: int,
    family: Adapter,
    patterns: Patterns | None,
    multiplier: BaseValue,
    base: Mapping[str, Any],
) -> torch.optim.Optimizer:
    """The twin set up as the rules say: hooks (not in the hook-free form, whose init and
    groups carry the multipliers), init by role, the optimizer."""
    depth = twin_depth(
        twin, len(placements(twin, family)["hidden"]), family.branches_per_layer
    )
    builtin = builtin_multipliers(twin)
    absorbed = rules.absorbed is not None
    if not builtin and not absorbed:
        install_multipliers(
            rules, twin, width, depth, multiplier=multiplier, adapter=family, patterns=patterns
        )
    init_std = base.get("init_std", 0.02)
    init_by_role(
        rules, twin, width, depth, init_std,
        patterns=patterns, adapter=family, multiplier=multiplier,
    )
    carried: dict[str, Any] = {"multiplier": multiplier} if absorbed else {}
    return build_composite(
        rules, twin, width, depth,
        adapter=family,
        patterns=patterns,
        multipliers_in_forward=builtin or None,
        **carried,
        **{k: v for k, v in base.items() if k != "init_std"},
    )


Outputs = dict[str, torch.Tensor]
"""Module name -> its output (double), and "logits"."""


def _run_and_step(
    twin: nn.Module,
    batch: Any,
    tracked: list[tuple[str, str, nn.Module]],
    opt: torch.optim.Optimizer,
    width: int,
) -> tuple[Outputs, Outputs, dict[str, tuple[Any, Any]]]:
    """Every tracked module's output before and after one step on ``batch``, and the
    inputs of those with a weight from before the step."""
    outputs: Outputs = {}

    def keep(name: str) -> Callable[..., None]:
        def hook(module: nn.Module, args: Any, out: Any) -> None:
            y = _first_tensor(out)
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
        _finite(logits, outputs, width, "at init")
        before = {**outputs, "logits": logits.detach().double().clone()}
        _loss(logits, getattr(out, "loss", None)).backward()
        opt.step()
        opt.zero_grad(set_to_none=True)
        with torch.no_grad():
            after_logits = _first_tensor(_run(twin, batch))
        if after_logits is None:
            raise UnsupportedModelError(
                "the model's output holds no tensor after the step"
            )
        _finite(after_logits, outputs, width, "after one step")
        after = {**outputs, "logits": after_logits.detach().double()}
    finally:
        for h in handles:
            h.remove()
    return before, after, inputs


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
    row = WidthRow(name, kind, role, owns_weight=w is not None or kind == "logits")
    row.features.append(int(before.shape[-1]) if before.ndim else 0)
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


def _logits_row(rows: Mapping[str, WidthRow], before: Outputs, after: Outputs) -> WidthRow | None:
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


def _measure_twin(
    rules: TorchRules,
    twin: nn.Module,
    width: int,
    family: Adapter,
    patterns: Patterns | None,
    multiplier: BaseValue,
    example_input: Any,
    base: Mapping[str, Any],
) -> tuple[dict[str, WidthRow], Any]:
    """One twin set up, run, stepped once and run again: its rows (one value each)."""
    roles_list = place(twin, rules, patterns=patterns, adapter=family).entries
    opt = _set_up_twin(rules, twin, width, family, patterns, multiplier, base)
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
    before, after, inputs = _run_and_step(twin, batch, tracked, opt, width)
    own = _own_outputs(tracked, inputs)
    rows: dict[str, WidthRow] = {}
    for name, kind, module in tracked:
        if name not in before or name not in after or before[name].shape != after[name].shape:
            continue
        mine = own.get(name)
        moved = mine if mine is not None and mine.shape == before[name].shape else after[name]
        values = (before[name], after[name], moved)
        rows[name] = _module_row(rules, twin, name, kind, module, roles, hooked, values)
        bias = _trained_bias(module)
        if name in biases and bias is not None:
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


def _finite(
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


def _pooled(drawn: list[dict[str, WidthRow]]) -> dict[str, WidthRow]:
    """One width's rows over its seeds: the first draw's rows, each measured value the mean
    over the draws (a module missing from a draw is left out)."""
    pooled: dict[str, WidthRow] = {}
    for name, row in drawn[0].items():
        if not all(name in rows for rows in drawn[1:]):
            continue
        for quantity in ("init", "step", "total"):
            values = [getattr(rows[name], quantity) for rows in drawn]
            if all(len(v) == 1 for v in values):
                setattr(row, quantity, [sum(v[0] for v in values) / len(values)])
        pooled[name] = row
    return pooled


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
            y = _first_tensor(module(*args, **kwargs))
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


def _checked_sizes(widths: Any, seeds: Any, base: Mapping[str, Any]) -> list[int]:
    """The widths, sorted whole numbers, once the arguments are checked: a bad one raises
    (ConfigError) before any twin is built."""
    if isinstance(seeds, bool) or not isinstance(seeds, int) or not 1 <= seeds <= MAX_SEEDS:
        shown = repr(seeds) if len(repr(seeds)) <= 40 else repr(seeds)[:40] + "..."
        bad_seeds = f"seeds must be a whole number from 1 to {MAX_SEEDS}, got {shown}"
        if isinstance(seeds, bool) or not isinstance(seeds, int):
            raise ConfigTypeError(bad_seeds)
        raise ConfigError(bad_seeds)
    try:
        sizes = sorted({_whole(w) for w in widths})
    except (TypeError, ValueError):
        shown = repr(widths) if len(repr(widths)) <= 80 else repr(widths)[:80] + "..."
        raise ConfigError(f"widths must be whole numbers, got {shown}") from None
    if len(sizes) < MIN_WIDTHS or sizes[0] < 1:
        raise ConfigError(
            f"check across widths needs {MIN_WIDTHS} or more widths, got {widths!r}"
        )
    if "lr" not in base:
        raise ConfigError(
            "check across widths did not measure: no base lr to build the twins' "
            "optimizers with (pass the optimizer build_optimizers returned, or lr=...)"
        )
    return sizes


def _built(
    build: Callable[[int], Any], width: int, sizes_built: dict[int, int] | None
) -> nn.Module:
    """The twin at ``width``; one that is no module, or (``sizes_built``: parameter count
    -> the width whose twin had it) the same size as another width's, is the model's
    problem, reported as not measured."""
    twin = build(width)
    if not isinstance(twin, nn.Module):
        raise UnsupportedModelError(
            f"factory({width}) returned {type(twin).__name__}, not a torch.nn.Module"
        )
    if sizes_built is not None:
        count = sum(p.numel() for p in twin.parameters())
        if count in sizes_built:
            raise UnsupportedModelError(
                f"the twins at widths {sizes_built[count]} and {width} are the same size "
                f"({count} parameters each): the factory must build the model at the width "
                "it is given"
            )
        sizes_built[count] = width
    return twin


def _across_widths(per_width: list[dict[str, WidthRow]]) -> list[WidthRow]:
    """One row per module measured at every width, its values in width order."""
    merged: list[WidthRow] = []
    for name, first in per_width[0].items():
        if all(name in rows_at for rows_at in per_width):
            row = first
            for rows_at in per_width[1:]:
                other = rows_at[name]
                row.init += other.init
                row.step += other.step
                row.total += other.total
                row.fan_in += other.fan_in
                row.fan_out += other.fan_out
                row.features += other.features
            merged.append(row)
    return merged


@dataclass
class _Progress:
    """The widths measured so far, the problems found, and the time limit."""

    sizes: list[int]
    timeout: float | None
    measured: list[int] = field(default_factory=list)
    problems: list[str] = field(default_factory=list)
    started: float = field(default_factory=time.monotonic)

    def late(self) -> bool:
        """The time limit reached (looked at before each twin, of every seed): the widths
        left are named as not measured."""
        if self.timeout is None or time.monotonic() <= self.started + self.timeout:
            return False
        left = ", ".join(str(w) for w in self.sizes if w not in self.measured)
        self.problems.append(
            f"check across widths did not measure widths {left}: the time limit of "
            f"{self.timeout:g} s was reached"
        )
        return True


def _measure_widths(
    rules: TorchRules,
    model: nn.Module,
    factory: Callable[[int], nn.Module] | None,
    adapter: AdapterLike | None,
    patterns: Patterns | None,
    multiplier: BaseValue,
    example_input: Any,
    base: Mapping[str, Any],
    seeds: int,
    progress: _Progress,
) -> list[dict[str, WidthRow]]:
    """Each width's rows, pooled over its seeds, until every width is measured or the
    time limit is reached (``progress`` holds what was measured and found)."""
    sizes, problems, measured = progress.sizes, progress.problems, progress.measured
    per_width: list[dict[str, WidthRow]] = []
    sizes_built: dict[int, int] = {}  # parameter count -> the width whose twin had it
    build = twin_builder(model, factory)
    placement = place(model, rules, patterns=patterns, adapter=adapter)
    family, patterns = placement.family, placement.patterns  # given once, kept
    for width in sizes:
        drawn: list[dict[str, WidthRow]] = []
        for seed in range(seeds):
            if progress.late():
                break
            torch.manual_seed(SEED + seed)
            twin = _built(build, width, sizes_built if seed == 0 else None)
            twin_family = family or place(twin, rules, patterns=patterns).family
            if twin_family is None:
                raise UnsupportedModelError(
                    "no adapter recognises the model: pass adapter=..."
                )
            rows, batch = _measure_twin(
                rules, twin, width, twin_family, patterns, multiplier, example_input, base
            )
            if seed == 0 and width == sizes[len(sizes) // 2]:
                problems += [
                    f"at width {width}: {line}"
                    for line in measured_problems(twin, twin_family, batch)
                ]
            drawn.append(rows)
            del twin
        if len(drawn) < seeds:
            break
        per_width.append(_pooled(drawn))
        measured.append(width)
    return per_width


def check_widths(
    rules: TorchRules,
    model: nn.Module,
    widths: list[int],
    *,
    factory: Callable[[int], nn.Module] | None = None,
    adapter: AdapterLike | None = None,
    patterns: Patterns | None = None,
    multiplier: BaseValue = 1.0,
    example_input: Any = None,
    timeout: float | None = 120.0,
    base: Mapping[str, Any] | None = None,
    seeds: int = 1,
) -> WidthReport:
    """Twins of ``model`` at ``widths`` measured; the report's problems are [] only when
    every module was measured at every width and is within SLOPE_TOLERANCE_WIDTHS of its rules.

    ``timeout``: seconds for the whole check, looked at before each twin of every seed (a
    twin that would start after it is not built: the widths left are named as not
    measured). ``seeds``: twins drawn per width (1 to MAX_SEEDS; init seeds 0, 1, ...);
    each RMS is their mean before the slope is fitted. At a few heads of width one draw's
    branch slopes scatter by about 0.1 from seed to seed, so a check near the tolerance
    wants several (the cost grows with them). A bad argument raises ConfigError."""
    base = dict(base or {})
    sizes = _checked_sizes(widths, seeds, base)
    progress = _Progress(sizes, timeout)
    measured, problems = progress.measured, progress.problems
    try:
        per_width = _measure_widths(
            rules, model, factory, adapter, patterns, multiplier, example_input, base,
            seeds, progress,
        )
    except ConfigError:  # a bad argument (adapter, base values) raises, as in check()
        raise
    except NotFiniteError as exc:
        return WidthReport(measured, [], problems + [str(exc)])
    except Exception as exc:  # noqa: BLE001 - the user's model: one line, not a traceback
        at = f" at width {sizes[len(measured)]}" if len(measured) < len(sizes) else ""
        line = f"check across widths did not measure the model{at} ({_exception_line(exc)})"
        return WidthReport(measured, [], problems + [line])
    if len(measured) < MIN_WIDTHS:
        lines = problems or ["check across widths did not measure enough widths"]
        return WidthReport(measured, [], lines)
    merged = _across_widths(per_width)
    logits = next((row for row in merged if row.kind == "logits"), None)
    if logits is not None and logits.dead:
        problems.append(
            f"the model's output is exactly 0 at init and after one step at widths "
            f"{', '.join(map(str, measured))}: nothing learns (is it multiplied by 0 after "
            "the readout?)"
        )
    return WidthReport(measured, merged, problems + off_rules(measured, merged))
