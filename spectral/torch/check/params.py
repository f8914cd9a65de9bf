"""check() on the user's own parameters: their init statistics against the rules at this size.

Names and hooks can all be right while the numbers in the parameters are not: ``init_`` never
called (Hugging Face's std 0.02 or torchtitan's own init left at every width), or, in the
hook-free form, carriers without their multiplier (an embedding, branch end or head that
should hold ``alpha`` in its std). Here every parameter's root mean square is compared with
the std ``init_`` draws it with at this width and depth, from the base ``init_std`` the
caller declares (0.02, init_'s default, when none is given).

A sample of N draws from N(0, sigma^2) has a root mean square within about sigma (1 ± z /
sqrt(2N)): parameters of one name across layers (``layers.N.mlp.down_proj.weight``) are
pooled, and a pool is judged when its statistical tolerance is small (a parameter of a few
entries is not judged, and a note says so, rather than a false alarm). A model that has
trained no longer holds its init: the check reads that from the optimizer (it has state)
or from the norm gains (no longer one value each), and then says, in a note, that it did
not judge the init.
"""

from __future__ import annotations

import math
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

import torch
from torch import nn

from spectral.errors import ConfigError, UnsupportedModelError
from spectral.scaling import BaseValue
from spectral.torch.apply.absorb import carriers_of
from spectral.torch.apply.init import (
    InitRecord,
    parameter_spreads,
    own_init_factors,
    init_record,
    innermost,
    keeps_own_values,
)
from spectral.torch.model.classify import is_table
from spectral.torch.model.placement import Placement
from spectral.torch.model.shapes import fans, is_norm

Z = 6.0
"""Standard errors of a pooled root mean square allowed before it is called off the rule:
a check runs once per model and many pools, so a false alarm must be rarer than 1e-8."""
FLOOR = 0.1
"""Smallest relative tolerance: a truncated normal (torchtitan's, timm's) or a uniform draw
of the right std is within it; a std that should have shrunk by sqrt(2) is not."""
MAX_TOLERANCE = 0.3
"""A pool whose statistical tolerance is wider than this is too small to judge."""


@dataclass
class _Pool:
    """Parameters of one name pattern, role and expected std: their squares summed."""

    role: str
    expected: float
    factor: float
    at_base: float
    """The std init_ gives it at the base size: what a std left unscaled shows."""
    members: list[tuple[str, float, int]] = field(default_factory=list)
    """(name, sum of squares, entries) of each parameter in the pool."""


def _pattern(name: str) -> str:
    """A parameter's name with its layer indices as N: one pool per place in a block."""
    return re.sub(r"(?<=\.)\d+(?=\.)|^\d+(?=\.)", "N", name)


def stepped(optimizer: Any) -> bool:
    """Whether the optimizer (or any optimizer inside a container) has taken a step: it
    holds state (moments, a step count) for some parameter."""
    parts = getattr(optimizer, "optimizers", None)
    if isinstance(parts, (list, tuple)) and parts:
        return any(stepped(part) for part in parts)
    state = getattr(optimizer, "state", None)
    return isinstance(state, Mapping) and any(bool(v) for v in state.values())


def _trained_norms(placement: Placement) -> list[str]:
    """Norm gains that no longer hold one value each: the model has been trained."""
    out = []
    for name, p, _, module in placement:
        if is_norm(module) and p.ndim == 1 and p.numel() > 1 and _readable(p):
            values = p.detach()
            if bool((values != values[0]).any()):
                out.append(name)
    return out


def _readable(p: torch.Tensor) -> bool:
    """A tensor whose values this process holds: not on meta, not a DTensor shard."""
    return p.device.type != "meta" and type(p).__name__ != "DTensor"


def not_at_init(placement: Placement, optimizer: Any) -> str | None:
    """Why the parameters cannot be taken for their init, or None."""
    if optimizer is not None and stepped(optimizer):
        return "the optimizer has taken steps"
    trained = _trained_norms(placement)
    if trained:
        return f"its norm gains have moved from one value each ({trained[0]})"
    return None


