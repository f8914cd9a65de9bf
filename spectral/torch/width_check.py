"""The check across widths: small twins of a model, one step each, slopes against the rules.

check() on one model at one width can only read names and measure ratios; a parameter whose
dimensions are not the ones its role assumes (a fixed-rank projection treated as width by
width), a built-in constant that grows with the width, or a mixer that init_ zeroed look right
there. Here the model is rebuilt at three or more widths (:mod:`spectral.torch.twins`), each
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
import re
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

import torch
from torch import nn

from spectral.scaling import BaseValue
from spectral.torch.classify import Adapter, AdapterLike, Patterns, as_adapter, classified, fans
from spectral.torch.forward_checks import _first_tensor, _rms, _run, measured_problems
from spectral.torch.hooks import builtin_multipliers, install_multipliers, our_hooks, placements
from spectral.torch.init import init_by_role
from spectral.torch.optim import build_composite
from spectral.torch.rules import TorchRules
from spectral.torch.twins import twin_builder, twin_depth

SLOPE_TOLERANCE = 0.2
"""A measured width exponent further than this from the predicted one names the module."""
STEP_EXPONENT = 0.0
"""The width exponent of every one-step change: each condition term's target is Theta(1),
Theta(1/L) or O(1/sqrt(L)), none with a power of the width."""
FAN_IN_GROWS = {
    "input_weight": False,
    "hidden_weight": True,
    "output_weight": True,
    "router_weight": True,
}
"""Whether a weight role's fan-in grows with the width (spectral.engine.roles: n_in)."""
FAN_OUT_GROWS = {
    "input_weight": True,
    "hidden_weight": True,
    "output_weight": False,
    "router_weight": False,
}
"""Whether a weight role's fan-out grows with the width (spectral.engine.roles: n_out)."""
MIN_WIDTHS = 3
SEED = 0


@dataclass
class WidthRow:
    """One module (or bias) measured at every width."""

    name: str
    kind: str
    """"input", "branch", "output", "logits", "linear" or "bias"."""
    role: str
    init: list[float] = field(default_factory=list)
    step: list[float] = field(default_factory=list)
    """The RMS of the one-step change its own parameters made (a weight module on its
    input from before the step), else of its whole change."""
    total: list[float] = field(default_factory=list)
    """The RMS of its whole one-step change, its input's change included."""
    init_predicted: float | None = None
    step_predicted: float = STEP_EXPONENT
    fan_in: list[int] = field(default_factory=list)
    fan_out: list[int] = field(default_factory=list)
    zeroed: list[str] = field(default_factory=list)
    """Parameters of a dead module that init_ left all zero (not biases)."""
    features: list[int] = field(default_factory=list)
    """The last dimension of the module's output at each width."""
    owns_weight: bool = True
    init_slope: float | None = None
    step_slope: float | None = None

    @property
    def label(self) -> str:
        """The role, or what a module without a weight matrix is (a hooked block)."""
        if self.owns_weight:
            return self.role
        return {"input": "input module", "branch": "branch end", "output": "readout"}.get(
            self.kind, self.kind
        )

    @property
    def dead(self) -> bool:
        return bool(self.init) and not any(self.init) and not any(self.step)


@dataclass
class WidthReport:
    """Every row, the widths measured, and the problems (one line each)."""

    widths: list[int]
    rows: list[WidthRow]
    problems: list[str]


def slope(widths: list[int], values: list[float]) -> float | None:
    """Least-squares slope of log(value) on log(width); None where a value is 0."""
    if len(values) < 2 or any(not (v > 0 and math.isfinite(v)) for v in values):
        return None
    xs = [math.log(w) for w in widths]
    ys = [math.log(v) for v in values]
    mx, my = sum(xs) / len(xs), sum(ys) / len(ys)
    sxx = sum((x - mx) ** 2 for x in xs)
    return sum((x - mx) * (y - my) for x, y in zip(xs, ys, strict=True)) / sxx


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


def _batch(model: nn.Module, family: Adapter, example_input: Any) -> Any:
    """The user's example input, or 2 x 8 token ids below the largest table of the input
    modules (BERT's embeddings module holds its word, position and type tables)."""
    if example_input is not None:
        return example_input
    tables = [
        sub
        for _, module in placements(model, family)["input"]
        for sub in module.modules()
        if isinstance(sub, nn.Embedding)
    ]
    if not tables:
        return None
    vocab = max(t.num_embeddings for t in tables)
    gen = torch.Generator().manual_seed(SEED)
    return torch.randint(0, vocab, (2, 8), generator=gen)


