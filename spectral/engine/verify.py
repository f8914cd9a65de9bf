"""Substitute emitted rules back into every condition term.

Verification starts from the *rules* (the exponents a user will apply), not from the
solver's intermediate values: the multiplier rule gives ``α``, the init-variance rule gives
``‖W‖_R`` through the random-matrix estimate ``‖W‖_2 = Θ(σ(√n_in + √n_out))``, and the
learning-rate and weight-decay rules give the realised step
``‖ΔW‖_R = η · max(‖A‖_R, λ‖W‖_R)``. Every init and update term of the conditions for
``k`` is then checked, together with the two conventions the solver relied on: Δ2
(``‖λW‖ = Θ(‖A‖)``) and the loss-sensitivity fixed point of App. C.4
(``‖ΔW‖_2 ‖∇W‖_2 = ΔL``).

The ``3 + 6·2^k`` terms (``4 + 3·2^k`` of the paper's network, the rest the router's) are
checked without listing them. The update terms of a chain are
``α ∏_{i∉S} ‖p_i‖ ∏_{i∈S} ‖Δp_i‖`` over every non-empty set ``S`` of updated factors, all
with one target ``T`` (a router's gated chain: its gate always in ``S``, and the terms
with more than the gate only ``O(T)`` at ``k = 1``); they all equal ``T`` exactly when the
largest and the smallest of them do. In log-scale a term is a sum of independent per-factor choices, so its largest
value with factor ``i`` updated is ``‖Δp_i‖ ∏_{j≠i} max(‖p_j‖, ‖Δp_j‖)`` (the maximum of
a sum of independent choices is the sum of the maxima), and the largest over all ``S`` is
the largest of these over ``i``; likewise the smallest with ``min``. Θ-scales are
piecewise-linear exponent functions (:mod:`spectral.engine.theta`), and ``max``/``min`` are
pointwise and exact there, so the bound is exact along every joint growth direction. The
factors of one role share their scales, so a chain costs O(1) Θ-operations whatever its
length, and ``k = 64`` costs what ``k = 2`` does. Only a chain that fails is split into
its distinct terms (one per number of updated factors of each role, ``O(k)``), to say
which labels fail and how many terms. :func:`check_terms` with ``enumerate_subsets=True``
lists every term instead: the oracle the tests compare against for small ``k``.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field
from fractions import Fraction
from itertools import product
from math import comb, prod
from typing import NamedTuple
from collections.abc import Callable

from .conditions import (
    Chain,
    Condition,
    chain_terms,
    chains,
    first_order_term,
    init_term,
    term_counts,
    update_label,
    update_relation,
    update_target,
)
from ..errors import VerificationError
from .expr import theta_of
from .result import CheckGroup, Derivation, summary
from .roles import ALL_ROLES, ROLE_NAMES, Role, role
from ..symbols import G, L, n_in, n_out
from .theta import Theta

__all__ = [
    "verify",
    "check_terms",
    "summary",
    "Tally",
    "weight_norm",
    "output_gain",
    "factor_norm",
    "factor_step",
    "GROUP_DESCRIPTIONS",
    "MAX_ENUMERATED_K",
]

_HALF = Fraction(1, 2)

MAX_ENUMERATED_K = 16
"""Largest ``k`` the oracle (:func:`check_terms` with ``enumerate_subsets=True``) accepts:
it lists ``3 + 6·2^k`` terms."""

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
    "R1.1": "router logits at init",
    "N1.1": "the input of a norm reading a rank-down map, at init",
    "N2.1": "the input of a norm reading a rank-down map, updates",
}


EXTENDED_DESCRIPTIONS = {
    "C1.1": "weights outside the blocks at init",
    "C2.1": "weight updates outside the blocks",
    "B1.1": "biases outside the blocks at init",
    "B2.1": "bias updates outside the blocks",
    "B1.2": "hidden biases and vectors at init",
    "C1.2": "hidden weights and rank factors at init",
}
"""The groups that also hold the roles placed by their dimensions (``docs/roles.md``),
described so when a derivation has them."""


def _describe(label: str, extended: bool = False) -> str:
    if extended and label in EXTENDED_DESCRIPTIONS:
        return EXTENDED_DESCRIPTIONS[label]
    if label in GROUP_DESCRIPTIONS:
        return GROUP_DESCRIPTIONS[label]
    head, order = label.split(".")
    j = int(order) - 1
    what = {"C2": "hidden weight", "B2": "hidden bias chain", "R2": "router gate"}[head]
    if extended:
        what = {"C2": "hidden weight/rank factor", "B2": "hidden bias/vector chain"}.get(head, what)
    if head == "R2" and j >= 2:
        return f"router gate and block updates, order {j} (only O(1/L) at k = 1)"
    return f"{what} updates, order {j}"


def weight_norm(r: Role, variance: Theta) -> Theta:
    """``‖W‖_R = sqrt(n_in/n_out) · σ · (√n_in + √n_out)`` at init (Sec. 4.1)."""
    sigma = variance**_HALF
    return (r.n_in / r.n_out) ** _HALF * sigma * Theta.maximum(r.n_in**_HALF, r.n_out**_HALF)


def output_gain(r: Role, variance: Theta) -> Theta:
    """``‖W h‖/‖h‖ = σ√n_in`` at init, for an input ``h`` the i.i.d. init is not aligned with
    (each output entry sums ``n_in`` independent terms): ``‖W‖_R`` for a square map,
    ``Θ(n^{-1/2})‖W‖_R`` for a width → fixed one. The input of the norm reading a normed
    role (N1.1)."""
    return variance**_HALF * r.n_in**_HALF


def factor_norm(r: Role, variance: Theta) -> Theta:
    """The init scale of ``r``'s factor in a block's chains: ``‖W‖_R``, or for a normed role
    the norm's output ``‖N(W h)‖/‖h‖ = Θ(1)`` whatever ``W``'s scale."""
    return Theta.one() if r.normed else weight_norm(r, variance)


def factor_step(r: Role, variance: Theta, step: Theta) -> Theta:
    """The one-step scale of ``r``'s factor in a block's chains given ``‖ΔW‖_R = step``:
    ``step``, or for a normed role the norm's relative change ``‖ΔW h‖/‖W h‖ = step/g``
    (the update aligned with its input, the init not: :func:`output_gain` ``g``)."""
    return step / output_gain(r, variance) if r.normed else step


INPUT = "@input"
"""Suffix of the scale key of a norm's input (the factor of a ``norm`` chain, N1.1/N2.1)."""