def _expected_std(
    rules: Any,
    entry: tuple[str, torch.Tensor, str, nn.Module],
    family: Any,
    size: tuple[float, float],
    init_std: BaseValue,
) -> float:
    """The std init_ draws this parameter with at size (width, depth), before a
    carrier's factor."""
    name, p, role, module = entry
    d_in = None
    if role == "input_weight" and not is_table(name, module, family):
        d_in = fans(module, p)[1]
    return float(rules.init_std_of(role, *size, init_std, d_in))


def _norm_problem(
    name: str, p: torch.Tensor, want: float, family_offset: float, s: float
) -> str | None:
    """A norm's gain (or bias) against the one value init_ writes (s - offset, or 0)."""
    values = p.detach().float()
    if not bool((values != values.flatten()[0]).any()) and math.isclose(
        float(values.flatten()[0]), want, rel_tol=1e-5, abs_tol=1e-7
    ):
        return None
    got = float(values.mean())
    carrier = (
        f" (it carries the multiplier {s:.4g} in the hook-free form)"
        if s != 1.0
        else ""
    )
    return (
        f"{name}: norm {'bias' if name.endswith('bias') else 'gain'} is {got:.4g}, init_ "
        f"sets {want:.4g}{carrier}: call init_(model, width, depth, ...) after the "
        "model's own init"
    )


def _pools(
    rules: Any,
    placement: Placement,
    width: float,
    depth: float,
    init_std: BaseValue,
    factors: Mapping[int, float],
) -> tuple[dict[tuple[str, str, float], _Pool], list[str]]:
    """Every judged parameter pooled by (name pattern, role, expected std); and the lines
    for norms whose value is not init_'s."""
    family = placement.family
    offset = float(getattr(family, "norm_offset", 0.0) or 0.0)
    pools: dict[tuple[str, str, float], _Pool] = {}
    problems: list[str] = []
    for name, p, role, module in placement:
        if not _readable(p) or not p.is_floating_point() or p.numel() == 0:
            continue
        s = factors.get(id(p), 1.0)
        if is_norm(module):
            want = 0.0 if name.endswith("bias") else s - offset
            line = _norm_problem(name, p, want, offset, s)
            problems += [line] if line is not None else []
            continue
        if keeps_own_values(name, role, module, init_std):
            continue
        entry = (name, p, role, module)
        try:
            std = _expected_std(rules, entry, family, (width, depth), init_std)
            base_size = (rules.base_width, rules.base_depth)
            at_base = _expected_std(rules, entry, family, base_size, init_std)
        except (ConfigError, UnsupportedModelError):  # reported by the placement check
            continue
        key = (_pattern(name), role, std * s)
        pool = pools.setdefault(key, _Pool(role, std * s, s, at_base))
        squares = float(p.detach().double().pow(2).sum())
        pool.members.append((name, squares, p.numel()))
    return pools, problems


def _hint(measured: float, pool: _Pool) -> str:
    """What a measured std that is off most likely means."""
    if pool.factor != 1.0 and math.isclose(
        measured, pool.expected / pool.factor, rel_tol=0.1
    ):
        return (
            f"it lacks its multiplier {pool.factor:.4g}, which this hook-free config puts "
            "into its init: call init_ (with no apply_multipliers)"
        )
    at_base = pool.at_base
    if at_base != pool.expected and math.isclose(measured, at_base, rel_tol=0.1):
        return (
            "it has the base width's std, not this width's: was init_(model, width, "
            "depth) called after the model's own init?"
        )
    return (
        "call init_(model, width, depth, init_std=...) after the model's own init, or "
        "pass check the init_std given to init_"
    )


