"""Which rule loses at width? ``spectral sweep --ablate`` swaps one role-rule at a time.

μP and SP differ, at a width ``n`` and the base depth, only in the exponents of ``r_n`` that
the derived rules give each role's multiplier, init variance, learning rate, weight decay and
ε (SP's are all 0: its base values at every width). The ablation measures what each one is
worth by the loss:

1. **Base η.** As ``--tune`` and ``--fit-exponent`` do: the base-size runs over ``--log2-lrs``
   (with ``--tune``'s candidates) pick η* and the base values (:func:`spectral.sweep.train.tune_at_base`).
2. **Swaps.** At the target width (the largest of ``--widths``), μP at η* with *one*
   role-rule's width exponent set to SP's (0) — every role the rule names, every other rule
   derived — for every seed; also μP itself and SP at the same η* (every rule swapped). A
   named variant (``--ablate-variant lr.input_weight=-0.5``) sets the exponent to another
   value instead (:func:`parse_variant`).
3. **Table.** Per swap, the seed-mean loss, its spread over seeds, and the paired difference
   from μP (same seed: the same initial stream and batches), with how many seeds it lowers
   (:func:`ablation_rows`).

A swap whose rule has the same exponent under μP and SP (e.g. the embedding's η under
AdamW, constant in both) changes no number; its runs share μP's fingerprint and are reused,
and the table says so. Pure (no torch, no files).
"""

from __future__ import annotations

import argparse
import math
import statistics
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any

from .tune import cell, freeze

__all__ = [
    "ROLE_RULES",
    "Ablation",
    "AblationRow",
    "RoleRule",
    "ablation_configs",
    "ablation_rows",
    "changes",
    "check_variant",
    "parse_variant",
    "sp_swaps",
]


@dataclass(frozen=True)
class RoleRule:
    """One rule of the μP/SP difference: an HP of some roles (``None``: every role that has it)."""

    name: str
    hp: str
    roles: tuple[str, ...] | None

    def entries(self, rules: Mapping[str, Mapping[str, Any]]) -> tuple[tuple[str, str], ...]:
        """(role, HP) pairs of this rule that ``rules`` has."""
        roles = self.roles if self.roles is not None else tuple(rules)
        return tuple((role, self.hp) for role in roles if self.hp in rules.get(role, {}))


ROLE_RULES = (
    RoleRule("hidden init", "init_var", ("hidden_weight",)),
    RoleRule("readout init", "init_var", ("output_weight",)),
    RoleRule("embedding init", "init_var", ("input_weight",)),
    RoleRule("output multiplier", "multiplier", ("output_weight",)),
    RoleRule("embedding lr", "lr", ("input_weight",)),
    # the reference GPT's norm gains share these roles with its linear biases: the swap moves both
    RoleRule("norm-gain lr", "lr", ("input_bias", "hidden_bias")),
    RoleRule("hidden lr", "lr", ("hidden_weight",)),
    RoleRule("output lr", "lr", ("output_weight",)),
    RoleRule("weight-decay scaling", "weight_decay", None),
    RoleRule("ε", "eps", None),
)
"""The role-rules ``--ablate`` swaps, in table order (issue 35's list, plus the embedding init)."""

KINDS = {"lr": "lr", "init": "init_var", "multiplier": "multiplier", "wd": "weight_decay", "eps": "eps"}
"""``--ablate-variant`` key prefix → the rule's HP."""
_LAYER_ROLES = {"input": "input_weight", "hidden": "hidden_weight", "output": "output_weight"}


@dataclass(frozen=True)
class Ablation:
    """One swap: its name and the (role, HP, width exponent) entries it sets."""

    name: str
    overrides: tuple[tuple[str, str, float], ...]
    variant: bool = False
    """A named variant (``--ablate-variant``) rather than SP's rule."""


def sp_swaps(rules: Mapping[str, Mapping[str, tuple[float, float]]]) -> list[Ablation]:
    """One :class:`Ablation` per :data:`ROLE_RULES` entry: its width exponents set to SP's (0)."""
    return [Ablation(r.name, tuple((role, hp, 0.0) for role, hp in r.entries(rules))) for r in ROLE_RULES]


def parse_variant(text: str) -> Ablation:
    """``lr.input_weight=-0.5`` → the embedding's η ∝ r_n^-0.5 (KIND.ROLE=EXPONENT; KIND one of
    lr, init (the *std*'s exponent), multiplier, wd, eps; ROLE a role or input/hidden/output)."""
    key, sep, value = text.partition("=")
    kind, dot, name = key.strip().lower().partition(".")
    if not sep or not dot or kind not in KINDS or not name:
        raise argparse.ArgumentTypeError(
            f"expected KIND.ROLE=EXPONENT with KIND in {', '.join(KINDS)} (e.g. lr.input_weight=-0.5), got {text!r}")
    try:
        a = float(value)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{key}: {value.strip()!r} is not a number") from None
    if not math.isfinite(a):
        raise argparse.ArgumentTypeError(f"{key}: expected a finite exponent, got {value.strip()!r}")
    role = _LAYER_ROLES.get(name, name)
    hp = KINDS[kind]
    stored = 2 * a if hp == "init_var" else a  # the rules hold the init *variance*'s exponent
    return Ablation(f"{kind}.{name} ∝ r_n^{a:g}", ((role, hp, stored),), variant=True)


