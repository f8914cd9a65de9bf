"""The ε of an implementation: which constructor argument regularises the step, and its scale.

:func:`eps_candidates` lists the arguments that may hold an ε, :func:`fit_eps_of` (the
entry) classifies each (inert guard, noise floor, regulariser) and, for a regulariser,
fits ``ε*`` — the ε at which the step has halved — like the update norm.
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable, Sequence
from typing import Any

from ..errors import SpecError
from .fit import Exponent, declaration, fit_declaration, fit_exponent, unrounded
from .meter import Meter, StepFailed
from .protocol import G_SCALES, RANKS, SEEDS
from .result import EpsFit
from .target import Target

__all__ = ["EPS_MAX_WIDTH", "EPS_OPTION", "HALF", "INERT", "eps_candidates", "fit_eps_of", "parse_eps_option"]

EPS_MAX_WIDTH = 256
"""ε* is searched at widths up to this (at least three): a matrix-root optimizer's step at
512 costs about a second here, and ε* needs about seven runs per point."""
INERT = 1e-6
"""An ε whose ×10^±3 changes move ``log ‖ΔW‖`` by less than this is inert (a guard)."""
HALF = math.log(2.0)
"""ε* is where ``|log(‖ΔW(ε)‖ / ‖ΔW(ε→0)‖)|`` reaches log 2."""


def eps_candidates(target: Target) -> list[tuple[str, int | None, Any]]:
    """Constructor arguments that may hold an ε: ``eps``, ``epsilon``, ``*_eps``; for a tuple
    (torch's Adafactor ``eps=(None, 1e-3)``) every float-or-None entry, in order."""
    defaults = {**target.defaults(), **target.kwargs}
    names = [n for n in defaults if n in ("eps", "epsilon")]
    names += [n for n in defaults if n.endswith("_eps") and not n.startswith("adamw")]
    out: list[tuple[str, int | None, Any]] = []
    for name in names:
        value = defaults[name]
        if isinstance(value, (tuple, list)):
            for i, v in enumerate(value):
                if v is None or (isinstance(v, float) and v > 0):
                    out.append((name, i, v))
        elif isinstance(value, (int, float)) and not isinstance(value, bool) and value > 0:
            out.append((name, None, float(value)))
    return out


def _eps_value(default: Any) -> float:
    return 1e-16 if default is None else float(default)  # None: the implementation's own tiny


def _classify_eps(meter: Meter, cand: tuple[str, int | None, Any], width: int) -> tuple[bool, str]:
    """Does this ε regularise the step? It must change the step when moved 10^3 either way
    around its default, and a larger ε must give a smaller step."""
    key, index, default = cand
    e0 = _eps_value(default)
    role = "hidden_weight"
    try:
        at = meter.measured(role, width, eps=(key, index, default))
        low = meter.measured(role, width, eps=(key, index, e0 * 1e-3))
        high = meter.measured(role, width, eps=(key, index, e0 * 1e3))
    except StepFailed as exc:
        return False, f"step() failed when it was changed ({exc})"
    place = key if index is None else f"{key}[{index}]"
    up, down = math.log(high / at), math.log(low / at)
    if max(abs(up), abs(down)) < INERT:
        return False, (
            f"inert: moving {place} from {default!r} to ×1e-3 and ×1e3 changes the step by "
            f"{max(abs(up), abs(down)):.1e} (hidden_weight, n = {width}); a guard against "
            "division by zero, not declared"
        )
    if up > -INERT:
        return False, (
            f"raising {place} ×1e3 from {default!r} does not shrink the step (×{high / at:.6g}; "
            f"lowering it ×1e-3: ×{low / at:.4g}): it acts below the gradient's signal (on "
            "noise), not as the regulariser of a denominator; not declared"
        )
    return True, f"regularises the step (×{high / at:.3g} at ×1e3 the default); declared"


def _threshold(
    meter: Meter,
    cand,
    role: str,
    width: int,
    *,
    g: float = 1.0,
    seed: int = 0,
    rank: int = 1,
    guess: float | None = None,
) -> float:
    """``ε*``: the ε at which ``‖ΔW‖_R`` has moved by a factor 2 from its small-ε value.

    The gap ``|log(‖ΔW(ε)‖/‖ΔW(ε→0)‖)|`` grows with ε; it is bracketed (around ``guess``,
    a log10 ε*, when given) and the crossing of log 2 found by regula falsi (Illinois) to
    0.03 decades (1.5% of the 64..256 span an exponent is fitted over, half of
    :data:`FLOOR`)."""
    key, index, default = cand
    start = math.log10(_eps_value(default)) - 6
    kw = {"g": g, "seed": seed, "rank": rank}
    base = meter.measured(role, width, eps=(key, index, 10.0**start), **kw)

    def f(log_eps: float) -> float:
        v = meter.measured(role, width, eps=(key, index, 10.0**log_eps), **kw)
        return abs(math.log(v / base)) - HALF

    if guess is None or not math.isfinite(guess):
        lo, f_lo = start, -HALF
        hi = start + 2
        f_hi = f(hi)
        while f_hi < 0:
            lo, f_lo, hi = hi, f_hi, hi + 2
            if hi > start + 40:
                return math.nan
            f_hi = f(hi)
    else:
        lo, hi = max(start, guess - 0.5), guess + 0.5
        f_lo, f_hi = (f(lo) if lo > start else -HALF), f(hi)
        while f_lo >= 0 and lo > start:
            hi, f_hi, lo = lo, f_lo, max(start, lo - 1)
            f_lo = f(lo) if lo > start else -HALF
        while f_hi < 0:
            lo, f_lo, hi = hi, f_hi, hi + 1
            if hi > start + 40:
                return math.nan
            f_hi = f(hi)
    side = 0
    for _ in range(12):
        if hi - lo < 0.03:
            break
        mid = (lo * f_hi - hi * f_lo) / (f_hi - f_lo)
        mid = min(max(mid, lo + 0.001), hi - 0.001)
        f_mid = f(mid)
        if abs(f_mid) < 5e-3:
            return 10.0**mid
        if f_mid < 0:
            lo, f_lo = mid, f_mid
            if side == -1:
                f_hi /= 2
            side = -1
        else:
            hi, f_hi = mid, f_mid
            if side == 1:
                f_lo /= 2
            side = 1
    return 10.0 ** ((lo * f_hi - hi * f_lo) / (f_hi - f_lo))


def _fit_eps(meter: Meter, cand, widths: Sequence[int], g_width: int) -> EpsFit:
    """ε* per role over the widths up to :data:`EPS_MAX_WIDTH` (seed 0, every rank) and in G
    (hidden role): each ε* is a search of about seven runs, so this is most of the cost."""
    key, index, default = cand
    configs = [(SEEDS[0], r) for r in RANKS]
    small = [w for w in widths if w <= EPS_MAX_WIDTH]
    widths = tuple(small) if len(small) >= 3 else tuple(widths[:3])
    roles: dict[str, Exponent] = {}
    thresholds: dict[str, tuple[float, ...]] = {}
    for role in ("input_weight", "hidden_weight", "output_weight"):
        curves = []
        for s, r in configs:
            th: list[float] = []
            for w in widths:
                guess = None
                if len(th) >= 2:
                    guess = 2 * math.log10(th[-1]) - math.log10(th[-2])
                elif th:
                    guess = math.log10(th[-1])
                elif curves:
                    guess = math.log10(curves[-1][0])
                th.append(_threshold(meter, cand, role, w, seed=s, rank=r, guess=guess))
            if not all(math.isfinite(t) and t > 0 for t in th):
                return EpsFit(key, index, default, True, f"ε* not found for {role}", roles, widths=widths)
            curves.append(th)
        thresholds[role] = tuple(
            math.exp(sum(math.log(c[i]) for c in curves) / len(curves)) for i in range(len(widths))
        )
        roles[role] = fit_exponent(widths, curves)
    g_curves = []
    for s, r in configs:
        if s != configs[0][0]:
            continue
        i = widths.index(g_width)
        guess = math.log10(thresholds["hidden_weight"][i])
        g_curves.append(
            [_threshold(meter, cand, "hidden_weight", g_width, g=g, seed=s, rank=r,
                        guess=guess + math.log10(g)) for g in G_SCALES]
        )
    if not all(math.isfinite(t) and t > 0 for c in g_curves for t in c):
        return EpsFit(key, index, default, True, "ε* not found in G", roles, None, thresholds, widths=widths)
    g_fit = fit_exponent(G_SCALES, g_curves)
    if g_fit.rounded is None:  # one G fit (hidden role) serves every role: say it once
        why = f"ε* (hidden_weight) is G^{unrounded(g_fit, 'G')}"
        return EpsFit(key, index, default, True, why, roles, g_fit, thresholds, widths=widths)
    gs = {role: g_fit for role in roles}
    exps, problems = fit_declaration(roles, gs, "ε*")
    if exps is None:
        return EpsFit(
            key, index, default, True, "; ".join(problems), roles, g_fit, thresholds, widths=widths
        )
    expr = declaration(exps["a"], exps["b"], exps["c"], exps["g"])
    why = f"regularises the step; ε* (where ‖ΔW‖_R has halved) ∝ {expr}"
    return EpsFit(key, index, default, True, why, roles, g_fit, thresholds, expr, widths)


EPS_OPTION = re.compile(r"([A-Za-z_][A-Za-z0-9_]*)(?:\[([0-9]{1,3})\])?")
"""``KEY`` or ``KEY[INDEX]``: a constructor argument, or one entry of a tuple argument."""


def parse_eps_option(eps: str) -> tuple[str, int | None]:
    """``"KEY"`` → ``(KEY, None)``, ``"KEY[I]"`` → ``(KEY, I)``; anything else is a SpecError."""
    m = EPS_OPTION.fullmatch(eps.strip())
    if m is None:
        raise SpecError(
            f"--eps {eps!r}: expected auto, none, KEY or KEY[INDEX] (an argument name, e.g. eps "
            "or betas[1])"
        )
    return m.group(1), None if m.group(2) is None else int(m.group(2))


def fit_eps_of(
    meter: Meter,
    target: Target,
    eps: str | None,
    widths: Sequence[int],
    g_width: int,
    say: Callable[[str], None],
    notes: list[str],
) -> EpsFit | None:
    """The ε of ``target`` (``eps``: ``"auto"``, ``None`` or ``"KEY[INDEX]"``): the first
    candidate that regularises the step, fitted; else the first one, classified; ``None``
    when there is none. What was ruled out is appended to ``notes``."""
    if eps is None:
        return None
    cands = eps_candidates(target)
    if eps != "auto":
        key, index = parse_eps_option(eps)
        defaults = {**target.defaults(), **target.kwargs}
        if key not in defaults:
            raise SpecError(
                f"--eps {eps}: {target.label} has no argument {key!r}; "
                f"its arguments: {', '.join(n for n in defaults if n != 'params')}"
            )
        value = defaults[key]
        if index is not None:
            if not isinstance(value, (tuple, list)) or not 0 <= index < len(value):
                raise SpecError(f"--eps {eps}: {key} = {value!r} has no entry {index}")
            value = value[index]
        cands = [(key, index, value)]
    if not cands:
        return None
    say("eps")
    first = None
    for cand in cands:
        active, why = _classify_eps(meter, cand, g_width)
        fit = EpsFit(cand[0], cand[1], cand[2], active, why)
        if active:
            return _fit_eps(meter, cand, widths, g_width)
        first = first or fit
        if len(cands) > 1:
            notes.append(f"ε candidate {fit.place} = {cand[2]!r}: {why}.")
    return first