@dataclass(eq=False)  # an accumulator: compared by identity (and no __eq__ to generate)
class Tally:
    """What a check found: terms per label, failing terms per label, a few failures spelled out."""

    counts: Counter[str] = field(default_factory=Counter)
    failing: Counter[str] = field(default_factory=Counter)
    examples: list[str] = field(default_factory=list)

    def record(self, label: str, terms: int = 1) -> None:
        self.counts[label] += terms

    def fail(self, label: str, terms: int, what: str) -> None:
        """``terms`` of the recorded ``label`` terms fail; ``what`` shows one of them."""
        self.failing[label] += terms
        self.examples.append(f"{label}: {what}")


class _Scales(NamedTuple):
    """The Θ-values the rules give: multiplier per layer, ``‖W‖`` and ``‖ΔW‖`` per role."""

    alpha: dict[str, Theta]
    norm: dict[str, Theta]
    step: dict[str, Theta]


def _substitute(
    result: Derivation, roles: tuple[Role, ...], tally: Tally
) -> tuple[_Scales, dict[str, Theta]]:
    """Turn the rules into scales, checking the α and Δ2 conventions on the way: the chain
    factors' (keyed by role, a norm's input by role + :data:`INPUT`) and each role's own
    realised step ``‖ΔW‖_R``."""
    alpha: dict[str, Theta] = {"norm": Theta.one()}
    norm: dict[str, Theta] = {}
    step: dict[str, Theta] = {}
    own: dict[str, Theta] = {}
    scales = {s.role: s for s in result.scales}
    rules = result.rules  # a property that builds the table: once
    for r in roles:
        rule = rules[r.name]
        a = rule["multiplier"].theta
        if r.layer in alpha:
            tally.record("α")
            if a != alpha[r.layer]:
                tally.fail("α", 1, f"{r.name} multiplier Θ({a}) ≠ Θ({alpha[r.layer]})")
        alpha.setdefault(r.layer, a)
        variance = rule["init_var"].theta
        grad = scales[r.name].gradient
        env = ((n_in, r.n_in), (n_out, r.n_out), (L, Theta.monomial(0, 1)), (G, grad))
        direction = theta_of(result.spec.update_norm, env)
        decay = rule["weight_decay"].theta * weight_norm(r, variance)
        tally.record("Δ2")
        if decay != direction:
            tally.fail("Δ2", 1, f"{r.name}: ‖λW‖ = Θ({decay}) but ‖A‖ = Θ({direction})")
        own[r.name] = rule["lr"].theta * Theta.maximum(direction, decay)
        norm[r.name] = factor_norm(r, variance)
        step[r.name] = factor_step(r, variance, own[r.name])
        if r.normed:
            norm[r.name + INPUT] = output_gain(r, variance)
            step[r.name + INPUT] = own[r.name]
    return _Scales(alpha, norm, step), own


