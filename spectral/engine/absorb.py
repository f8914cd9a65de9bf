"""The hook-free form: every block multiplier absorbed into the matrix it scales.

A multiplier ``α`` scales the output of one linear map ``W`` (the embedding, the last map
of each residual branch, the head). The forward pass sees only ``αW``, so the
reparametrisation ``(α, W) → (θα, W/θ)`` leaves it unchanged, and its gradient becomes
``∇_{W/θ} = θ ∇_W``. An update that is homogeneous of degree ``p`` in the gradient
(``A(θ∇) = θ^p A(∇)``: ``p = 0`` for Adam-like, Muon-like and sign updates, ``p = 1`` for
SGD) then takes the same step in ``W`` when the learning rate, weight decay and ε move too:

    (α, W, η, λ, ε) → (θα, W/θ, η θ^−(1+p), λ θ^(1+p), ε θ^q)

with ``q`` the degree of ε in the gradient (ε is added to a gradient-sized quantity:
``q = 1`` for Adam's ``sqrt(v̂) + ε``, ``q = 2`` for Shampoo's ``GGᵀ + εI``). ``θ = 1/α``
leaves every multiplier 1. ``p`` and ``q`` are read from the declaration (the degree of
``update_norm`` and ``eps`` in ``G``); a declaration that is not homogeneous in ``G``
(``max(G, n)``) has none, and is refused.

:func:`absorb` returns the absorbed rule set of a derivation and verifies it like any rule
set: each multiplier is 1, the *carrier* of a layer's multiplier (the last factor of each
hidden chain, every input, output and router factor) takes the transformed init, lr,
weight decay and ε, the gradient it sees is ``G/α``, and every condition term (factor by
factor, :mod:`spectral.engine.verify`), Δ2, the loss-sensitivity fixed point C.4 and the ε
scale are checked on substitution.
"""

from __future__ import annotations

from dataclasses import dataclass
from fractions import Fraction

import sympy as sp

from ..errors import VerificationError
from ..symbols import G, L, n_in, n_out
from .degree import homogeneity
from .conditions import Chain, chains, first_order_term
from .expr import theta_of
from .result import CheckGroup, Derivation, Exponent
from .roles import ROLES, Role
from .theta import Theta
from .verify import Tally, _check_chain, _enumerate_chain, _Scales, weight_norm

__all__ = ["Absorbed", "absorb", "check_absorbed", "carrier_keys", "homogeneity"]

_HALF = Fraction(1, 2)
CARRIED = "'"
"""Suffix of the scale key of a carrier factor (``hidden_weight'``)."""


@dataclass(frozen=True)
class Absorbed:
    """The absorbed rule set of one derivation, verified.

    ``rules[role]`` holds the exponents of a *carrier* parameter of ``role`` (one whose
    module's output its layer's multiplier scaled): multiplier 1, init variance, lr, weight
    decay and ε transformed. Every other parameter keeps the derivation's rules, with
    multiplier 1.
    """

    derivation: Derivation
    p: Fraction
    q: Fraction | None
    rules: dict[str, dict[str, Exponent]]
    checks: tuple[CheckGroup, ...]

    @property
    def plain(self) -> dict[str, dict[str, Exponent]]:
        """Role -> the exponents of its parameters that carry no multiplier: the
        derivation's, with multiplier 1."""
        one = Exponent(Fraction(0), Fraction(0))
        return {r: {**hps, "multiplier": one} for r, hps in self.derivation.rules.items()}

    @property
    def exponents(self) -> dict[str, Fraction]:
        """HP -> the power of α it is multiplied by on a carrier (θ = 1/α)."""
        out = {"init_var": Fraction(2), "lr": 1 + self.p, "weight_decay": -(1 + self.p)}
        if self.q is not None:
            out["eps"] = -self.q
        return out


def carrier_keys(chain: Chain, k: int) -> tuple[str, ...]:
    """Each factor's scale key: a carrier's is its role with :data:`CARRIED` appended.

    A hidden chain's multiplier scales the output of its last map (position ``k``); in a
    gated chain the router (position 0) carries its own ``α_r``. Outside blocks the one
    factor carries its layer's multiplier."""
    keys = []
    for r, position in chain.params:
        carried = chain.layer != "hidden" or position == k or (chain.gated and position == 0)
        keys.append(r + CARRIED if carried else r)
    return tuple(keys)


