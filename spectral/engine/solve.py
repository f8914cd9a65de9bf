"""Solve the conditions for one optimizer and block depth ``k``; verify before returning.

The order follows the paper (Sec. 4, App. C, D):

1. Init variance by the μP-aligned convention (Sec. 4.1) gives ``‖W‖_R`` per role.
2. The init conditions fix the block multipliers ``α`` (for ``k = 1`` the largest ``α``
   allowed by ``O(1/√L)``, the Depth-μP choice).
3. The first-order update conditions fix the required ``‖ΔW‖_R`` per role.
4. Loss sensitivity (App. C.4): one step of a role changes the loss by the right-hand side
   of its update condition, ``ΔL = ‖ΔW‖_2 ‖∇W‖_2`` for low-rank aligned gradients, which
   gives the gradient scale ``G = ‖∇W‖_2`` per role.
5. The declaration gives ``‖A‖_R``; ``η = ‖ΔW‖_R / ‖A‖_R``; weight decay by convention Δ2
   ``‖λW‖_R = Θ(‖A‖_R)``; ``ε`` from its declared scale.
6. :func:`spectral.engine.verify.verify` substitutes the emitted rules into every condition term
   (factor by factor: no step lists the ``3 + 6·2^k`` terms, so the cost is linear in ``k``).
"""

from __future__ import annotations

import math
from fractions import Fraction
from typing import NamedTuple

import sympy as sp

from .conditions import MULTIPLIER_SYMBOL, Condition, chains, first_order_term, init_term
from ..errors import IncomparableError, SpecError
from .expr import theta_of
from .axes import axis_rules
from .result import Derivation, Entry, Exponent, RoleScales
from .roles import ALL_ROLES, HPS, ROLES, Role, role
from ..spec import OptimizerSpec, show
from ..symbols import G, L, n_in, n_out
from .theta import Theta
from .verify import factor_norm, output_gain, verify, weight_norm

__all__ = ["derive_spec", "MAX_K", "init_variance", "show"]

MAX_K = 64
"""Largest block depth accepted. Derivation and verification cost O(k) (the ``3 + 6·2^k``
terms are bounded factor by factor, never listed); 64 keeps every per-label term count in
a signed 64-bit integer (the largest, the router's order-33 terms ``C(64, 32) + C(65, 33)``,
is about 5.4·10¹⁸), so the JSON
``terms`` stay exact in any 64-bit consumer, and is far beyond any real block."""

_HALF = Fraction(1, 2)
_L = Theta.monomial(0, 1)


def init_variance(r: Role) -> Theta:
    """μP-aligned init (Sec. 4.1): ``σ² = min(1, n_out/n_in)/n_in``; ``Θ(1)`` for the readout.

    For a bias (``n_in = 1``) this is ``Θ(1)``, so ``‖b‖_R = Θ(1)`` as App. B.3 asks. The
    readout's bias shares ``α_{L+1}`` with the readout (the multiplier scales the layer's
    whole output), so B1.1 ``α_{L+1}‖b_{L+1}‖ = Θ(1)`` needs ``‖b_{L+1}‖ = ‖W_{L+1}‖``.
    A map a norm reads (``r.normed``) has N1.1 instead: the norm's input
    ``‖W h‖ = σ√n_in ‖h‖ = Θ(1)``, so ``σ² = 1/n_in``.
    """
    if r.normed:
        return Theta.one() / r.n_in
    if r.readout:
        return Theta.one()
    if r.layer == "output":  # the readout's bias
        w = role("output_weight")
        return (weight_norm(w, init_variance(w)) / weight_norm(r, Theta.one())) ** 2
    return Theta.minimum(Theta.one(), r.n_out / r.n_in) / r.n_in