def changes(rules: Mapping[str, Mapping[str, tuple[float, float]]], ablation: Ablation) -> list[tuple[str, str, float, float]]:
    """(role, HP, derived width exponent, swapped one) for each entry the swap changes; empty:
    the swap is μP itself (the two rules agree)."""
    return [(role, hp, float(rules[role][hp][0]), float(a)) for role, hp, a in ablation.overrides
            if float(rules[role][hp][0]) != float(a)]


def target_config(cfg: Any, target: int) -> Any:
    """``cfg`` reduced to one size: ``target`` × the base depth (both axes)."""
    return replace(cfg, widths=(target,), depth=cfg.base_depth, depths=(cfg.base_depth,), width=target)


def ablation_configs(cfg: Any, ablations: Sequence[Ablation], target: int, log2_lr: int,
                     seeds: Sequence[int], *, sp: bool = True) -> list[Any]:
    """Stage 2: μP and SP (``sp=False``: μP alone) at ``target`` and η = 2^``log2_lr``, then μP
    with each swap, every seed."""
    one = replace(target_config(cfg, target), log2_lrs=(log2_lr,))
    out = [replace(one, parameterizations=("mup", "sp") if sp else ("mup",), seed=s) for s in seeds]
    for ab in ablations:
        out += [replace(one, parameterizations=("mup",), ablation=ab.overrides, ablation_name=ab.name, seed=s)
                for s in seeds]
    return out


@dataclass(frozen=True)
class AblationRow:
    """One line of the ablation table."""

    name: str
    change: str
    """What the swap changes, e.g. ``hidden_weight init_var r_n^-1 → r_n^0``; ``""`` for the references."""
    per_seed: tuple[float | str | None, ...]
    """Each seed's final validation loss (``"div"``: diverged, ``None``: not run)."""
    mean: float | None
    sd: float | None
    """The sample standard deviation over seeds (``None`` with fewer than two finite seeds)."""
    delta: float | None
    """Seed-mean of (this − μP) per seed, paired; ``None`` unless every seed of both is finite."""
    delta_lo: float | None
    delta_hi: float | None
    lower: int
    """Seeds in which this row's loss is below μP's."""
    noop: bool
    """The swap changes no exponent: its runs are μP's (reused)."""
    reused: bool
    """Every seed's run was reused from another record with the same fingerprint."""


def _fmt_exp(hp: str, a: float) -> str:
    return f"r_n^{a:g}"


def _change_text(ch: list[tuple[str, str, float, float]]) -> str:
    return "; ".join(f"{role} {hp} {_fmt_exp(hp, d)} → {_fmt_exp(hp, a)}" for role, hp, d, a in ch)


def ablation_rows(records: Iterable[dict[str, Any]], cfg: Any, ablations: Sequence[Ablation],
                  rules: Mapping[str, Mapping[str, tuple[float, float]]], target: int, log2_lr: int,
                  seeds: Sequence[int], *, sp: bool = True) -> list[AblationRow]:
    """The table from recorded runs: μP, then each swap, then SP (every rule swapped; not with
    ``sp=False``)."""
    records = list(records)
    one = replace(target_config(cfg, target), log2_lrs=(log2_lr,))
    index: dict[tuple, dict[str, Any]] = {}
    for r in records:
        if r.get("optimizer") == cfg.optimizer and r.get("width") == target and r.get("depth") == cfg.base_depth \
                and r.get("log2_lr") == log2_lr:
            index[(freeze(r.get("settings")), r.get("parameterization"))] = r

    def runs(c: Any, param: str) -> list[dict[str, Any] | None]:
        return [index.get((freeze(replace(c, seed=s).settings()), param)) for s in seeds]

    mup_runs = runs(one, "mup")
    mup = [cell(r) for r in mup_runs]

    def row(name: str, change: str, rs: list[dict[str, Any] | None], noop: bool) -> AblationRow:
        vals = [cell(r) for r in rs]
        finite = [v for v in vals if isinstance(v, float)]
        complete = len(finite) == len(vals) and bool(vals)
        paired = [v - m for v, m in zip(vals, mup, strict=True) if isinstance(v, float) and isinstance(m, float)]
        both = complete and len(paired) == len(vals)
        return AblationRow(
            name=name, change=change, per_seed=tuple(vals),
            mean=statistics.fmean(finite) if complete else None,
            sd=statistics.stdev(finite) if complete and len(finite) > 1 else None,
            delta=statistics.fmean(paired) if both else None,
            delta_lo=min(paired) if both else None,
            delta_hi=max(paired) if both else None,
            lower=sum(1 for d in paired if d < 0),
            noop=noop,
            reused=bool(rs) and all(r is not None and "reused_from" in r for r in rs),
        )

    out = [row("μP (derived rules)", "", mup_runs, False)]
    for ab in ablations:
        ch = changes(rules, ab)
        c = replace(one, ablation=ab.overrides, ablation_name=ab.name)
        out.append(row(ab.name + (" (variant)" if ab.variant else ""), _change_text(ch) if ch else "none: μP's rule is SP's",
                       runs(c, "mup"), not ch))
    if sp:
        out.append(row("SP (every rule swapped)", "", runs(one, "sp"), False))
    return out


def check_variant(rules: Mapping[str, Mapping[str, tuple[float, float]]], ablation: Ablation) -> None:
    """Refuse a variant that names a role or HP the rules do not have, listing what they have."""
    from ..errors import SpecError

    for role, hp, _ in ablation.overrides:
        if hp not in rules.get(role, {}):
            have = "; ".join(f"{r}: {', '.join(e)}" for r, e in rules.items())
            raise SpecError(f"--ablate-variant {ablation.name}: the rules have no {hp} for {role} ({have})")