def _loss(out: torch.Tensor) -> torch.Tensor:
    """Cross-entropy against fixed labels (the same at every width: they index the
    output's last dimension, which does not grow)."""
    classes = out.shape[-1]
    gen = torch.Generator().manual_seed(SEED + 1)
    flat = out.reshape(-1, classes).float()
    if classes == 1:
        return (flat - 1.0).pow(2).mean()
    labels = torch.randint(0, classes, (flat.shape[0],), generator=gen)
    return nn.functional.cross_entropy(flat, labels.to(flat.device))


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
    roles_list = classified(twin, patterns, family, rules)
    depth = twin_depth(twin, len(placements(twin, family)["hidden"]), family.branches_per_layer)
    builtin = builtin_multipliers(twin)
    if not builtin:
        install_multipliers(
            rules, twin, width, depth, multiplier=multiplier, adapter=family, patterns=patterns
        )
    init_std = base.get("init_std", 0.02)
    init_by_role(rules, twin, width, depth, init_std, patterns=patterns, adapter=family)
    opt = build_composite(
        rules,
        twin,
        width,
        depth,
        adapter=family,
        patterns=patterns,
        multipliers_in_forward=builtin or None,
        **{k: v for k, v in base.items() if k != "init_std"},
    )
    roles = {id(p): role for _, p, role, _ in roles_list}
    hooked = _hooked(twin)
    tracked = _tracked(twin, family, roles)
    batch = _batch(twin, family, example_input)
    if batch is None:
        raise ValueError(
            "no token input to build a batch from (the input modules hold no nn.Embedding): "
            "pass example_input=... (what the model's forward takes, the same at every width)"
        )
    outputs: dict[str, torch.Tensor] = {}

    def keep(name: str) -> Callable[..., None]:
        def hook(module: nn.Module, args: Any, out: Any) -> None:
            y = _first_tensor(out)
            if y is not None:
                outputs[name] = y.detach().double().clone()

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
    biases = {
        name: b.detach().double().clone()
        for name, _, m in tracked
        if (b := _trained_bias(m)) is not None
    }
    twin.eval()  # dropout off: the same function before and after the step
    try:
        logits = _first_tensor(_run(twin, batch))
        if logits is None:
            raise ValueError("the model's output holds no tensor to take a loss of")
        before = {**outputs, "logits": logits.detach().double().clone()}
        _loss(logits).backward()
        opt.step()
        opt.zero_grad(set_to_none=True)
        with torch.no_grad():
            after_logits = _first_tensor(_run(twin, batch))
        if after_logits is None:
            raise ValueError("the model's output holds no tensor after the step")
        after = {**outputs, "logits": after_logits.detach().double()}
    finally:
        for h in handles:
            h.remove()
    own = _own_outputs(tracked, inputs)
    rows: dict[str, WidthRow] = {}
    for name, kind, module in tracked:
        if name not in before or name not in after or before[name].shape != after[name].shape:
            continue
        w = _weight(module)
        layer = hooked.get(id(module), (None, 1.0))[0]
        role = roles.get(id(w), "") if w is not None else f"{layer}_weight"
        row = WidthRow(name, kind, role, owns_weight=w is not None or kind == "logits")
        row.features.append(int(before[name].shape[-1]) if before[name].ndim else 0)
        row.init_predicted = _init_exponent(rules, role, layer)
        row.init.append(_rms(before[name]))
        row.total.append(_rms(after[name] - before[name]))
        moved = own[name] if name in own and own[name].shape == before[name].shape else after[name]
        row.step.append(_rms(moved - before[name]))
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
        rows[name] = row
        bias = _trained_bias(module)
        if name in biases and bias is not None:
            factor = hooked.get(id(module), (None, 1.0))[1]
            b_role = next((r for _, p, r, _ in roles_list if p is bias), "")
            moved = (bias.detach().double() - biases[name]) * factor
            b_row = WidthRow(f"{name}.bias", "bias", b_role, init_predicted=None)
            b_row.init.append(_rms(biases[name] * factor))
            b_row.step.append(_rms(moved))
            rows[b_row.name] = b_row
    out_rows = [r for r in rows.values() if r.kind == "output"]
    if out_rows:
        rows["logits"] = WidthRow(
            "logits", "logits", out_rows[0].role, init_predicted=out_rows[0].init_predicted
        )
        rows["logits"].init.append(_rms(before["logits"]))
        rows["logits"].step.append(_rms(after["logits"] - before["logits"]))
        rows["logits"].total.append(rows["logits"].step[-1])
    return rows, batch


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
            out[name] = y.detach().double()
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


def group_name(name: str) -> str:
    """The name with every layer index as N: one line names a module of every layer."""
    return re.sub(r"(?<=\.)\d+(?=\.)", "N", name)


