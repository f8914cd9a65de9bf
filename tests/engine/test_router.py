"""The router role, pinned against a derivation done by hand (docs/router.md).

The router ``W_r`` is ``E × n`` (``n_in = n``, ``n_out = E = Θ(1)``) inside block ``l``:
``block_l(h) = Σ_e g_e(α_r W_r h) · W_e⁽ᵏ⁾ … W_e⁽¹⁾ h``, added to the stream with ``α_l``.

Optimizer-independent part (the same for every row below):

* init (Sec. 4.1, a layer l ≤ L): ``σ² = min(1, n_out/n_in)/n_in = 1/n²``, so
  ``‖W_r‖_R = sqrt(n_in/n_out) · σ · (√n_in + √n_out) = √n · (1/n) · √n = 1``;
* R1.1, logits Θ(1) at init: ``α_r ‖W_r‖ = Θ(1)`` ⇒ ``α_r = Θ(1)``;
* R2.2, the gate alone updated: ``α_l · α_r‖ΔW_r‖ · ∏_i ‖W⁽ⁱ⁾‖ = Θ(1/L)`` with
  ``‖W⁽ⁱ⁾‖ = 1``; k ≥ 2: ``α_l = 1/L`` ⇒ ``‖ΔW_r‖ = T = 1``; k = 1: ``α_l = 1/√L`` ⇒
  ``T = 1/√L`` (the logits move by T per step);
* loss sensitivity (App. C.4): ``ΔL = 1/L`` (the term's target) ``= ‖ΔW_r‖_2 ‖∇W_r‖_2`` with
  ``‖ΔW_r‖_2 = sqrt(n_out/n_in) T = T/√n`` ⇒ ``G = √n/(L T)``: ``√n/L`` (k ≥ 2),
  ``√(n/L)`` (k = 1).

Then per optimizer ``lr = T/‖A‖``, ``wd = ‖A‖/‖W_r‖ = ‖A‖`` and ε from its declaration.
"""

from __future__ import annotations

from fractions import Fraction as F

import pytest

from spectral import derive
from spectral.engine.conditions import chains
from spectral.engine.roles import role

H = F(1, 2)
SHARED = {"multiplier": (0, 0), "init_var": (-2, 0)}

HAND = {
    # AdamW: ‖A‖_R = n_in = n (sign of a low-rank gradient), ε ~ entry RMS of ∇W = G/√(n_in n_out)
    #   k=2: lr = 1/n, wd = n, ε = (√n/L)/√n = 1/L
    #   k=1: lr = (1/√L)/n, wd = n, ε = √(n/L)/√n = 1/√L
    ("adamw", 2): dict(lr=(-1, 0), weight_decay=(1, 0), eps=(0, -1)),
    ("adamw", 1): dict(lr=(-1, -H), weight_decay=(1, 0), eps=(0, -H)),
    # SGD: ‖A‖_R = sqrt(n_in/n_out) G = √n G
    #   k=2: ‖A‖ = √n · √n/L = n/L, lr = 1/(n/L) = L/n, wd = n/L
    #   k=1: ‖A‖ = √n · √(n/L) = n/√L, lr = (1/√L)/(n/√L) = 1/n, wd = n/√L
    ("sgd", 2): dict(lr=(-1, 1), weight_decay=(1, -1)),
    ("sgd", 1): dict(lr=(-1, 0), weight_decay=(1, -H)),
    # Muon-Kimi: ‖A‖_R = 0.2 sqrt(max(n, 1)) sqrt(n/1) = 0.2 n
    #   k=2: lr = 1/n, wd = n   (as hidden_weight it would get lr n^-1/2: logits move as √n)
    #   k=1: lr = 1/(n√L), wd = n
    ("muon-kimi", 2): dict(lr=(-1, 0), weight_decay=(1, 0)),
    ("muon-kimi", 1): dict(lr=(-1, -H), weight_decay=(1, 0)),
    # Shampoo: ‖A‖_R = sqrt(n_in/n_out) = √n (Muon's direction), ε = G²
    #   k=2: lr = 1/√n, wd = √n, ε = n/L²
    #   k=1: lr = 1/√(nL), wd = √n, ε = n/L
    ("shampoo", 2): dict(lr=(-H, 0), weight_decay=(H, 0), eps=(1, -2)),
    ("shampoo", 1): dict(lr=(-H, -H), weight_decay=(H, 0), eps=(1, -1)),
}