def _holds(value: Theta, relation: str, target: Theta) -> bool:
    return value == target if relation == "=" else value.le(target)


def _groups(keys: tuple[str, ...]) -> dict[str, tuple[int, ...]]:
    """The positions of each scale key's factors (factors of one key share scales)."""
    out: dict[str, list[int]] = {}
    for p, key in enumerate(keys):
        out.setdefault(key, []).append(p)
    return {r: tuple(ps) for r, ps in out.items()}


def role_keys(chain: Chain) -> tuple[str, ...]:
    """The scale key of each factor of ``chain``: its role (every factor of a role shares
    its scales); a norm's input (layer ``norm``) its role with :data:`INPUT` appended.
    :mod:`spectral.engine.absorb` keys some factors apart."""
    suffix = INPUT if chain.layer == "norm" else ""
    return tuple(r + suffix for r, _ in chain.params)


def _local(chain: Chain, s: _Scales) -> _Scales:
    """The scales of ``chain``'s factors: a factor from another layer (a router's gate in a
    block) carries its own layer's multiplier, ``α_r‖W_r‖`` and ``α_r‖ΔW_r‖``."""
    gain = {r: s.alpha[role(r).layer] for r, _ in chain.params if role(r).layer != chain.layer}
    if not gain:
        return s
    norm = {r: v * gain[r] if r in gain else v for r, v in s.norm.items()}
    step = {r: v * gain[r] if r in gain else v for r, v in s.step.items()}
    return _Scales(s.alpha, norm, step)


def _extreme(
    pick: Callable[..., Theta], alpha: Theta, groups: dict[str, tuple[int, ...]], s: _Scales
) -> Theta:
    """``pick`` (max or min) of ``α ∏ factor`` over every non-empty set of updated factors.

    With one factor of role ``g`` forced to be an update, every other factor is free:
    ``‖Δp_g‖ · pick(‖p_g‖, ‖Δp_g‖)^(c_g − 1) · ∏_{h≠g} pick(‖p_h‖, ‖Δp_h‖)^(c_h)``;
    then ``pick`` over ``g``. Exact, because log-scales add and ``pick`` is pointwise.
    """
    free = {r: pick(s.norm[r], s.step[r]) for r in groups}
    candidates = []
    for g, positions in groups.items():
        value = alpha * s.step[g] * free[g] ** (len(positions) - 1)
        for h, others in groups.items():
            if h != g:
                value = value * free[h] ** len(others)
        candidates.append(value)
    return pick(*candidates)