def _pool_line(
    where: str, squares: float, count: int, pool: _Pool, size: tuple[float, float]
) -> tuple[str | None, str | None]:
    """(problem, note) for ``count`` entries of the pool: off the rule, or too few to
    judge."""
    measured = math.sqrt(squares / count)
    if pool.expected == 0.0:
        if measured == 0.0:
            return None, None
        line = (
            f"{where}: init std {measured:.4g}, the rule gives 0 (init_ zeroes it): "
            "call init_(model, width, depth, ...) after the model's own init"
        )
        return line, None
    tolerance = max(FLOOR, Z / math.sqrt(2.0 * count))
    if tolerance > MAX_TOLERANCE:
        return None, (
            f"{where}: {count} entries, too few to judge its init std against the "
            f"rule's {pool.expected:.4g}"
        )
    if abs(measured / pool.expected - 1.0) <= tolerance:
        return None, None
    line = (
        f"{where}: init std {measured:.4g}, the rule gives {pool.expected:.4g} at width "
        f"{size[0]:g}, depth {size[1]:g}; {_hint(measured, pool)}"
    )
    return line, None


def _pool_lines(
    pattern: str, pool: _Pool, size: tuple[float, float]
) -> tuple[list[str], list[str]]:
    """(problems, notes) of one pool: the pool as a whole (one line for every layer that
    is off alike), else each of its parameters that is off on its own."""
    if len(pool.members) == 1:
        name, squares, count = pool.members[0]
        problem, note = _pool_line(f"{name} ({pool.role})", squares, count, pool, size)
        return [problem] if problem else [], [note] if note else []
    squares = sum(m[1] for m in pool.members)
    count = sum(m[2] for m in pool.members)
    where = _pool_label(pattern, pool.role, [m[0] for m in pool.members])
    problem, note = _pool_line(where, squares, count, pool, size)
    if note is not None:
        return [], [note]
    problems = []
    for name, squares, count in pool.members:  # a layer off among right ones
        line, _ = _pool_line(f"{name} ({pool.role})", squares, count, pool, size)
        problems += [line] if line else []
    if problem is not None and len(problems) == len(pool.members):
        return [problem], []  # every layer off alike: one line for them all
    return problems, []


def _pool_label(pattern: str, role: str, names: list[str]) -> str:
    """A pool's label: the parameter, or its name pattern and layer count."""
    if len(names) > 1:
        return f"{pattern} ({role}, {len(names)} layers)"
    return f"{names[0]} ({role})"


def _pool_std(rms: Mapping[str, float], names: list[str]) -> float:
    """The root mean square of a pool of equally large parameters, from each one's."""
    return math.sqrt(sum(rms[n] ** 2 for n in names) / len(names))


def _own_lines(
    factors: Mapping[str, float],
    carried: Mapping[str, float],
    roles: Mapping[str, str],
    rms: Mapping[str, float],
    size: tuple[float, float],
) -> list[str]:
    """init_ never ran: one line naming how many parameters init_ would scale and its
    factors (pooled by name pattern, the three largest moves first)."""
    pools: dict[tuple[str, str, float], list[str]] = {}
    for name, f in factors.items():
        if name in rms and rms[name] > 0.0 and not math.isclose(f, 1.0, rel_tol=1e-9):
            pools.setdefault((_pattern(name), roles[name], f), []).append(name)
    if not pools:
        return []
    count = sum(len(names) for names in pools.values())
    ranked = sorted(pools.items(), key=lambda kv: -abs(math.log(kv[0][2])))
    shown = [
        f"{_pool_label(pattern, role, names)} x{f:.4g}"
        for (pattern, role, f), names in ranked[:3]
    ]
    more = f" and {len(ranked) - 3} more" if len(ranked) > 3 else ""
    carriers = any(
        not math.isclose(carried.get(n, 1.0), 1.0, rel_tol=1e-9)
        for names in pools.values()
        for n in names
    )
    hint = (
        ", including the multipliers this hook-free config carries in the init"
        if carriers
        else ""
    )
    line = (
        f"init_ has not run on this model: {count} parameter(s) hold the model's own "
        f"init, where the rules at width {size[0]:g}, depth {size[1]:g} multiply it "
        f"({'; '.join(shown)}{more}{hint}); call init_(model, width, depth) once, after "
        "the model's own init"
    )
    return [line]


