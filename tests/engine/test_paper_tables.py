"""Every entry of the paper's appendix tables, reproduced by derivation.

Transcribed from ``spectral-condition-width-depth-mup.tex`` (App. C: Condition C, k = 2;
App. D: Condition "one-layer", k = 1). Each entry is the exponent pair ``(a, b)`` of
``base × r_n^a × r_L^b``; e.g. ``η_base/√r_n`` is ``(-1/2, 0)``. Column order follows the
paper: input weights (& input biases), hidden weights, output weights, hidden biases. The
input-weight variance ``σ²_base/d₀ or σ²_base`` has no width/depth factor: ``(0, 0)``; the
input bias variance is ``σ²_base`` (caption of Tab. sgd-mup / adamw-mup).
"""

from __future__ import annotations

from fractions import Fraction as F

import pytest

from spectral import derive

COLUMNS = ("input_weight", "hidden_weight", "output_weight", "hidden_bias")
ONE = (0, 0)


def table(**rows):
    """rows: hp -> tuple of (a, b) per column (3 columns for matrix tables, 4 with biases)."""
    out: dict[str, dict[str, tuple]] = {}
    for hp, cells in rows.items():
        for col, cell in zip(COLUMNS, cells, strict=False):
            out.setdefault(col, {})[hp] = cell
            if col == "input_weight" and len(cells) == 4:  # "Input weights & biases"
                out.setdefault("input_bias", {})[hp] = cell
    return out


H = F(1, 2)

# ---- Condition C (k = 2), App. C ---------------------------------------------------------
K2_INIT = dict(multiplier=(ONE, (0, -1), (-1, 0)), init_var=(ONE, (-1, 0), ONE))
K2_INIT_B = dict(multiplier=(ONE, (0, -1), (-1, 0), (0, -1)), init_var=(ONE, (-1, 0), ONE, ONE))

PAPER = {
    # Tab. "muon-kimi-wd mup" (App. C.1; also Tab. "muon-kimi mup", Sec. 4.2)
    ("muon-kimi", 2): table(**K2_INIT, lr=(ONE, (-H, 0), ONE), weight_decay=(ONE, (H, 0), ONE)),
    # Tab. "muon-wd mup" (App. C.2): Muon / Shampoo / SOAP; Shampoo ε row
    ("muon", 2): table(**K2_INIT, lr=((H, 0), ONE, (H, 0)), weight_decay=((-H, 0), ONE, (-H, 0))),
    ("soap", 2): table(**K2_INIT, lr=((H, 0), ONE, (H, 0)), weight_decay=((-H, 0), ONE, (-H, 0))),
    ("shampoo", 2): table(
        **K2_INIT,
        lr=((H, 0), ONE, (H, 0)),
        weight_decay=((-H, 0), ONE, (-H, 0)),
        eps=((-1, 0), (0, -2), (-1, 0)),
    ),
    # Tab. "sgd-mup" (App. C.3), with input and hidden biases
    ("sgd", 2): table(
        **K2_INIT_B,
        lr=((1, 0), (0, 1), (1, 0), (1, 1)),
        weight_decay=((-1, 0), (0, -1), (-1, 0), (-1, -1)),
    ),
    # Tab. "adamw-mup" (App. C.5): AdamW / Lion / Sophia; AdamW ε row
    ("adamw", 2): table(
        **K2_INIT_B,
        lr=(ONE, (-1, 0), ONE, ONE),
        weight_decay=(ONE, (1, 0), ONE, ONE),
        eps=((-1, 0), (-1, -1), (-1, 0), (-1, -1)),
    ),
    ("lion", 2): table(**K2_INIT_B, lr=(ONE, (-1, 0), ONE, ONE), weight_decay=(ONE, (1, 0), ONE, ONE)),
    ("sophia", 2): table(**K2_INIT_B, lr=(ONE, (-1, 0), ONE, ONE), weight_decay=(ONE, (1, 0), ONE, ONE)),
    # Tab. "sso mup" (App. C.8)
    ("sso", 2): table(**K2_INIT, lr=(ONE, ONE, (1, 0)), weight_decay=(ONE, ONE, (-1, 0))),
}

# ---- Condition "one-layer" (k = 1), App. D ------------------------------------------------
K1_INIT = dict(multiplier=(ONE, (0, -H), (-1, 0)), init_var=(ONE, (-1, 0), ONE))
K1_INIT_B = dict(multiplier=(ONE, (0, -H), (-1, 0), (0, -H)), init_var=(ONE, (-1, 0), ONE, ONE))