def _check_chain(
    chain: Chain, s: _Scales, tally: Tally, keys: tuple[str, ...] | None = None
) -> None:
    """Every term of ``chain``, factor by factor (see the module docstring).

    A gated chain's gate is always updated: its terms are ``α ‖Δg‖`` times the free
    factors' terms, the empty set (the router's first-order term) included. ``keys``: the
    scale key of each factor (:func:`role_keys` by default)."""
    keys = role_keys(chain) if keys is None else keys
    alpha = s.alpha[chain.layer]
    s = _local(chain, s)
    for label, n in term_counts(chain).items():
        tally.record(label, n)
    lead: tuple[int, ...] = (0,) if chain.gated else ()
    groups = _groups(keys[len(lead) :])
    target = update_target(chain)
    if chain.gated:
        base = alpha * s.step[keys[0]]
        first = base * prod((s.norm[r] ** len(ps) for r, ps in groups.items()), start=Theta.one())
        ok = first == target
    else:
        base = alpha
        init = init_term(chain)
        value = alpha * prod((s.norm[r] ** len(ps) for r, ps in groups.items()), start=Theta.one())
        if not _holds(value, init.relation, init.target):
            tally.fail(init.label, 1, f"{init}, but the rules give Θ({value})")
        if not chain.has_updates:
            return
        ok = True
    rel = update_relation(chain, len(lead) + 2)
    hi = _extreme(Theta.maximum, base, groups, s)
    lo = _extreme(Theta.minimum, base, groups, s)
    ok = ok and (hi == target and lo == target if rel == "=" else hi.le(target))
    if ok:
        return
    # Some term fails: split the chain into its distinct terms (how many factors of each
    # role are updated) to count the failing ones per label and show one of each.
    roles = list(groups)
    patterns = product(*(range(len(groups[r]) + 1) for r in roles))
    for updated in sorted(patterns, key=sum):
        order = sum(updated) + len(lead)
        if order == 0:
            continue
        value = base
        for r, u in zip(roles, updated, strict=True):
            c = len(groups[r])
            value = value * s.norm[r] ** (c - u) * s.step[r] ** u
        rel = update_relation(chain, order)
        if _holds(value, rel, target):
            continue
        label = update_label(chain, order)
        terms = prod(comb(len(groups[r]), u) for r, u in zip(roles, updated, strict=True))
        shift = len(lead)
        witness = lead + tuple(
            sorted(p + shift for r, u in zip(roles, updated, strict=True) for p in groups[r][:u])
        )
        term = Condition(label, chain, witness, rel, target)
        tally.fail(label, terms, f"{term}, but the rules give Θ({value})")


def _enumerate_chain(
    chain: Chain, s: _Scales, tally: Tally, keys: tuple[str, ...] | None = None
) -> None:
    """The oracle: every term of ``chain`` multiplied out and compared, one by one."""
    keys = role_keys(chain) if keys is None else keys
    alpha = s.alpha[chain.layer]
    s = _local(chain, s)
    for c in chain_terms(chain):
        value = alpha
        for key, f in zip(keys, c.factors, strict=True):
            value = value * (s.step[key] if f.delta else s.norm[key])
        tally.record(c.label)
        if not _holds(value, c.relation, c.target):
            tally.fail(c.label, 1, f"{c}, but the rules give Θ({value})")


def check_terms(result: Derivation, *, enumerate_subsets: bool = False) -> Tally:
    """Check every condition term and convention for ``result``; return what was found.

    ``enumerate_subsets=True`` lists all ``3 + 6·2^k`` terms one by one (the test-time
    oracle, ``k ≤`` :data:`MAX_ENUMERATED_K`); the default checks each chain factor by factor.
    """
    k = result.k
    if enumerate_subsets and k > MAX_ENUMERATED_K:
        raise ValueError(f"enumerating 3 + 6·2^k terms is for k ≤ {MAX_ENUMERATED_K}, got {k}")
    roles = tuple(r for r in ALL_ROLES if r.name in result.roles)
    tally = Tally()
    s, own = _substitute(result, roles, tally)
    chain_list = list(chains(k, roles))
    check = _enumerate_chain if enumerate_subsets else _check_chain
    for chain in chain_list:
        check(chain, s, tally)
    # loss sensitivity: the gradient scale the solver assumed must be reproduced by the step
    scales = {x.role: x for x in result.scales}
    for r in roles:
        c = first_order_term(chain_list, r.name)
        change = (r.n_out / r.n_in) ** _HALF * own[r.name] * scales[r.name].gradient
        tally.record("C.4")
        if change != c.target:
            tally.fail("C.4", 1, f"{r.name}: ‖ΔW‖₂‖∇W‖₂ = Θ({change}) but ΔL = Θ({c.target})")
    return tally


def verify(result: Derivation) -> tuple[CheckGroup, ...]:
    """Check every condition term for ``result``; raise :class:`VerificationError` on failure."""
    tally = check_terms(result)
    if tally.failing:
        n = sum(tally.failing.values())
        shown = "; ".join(tally.examples[:5])
        more = len(tally.examples) - 5
        raise VerificationError(
            f"{result.spec.name} (k={result.k}): {n} condition term(s) fail on substitution: "
            f"{shown}" + (f"; … {more} more" if more > 0 else "")
        )
    counts = tally.counts
    order = sorted(counts, key=lambda s: (s[0] not in "CBRN", s[0], len(s), s))
    extended = not set(result.roles) <= set(ROLE_NAMES)
    return tuple(CheckGroup(label, _describe(label, extended), counts[label], True) for label in order)
