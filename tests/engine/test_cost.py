"""Derivation cost: the condition terms are bounded factor by factor, never listed.

The factor-by-factor check (:func:`spectral.engine.verify.check_terms`) must agree with the full
enumeration of every subset of every chain (``enumerate_subsets=True``, the oracle) on
every catalog optimizer, on random declarations, and — so that agreement is not only
"both say yes" — on derivations whose rules were deliberately broken: the same terms per
label, the same failing terms per label.
"""

from __future__ import annotations

import dataclasses
from fractions import Fraction

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from spectral import IncomparableError, OptimizerSpec, VerificationError, catalog, derive
from spectral.engine import conditions
from spectral.engine.conditions import chains, generate, term_counts, term_formula
from spectral.engine.expr import parse_expression
from spectral.engine.result import Exponent
from spectral.engine.roles import ROLES
from spectral.engine.solve import MAX_K
from spectral.engine.verify import check_terms, summary, verify

ORACLE_KS = range(1, 7)


def agree(d) -> tuple[dict, dict]:
    """Both checks of ``d``; assert they found the same, return (counts, failing)."""
    fast = check_terms(d)
    slow = check_terms(d, enumerate_subsets=True)
    assert dict(fast.counts) == dict(slow.counts)
    assert dict(fast.failing) == dict(slow.failing)
    assert bool(fast.examples) == bool(slow.examples)
    return dict(fast.counts), dict(fast.failing)


def broken(d, role: str, hp: str, shift: tuple[Fraction, Fraction]):
    """``d`` with one rule's exponent moved by ``shift``: a derivation that must fail."""
    entries = tuple(
        dataclasses.replace(e, exponent=Exponent(e.exponent.r_n + shift[0], e.exponent.r_L + shift[1]))
        if (e.role, e.hp) == (role, hp)
        else e
        for e in d.entries
    )
    return dataclasses.replace(d, entries=entries, checks=(), verified=False)


@pytest.mark.parametrize("k", ORACLE_KS)
@pytest.mark.parametrize("optimizer", sorted(catalog()))
def test_factor_check_agrees_with_enumeration_on_the_catalog(optimizer, k):
    d = derive(optimizer, k=k)
    counts, failing = agree(d)
    assert failing == {}
    assert {c.label: c.terms for c in d.checks} == counts


SHIFTS = [(Fraction(1, 2), Fraction(0)), (Fraction(0), Fraction(-1)), (Fraction(-1), Fraction(1, 2))]


@pytest.mark.parametrize("shift", SHIFTS, ids=str)
@pytest.mark.parametrize("hp", ["multiplier", "init_var", "lr", "weight_decay"])
@pytest.mark.parametrize("optimizer,k", [("adamw", 1), ("sgd", 3), ("muon", 2), ("shampoo", 4)])
def test_factor_check_agrees_with_enumeration_on_broken_rules(optimizer, k, hp, shift):
    d = derive(optimizer, k=k)
    for role in d.roles:
        bad = broken(d, role, hp, shift)
        _, failing = agree(bad)
        assert failing, f"moving {hp} of {role} must break some term"
        with pytest.raises(VerificationError, match=rf"{sum(failing.values())} condition term\(s\) fail"):
            verify(bad)


@pytest.mark.slow  # seconds on the 2-core CPU: out of pytest -m "not slow"
def test_hidden_lr_off_by_one_counts_every_failing_term_without_listing_them():
    """Only ‖ΔW‖ of the hidden weights is wrong. Failing among the paper's terms: every
    update term of the weight chain (2^k − 1), every bias-chain term with a weight updated
    (Σ_{m=1..k} 2^m − 2 = 2^{k+1} − 2 − 2k), and that role's C.4 check: 3·2^k − 2 − 2k.
    Among the router's (R): every gated term with a weight updated, the same count less
    the C.4 check: 3·2^k − 3 − 2k."""
    paper, router = (lambda k: 3 * 2**k - 2 - 2 * k), (lambda k: 3 * 2**k - 3 - 2 * k)
    for k in (3, 5):  # the oracle agrees with the formula
        _, failing = agree(broken(derive("sgd", k=k), "hidden_weight", "lr", (Fraction(1), Fraction(0))))
        assert sum(n for label, n in failing.items() if label[0] != "R") == paper(k)
        assert sum(n for label, n in failing.items() if label[0] == "R") == router(k)
    k = MAX_K
    bad = broken(derive("sgd", k=k), "hidden_weight", "lr", (Fraction(1), Fraction(0)))
    with pytest.raises(VerificationError) as err:
        verify(bad)
    assert str(err.value).startswith(f"sgd (k={k}): {paper(k) + router(k)} condition term(s) fail")
    assert "C2.2: α_l ‖ΔW⁽¹⁾‖" in str(err.value)


