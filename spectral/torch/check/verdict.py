"""The verdict of the check across widths: slopes against the rules, one line per module off.

:mod:`spectral.torch.check.widths` measures each module of the twins (a :class:`WidthRow`);
here its slopes are fitted and judged. A module more than
:data:`~spectral.measure.fit.SLOPE_TOLERANCE_WIDTHS` off the exponent the rules predict is
named with both exponents and what to change; a module whose own dimensions fit its role
but that follows a named one says so.
"""

from __future__ import annotations

import math
import re
from collections.abc import Mapping
from dataclasses import dataclass, field

from spectral.measure.fit import SLOPE_TOLERANCE_WIDTHS, log_slope, t_quantile, within
from spectral.engine.dims import fan_in_grows, fan_out_grows

STEP_EXPONENT = 0.0
"""The width exponent of every one-step change: each condition term's target is Theta(1),
Theta(1/L) or O(1/sqrt(L)), none with a power of the width."""
_WEIGHT_ROLES = (
    "input_weight",
    "hidden_weight",
    "output_weight",
    "router_weight",
    "outer_weight",
    "rank_down_weight",
    "normed_rank_down_weight",
    "rank_up_weight",
)
FAN_IN_GROWS = {role: fan_in_grows(role) for role in _WEIGHT_ROLES}
"""Whether a weight role's fan-in grows with the width (spectral.engine.dims)."""
FAN_OUT_GROWS = {role: fan_out_grows(role) for role in _WEIGHT_ROLES}
"""Whether a weight role's fan-out grows with the width (spectral.engine.dims)."""


SIGN_LIKE_FIRST_STEP = frozenset(
    {
        "adam",
        "adamw",
        "adan",
        "lamb",
        "lion",
        "mars",
        "nadam",
        "schedulefree-adamw",
        "signsgd",
    }
)
"""Catalog optimizers whose first step is sign-like entry by entry (m_hat/sqrt(v_hat) with m_hat = g
and v_hat = g^2, or sign itself; LAMB's direction is Adam's): on a hidden matrix it moves ``W x``
by a part aligned with the batch's tokens, Theta(1), and one that is not, ~ n^-1/2, which
dominates while the width is below about (pi/2) T (docs/your-model.md, "Why the AdamW
control is off")."""
BATCH_NOTE_ROLE = "hidden_weight"
"""The role whose lines :func:`batch_note` explains."""

_READ_FROM_SHAPE = ("rank_down_weight", "normed_rank_down_weight", "rank_up_weight")
"""Roles the runtime reads from which dimensions grow (model/shapes.py), over any name."""


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
    scaled: bool = False
    """A bias whose module's output a block multiplier scales."""
    init_slope: float | None = None
    step_slope: float | None = None
    init_draws: list[list[float]] = field(default_factory=list)
    step_draws: list[list[float]] = field(default_factory=list)
    """Per width, the value of each seed's twin (``init`` and ``step`` hold their mean):
    with two seeds or more, a group's verdict states its interval over the draws."""

    @property
    def label(self) -> str:
        """The role, or what a module without a weight matrix is (a hooked block)."""
        if self.owns_weight:
            return self.role
        return {
            "input": "input module",
            "branch": "branch end",
            "output": "readout",
        }.get(self.kind, self.kind)

    @property
    def dead(self) -> bool:
        return bool(self.init) and not any(self.init) and not any(self.step)


@dataclass
class WidthReport:
    """Every row, the widths measured, and the problems (one line each)."""

    widths: list[int]
    rows: list[WidthRow]
    problems: list[str]
    notes: list[str] = field(default_factory=list)
    """What was not judged or compared, and why (not problems)."""

    def slopes(self) -> dict[str, float | None]:
        """The width exponents that muP keeps flat, by quantity, fitted on the rows:
        ``"h0"`` the first input module's output at init (h_0, alpha_in applied),
        ``"logits"`` the logits at init, ``"dlogits"`` their one-step change, and
        ``"branch:<name>"`` each branch end's whole one-step change (what it adds to the
        residual stream, its input's change included). None where a value was 0; {} when
        nothing was measured (the problems say why)."""
        out: dict[str, float | None] = {}
        first = next((r for r in self.rows if r.kind == "input"), None)
        if first is not None:
            out["h0"] = log_slope(self.widths, first.init)
        logits = next((r for r in self.rows if r.kind == "logits"), None)
        if logits is not None:
            out["logits"] = log_slope(self.widths, logits.init)
            out["dlogits"] = log_slope(self.widths, logits.step)
        for row in self.rows:
            if row.kind == "branch":
                out[f"branch:{row.name}"] = log_slope(self.widths, row.total)
        return out


