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

* at init, ``alpha * sigma * sqrt(fan_in)`` of the module's role (a random matrix times a
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
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import torch
from torch import nn

from spectral.errors import (
    ConfigError,
    ConfigTypeError,
    NotFiniteError,
    TimeLimitExceeded,
    UnsupportedModelError,
    first_line,
)
from spectral.measure.guard import user_code
from spectral.scaling import BaseValue
from spectral.torch.check.anchor import anchor_problems
from spectral.torch.check.forward import (
    measured_problems,
)
from spectral.torch.check.twin_rows import SEED, measure_twin
from spectral.torch.check.twins import twin_builder
from spectral.torch.check.verdict import (
    FAN_IN_GROWS,
    FAN_OUT_GROWS,
    STEP_EXPONENT,
    WidthReport,
    WidthRow,
    batch_note,
    fixed_rank_note,
    group_name,
    off_rules,
)
from spectral.torch.model.classify import unplaced_message
from spectral.torch.model.placement import Placement, placed_alike
from spectral.torch.model.shapes import fans
from spectral.torch.optim.groups import role_param_groups
from spectral.torch.rules import TorchRules

__all__ = [
    "FAN_IN_GROWS",
    "FAN_OUT_GROWS",
    "STEP_EXPONENT",
    "WidthReport",
    "WidthRow",
    "widths_report",
    "group_name",
]

MIN_WIDTHS = 3
MAX_WIDTH = 2**17
"""The widest twin the check builds (131072): a twin's hidden matrices hold width^2
entries, so a wider one cannot be built in any memory the check could run in."""
MAX_SEEDS = 1000
"""The most twins drawn per width (each draw costs a twin's build and step)."""


def _whole(value: Any) -> int:
    """A width as an int: an integer, or a float or one-element tensor holding a whole
    number; a bool, a fraction (64.5), inf, NaN or text is refused (ValueError)."""
    if isinstance(value, (bool, str, bytes)) or (
        isinstance(value, torch.Tensor) and value.dtype == torch.bool
    ):
        raise ConfigError(f"not a whole number: {value!r}")
    try:
        return operator.index(value)
    except TypeError:
        pass
    number = float(value)  # TypeError or ValueError for what holds no number
    if not math.isfinite(number) or number != int(number):
        raise ConfigError(f"not a whole number: {value!r}")
    return int(number)


def batch_tokens(example: Any) -> int | None:
    """The positions the loss sees in a user's example batch, as far as the check can tell:
    the product of its first tensor's leading dimensions (every dimension of integer token
    ids, all but the features of a float input); None when it holds no tensor."""
    if isinstance(example, Mapping):
        values = [example.get("input_ids"), *example.values()]
    elif isinstance(example, (tuple, list)):
        values = list(example)
    else:
        values = [example]
    first = next((v for v in values if isinstance(v, torch.Tensor) and v.ndim), None)
    if first is None:
        return None
    if first.is_floating_point() or first.is_complex():
        return math.prod(first.shape[:-1])
    return first.numel()


def _pooled(drawn: list[dict[str, WidthRow]]) -> dict[str, WidthRow]:
    """One width's rows over its seeds: the first draw's rows, each measured value the mean
    over the draws and each draw's own value kept (``init_draws``, ``step_draws``) for the
    verdict's interval (a module missing from a draw is left out)."""
    pooled: dict[str, WidthRow] = {}
    for name, row in drawn[0].items():
        if not all(name in rows for rows in drawn[1:]):
            continue
        for quantity in ("init", "step", "total"):
            values = [getattr(rows[name], quantity) for rows in drawn]
            if all(len(v) == 1 for v in values):
                setattr(row, quantity, [sum(v[0] for v in values) / len(values)])
                if (
                    quantity != "total" and len(values) > 1
                ):  # each seed's, for intervals
                    setattr(row, f"{quantity}_draws", [[v[0] for v in values]])
        pooled[name] = row
    return pooled


def checked_timeout(timeout: Any) -> float | None:
    """The time limit in seconds: None (no limit) or a finite number > 0; anything else
    raises (ConfigError) before any twin is built."""
    if timeout is None:
        return None
    if isinstance(timeout, bool) or not isinstance(timeout, (int, float)):
        raise ConfigTypeError(
            f"timeout must be a number of seconds > 0 or None, got {timeout!r}"
        )
    if not (math.isfinite(timeout) and timeout > 0):
        raise ConfigError(
            f"timeout must be a number of seconds > 0 or None (no limit), got {timeout!r}"
        )
    return float(timeout)


