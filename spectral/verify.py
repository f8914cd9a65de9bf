"""Substitute emitted rules back into every condition term.

Verification starts from the *rules* (the exponents a user will apply), not from the
solver's intermediate values: the multiplier rule gives ``α``, the init-variance rule gives
``‖W‖_R`` through the random-matrix estimate ``‖W‖_2 = Θ(σ(√n_in + √n_out))``, and the
learning-rate and weight-decay rules give the realised step
``‖ΔW‖_R = η · max(‖A‖_R, λ‖W‖_R)``. Every init and update term of the conditions for
``k`` is then checked, together with the two conventions the solver relied on: Δ2
(``‖λW‖ = Θ(‖A‖)``) and the loss-sensitivity fixed point of App. C.4
(``‖ΔW‖_2 ‖∇W‖_2 = ΔL``).
"""

from __future__ import annotations

from collections import Counter
from fractions import Fraction
from typing import TYPE_CHECKING

from .conditions import Condition, generate
from .errors import VerificationError
from .expr import theta_of
from .result import CheckGroup
from .roles import ROLES, Role
from .symbols import G, L, n_in, n_out
from .theta import Theta

if TYPE_CHECKING:
    from .result import Derivation

__all__ = ["verify", "weight_norm", "GROUP_DESCRIPTIONS"]

_HALF = Fraction(1, 2)

GROUP_DESCRIPTIONS = {
    "C1.1": "input/output weights at init",
    "C1.2": "hidden weights at init",
    "C2.1": "input/output weight updates",
    "B1.1": "input bias at init",
    "B1.2": "hidden biases at init",
    "B2.1": "input bias updates",
    "Δ2": "weight decay matches the update direction",
    "C.4": "loss-sensitivity fixed point ‖ΔW‖₂‖∇W‖₂ = ΔL",
    "α": "biases share their layer's multiplier",
}


def _describe(label: str) -> str:
    if label in GROUP_DESCRIPTIONS:
        return GROUP_DESCRIPTIONS[label]
    head, order = label.split(".")
    j = int(order) - 1
    what = "hidden weight" if head == "C2" else "hidden bias chain"
    return f"{what} updates, order {j}"


def weight_norm(r: Role, variance: Theta) -> Theta:
    """``‖W‖_R = sqrt(n_in/n_out) · σ · (√n_in + √n_out)`` at init (Sec. 4.1)."""
    sigma = variance**_HALF
    return (r.n_in / r.n_out) ** _HALF * sigma * Theta.maximum(r.n_in**_HALF, r.n_out**_HALF)


def verify(result: Derivation) -> tuple[CheckGroup, ...]:
    """Check every condition term for ``result``; raise :class:`VerificationError` on failure."""
    spec, k = result.spec, result.k
    roles = tuple(r for r in ROLES if r.name in result.roles)
    counts: Counter[str] = Counter()
    failures: list[str] = []

    def check(label: str, ok: bool, what: str) -> None:
        counts[label] += 1
        if not ok:
            failures.append(f"{label}: {what}")

    alpha: dict[str, Theta] = {}
    norm: dict[str, Theta] = {}
    step: dict[str, Theta] = {}
    scales = {s.role: s for s in result.scales}
    for r in roles:
        rule = result.rules[r.name]
        a = rule["multiplier"].theta
        if r.layer in alpha:
            check("α", a == alpha[r.layer], f"{r.name} multiplier Θ({a}) ≠ Θ({alpha[r.layer]})")
        alpha.setdefault(r.layer, a)
        norm[r.name] = weight_norm(r, rule["init_var"].theta)
        grad = scales[r.name].gradient
        env = ((n_in, r.n_in), (n_out, r.n_out), (L, Theta.monomial(0, 1)), (G, grad))
        direction = theta_of(spec.update_norm, env)
        decay = rule["weight_decay"].theta * norm[r.name]
        check("Δ2", decay == direction, f"{r.name}: ‖λW‖ = Θ({decay}) but ‖A‖ = Θ({direction})")
        step[r.name] = rule["lr"].theta * Theta.maximum(direction, decay)

    # loss sensitivity: the gradient scale the solver assumed must be reproduced by the step
    first_order: dict[str, Condition] = {}
    memo: dict[tuple, tuple[Theta, bool]] = {}
    for c in generate(k, roles):
        # A term's value is the product of its factors; terms with the same multiset of
        # factors (same chain, same number of updated weights, bias updated or not) are
        # equal, so each multiset is multiplied out once and every term is compared.
        bias_updated = c.chain.is_bias and c.updated[:1] == (0,)
        key = (id(c.chain), len(c.updated), bias_updated)
        known = memo.get(key)
        if known is None:
            value = alpha[c.layer]
            for f in c.factors:
                value = value * (step[f.role] if f.delta else norm[f.role])
            ok = value == c.target if c.relation == "=" else value.le(c.target)
            memo[key] = known = (value, ok)
        counts[c.label] += 1
        if not known[1]:
            failures.append(f"{c.label}: {c}, but the rules give Θ({known[0]})")
        if len(c.updated) == 1:
            for f in c.factors:
                if f.delta:
                    first_order.setdefault(f.role, c)
    for r in roles:
        c = first_order[r.name]
        change = (r.n_out / r.n_in) ** _HALF * step[r.name] * scales[r.name].gradient
        check("C.4", change == c.target, f"{r.name}: ‖ΔW‖₂‖∇W‖₂ = Θ({change}) but ΔL = Θ({c.target})")

    if failures:
        shown = "; ".join(failures[:5]) + (f"; … {len(failures) - 5} more" if len(failures) > 5 else "")
        raise VerificationError(
            f"{spec.name} (k={k}): {len(failures)} condition term(s) fail on substitution: {shown}"
        )
    order = sorted(counts, key=lambda s: (s[0] not in "CB", s[0], len(s), s))
    return tuple(CheckGroup(label, _describe(label), counts[label], True) for label in order)

