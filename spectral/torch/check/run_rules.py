"""Naming a run whose optimizer is off the rules along the horizon and the batch.

A pure function of numbers (no torch, no model): the config's ``ALONG`` (optimizer -> HP ->
(d, b)) and ``BASE_RUN``, the run's horizon and batch as given to ``check`` (``steps=`` or
``tokens=``, ``batch=``), each role's numbers at the base run, and the optimizer's groups.
One line per (role, HP) whose value is off ``base-run value * r_D**d * r_B**b`` by more than
:data:`RUN_RULE_TOL`, saying whether it is the base run's value (the run's horizon and batch were
not passed to ``build_optimizers``). ``check`` collects these lines beside its own.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping
from typing import Any

from spectral.scaling import along_factor, run_ratios

__all__ = ["RUN_RULE_HPS", "RUN_RULE_TOL", "run_rule_problems"]

RUN_RULE_TOL = 0.01
"""Largest relative gap between a group's value and the run's rule that passes."""

RUN_RULE_HPS = ("lr", "weight_decay", "eps")
"""The param-group numbers a rule along the horizon and the batch moves."""


def _off_run_rule(value: float, want: float) -> bool:
    if want == 0.0:
        return value != 0.0
    return abs(value / want - 1.0) > RUN_RULE_TOL


def _run_words(run: Mapping[str, float], r_d: float, r_b: float) -> str:
    given = ", ".join(
        f"{k} {run[k]:g}" for k in ("steps", "tokens", "batch") if k in run
    )
    return f"the run ({given}: r_D {r_d:.4g}, r_B {r_b:.4g})"


def run_rule_problems(
    along: Mapping[str, Mapping[str, tuple[float, float]]] | None,
    base_run: Mapping[str, float],
    run: Mapping[str, Any],
    groups: Iterable[tuple[str, str, Mapping[str, Any]]],
    at_base: Mapping[str, Mapping[str, float]],
) -> list[str]:
    """Lines for the knobs off the run's rule. ``groups``: (role, optimizer name, param
    group); ``at_base``: role -> HP -> its number at the base run (width and depth rules
    applied). Nothing to judge (``[]``) at the base run or without rules along it."""
    given = {k: v for k, v in run.items() if v is not None}
    if not along or not given:
        return []
    r_d, r_b = run_ratios(given, base_run)
    if (r_d, r_b) == (1.0, 1.0):
        return []
    lines: list[str] = []
    seen: set[tuple[str, str]] = set()
    for role, opt, group in groups:
        for hp in RUN_RULE_HPS:
            base_value = at_base.get(role, {}).get(hp)
            value = group.get(
                "spectral_eps" if hp == "eps" and "spectral_eps" in group else hp
            )
            if (
                base_value is None
                or not isinstance(value, (int, float))
                or (role, hp) in seen
            ):
                continue
            factor = along_factor(along, opt, hp, r_d, r_b)
            want = base_value * factor
            if (
                factor == 1.0
                or not math.isfinite(float(value))
                or not _off_run_rule(float(value), want)
            ):
                continue
            seen.add((role, hp))
            if not _off_run_rule(float(value), base_value):
                why = "the base run's value: pass the run's steps= (or tokens=) and batch= to build_optimizers"
            else:
                why = (
                    f"{float(value) / want:.3g} x the rule's"
                    if want
                    else "the rule's is 0"
                )
            lines.append(
                f"{role} ({opt}): {hp} {float(value):.4g} is off {_run_words(given, r_d, r_b)}'s "
                f"rule {want:.4g} (base-run value x {factor:.4g}); it is {why}"
            )
    return lines