def checked_sizes(widths: Any, seeds: Any, base: Mapping[str, Any]) -> list[int]:
    """The widths, sorted whole numbers, once the arguments are checked: a bad one raises
    (ConfigError) before any twin is built."""
    if (
        isinstance(seeds, bool)
        or not isinstance(seeds, int)
        or not 1 <= seeds <= MAX_SEEDS
    ):
        shown = repr(seeds) if len(repr(seeds)) <= 40 else repr(seeds)[:40] + "..."
        bad_seeds = f"seeds must be a whole number from 1 to {MAX_SEEDS}, got {shown}"
        if isinstance(seeds, bool) or not isinstance(seeds, int):
            raise ConfigTypeError(bad_seeds)
        raise ConfigError(bad_seeds)
    shown = repr(widths) if len(repr(widths)) <= 80 else repr(widths)[:80] + "..."
    if isinstance(
        widths, (str, bytes)
    ):  # "64,128" would be read one character at a time
        raise ConfigTypeError(f"widths must be a list of whole numbers, got {shown}")
    try:
        sizes = sorted({_whole(w) for w in widths})
    except (TypeError, ValueError):
        raise ConfigError(f"widths must be whole numbers, got {shown}") from None
    if sizes and sizes[0] < 1:
        raise ConfigError(f"widths must be whole numbers >= 1, got {shown}")
    if len(sizes) < MIN_WIDTHS:
        raise ConfigError(
            f"check across widths needs {MIN_WIDTHS} or more widths, got {widths!r}"
        )
    if sizes[-1] > MAX_WIDTH:
        raise ConfigError(
            f"widths must be at most {MAX_WIDTH} (a twin holds width^2 entries per hidden "
            f"matrix), got {sizes[-1]}"
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
                row.init_draws += other.init_draws
                row.step_draws += other.step_draws
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

    def left(self) -> float | None:
        """Seconds left before the time limit (None: no limit)."""
        if self.timeout is None:
            return None
        return self.started + self.timeout - time.monotonic()

    def late(self) -> bool:
        """The time limit reached (looked at before each twin, of every seed): the widths
        left are named as not measured."""
        left = self.left()
        if left is None or left > 0:
            return False
        self.expired()
        return True

    def expired(self) -> None:
        """Name the widths not measured: the time limit was reached before them or while
        one of their twins was built or measured (its alarm interrupts the work)."""
        left = ", ".join(str(w) for w in self.sizes if w not in self.measured)
        self.problems.append(
            f"check across widths did not measure widths {left}: the time limit of "
            f"{self.timeout:g} s was reached"
        )

    def bounded(self, what: str) -> user_code:
        """The time left, as a limit on one piece of the user's code (a twin built and
        measured, the anchor): the limit bounds the work, not only the gaps between."""
        left = self.left()
        return user_code(what, None if left is None else max(left, 1e-3))


def _measure_widths(
    rules: TorchRules,
    placement: Placement,
    factory: Callable[[int], nn.Module] | None,
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
    model = placement.model
    build = twin_builder(model, factory, sizes, example_input)
    for width in sizes:
        drawn: list[dict[str, WidthRow]] = []
        for seed in range(seeds):
            if progress.late():
                break
            torch.manual_seed(SEED + seed)
            try:
                with progress.bounded(f"the twin at width {width}"):
                    twin = _built(build, width, sizes_built if seed == 0 else None)
                    twin_placement = placed_alike(placement, twin)
                    twin_family = twin_placement.family
                    if twin_family is None:
                        raise UnsupportedModelError(
                            unplaced_message(twin, "pass adapter=...")
                        )
                    rows, batch = measure_twin(
                        rules, twin_placement, width, multiplier, example_input, base
                    )
            except TimeLimitExceeded:
                progress.expired()
                break
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
    problems += build.problems()  # a head count the twins keep fixed
    return per_width


def _checked_values(
    rules: TorchRules,
    placement: Placement,
    multiplier: BaseValue,
    base: Mapping[str, Any],
) -> None:
    """The base values (lr, weight_decay, eps, ...) checked as the twins' optimizers will
    read them, on the user's placement: a bad one raises (ConfigError) before any twin is
    built. What only a twin can show (a model the rules cannot carry) is left to it."""
    carried: dict[str, Any] = {"multiplier": multiplier} if rules.absorbed else {}
    values = {k: v for k, v in base.items() if k != "init_std"}
    try:
        role_param_groups(
            rules, placement, rules.base_width, rules.base_depth, **carried, **values
        )
    except ConfigError:
        raise
    except Exception:  # noqa: BLE001 - the twins report the model's own problems
        return


def _anchored(
    rules: TorchRules,
    model: nn.Module,
    anchor: tuple[float, float],
    factory: Callable[[int], nn.Module] | None,
    placement: Placement,
    multiplier: BaseValue,
    example_input: Any,
    base: Mapping[str, Any],
) -> tuple[list[str], list[str], bool]:
    """The user's model against the twin at its own width (spectral.torch.check.anchor):
    (problems, notes, whether the twins are the user's model). A model that cannot be
    compared is one line, as a twin would be; a twin that is another model (other
    parameters or shapes) is one line, and no twin is worth measuring then."""
    width = _whole(anchor[0])
    try:
        torch.manual_seed(SEED)
        twin = _built(twin_builder(model, factory), width, None)
        differ = _shape_differences(model, twin, width)
        if differ:
            return differ, [], False
        found, notes = anchor_problems(
            rules,
            model,
            twin,
            (width, anchor[1]),
            placement,
            multiplier,
            example_input,
            base,
        )
        return found, notes, True
    except ConfigError:
        raise
    except Exception as exc:  # noqa: BLE001 - the user's model: one line, not a traceback
        line = (
            f"check across widths could not compare your model with the twin at its width "
            f"{width} ({first_line(exc)}): what it certifies may not be your model"
        )
        return [line], [], True


def _shape_differences(model: nn.Module, twin: nn.Module, width: int) -> list[str]:
    """One line when the twin at the user's width does not have the user's parameter
    shapes (a factory that keeps an MLP's inner size fixed, or builds another model):
    the first parameter that differs, both shapes and the dimension."""
    theirs = dict(twin.named_parameters())
    mine = dict(model.named_parameters())
    extra = [n for n in theirs if n not in mine]
    missing = [n for n in mine if n not in theirs]
    if extra or missing:
        names, whose, other = (
            (extra, "the twin", "yours") if extra else (missing, "yours", "the twin")
        )
        more = f" and {len(names) - 3} more" if len(names) > 3 else ""
        line = (
            f"the twin at your model's width {width} is not your model: {whose} has "
            f"{len(names)} parameter(s) {other} has not ({', '.join(names[:3])}{more}); "
            "the factory must build your model at the width it is given (the same depth "
            "and modules)"
        )
        return [line]
    for name, p in mine.items():
        q = theirs.get(name)
        if q is None or q.shape == p.shape or p.device.type == "meta":
            continue
        dims = [
            d for d, (a, b) in enumerate(zip(p.shape, q.shape, strict=False)) if a != b
        ]
        where = f"dimension {dims[0]}" if dims else "its rank"
        line = (
            f"the twin at your model's width {width} is not your model: {name} has shape "
            f"{tuple(p.shape)} in yours, {tuple(q.shape)} in the twin ({where}); the factory "
            "must build your model at the width it is given (a size that stays fixed in "
            "the factory but follows the width in your model, or the other way round)"
        )
        return [line]
    return []


def fixed_rank_notes(placement: Placement) -> list[str]:
    """The one line for maps from the width to a fixed rank that a norm reads
    (spectral.torch.check.verdict.fixed_rank_note), as a note: what no rule keeps flat."""
    shapes = {
        name: (role, fans(module, p)[0])
        for name, p, role, module in placement
        if module is not None and p.ndim >= 2
    }
    note = fixed_rank_note(shapes)
    return [] if note is None else [note]


def widths_report(
    rules: TorchRules,
    placement: Placement,
    widths: Sequence[int],
    *,
    anchor: tuple[float, float] | None = None,
    factory: Callable[[int], nn.Module] | None = None,
    multiplier: BaseValue = 1.0,
    example_input: Any = None,
    timeout: float | None = 120.0,
    base: Mapping[str, Any] | None = None,
    seeds: int = 1,
) -> WidthReport:
    """Twins of the placed model at ``widths`` measured (the public ``check_widths`` in
    spectral.torch.config says how); the report's problems are [] only when every module
    was measured at every width and is within SLOPE_TOLERANCE_WIDTHS of its rules."""
    model = placement.model
    base = dict(base or {})
    sizes = checked_sizes(widths, seeds, base)
    _checked_values(rules, placement, multiplier, base)
    progress = _Progress(sizes, checked_timeout(timeout))
    measured, problems = progress.measured, progress.problems
    notes: list[str] = []
    if anchor is not None:
        try:
            with progress.bounded("the comparison of your model with its twin"):
                found, notes, alike = _anchored(
                    rules,
                    model,
                    anchor,
                    factory,
                    placement,
                    multiplier,
                    example_input,
                    base,
                )
        except TimeLimitExceeded:
            progress.expired()
            return WidthReport(measured, [], problems, notes)
        problems += found
        if not alike:
            return WidthReport(measured, [], problems, notes)
    try:
        per_width = _measure_widths(
            rules,
            placement,
            factory,
            multiplier,
            example_input,
            base,
            seeds,
            progress,
        )
    except ConfigError:  # a bad argument (adapter, base values) raises, as in check()
        raise
    except NotFiniteError as exc:
        return WidthReport(measured, [], problems + [str(exc)], notes)
    except Exception as exc:  # noqa: BLE001 - the user's model: one line, not a traceback
        at = f" at width {sizes[len(measured)]}" if len(measured) < len(sizes) else ""
        line = f"check across widths did not measure the model{at} ({first_line(exc)})"
        return WidthReport(measured, [], problems + [line], notes)
    if len(measured) < MIN_WIDTHS:
        lines = problems or ["check across widths did not measure enough widths"]
        return WidthReport(measured, [], lines, notes)
    merged = _across_widths(per_width)
    logits = next((row for row in merged if row.kind == "logits"), None)
    if logits is not None and logits.dead:
        problems.append(
            f"the model's output is exactly 0 at init and after one step at widths "
            f"{', '.join(map(str, measured))}: nothing learns (is it multiplied by 0 after "
            "the readout?)"
        )
    problems += off_rules(measured, merged)
    # the lines of a hidden role under a sign-like step: perhaps the batch, not the role
    note = batch_note(batch_tokens(example_input), measured, merged, rules.optimizers)
    notes += [line for line in fixed_rank_notes(placement) if line not in notes]
    return WidthReport(measured, merged, problems + ([note] if note else []), notes)