def group_name(name: str) -> str:
    """The name with every layer index as N: one line names a module of every layer."""
    return re.sub(r"(?<=\.)\d+(?=\.)", "N", name)


def _what_to_change(row: WidthRow, off_init: bool) -> str:
    """One hint: from the row's kind, the role's assumed dimensions and the twins' own."""
    if row.dead:
        zeroed = (
            ", ".join(dict.fromkeys(group_name(z) for z in row.zeroed)) or "its weights"
        )
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
                held = (
                    f"stays {dims[0]}" if not actual else f"grows {dims[0]}->{dims[-1]}"
                )
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
    if row.kind == "bias" and not row.scaled:
        return f"role {row.role}'s learning rate does not move its effect by the same at every width"
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
    if row.role in _READ_FROM_SHAPE:  # patterns= cannot change it: the shape decides
        return (
            f"role {row.role} follows from its shape (a size that stays fixed as the "
            "width grows, e.g. Mamba's time_step_rank, which the config stores as a "
            "number); if that size should grow, build it from the width "
            "(set_base_shapes(model, factory=...))"
        )
    return f"role {row.role}'s rules do not fit it: give it another role (patterns={{...}})"


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
        and not within(measured, predicted, SLOPE_TOLERANCE_WIDTHS)
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
        parts.append(
            f"output at init ~ n^{row.init_slope:.2f} (rules: n^{row.init_predicted:g})"
        )
    if _off(row.step_slope, row.step_predicted):
        assert row.step_slope is not None
        gap = max(gap, abs(row.step_slope - row.step_predicted))
        what = (
            "its effect's one-step change" if row.kind == "bias" else "one-step change"
        )
        # the logits' whole change is compared with the readout module's whole change
        source = "the readout's" if row.kind == "logits" else "rules:"
        parts.append(
            f"{what} ~ n^{row.step_slope:.2f} ({source} n^{row.step_predicted:.2g})"
        )
    if not parts:
        return None
    return gap, ", ".join(parts), _mismatched(row)


def _draw_slopes(widths: list[int], draws: list[list[float]]) -> list[float]:
    """One slope per seed: each seed's twins' values across the widths ([] with one
    seed, or no draws kept)."""
    if len(draws) != len(widths) or min((len(d) for d in draws), default=0) < 2:
        return []
    seeds = min(len(d) for d in draws)
    slopes = (log_slope(widths, [d[s] for d in draws]) for s in range(seeds))
    return [v for v in slopes if v is not None]


def _spread(
    widths: list[int], members: list[WidthRow], quantity: str
) -> tuple[float, float, float, int] | None:
    """(mean, low, high, slopes): the 95 % t-interval of a group's slope over every
    member's per-seed slopes (``quantity`` "init" or "step"); None at one seed."""
    slopes = [
        v
        for r in members
        for v in _draw_slopes(widths, getattr(r, f"{quantity}_draws"))
    ]
    if len(slopes) < 2:
        return None
    m = len(slopes)
    mean = sum(slopes) / m
    sd = math.sqrt(sum((v - mean) ** 2 for v in slopes) / (m - 1))
    half = t_quantile(m - 1) * sd / math.sqrt(m)
    return mean, mean - half, mean + half, m


def _group_off(widths: list[int], members: list[WidthRow]) -> tuple[bool, str]:
    """Whether a group of modules (one name in every layer) is off its rules as a group,
    and the interval that says so ("" at one seed). At one seed: one member alone, or the
    mean of the members' slopes off the rule (at a few heads one layer's slope scatters
    by 0.1-0.3: a router of 4 experts, -0.74 and -0.47 against the rules' -0.5; the mean
    over the layers is the group's estimate, the largest of several noisy slopes is not).
    With seeds: also the 95 % interval over every member's per-seed slope must exclude
    the rule (a verdict is not issued where the draws span it)."""
    if any(r.dead for r in members):
        return True, ""

    def mean(values: list[float | None]) -> float | None:
        known = [v for v in values if v is not None]
        return sum(known) / len(known) if len(known) == len(values) else None

    first = members[0]
    for quantity, predicted in (
        ("init", first.init_predicted),
        ("step", first.step_predicted),
    ):
        value = mean([getattr(r, f"{quantity}_slope") for r in members])
        if not _off(value, predicted):
            continue
        interval = _spread(widths, members, quantity)
        if interval is None:
            return True, ""
        centre, low, high, count = interval
        assert predicted is not None  # _off holds
        if not low <= predicted <= high:
            return True, (
                f" (over {count} draws: n^{centre:.2f} [{low:.2f}, {high:.2f}], 95 %)"
            )
    return False, ""