def _record_lines(
    record: InitRecord,
    rms: Mapping[str, float],
    roles: Mapping[str, str],
    size: tuple[float, float],
) -> list[str]:
    """init_ ran: its size against the one checked, and each parameter (pooled by name
    pattern) whose std moved since."""
    if (record.width, record.depth) != size:
        line = (
            f"init_ ran for width {record.width:g}, depth {record.depth:g}; the model is "
            f"checked at width {size[0]:g}, depth {size[1]:g}: call init_ with the size "
            "the model has, after the model's own init"
        )
        return [line]
    pools: dict[tuple[str, str], list[str]] = {}
    for name, was in record.rms.items():
        now = rms.get(name)
        if now is not None and not math.isclose(now, was, rel_tol=1e-4, abs_tol=1e-12):
            pools.setdefault((_pattern(name), roles.get(name, "?")), []).append(name)
    lines = []
    for (pattern, role), names in pools.items():
        where = _pool_label(pattern, role, names)
        now, was = _pool_std(rms, names), _pool_std(record.rms, names)
        lines.append(
            f"{where}: init std {now:.4g}, init_ left it at {was:.4g}: it changed after "
            "init_ (the model's own init run again, weights loaded?); call init_ after "
            "the model's own init and before anything else sets the weights"
        )
    return lines


def init_problems(
    rules: Any,
    placement: Placement,
    size: tuple[float, float],
    init_std: BaseValue | None,
    multiplier: BaseValue,
    optimizer: Any = None,
) -> tuple[list[str], list[str]]:
    """(problems, notes): every parameter's init statistics at ``size`` (width, depth).

    ``init_std`` given: against the draws init_(..., init_std=...) makes (statistically).
    Otherwise against what init_ did to this model (:func:`init_record`): a parameter whose
    std moved since is named; and when init_ never ran on it, each parameter init_ would
    have scaled (the model's own init times the rule's ratio, times a carrier's multiplier
    in the hook-free form), so that a model left with its own init away from the base
    width (Hugging Face's 0.02, torchtitan's) is named. At the base size init_'s factors
    are 1 (the hooked form): a model without init_ there is the user's model, as it should
    be. Notes say what was not judged and why (a trained model, a pool too small)."""
    width, depth = size
    model = placement.model
    why = not_at_init(placement, optimizer)
    if why is not None:
        return [], [f"init std not judged: the model is past its init ({why})"]
    try:
        carried = carriers_of(rules, placement, width, depth, multiplier)
    except UnsupportedModelError:  # reported by the hook-free form's own check
        return [], [
            "init std not judged: the carriers of the multipliers are not known"
        ]
    if init_std is not None:
        pools, problems = _pools(rules, placement, width, depth, init_std, carried)
        notes: list[str] = []
        for (pattern, _, _), pool in pools.items():
            found, unjudged = _pool_lines(pattern, pool, (width, depth))
            problems += found
            notes += unjudged
        return problems, notes
    rms = parameter_spreads(model)
    names = {id(p): name for name, p in innermost(model).named_parameters()}
    roles = {names[id(p)]: role for _, p, role, _ in placement if id(p) in names}
    record = init_record(model)
    if record is not None:
        return _record_lines(record, rms, roles, size), []
    try:
        scaled = own_init_factors(rules, placement, width, depth, multiplier)
    except (ConfigError, UnsupportedModelError):  # reported by the placement check
        return [], []
    factors = {names[id(p)]: f for _, p, f in scaled if id(p) in names}
    by_name = {
        names[id(p)]: carried.get(id(p), 1.0) for _, p, _ in scaled if id(p) in names
    }
    return _own_lines(factors, by_name, roles, rms, size), []