def _init_why(r: Role, norm: Theta) -> str:
    if r.normed:
        return (
            f"N1.1 ‖{r.symbol} h‖ = σ√n_in ‖h‖ = Θ(1): the input of the norm that reads it is "
            "Θ(1) at init, so the norm's ε stays negligible at every width (its output is "
            f"Θ(1) whatever σ); σ² = 1/n_in with n_in = Θ({r.n_in}); ‖{r.symbol}‖ = Θ({norm})"
        )
    if r.readout:
        return "μP-aligned init (Sec. 4.1): σ² = Θ(1) for the output layer"
    if r.layer == "output":
        return (
            f"B1.1 α_{{L+1}} ‖{r.symbol}‖ = Θ(1): the bias shares α_{{L+1}} with the readout, "
            f"so ‖{r.symbol}‖ = ‖W_{{L+1}}‖ = Θ({norm}) (σ² = Θ(1) for the output layer, "
            "Sec. 4.1); biases start at 0 unless an init std is named for them"
        )
    return (
        f"μP-aligned init (Sec. 4.1): σ² = min(1, n_out/n_in)/n_in with "
        f"n_in = Θ({r.n_in}), n_out = Θ({r.n_out}); ‖{r.symbol}‖ = Θ({norm})"
    )


def _theta(spec: OptimizerSpec, field: str, expr: sp.Expr, env: dict[sp.Symbol, Theta]) -> Theta:
    try:
        return theta_of(expr, tuple(env.items()))
    except SpecError as exc:
        raise SpecError(f"{spec.name}: {field} = {expr}: {exc}") from None


def _monomial(value: Theta, r: Role, hp: str, spec: OptimizerSpec) -> Exponent:
    if not value.is_monomial:
        pieces = ", ".join(str(Theta.monomial(a, b)) for a, b in value.pieces())
        raise IncomparableError(
            f"{hp} of {r.name} for {spec.name}: Θ({value}) is not a single power of n and L "
            f"(its pieces {pieces} are incomparable), so no rule base·r_n^a·r_L^b exists; "
            f"check update_norm = {show(spec.update_norm)}"
        )
    exp = Exponent.of(value)
    for x in (exp.r_n, exp.r_L):
        if not _float_safe(x):
            raise SpecError(
                f"{hp} of {r.name} for {spec.name}: the exponent {_short(x)} has no faithful "
                "float (the rule base·r_n^a·r_L^b is applied with float exponents, in the "
                "generated module too); check the declaration's powers"
            )
    return exp


def _float_safe(x: Fraction) -> bool:
    """Whether ``float(x)`` is finite and is 0 only for 0: what a rule's exponent must be,
    since :mod:`spectral.scaling` and the generated module apply it as a float. The parser's
    limits keep declared text well inside; a sympy expression built in Python may not be."""
    try:
        f = float(x)
    except OverflowError:
        return False
    return math.isfinite(f) and (f == 0) == (x == 0)


def _short(x: Fraction) -> str:
    """``x``, or its order of magnitude when it is too long to print on one line."""
    text = str(x)
    if len(text) <= 40:
        return text
    digits = len(str(abs(x.numerator))) - len(str(x.denominator))
    return f"about {'-' if x < 0 else ''}10^{digits}"


def _gated_scales(c: Condition, alpha: dict[str, Theta], norm: dict[str, Theta]) -> str:
    """``α_l = Θ(1/L), α_r = Θ(1), ‖W‖ = Θ(1)``: the scales in a gated first-order term."""
    layers = dict.fromkeys([c.layer, *(role(f.role).layer for f in c.factors)])
    parts = [f"{MULTIPLIER_SYMBOL[x]} = Θ({alpha[x]})" for x in layers]
    parts += [f"‖{role(r).symbol}‖ = Θ({norm[r]})" for r in dict.fromkeys(f.role for f in c.factors if not f.delta)]
    return ", ".join(parts)


def _normed_scales(r: Role, c: Condition, s: _Solved) -> str:
    """``α_l = Θ(1/L), ‖W‖ = Θ(1), ‖N(D_N)‖ = Θ(1) ⇒ ‖ΔN(D_N)‖ = Θ(1), ‖D_N h‖ = Θ(1)``: the
    scales in a normed role's first-order term, and its norm's input (N1.1)."""
    others = dict.fromkeys(f.role for f in c.factors if f.role != r.name)
    parts = [f"α = Θ({s.alpha[c.layer]})"]
    parts += [f"‖{role(o).symbol}‖ = Θ({s.factor[o]})" for o in others]
    gain = output_gain(r, s.var[r.name])
    return (
        ", ".join(parts)
        + f", ‖N({r.symbol})‖ = Θ(1) (the norm's output) ⇒ ‖ΔN({r.symbol})‖ = "
        f"Θ({s.target[r.name] / gain}) = ‖Δ{r.symbol} h‖/‖{r.symbol} h‖ with N1.1 "
        f"‖{r.symbol} h‖ = Θ({gain})"
    )