def _env(r: Role, grad: Theta) -> tuple[tuple[sp.Symbol, Theta], ...]:
    return ((n_in, r.n_in), (n_out, r.n_out), (L, Theta.monomial(0, 1)), (G, grad))


def _power(e: Exponent, alpha: Exponent, c: Fraction) -> Exponent:
    return Exponent(e.r_n + c * alpha.r_n, e.r_L + c * alpha.r_L)


def check_absorbed(absorbed: Absorbed, *, enumerate_subsets: bool = False) -> Tally:
    """Substitute the absorbed rules into every condition term; return what was found."""
    result = absorbed.derivation
    roles = tuple(r for r in ROLES if r.name in result.roles)
    scales = {x.role: x for x in result.scales}
    tally = Tally()
    norm: dict[str, Theta] = {}
    step: dict[str, Theta] = {}
    grads: dict[str, Theta] = {}
    for r in roles:
        plain = absorbed.plain[r.name]
        for key, rule in ((r.name, plain), (r.name + CARRIED, absorbed.rules[r.name])):
            tally.record("α")
            if not rule["multiplier"].is_sp:
                tally.fail("α", 1, f"{key}: multiplier Θ({rule['multiplier'].theta}) is not 1")
            carried = key != r.name
            alpha = result.rules[r.name]["multiplier"].theta
            grad = scales[r.name].gradient / alpha if carried else scales[r.name].gradient
            env = _env(r, grad)
            direction = theta_of(result.spec.update_norm, env)
            norm[key] = weight_norm(r, rule["init_var"].theta)
            decay = rule["weight_decay"].theta * norm[key]
            tally.record("Δ2")
            if decay != direction:
                tally.fail("Δ2", 1, f"{key}: ‖λW‖ = Θ({decay}) but ‖A‖ = Θ({direction})")
            step[key] = rule["lr"].theta * Theta.maximum(direction, decay)
            grads[key] = grad
            if result.spec.eps is not None:
                tally.record("ε")
                want = theta_of(result.spec.eps, env)
                if rule["eps"].theta != want:
                    tally.fail("ε", 1, f"{key}: ε = Θ({rule['eps'].theta}) but G gives Θ({want})")
    ones = {layer: Theta.one() for layer in ("input", "hidden", "output", "router")}
    s = _Scales(ones, norm, step)
    chain_list = list(chains(result.k, roles))
    check = _enumerate_chain if enumerate_subsets else _check_chain
    for chain in chain_list:
        check(chain, s, tally, carrier_keys(chain, result.k))
    for r in roles:
        c = first_order_term(chain_list, r.name)
        for key in (r.name, r.name + CARRIED):
            change = (r.n_out / r.n_in) ** _HALF * step[key] * grads[key]
            tally.record("C.4")
            if change != c.target:
                tally.fail("C.4", 1, f"{key}: ‖ΔW‖₂‖∇W‖₂ = Θ({change}) but ΔL = Θ({c.target})")
    return tally


def absorb(result: Derivation) -> Absorbed:
    """The absorbed rule set of ``result`` (see the module docstring), verified.

    Raises :class:`SpecError` when the declaration is not homogeneous in the gradient and
    :class:`VerificationError` when a condition term fails on substitution.
    """
    p, q = homogeneity(result.spec)
    one = Exponent(Fraction(0), Fraction(0))
    rules: dict[str, dict[str, Exponent]] = {}
    for name, hps in result.rules.items():
        alpha = hps["multiplier"]
        powers = {"init_var": Fraction(2), "lr": 1 + p, "weight_decay": -(1 + p)}
        if q is not None:
            powers["eps"] = -q
        rules[name] = {"multiplier": one}
        for hp, e in hps.items():
            if hp != "multiplier":
                rules[name][hp] = _power(e, alpha, powers[hp])
    out = Absorbed(result, p, q, rules, ())
    tally = check_absorbed(out)
    if tally.failing:
        n = sum(tally.failing.values())
        raise VerificationError(
            f"{result.spec.name} (k={result.k}), multipliers absorbed: {n} check(s) fail on "
            f"substitution: {'; '.join(tally.examples[:5])}"
        )
    groups = tuple(CheckGroup(label, label, n, True) for label, n in sorted(tally.counts.items()))
    return Absorbed(result, p, q, rules, groups)
