"""Tied embeddings, decided by the config's rules: one matrix read both ways.

A tied embedding is one ``vocabulary x n`` matrix used as the input table and as the
readout. The block multipliers are forward hooks on the modules' outputs (alpha_in on the
embedding, alpha_out on the logits), so they may differ; everything else belongs to the
matrix and must be one rule. The tie is allowed exactly when the config's input_weight and
output_weight rules agree in every hyperparameter but the multiplier (init variance, lr,
weight decay, eps: the engine's ``Derivation.tie_differences``, docs/ties.md), and both
roles are trained by the same optimizer. The tied parameter then has the role input_weight.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from spectral.errors import ConfigError

TIE_ROLES = ("input_weight", "output_weight")


def _rule_text(rule: Any) -> str:
    a, b = rule
    return f"r_n^{a:g} r_L^{b:g}"


def tie_differences(rules: Any) -> list[str]:
    """What differs between input_weight and output_weight (the multiplier aside): [] when
    a tied embedding is allowed. ``rules`` is a config (its .optimizers and .rules)."""
    optimizers: Mapping[str, str] = rules.optimizers
    table: Mapping[str, Mapping[str, Any]] = rules.rules
    first, second = TIE_ROLES
    if first not in optimizers or second not in optimizers:
        return [f"{r}: no optimizer" for r in TIE_ROLES if r not in optimizers]
    if optimizers[first] != optimizers[second]:
        return [
            f"optimizer: {optimizers[first]} ({first}) vs {optimizers[second]} ({second})"
        ]
    out = []
    a, b = table[first], table[second]
    for hp in sorted(set(a) | set(b)):
        if hp == "multiplier":
            continue
        x, y = a.get(hp), b.get(hp)
        if x is None or y is None or tuple(x) != tuple(y):
            text_x = "none" if x is None else _rule_text(x)
            text_y = "none" if y is None else _rule_text(y)
            out.append(f"{hp}: {text_x} ({first}) vs {text_y} ({second})")
    return out


def tie_problem(
    first: str, first_role: str, name: str, role: str, rules: Any | None
) -> str | None:
    """None when the parameters ``first`` and ``name`` (one tensor) may share it; else the
    refusal, naming why."""
    if {first_role, role} != set(TIE_ROLES):
        return (
            f"parameter {first!r} ({first_role}) is shared with {name!r} ({role}): one "
            "tensor used in two places (ALBERT-style shared layers, a weight reused across "
            "blocks). muP's rules are derived per layer, and a shared matrix's updates add "
            "up over every place it is used, which no rule here accounts for; give each "
            "place its own parameter (only an input/output embedding tie is supported)."
        )
    untie = (
        "untie them (Hugging Face: tie_word_embeddings=False; nanoGPT: drop the "
        "weight-tying line)"
    )
    if rules is None:
        return (
            f"parameters {first!r} and {name!r} are tied (one tensor); whether input and "
            "output embeddings may share a matrix depends on the optimizer's rules: use a "
            f"config's functions (apply_multipliers, init_, build_optimizers, check) or {untie}"
        )
    differences = tie_differences(rules)
    if not differences:
        return None
    opt = rules.optimizers.get("input_weight", "?")
    return (
        f"parameters {first!r} and {name!r} are tied (one tensor), and under {opt} the "
        "input and output embedding rules differ (the multiplier aside) in "
        f"{'; '.join(differences)} (HP = base * r_n^a * r_L^b). A shared matrix needs "
        f"one rule; {untie}, or train the embeddings with an optimizer whose rules agree "
        "(18 of the 21 catalog optimizers do: docs/ties.md)"
    )


def tied_to_output(model: Any, p: Any) -> bool:
    """Whether the input table ``p`` is also used elsewhere in the model (classified has
    let through only the input/output tie its rules allow)."""
    return sum(q is p for _, q in model.named_parameters(remove_duplicate=False)) > 1


def tied_values_agree(hp: Mapping[str, Mapping[str, float]], name: str) -> None:
    """Refuse base values that give a tied matrix two numbers (the rules are one; a dict of
    base values by role may not be)."""
    a, b = hp["input_weight"], hp["output_weight"]
    for key in sorted(set(a) | set(b)):
        if key == "multiplier" or a.get(key) == b.get(key):
            continue
        raise ConfigError(
            f"{name!r} is a tied input/output embedding, but the base values give it "
            f"{key} {a.get(key)!r} as input_weight and {b.get(key)!r} as output_weight: "
            "give both roles the same base value (or one value for all roles)"
        )