def off_rules(widths: list[int], rows: list[WidthRow]) -> list[str]:
    """One line per group of modules (the same name in every layer) off its rules: the
    measured and predicted exponents and what to change. A module whose own dimensions fit
    its role but that sits after one whose do not is said to follow from it."""
    for row in rows:
        row.init_slope = log_slope(widths, row.init)
        row.step_slope = log_slope(widths, row.step)
    readout = next((r for r in rows if r.kind == "output"), None)
    for row in rows:
        total = log_slope(widths, readout.total) if readout is not None else None
        if row.kind == "logits" and total is not None:
            row.step_predicted = (
                total  # the readout's output, its input's change included
            )
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
    everyone: dict[str, list[WidthRow]] = {}
    for row in rows:
        everyone.setdefault(group_name(row.name), []).append(row)
    for group, members in grouped.items():
        off, interval = _group_off(widths, everyone[group])
        if not off:
            continue  # one layer's scatter, or draws that span the rule: no verdict
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
        lines.append(f"{group} ({row.label}{count}): {measured}{interval}; {hint}")
    return lines


def batch_note(
    tokens: int | None,
    widths: list[int],
    rows: list[WidthRow],
    optimizers: Mapping[str, str],
) -> str | None:
    """One line when a hidden matrix's one-step change shrinks with the width (its slope
    fitted by :func:`off_rules`) under a sign-like optimizer and the example batch has more
    ``tokens`` (the positions the loss sees) than the narrowest width: the batch, not the
    role, may be the cause. None otherwise, or when the tokens are unknown."""
    optimizer = optimizers.get(BATCH_NOTE_ROLE)
    if tokens is None or not widths or tokens <= widths[0]:
        return None
    if optimizer not in SIGN_LIKE_FIRST_STEP:
        return None
    if not any(
        row.role == BATCH_NOTE_ROLE
        and row.owns_weight
        and not _mismatched(row)
        and _off(row.step_slope, row.step_predicted)
        and row.step_slope is not None
        and row.step_slope < row.step_predicted
        for row in rows
    ):
        return None
    return (
        f"the example batch has {tokens} tokens, more than the narrowest width checked "
        f"({widths[0]}): role {BATCH_NOTE_ROLE} steps with {optimizer}, whose first step is "
        "sign-like, and its part not aligned with the batch's tokens shrinks the one-step "
        f"change as n^-1/2 while the width is below about (pi/2) T = "
        f"{round(math.pi / 2 * tokens)}: re-run the check with fewer tokens (e.g. the "
        f"default 2 x 8) before changing the role of the {BATCH_NOTE_ROLE} lines"
    )


NORMED_DOWN_ROLE = "normed_rank_down_weight"


def fixed_rank_note(shapes: Mapping[str, tuple[str, int]]) -> str | None:
    """One line for the maps from the width to a fixed rank that a norm reads (MLA's
    q_a_proj and kv_a_proj_with_mqa, Jamba's x_proj): ``shapes`` maps each parameter's
    name to its (role, output rows). Their rules keep their output and their own step
    flat, but no width rule keeps the norm's change flat at a fixed rank: the part of the
    input's change that lies along the map's rows (the backward pass through the map put
    it there) is amplified as (n / rank)^(1/2). None when there is no such map."""
    found = {
        name: rows for name, (role, rows) in shapes.items() if role == NORMED_DOWN_ROLE
    }
    if not found:
        return None
    modules = sorted({group_name(name).rpartition(".")[0] for name in found})
    ranks = ", ".join(str(r) for r in sorted(set(found.values())))
    return (
        f"{', '.join(modules)} ({len(found)} matrices, width -> rank {ranks}): a norm "
        "reads each, so they take the normed rank-down rules (their output and own step "
        "stay flat), but at a fixed rank no width rule keeps the norm's change flat: the "
        "part of the input's change along their rows grows as (n/rank)^(1/2); grow the "
        "rank with the width (and record it with set_base_shapes) where transfer must be "
        "exact"
    )
