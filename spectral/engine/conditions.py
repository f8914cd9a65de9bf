"""The paper's spectral conditions for residual blocks of any depth ``k``.

Every condition term is ``α · ∏ ‖p‖ (relation) target`` where each factor is a parameter
``p`` at initialisation or its one-step update ``Δp`` (RMS operator norms), and ``α`` is the
multiplier of the layer the parameters sit in.

* Input and output layers (C1.1, C2.1): ``α‖W‖ = Θ(1)`` and ``α‖ΔW‖ = Θ(1)``; the input
  bias likewise (App. B.3).
* A hidden block is read as *chains*: the path of the residual stream through
  ``W⁽¹⁾ … W⁽ᵏ⁾``, and for each bias ``b⁽ⁱ⁾`` the path ``b⁽ⁱ⁾ → W⁽ⁱ⁺¹⁾ … W⁽ᵏ⁾`` (App. B.3).
  For a chain of ``m`` factors the init term is ``Θ(1/L)`` when ``m ≥ 2`` (Condition C)
  and ``O(1/√L)`` when ``m = 1`` (Condition "one-layer", App. B.1); every update term —
  each non-empty subset ``S`` of the chain updated, order ``j = |S|`` — is ``Θ(1/L)``.
  For ``k = 1`` this is Condition "one-layer"; for ``k ≥ 2`` Condition C (App. B.2).

* A router (``docs/router.md``) adds two kinds of term, labelled R. Its logits
  ``α_r W_r h`` are Θ(1) at init (R1.1: ``α_r‖W_r‖ = Θ(1)``), so its gate is Θ(1) and moves
  as ``α_r‖ΔW_r‖``. The gate multiplies every path of the block, so each hidden chain has a
  *gated* twin ``(W_r, …chain)`` under ``α_l``; only its terms with the gate updated are
  new (the others are the chain's own, times ``‖g‖ = Θ(1)``): the gate alone is the
  router's first-order term, ``Θ(1/L)`` (R2.2); with factors of the chain updated too
  (R2.3, …) they are ``Θ(1/L)`` under Condition C (``k ≥ 2``) and ``O(1/L)`` under
  Condition "one-layer" (``k = 1``, whose multiplier leaves no cross term maximal).

* The roles placed by their dimensions (``docs/roles.md``) reuse these chains: an output bias
  or an outer map is one more one-factor chain outside the blocks (B1.1/B2.1, C1.1/C2.1); a
  fixed-rank factor takes one hidden matrix's place in the block's weight chain (a
  rank-down map first: it reads the stream; a rank-up map last: it may end the branch);
  a per-channel vector starts chains like a bias. A product commutes, so one chain per
  role covers every position it may take.

* A rank-down map a scale-invariant norm reads (``normed_rank_down_weight`` ``D_N``,
  ``docs/roles.md``) takes a hidden matrix's place like a rank-down map, but what the rest
  of the block sees is the norm's output ``N(D_N h) = D_N h / rms(D_N h)``: its factor in the
  block's chains is ``‖N(D_N)‖ = Θ(1)`` at init whatever ``D_N``'s scale, and its update
  factor is the relative change ``‖ΔN(D_N)‖ = ‖ΔD_N h‖/‖D_N h‖ = ‖ΔD_N‖/g`` (an update is
  aligned with the input it was computed on, ``‖ΔD_N h‖ = ‖ΔD_N‖‖h‖``; the init is not,
  ``‖D_N h‖ = g‖h‖`` with the gain ``g = σ√n_in``, ``Θ(n^{-1/2})‖D_N‖`` for r × n).
  Scale invariance holds while the norm's ε is negligible against ``mean (D_N h)²``, so the
  norm's input gets a chain of its own (layer ``norm``, no multiplier), labelled N:
  ``‖D_N h‖ = Θ(1)`` at init (N1.1, which fixes ``σ² = 1/n_in``) and ``‖ΔD_N h‖ = Θ(1)``
  (N2.1).

The number of terms grows as ``2^k`` (:func:`term_formula`: ``4 + 3·2^k`` over the paper's
roles, ``3 + 6·2^k`` with the router).
Nothing in the engine enumerates them: a chain's terms differ only in *which* factors are
updates, so :mod:`spectral.engine.verify` bounds them factor by factor, and :func:`term_counts`
counts them with binomial coefficients. :func:`generate` still yields every term, lazily,
as the test-time oracle for small ``k``.
"""

from __future__ import annotations

from fractions import Fraction
from functools import cache
from itertools import combinations
from math import comb
from typing import Literal, NamedTuple
from collections.abc import Iterable, Iterator