def rules(optimizer: str, k: int) -> dict:
    return {hp: (e.r_n, e.r_L) for hp, e in derive(optimizer, k=k).rules["router_weight"].items()}


@pytest.mark.parametrize("optimizer,k", sorted(HAND), ids=str)
def test_router_rules_match_the_hand_derivation(optimizer, k):
    want = {hp: (F(a), F(b)) for hp, (a, b) in {**SHARED, **HAND[(optimizer, k)]}.items()}
    assert rules(optimizer, k) == want


@pytest.mark.parametrize("optimizer", ["adamw", "sgd", "muon-kimi", "shampoo"])
def test_deeper_blocks_give_the_k2_router(optimizer):
    for k in (3, 5, 16):
        assert rules(optimizer, k) == rules(optimizer, 2)


def test_router_is_neither_hidden_nor_output():
    """The issue's two wrong placements, derived: as hidden_weight Muon-Kimi's lr is n^-1/2
    (the router's logits move as √n); as output_weight (readout init σ² = 1, α = 1/n) AdamW's
    ε would lack 1/L, Shampoo's 1/L², and SGD's lr be off by L."""
    kimi = derive("muon-kimi", k=2)
    assert kimi.rule("hidden_weight", "lr").r_n == -H != kimi.rule("router_weight", "lr").r_n
    # in the readout convention the router's gradient is α_r = 1/n times smaller than here
    # and 1/L times the output weight's (ΔL = 1/L instead of 1): ε_AdamW ∝ G, ε_Shampoo ∝ G²
    for name, power in (("adamw", 1), ("shampoo", 2)):
        d = derive(name, k=2)
        router, output = d.rule("router_weight", "eps"), d.rule("output_weight", "eps")
        assert (router.r_n - power * 1, router.r_L) == (output.r_n, output.r_L - power)
    sgd = derive("sgd", k=2)  # readout convention: lr × n² (α_r → 1/n, ‖W‖ → n); then vs output
    router, output = sgd.rule("router_weight", "lr"), sgd.rule("output_weight", "lr")
    assert (router.r_n + 2, router.r_L) == (output.r_n, output.r_L + 1)


@pytest.mark.parametrize("k", [1, 2, 3])
def test_router_terms_are_checked_and_labelled(k):
    d = derive("adamw", k=k)
    counts = {c.label: c.terms for c in d.checks if c.label.startswith("R")}
    assert counts["R1.1"] == 1
    # gated twins: the weight chain (k free factors) and the bias chains (m = 1..k)
    assert sum(counts.values()) == 1 + 2**k + 2 ** (k + 1) - 2
    assert sum(n for label, n in counts.items() if label == "R2.2") == 1 + k


def test_gated_cross_terms_are_o_at_k1_and_theta_beyond():
    """Condition "one-layer" maximises no cross term: at k = 1 the gate × weight update term
    is α_l ‖Δg‖ ‖ΔW‖ = L^-1/2 · L^-1/2 · L^-1/2 = O(1/L); under Condition C it is Θ(1/L)."""
    for k, rel in ((1, "≤"), (2, "=")):
        gated = [c for c in chains(k) if c.gated]
        assert gated and all(c.cross == rel for c in gated)
        assert all(role(c.params[0][0]).gate and c.layer == "hidden" for c in gated)


def test_explain_says_where_each_router_entry_comes_from():
    d = derive("muon-kimi", k=2)
    why = {e.hp: (e.condition, e.explanation) for e in d.entries if e.role == "router_weight"}
    assert why["multiplier"][0] == "R1.1" and "not the logits" in why["multiplier"][1]
    assert why["lr"][0] == "R2.2" and "α_l α_r‖ΔW_r‖" in why["lr"][1]
    assert why["weight_decay"][0] == "Δ2" and why["init_var"][0] == "init"