def _what_to_change(row: WidthRow, off_init: bool) -> str:
    """One hint: from the row's kind, the role's assumed dimensions and the twins' own."""
    if row.dead:
        zeroed = ", ".join(dict.fromkeys(group_name(z) for z in row.zeroed)) or "its weights"
        return (
            f"{zeroed} are all 0 after init_ (a bias role starts at 0): give them a role "
            "that keeps their values, or leave them out of init_"
        )
    grows_in = FAN_IN_GROWS.get(row.role)
    grows_out = FAN_OUT_GROWS.get(row.role)
    if row.fan_in and grows_in is not None:
        for what, dims, assumed in (
            ("fan-in", row.fan_in, grows_in),
            ("fan-out", row.fan_out, grows_out),
        ):
            actual = dims[-1] > dims[0]
            if actual != assumed:
                held = f"stays {dims[0]}" if not actual else f"grows {dims[0]}→{dims[-1]}"
                wanted = "grows with" if assumed else "is fixed across"
                return (
                    f"its {what} {held} while role {row.role} assumes it {wanted} the width: "
                    "give it a role with its own dimensions (patterns={...})"
                )
    if row.kind == "logits":
        return (
            "the readout module itself is on its rules, so something after it scales the "
            "logits with the width (a built-in divisor such as Granite's logits_scaling); keep "
            "it constant across widths or divide it out"
        )
    if row.kind == "bias":
        return (
            f"its effect is scaled by its module's multiplier, which role {row.role}'s learning "
            "rate does not undo (an output bias after alpha_out): give it a role of its own"
        )
    if row.kind == "input":
        return (
            "h_0's scale changes with the width: a built-in embedding factor (Gemma's "
            "sqrt(n), Granite's embedding_multiplier) or alpha_in on another module"
        )
    if row.kind == "branch":
        return (
            "the branch's contribution changes with the width: a built-in factor on it "
            "(Granite's residual_multiplier) or a module inside it on the wrong role"
        )
    if off_init and not _off(row.step_slope, row.step_predicted):
        return f"its initial scale does not follow role {row.role}'s init rule"
    return f"role {row.role}'s rules do not fit it: give it another role (patterns={{...}})"


def _fmt(x: float | None) -> str:
    return "—" if x is None else f"{x:+.2f}"


def _mismatched(row: WidthRow) -> bool:
    """Whether the twins' own dimensions differ from those the row's role assumes."""
    if not row.fan_in or row.role not in FAN_IN_GROWS:
        return False
    return (row.fan_in[-1] > row.fan_in[0]) != FAN_IN_GROWS[row.role] or (
        row.fan_out[-1] > row.fan_out[0]
    ) != FAN_OUT_GROWS[row.role]


def _not_branch_ends(widths: list[int], rows: list[WidthRow]) -> list[str]:
    """A branch end adds to the residual stream: its output has the width's features."""
    lines = []
    for row in rows:
        if row.kind == "branch" and row.features and row.features != widths:
            lines.append(
                f"{row.name}: hooked as a branch end (alpha_hidden), but its output has "
                f"{row.features[0]} features at width {widths[0]}, not the residual stream's "
                f"{widths[0]}: alpha_hidden belongs on the last module before the residual "
                "addition (the adapter's branches)"
            )
    return lines


def _off(measured: float | None, predicted: float | None) -> bool:
    return (
        measured is not None
        and predicted is not None
        and abs(measured - predicted) > SLOPE_TOLERANCE
    )


def _finding(widths: list[int], row: WidthRow) -> tuple[float, str, bool] | None:
    """(how far off, what was measured, whether the row's own dimensions are the cause)
    for a row off its rules; None for a row on them."""
    if row.dead and row.kind != "bias":
        listed = ", ".join(map(str, widths))
        what = f"outputs exactly 0 at init and after one step at widths {listed}: dead"
        return math.inf, what, True
    parts, gap = [], 0.0
    if _off(row.init_slope, row.init_predicted):
        assert row.init_slope is not None and row.init_predicted is not None
        gap = abs(row.init_slope - row.init_predicted)
        parts.append(f"output at init ∝ n^{row.init_slope:.2f} (rules: n^{row.init_predicted:g})")
    if _off(row.step_slope, row.step_predicted):
        assert row.step_slope is not None
        gap = max(gap, abs(row.step_slope - row.step_predicted))
        what = "its effect's one-step change" if row.kind == "bias" else "one-step change"
        # the logits' whole change is compared with the readout module's whole change
        source = "the readout's" if row.kind == "logits" else "rules:"
        parts.append(f"{what} ∝ n^{row.step_slope:.2f} ({source} n^{row.step_predicted:.2g})")
    if not parts:
        return None
    return gap, ", ".join(parts), _mismatched(row)