class _Solved(NamedTuple):
    """What steps 1-3 fix for every role: its init variance and weight norm, each layer's
    multiplier (and the term that set it), each role's required update size (and term)."""

    var: dict[str, Theta]
    norm: dict[str, Theta]
    """``‖W‖_R`` at init."""
    factor: dict[str, Theta]
    """The init scale of the role's factor in a block's chains (``verify.factor_norm``)."""
    alpha: dict[str, Theta]
    alpha_cond: dict[str, Condition]
    target: dict[str, Theta]
    target_cond: dict[str, Condition]


def _solve(k: int, roles: tuple[Role, ...]) -> _Solved:
    """Steps 1-3: one init term per layer fixes its multiplier, one first-order term per
    role its update size (the higher-order terms are left to verification)."""
    chain_list = list(chains(k, roles))
    var = {r.name: init_variance(r) for r in roles}
    norm = {r.name: weight_norm(r, var[r.name]) for r in roles}
    factor = {r.name: factor_norm(r, var[r.name]) for r in roles}
    # a normed factor's step is relative to its norm's input: ‖ΔW‖ = g · ‖ΔN(W)‖
    relative = {r.name: output_gain(r, var[r.name]) if r.normed else Theta.one() for r in roles}

    def product(c: Condition, skip_delta: bool) -> Theta:
        out = Theta.one()
        for f in c.factors:
            if not (skip_delta and f.delta):
                out = out * factor[f.role]
        return out

    # 2. multipliers from the init term of each layer's first chain
    alpha: dict[str, Theta] = {}
    alpha_cond: dict[str, Condition] = {}
    for chain in chain_list:
        if chain.layer not in alpha and not chain.gated and chain.layer != "norm":
            c = init_term(chain)
            alpha[c.layer] = c.target / product(c, False)
            alpha_cond[c.layer] = c
    # 3. required update size from each role's first first-order term; a factor from
    # another layer (a router's gate in a block) carries its own multiplier
    target: dict[str, Theta] = {}
    target_cond: dict[str, Condition] = {}
    for r in roles:
        c = first_order_term(chain_list, r.name)
        gain = alpha[r.layer] if r.layer != c.layer else Theta.one()
        target[r.name] = c.target / (alpha[c.layer] * gain * product(c, True)) * relative[r.name]
        target_cond[r.name] = c
    return _Solved(var, norm, factor, alpha, alpha_cond, target, target_cond)


def _why(
    spec: OptimizerSpec, r: Role, s: _Solved, grad: Theta, direction: Theta
) -> dict[str, tuple[str, str]]:
    """HP -> (the condition term that sets it, the one-line reason --explain prints)."""
    name, c, ac = r.name, s.target_cond[r.name], s.alpha_cond[r.layer]
    return {
        "multiplier": (
            ac.label,
            f"{ac.label} {ac} with ‖{role(ac.factors[0].role).symbol}‖ = Θ({s.norm[ac.factors[0].role]})"
            + ("; the largest α it allows (Depth-μP choice)" if ac.relation == "≤" else "")
            + ("; a bias shares the multiplier of its layer" if r.is_bias else "")
            + (
                "; its own multiplier: α_l scales the gated block output, not the logits"
                if r.gate
                else ""
            ),
        ),
        "init_var": ("N1.1" if r.normed else "init", _init_why(r, s.norm[name])),
        "lr": (
            c.label,
            f"{c.label} {c} with "
            + (
                f"α = Θ({s.alpha[r.layer]}), ‖W‖ = Θ({s.norm[name]})"
                if c.layer == r.layer and not r.normed
                else _normed_scales(r, c, s)
                if r.normed
                else _gated_scales(c, s.alpha, s.factor)
            )
            + f" ⇒ ‖Δ{r.symbol}‖ = Θ({s.target[name]}); ‖A‖ = Θ({direction}) from "
            f"update_norm = {show(spec.update_norm)} with G = Θ({grad})",
        ),
        "weight_decay": (
            "Δ2",
            f"Δ2 ‖λ{r.symbol}‖ = Θ(‖A‖) with ‖A‖ = Θ({direction}), ‖{r.symbol}‖ = Θ({s.norm[name]})",
        ),
        "eps": (
            "C.4",
            f"C.4 ε = Θ({show(spec.eps)}) with G = ‖∇{r.symbol}‖_2 = Θ({grad}) from loss sensitivity "
            f"ΔL = Θ({s.target_cond[name].target}) (App. C.4)",
        ),
    }