atoms = st.sampled_from(["n_in", "n_out", "L", "G", "2", "0.2", "3"])
powers = st.sampled_from(["2", "-1", "(1/2)", "(-1/2)", "(3/2)"])
expressions = st.recursive(
    atoms,
    lambda c: st.one_of(
        st.tuples(c, c).map(lambda t: f"({t[0]} * {t[1]})"),
        st.tuples(c, c).map(lambda t: f"({t[0]} / {t[1]})"),
        st.tuples(c, powers).map(lambda t: f"({t[0]})**{t[1]}"),
        st.tuples(c, c).map(lambda t: f"max({t[0]}, {t[1]})"),
        st.tuples(c, c).map(lambda t: f"min({t[0]}, {t[1]})"),
    ),
    max_leaves=5,
)
halves = st.sampled_from([Fraction(n, 2) for n in range(-2, 3)])


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    update=expressions,
    applies=st.sampled_from(["all", "matrices"]),
    k=st.integers(1, 5),
    role=st.sampled_from([r.name for r in ROLES]),
    hp=st.sampled_from(["multiplier", "init_var", "lr", "weight_decay"]),
    shift=st.tuples(halves, halves),
)
@pytest.mark.slow  # seconds on the 2-core CPU: out of pytest -m "not slow"
def test_factor_check_agrees_with_enumeration_on_random_declarations(update, applies, k, role, hp, shift):
    spec = OptimizerSpec(
        name="random", update_norm=parse_expression(update, field="update_norm"), applies_to=applies
    )
    try:
        d = derive(spec, k=k)
    except IncomparableError:
        return
    assert agree(d)[1] == {}
    if role in d.roles:
        agree(broken(d, role, hp, shift))


@pytest.mark.parametrize("k", [1, 2, 5, 9])
def test_term_counts_are_those_of_the_listed_terms(k):
    for roles in (ROLES, tuple(r for r in ROLES if not r.is_bias)):
        listed: dict[str, int] = {}
        for c in generate(k, roles):
            listed[c.label] = listed.get(c.label, 0) + 1
        counted: dict[str, int] = {}
        for chain in chains(k, roles):
            for label, n in term_counts(chain).items():
                counted[label] = counted.get(label, 0) + n
        assert counted == listed
        a, b = term_formula(roles)
        assert sum(listed.values()) == a + b * 2**k


def test_no_term_is_listed_when_deriving(monkeypatch):
    """Neither solving nor verifying walks the subsets: the term generator is never called."""

    def refuse(*_args, **_kwargs):
        raise AssertionError("the condition terms were enumerated")

    monkeypatch.setattr(conditions, "chain_terms", refuse)
    monkeypatch.setattr(conditions, "generate", refuse)
    d = derive("adamw", k=MAX_K)
    assert d.verified
    assert sum(c.terms for c in d.checks if c.label[0] in "CB" and c.label != "C.4") == 4 + 3 * 2**MAX_K


def test_verification_summary_says_how_many_terms_and_how():
    d = derive("adamw", k=16)
    assert d.verification_summary == summary(d) == (
        "3 + 6·2^k = 393 219 condition terms at k = 16, checked factor by factor (the largest "
        "and smallest term of each chain), plus 14 checks of the conventions Δ2, C.4 and α"
    )
    # matrices only: in/out weights 4, the router's init 1, the weight chain and its gated twin
    assert derive("muon", k=3).verification_summary.startswith("5 + 2·2^k = 21 condition terms at k = 3,")


def test_k_up_to_max_k_is_accepted_and_gives_the_k2_rules():
    assert MAX_K == 64
    assert derive("adamw", k=MAX_K).rules == derive("adamw", k=2).rules
    with pytest.raises(ValueError, match="k ≤ 16"):
        check_terms(derive("adamw", k=17), enumerate_subsets=True)


def test_codegen_derives_once(monkeypatch):
    """``spectral codegen`` derives each optimizer once: ``render`` takes the CLI's plan."""
    import importlib
    import spectral.transfer
    from spectral.cli import main

    calls: list[str] = []
    # the module, not the package's catalog() function of the same name
    real = importlib.import_module("spectral.catalog").derive

    def counting(optimizer, k=2, **kw):
        calls.append(optimizer if isinstance(optimizer, str) else optimizer.name)
        return real(optimizer, k, **kw)

    monkeypatch.setattr(spectral.transfer, "derive", counting)
    args = ["codegen", "muon-kimi", "--others", "adamw", "--k", "16", "--base-width", "64", "--base-depth", "2"]
    assert main(args) == 0
    assert sorted(calls) == ["adamw", "muon-kimi"]


@pytest.mark.parametrize(
    "power,message",
    [
        (Fraction(10**400), r"the exponent about -10\^400 has no faithful float"),
        (Fraction(1, 10**400), r"the exponent about -10\^-400 has no faithful float"),
    ],
)
def test_an_exponent_without_a_faithful_float_is_refused(power, message):
    """Rules are applied with float exponents (spectral.scaling, the generated module): an
    exponent that overflows a float, or rounds to 0 without being 0, is refused, not
    printed as ``inf`` or silently applied as 0. Declared text cannot reach this (the
    parser bounds each power and the length); a sympy expression built in Python can."""
    import sympy as sp

    from spectral import SpecError
    from spectral.symbols import n_in

    spec = OptimizerSpec(name="huge", update_norm=n_in ** sp.Rational(power.numerator, power.denominator))
    with pytest.raises(SpecError, match=message):
        derive(spec, k=2)
    tiny = derive(OptimizerSpec(name="tiny", update_norm=n_in ** sp.Rational(1, 10**300)), k=2)
    assert tiny.rule("hidden_weight", "lr").as_floats()[0] == -1e-300