from .roles import ROLES, Role, role
from .theta import Theta, format_monomial

__all__ = [
    "Factor",
    "Chain",
    "Condition",
    "chains",
    "generate",
    "chain_terms",
    "init_term",
    "update_label",
    "update_relation",
    "update_target",
    "first_order_term",
    "term_counts",
    "term_formula",
    "MULTIPLIER_SYMBOL",
]

Relation = Literal["=", "≤"]

_ONE = Theta.one()
_INV_L = Theta.monomial(0, -1)
_INV_SQRT_L = Theta.monomial(0, Fraction(-1, 2))
MULTIPLIER_SYMBOL = {
    "input": "α_0",
    "hidden": "α_l",
    "output": "α_{L+1}",
    "router": "α_r",
    "outer": "α_o",
    "norm": "",
}
"""The multiplier of each layer's terms as written; a norm's input (layer ``norm``) has none."""

_SUP = str.maketrans("0123456789", "⁰¹²³⁴⁵⁶⁷⁸⁹")


class Factor(NamedTuple):
    """``‖p‖`` or ``‖Δp‖`` for one parameter ``p`` of a role (a named tuple, as
    :class:`Condition`: every listed term has one per factor)."""

    role: str
    position: int
    """Index ``i`` of the map inside a block (1..k); 0 outside blocks."""
    delta: bool
    view: Literal["", "norm", "input"] = ""
    """What of a normed role's map the term holds: ``norm``, the norm's output ``N(p h)``
    (in the block's chains); ``input``, the norm's input ``p h`` (layer ``norm``); ``""``
    the map itself (every other role)."""

    def __str__(self) -> str:
        sym = role(self.role).symbol
        if self.position:
            sym = f"{sym}⁽{str(self.position).translate(_SUP)}⁾"
        if self.view == "norm":
            sym = f"N({sym})"
        elif self.view == "input":
            sym = f"{sym} h"
        return f"‖{'Δ' if self.delta else ''}{sym}‖"


class Chain(NamedTuple):
    """A path through one layer: ``W⁽¹⁾…W⁽ᵏ⁾``, ``b⁽ⁱ⁾ → W⁽ⁱ⁺¹⁾…W⁽ᵏ⁾``, one in/out parameter,
    a router's logits, or a hidden chain gated by a router (``W_r`` first, ``gated``)."""

    layer: str
    params: tuple[tuple[str, int], ...]
    """``(role, position)`` of each factor, in the order the signal passes them."""
    is_bias: bool
    """Whether the chain starts at a bias (its terms are labelled B…)."""
    gated: bool = False
    """``params[0]`` is a router whose gate multiplies the rest: every term of this chain
    has the gate updated (the others are the ungated chain's), and it has no init term."""
    cross: Relation = "="
    """Relation of a gated chain's terms with more than the gate updated: ``=`` under
    Condition C (``k ≥ 2``), ``≤`` under Condition "one-layer" (``k = 1``)."""

    @property
    def has_updates(self) -> bool:
        """A router's logits chain has only its init term: the block fixes how they move."""
        return self.layer != "router"


class Condition(NamedTuple):
    """One condition term: ``α_layer · ∏ factors (relation) target``.

    A named tuple rather than a dataclass: blocks of ``k = 16`` maps have ~200 000 terms.
    """

    label: str
    """Paper label: C1.1/C1.2 init, C2.1 in/out update, C2.(j+1) hidden order j; B… biases."""
    chain: Chain
    updated: tuple[int, ...]
    """Indices into ``chain.params`` of the factors that are updates ``Δp``."""
    relation: Relation
    target: Theta

    @property
    def layer(self) -> str:
        return self.chain.layer

    @property
    def factors(self) -> tuple[Factor, ...]:
        return tuple(
            Factor(r, i, p in self.updated, factor_view(self.chain, r))
            for p, (r, i) in enumerate(self.chain.params)
        )

    @property
    def kind(self) -> str:
        return "update" if self.updated else "init"

    @property
    def order(self) -> int:
        return len(self.updated)

    def __str__(self) -> str:
        return _condition_text(self)

    def _text(self) -> str:
        # a factor from another layer (a router's gate in a block) carries its own
        # multiplier; a norm's input (layer norm) is the map's output, before any multiplier
        own: dict[str, str] = {f.role: role(f.role).layer for f in self.factors}
        if self.layer == "norm":
            own = dict.fromkeys(own, "norm")
        factors = [
            f"{MULTIPLIER_SYMBOL[own[f.role]]}{f}" if own[f.role] != self.layer else str(f)
            for f in self.factors
        ]
        lhs = " ".join(x for x in (MULTIPLIER_SYMBOL[self.layer], *factors) if x)
        rhs = "Θ" if self.relation == "=" else "O"
        return f"{lhs} = {rhs}({format_monomial(*self.target.exponents)})"