def _role_rules(spec: OptimizerSpec, r: Role, s: _Solved) -> tuple[list[Entry], RoleScales]:
    """Step 4 for one role: its gradient scale from the loss sensitivity, the update
    direction's size from the declaration, and every HP's rule with its reason."""
    name = r.name
    loss_change = s.target_cond[name].target
    # 4. loss sensitivity: ΔL = ‖ΔW‖_2 ‖∇W‖_2 with ‖ΔW‖_2 = sqrt(n_out/n_in) ‖ΔW‖_R
    grad = loss_change * (r.n_in / r.n_out) ** _HALF / s.target[name]
    env = {n_in: r.n_in, n_out: r.n_out, L: _L, G: grad}
    direction = _theta(spec, "update_norm", spec.update_norm, env)
    values: dict[str, Theta] = {
        "multiplier": s.alpha[r.layer],
        "init_var": s.var[name],
        "lr": s.target[name] / direction,
        "weight_decay": direction / s.norm[name],
    }
    if spec.eps is not None:
        values["eps"] = _theta(spec, "eps", spec.eps, env)
    why = _why(spec, r, s, grad, direction)
    entries = []
    for hp in HPS:
        if hp not in values:
            continue
        label, text = why[hp]
        exp = _monomial(values[hp], r, hp, spec)
        entries.append(Entry(name, hp, exp, label, f"{hp}({name}) = Θ({values[hp]}): {text}"))
    scales = RoleScales(
        name, s.alpha[r.layer], s.norm[name], s.target[name], loss_change, grad, direction
    )
    return entries, scales


def derive_spec(spec: OptimizerSpec, k: int = 2, *, all_roles: bool = False) -> Derivation:
    """Derive and verify the HP rules of a declaration for residual blocks of ``k`` maps.

    Names are looked up one layer up, by :func:`spectral.catalog.derive` (the public
    ``spectral.derive``), which calls this. ``all_roles`` adds the roles placed by their
    dimensions (:data:`~spectral.engine.roles.EXTRA_ROLES`, ``docs/roles.md``); one that
    blocks of ``k`` maps cannot hold is left out and named in ``Derivation.omitted``.
    """
    if not isinstance(spec, OptimizerSpec):
        raise SpecError(f"expected an OptimizerSpec, got {type(spec).__name__}")
    if isinstance(k, bool) or not isinstance(k, int) or not 1 <= k <= MAX_K:
        raise SpecError(f"k must be an integer from 1 to {MAX_K}, got {k!r}")
    wanted = tuple(r for r in (ALL_ROLES if all_roles else ROLES) if spec.applies_to_biases or not r.is_bias)
    roles = tuple(r for r in wanted if r.min_k <= k)
    omitted = tuple((r.name, f"not derived at k = {k}: {r.why_min_k}") for r in wanted if r.min_k > k)
    solved = _solve(k, roles)
    entries: list[Entry] = []
    scales: list[RoleScales] = []
    for r in roles:
        role_entries, role_scales = _role_rules(spec, r, solved)
        entries += role_entries
        scales.append(role_scales)
    hps = tuple(hp for hp in HPS if hp != "eps" or spec.eps is not None)
    result = Derivation(
        optimizer=spec.name,
        k=k,
        spec=spec,
        roles=tuple(r.name for r in roles),
        hps=hps,
        entries=tuple(entries),
        scales=tuple(scales),
        checks=(),
        verified=False,
        omitted=omitted,
        axes=axis_rules(spec, tuple(r.name for r in roles)),
    )
    checks = verify(result)  # raises VerificationError on any failing term
    return Derivation(**{**result.__dict__, "checks": checks, "verified": True})