PAPER |= {
    # Tab. "muon-kimi-wd mup one-layer" (App. D.1)
    ("muon-kimi", 1): table(**K1_INIT, lr=(ONE, (-H, -H), ONE), weight_decay=(ONE, (H, 0), ONE)),
    # Tab. "muon-wd mup one-layer" (App. D.2): Muon / Shampoo / SOAP; Shampoo ε row
    ("muon", 1): table(**K1_INIT, lr=((H, 0), (0, -H), (H, 0)), weight_decay=((-H, 0), ONE, (-H, 0))),
    ("soap", 1): table(**K1_INIT, lr=((H, 0), (0, -H), (H, 0)), weight_decay=((-H, 0), ONE, (-H, 0))),
    ("shampoo", 1): table(
        **K1_INIT,
        lr=((H, 0), (0, -H), (H, 0)),
        weight_decay=((-H, 0), ONE, (-H, 0)),
        eps=((-1, 0), (0, -1), (-1, 0)),
    ),
    # Tab. "sgd-mup one-layer" (App. D.3)
    ("sgd", 1): table(
        **K1_INIT_B,
        lr=((1, 0), ONE, (1, 0), (1, 0)),
        weight_decay=((-1, 0), (0, -H), (-1, 0), (-1, -H)),
    ),
    # Tab. "adamw-mup one-layer" (App. D.4): AdamW / Lion / Sophia; AdamW ε row
    ("adamw", 1): table(
        **K1_INIT_B,
        lr=(ONE, (-1, -H), ONE, (0, -H)),
        weight_decay=(ONE, (1, 0), ONE, ONE),
        eps=((-1, 0), (-1, -H), (-1, 0), (-1, -H)),
    ),
    ("lion", 1): table(**K1_INIT_B, lr=(ONE, (-1, -H), ONE, (0, -H)), weight_decay=(ONE, (1, 0), ONE, ONE)),
    ("sophia", 1): table(**K1_INIT_B, lr=(ONE, (-1, -H), ONE, (0, -H)), weight_decay=(ONE, (1, 0), ONE, ONE)),
    # Tab. "sso-mup one-layer" (App. D.5)
    ("sso", 1): table(**K1_INIT, lr=(ONE, (0, -H), (1, 0)), weight_decay=(ONE, ONE, (-1, 0))),
}


BEYOND_PAPER = {"soap": {"eps"}}
"""HPs the catalog derives that the paper does not tabulate, left out of the comparison:
SOAP's ε (``optimizers/soap.py``; its exponents are pinned in tests/engine/test_spec_eps.py)."""


ROLES_BEYOND_PAPER = {"router_weight"}
"""Roles the engine derives that the paper's network does not have: the router
(docs/router.md; its rules are pinned against a hand derivation in tests/engine/test_router.py).
An addition, so every role the paper has must still come out exactly as tabulated."""


def as_dict(d) -> dict:
    skip = BEYOND_PAPER.get(d.optimizer, set())
    return {
        role: {hp: (e.r_n, e.r_L) for hp, e in hps.items() if hp not in skip}
        for role, hps in d.rules.items()
        if role not in ROLES_BEYOND_PAPER
    }


def test_the_roles_beyond_the_paper_are_only_additions():
    """Leaving the router out of the network changes no rule of the paper's roles."""
    from spectral.engine.roles import ROLE_NAMES

    assert ROLES_BEYOND_PAPER <= set(ROLE_NAMES)
    for optimizer, k in PAPER:
        assert ROLES_BEYOND_PAPER <= set(derive(optimizer, k=k).roles)


def normalise(expected: dict) -> dict:
    return {
        role: {hp: (F(a), F(b)) for hp, (a, b) in hps.items()} for role, hps in expected.items()
    }


@pytest.mark.parametrize("optimizer,k", sorted(PAPER), ids=lambda x: str(x))
def test_paper_table(optimizer, k):
    """Every role, every HP, exactly as tabulated — and nothing the paper does not list."""
    d = derive(optimizer, k=k)
    assert d.verified
    assert as_dict(d) == normalise(PAPER[(optimizer, k)])


@pytest.mark.parametrize("k", range(3, 17))
@pytest.mark.parametrize("optimizer", ["muon-kimi", "muon", "shampoo", "soap", "sgd", "adamw", "lion", "sophia", "sso"])
def test_deeper_blocks_give_the_k2_rules(optimizer, k):
    """App. B.2: any fixed k ≥ 2 needs no parameterization beyond k = 2."""
    assert as_dict(derive(optimizer, k=k)) == normalise(PAPER[(optimizer, 2)])


def test_every_catalog_optimizer_is_in_the_paper_table():
    from spectral import catalog

    # the catalog opens with the paper's nine; the optimizers declared after them are checked
    # against their implementations instead (tests/test_catalog.py, tests/infer/test_infer.py)
    assert {name for name, _ in PAPER} == set(list(catalog())[: len({n for n, _ in PAPER})])


@pytest.mark.parametrize("k", [1, 2, 3, 8, 16])
def test_every_subset_of_every_chain_is_checked(k):
    """SGD has every role. In/out layers and the input bias give 6 terms; the weight chain
    2^k (init + every non-empty subset); the bias chains b⁽ⁱ⁾ → W⁽ⁱ⁺¹⁾…W⁽ᵏ⁾ give
    Σ_{m=1..k} 2^m. All of them are substituted: 4 + 3·2^k terms. The router's (labelled R)
    add its init term and a gated twin of each hidden chain with the gate updated:
    1 + 2^k + 2^{k+1} − 2 more."""
    d = derive("sgd", k=k)
    condition_terms = sum(c.terms for c in d.checks if c.label[0] in "CB" and c.label != "C.4")
    assert condition_terms == 4 + 3 * 2**k
    router_terms = sum(c.terms for c in d.checks if c.label[0] == "R")
    assert router_terms == 3 * 2**k - 1