@cache
def _condition_text(c: Condition) -> str:
    """``str`` of a term, once per term: a derivation quotes each layer's and role's fixing
    term in the reasons of several rules."""
    return c._text()


def factor_view(chain: Chain, role_name: str) -> Literal["", "norm", "input"]:
    """What a factor of ``role_name`` in ``chain`` holds (:attr:`Factor.view`)."""
    if not role(role_name).normed:
        return ""
    return "input" if chain.layer == "norm" else "norm"


def _label(chain: Chain, order: int) -> str:
    """Paper label of the terms of ``chain`` with ``order`` factors updated (0: init)."""
    if chain.layer == "norm":
        return f"N{1 if order == 0 else 2}.1"
    if chain.gated or chain.layer == "router":
        return f"R{1 if order == 0 else 2}.{1 if order == 0 else order + 1}"
    head = "B" if chain.is_bias else "C"
    inner = chain.layer == "hidden"
    if order == 0:
        return f"{head}1.{2 if inner else 1}"
    return f"{head}2.{order + 1 if inner else 1}"


def init_term(chain: Chain) -> Condition:
    """The chain with no factor updated: ``Θ(1/L)`` for a hidden chain of ``m ≥ 2`` factors
    (Condition C), ``O(1/√L)`` for ``m = 1`` (Condition "one-layer"), ``Θ(1)`` outside blocks
    (a router's logits included) and for a norm's input (N1.1). A gated chain has none: it
    is the chain's own, times ``‖g‖ = Θ(1)``."""
    if chain.gated:
        raise ValueError("a gated chain has no init term of its own")
    rel: Relation
    target: Theta
    if chain.layer == "hidden":
        rel, target = ("=", _INV_L) if len(chain.params) >= 2 else ("≤", _INV_SQRT_L)
    else:
        rel, target = "=", _ONE
    return Condition(_label(chain, 0), chain, (), rel, target)


def update_target(chain: Chain) -> Theta:
    """The target every update term of ``chain`` must equal: ``Θ(1/L)`` in a block, else
    ``Θ(1)`` (a norm's input, N2.1, included)."""
    return _INV_L if chain.layer == "hidden" else _ONE


def update_relation(chain: Chain, order: int) -> Relation:
    """``=`` for every update term but a gated chain's cross terms (``chain.cross``)."""
    return chain.cross if chain.gated and order >= 2 else "="


def update_label(chain: Chain, order: int) -> str:
    """Label of the update terms of ``chain`` with ``order`` factors updated (``C2.3``, ``B2.2``)."""
    return _label(chain, order)


def _free(chain: Chain) -> int:
    """How many factors of ``chain`` may be updated or not (a gated chain's gate always is)."""
    return len(chain.params) - chain.gated


def chain_terms(chain: Chain) -> Iterator[Condition]:
    """The init term and every update term of one chain of parameters (see the module doc)."""
    target = update_target(chain)
    if chain.gated:
        for j in range(_free(chain) + 1):
            for subset in combinations(range(1, len(chain.params)), j):
                order = j + 1
                rel = update_relation(chain, order)
                yield Condition(_label(chain, order), chain, (0, *subset), rel, target)
        return
    m = len(chain.params)
    yield init_term(chain)
    if not chain.has_updates:
        return
    for j in range(1, m + 1):
        label = update_label(chain, j)
        for subset in combinations(range(m), j):
            yield Condition(label, chain, subset, "=", target)


def term_counts(chain: Chain) -> dict[str, int]:
    """How many terms of each label ``chain`` has, without listing them: one init term and
    ``C(m, j)`` update terms of order ``j`` (one per set of ``j`` updated factors); a gated
    chain ``C(m − 1, j − 1)`` of order ``j`` (the gate is always one of them)."""
    m = _free(chain)
    out: dict[str, int] = {}
    if chain.gated:
        for j in range(m + 1):
            label = _label(chain, j + 1)
            out[label] = out.get(label, 0) + comb(m, j)
        return out
    out[init_term(chain).label] = 1
    if not chain.has_updates:
        return out
    for j in range(1, m + 1):
        label = update_label(chain, j)
        out[label] = out.get(label, 0) + comb(m, j)
    return out