def _problems(widths: list[int], rows: list[WidthRow]) -> list[str]:
    """One line per group of modules (the same name in every layer) off its rules: the
    measured and predicted exponents and what to change. A module whose own dimensions fit
    its role but that sits after one whose do not is said to follow from it."""
    for row in rows:
        row.init_slope = slope(widths, row.init)
        row.step_slope = slope(widths, row.step)
    readout = next((r for r in rows if r.kind == "output"), None)
    for row in rows:
        total = slope(widths, readout.total) if readout is not None else None
        if row.kind == "logits" and total is not None:
            row.step_predicted = total  # the readout's output, its input's change included
    findings = {}
    for row in rows:
        if (
            row.kind == "logits"
            and readout is not None
            and not any(
                _off(mine, theirs)
                for mine, theirs in (
                    (row.init_slope, readout.init_slope),
                    (row.step_slope, row.step_predicted),
                )
            )
        ):
            continue  # what the readout module outputs: judged there, on its own change
        found = _finding(widths, row)
        if found is not None:
            findings[row.name] = found
    causes = [name for name, (_, _, own) in findings.items() if own]
    grouped: dict[str, list[WidthRow]] = {}
    for row in rows:
        if row.name in findings:
            grouped.setdefault(group_name(row.name), []).append(row)
    lines = _not_branch_ends(widths, rows)
    for group, members in grouped.items():
        row = max(members, key=lambda r: findings[r.name][0])
        _, measured, own = findings[row.name]
        if causes and not own and row.kind not in ("logits", "bias"):
            hint = (
                f"its own dimensions fit {row.label}: it follows from {group_name(causes[0])}, "
                "named here too"
            )
        else:
            hint = _what_to_change(row, _off(row.init_slope, row.init_predicted))
        count = f", {len(members)} modules" if len(members) > 1 else ""
        lines.append(f"{group} ({row.label}{count}): {measured}; {hint}")
    return lines


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
) -> WidthReport:
    """Twins of ``model`` at ``widths`` measured; the report's problems are [] only when
    every module was measured at every width and is within SLOPE_TOLERANCE of its rules.

    ``timeout``: seconds for the whole check, looked at between twins (a twin that would
    start after it is not built: the widths left are named as not measured)."""
    base = dict(base or {})
    try:
        sizes = sorted({int(w) for w in widths})
    except (TypeError, ValueError):
        return WidthReport([], [], [f"widths must be whole numbers, got {widths!r}"])
    if len(sizes) < MIN_WIDTHS or sizes[0] < 1:
        return WidthReport(
            sizes, [], [f"check across widths needs {MIN_WIDTHS} or more widths, got {widths!r}"]
        )
    if "lr" not in base:
        return WidthReport(
            sizes,
            [],
            [
                "check across widths did not measure: no base lr to build the twins' "
                "optimizers with (pass the optimizer build_optimizers returned, or lr=...)"
            ],
        )
    deadline = None if timeout is None else time.monotonic() + timeout
    per_width: list[dict[str, WidthRow]] = []
    problems: list[str] = []
    measured: list[int] = []
    try:
        build = twin_builder(model, factory)
        family = as_adapter(adapter, model)
        for width in sizes:
            if deadline is not None and time.monotonic() > deadline:
                left = ", ".join(str(w) for w in sizes if w not in measured)
                problems.append(
                    f"check across widths did not measure widths {left}: the time limit of "
                    f"{timeout:g} s was reached"
                )
                break
            torch.manual_seed(SEED)
            twin = build(width)
            twin_family = family or as_adapter(None, twin)
            if twin_family is None:
                raise ValueError("no adapter recognises the model: pass adapter=...")
            rows, batch = _measure_twin(
                rules, twin, width, twin_family, patterns, multiplier, example_input, base
            )
            if width == sizes[len(sizes) // 2]:
                problems += [
                    f"at width {width}: {line}"
                    for line in measured_problems(twin, twin_family, batch)
                ]
            per_width.append(rows)
            measured.append(width)
            del twin
    except Exception as exc:  # noqa: BLE001 - the user's model: one line, not a traceback
        text = str(exc).strip().splitlines()[0] if str(exc).strip() else ""
        at = f" at width {sizes[len(measured)]}" if len(measured) < len(sizes) else ""
        return WidthReport(
            measured,
            [],
            problems
            + [f"check across widths did not measure the model{at} ({type(exc).__name__}: {text})"],
        )
    if len(measured) < MIN_WIDTHS:
        return WidthReport(
            measured, [], problems or ["check across widths did not measure enough widths"]
        )
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
    return WidthReport(measured, merged, problems + _problems(measured, merged))