def first_order_term(chain_list: Iterable[Chain], role_name: str) -> Condition:
    """The first term, in :func:`generate` order, in which ``role_name`` alone is updated:
    its first factor in the first chain that holds it (a router: its gate, alone updated,
    in the first gated chain). It fixes the role's update size and the loss change one
    step of it causes (App. C.4), so a norm's input (N2.1, a size, not a loss change) is
    never it."""
    for chain in chain_list:
        if not chain.has_updates or chain.layer == "norm":
            continue
        for p, (r, _) in enumerate(chain.params):
            if r == role_name and (p == 0 or not chain.gated):
                return Condition(update_label(chain, 1), chain, (p,), "=", update_target(chain))
    raise ValueError(f"no chain holds {role_name}")


def term_formula(roles: tuple[Role, ...] = ROLES) -> tuple[int, int]:
    """``(a, b)`` with ``a + b·2^k`` condition terms for blocks of ``k`` maps over ``roles``.

    Each chain outside the blocks (one factor) has 2 terms; the hidden weight chain ``2^k``
    (init and every non-empty subset), and so has each chain with a fixed-rank factor in a
    hidden matrix's place; the chains of a bias-like role in a block
    ``Σ_{m=1..k} 2^m = 2^{k+1} − 2``. With the paper's roles: ``4 + 3·2^k``. A router adds
    its init term (1) and a gated twin of each block chain with the gate always updated
    (as many terms as the chain), so ``3 + 6·2^k`` with the paper's roles and the router.
    A normed role adds its norm's input (2: N1.1, N2.1).
    """
    names = {r.name for r in roles}
    outside = sum(1 for r in roles if not r.in_block)
    routers = sum(1 for r in roles if r.gate)
    weights = "hidden_weight" in names
    factors = weights * sum(1 for r in roles if _in_weight_chain(r))
    vectors = sum(1 for r in roles if r.layer == "hidden" and r.is_bias)
    twins = 1 + routers
    normed = 2 * sum(1 for r in roles if r.normed and weights)
    outer = 2 * outside + routers - 2 * vectors * twins + normed
    return outer, (weights + factors + 2 * vectors) * twins


def _in_weight_chain(r: Role) -> bool:
    """A matrix of a block other than the hidden weight: it takes a hidden matrix's place."""
    return r.layer == "hidden" and not r.is_bias and r.name != "hidden_weight"


def _place(r: Role, k: int) -> int:
    """Where a fixed-rank factor sits in the weight chain: first if it reads the stream
    (``n_in = Θ(n)``: a rank-down map), last otherwise (a rank-up map may end the branch)."""
    return 1 if r.n_in != Theta.one() else k


def chains(k: int, roles: tuple[Role, ...] = ROLES) -> Iterator[Chain]:
    """Every chain of the network with ``k`` maps per block, over ``roles`` (a role that
    needs deeper blocks, ``k < role.min_k``, has none)."""
    roles = tuple(r for r in roles if r.min_k <= k)
    names = {r.name for r in roles}
    for r in roles:
        if r.layer != "hidden":
            yield Chain(r.layer, ((r.name, 0),), r.is_bias)
    block: list[Chain] = []
    if "hidden_weight" in names:
        weights = tuple(("hidden_weight", i) for i in range(1, k + 1))
        block.append(Chain("hidden", weights, False))
        for r in roles:
            if _in_weight_chain(r):
                at = _place(r, k)
                params = tuple((r.name, i) if i == at else (w, i) for w, i in weights)
                block.append(Chain("hidden", params, False))
    for r in roles:
        if r.layer == "hidden" and r.is_bias:
            for i in range(1, k + 1):
                tail = tuple(("hidden_weight", m) for m in range(i + 1, k + 1))
                block.append(Chain("hidden", ((r.name, i), *tail), True))
    yield from block
    cross: Relation = "=" if k >= 2 else "≤"
    for r in roles:
        if r.gate:
            for c in block:
                yield Chain("hidden", ((r.name, 0), *c.params), c.is_bias, True, cross)
    # the input of the norm that reads a normed factor (one per role, where the block's
    # weight chain holds it), after the block's chains: those fix its update size
    for r in roles:
        if r.normed and "hidden_weight" in names:
            yield Chain("norm", ((r.name, _place(r, k)),), False)


def generate(k: int, roles: tuple[Role, ...] = ROLES) -> Iterator[Condition]:
    """Every init and update condition term for blocks of ``k`` maps, over ``roles``.

    ``3 + 6·2^k`` of them (``4 + 3·2^k`` without the router): the engine never lists them
    (see :mod:`spectral.engine.verify`); the tests do, for small ``k``, as the oracle the
    factor-by-factor check must agree with.
    """
    if not isinstance(k, int) or isinstance(k, bool) or k < 1:
        raise ValueError(f"k must be an integer ≥ 1, got {k!r}")
    for chain in chains(k, roles):
        yield from chain_terms(chain)
