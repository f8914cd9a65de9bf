"""A rank-down map whose output a norm reads (``normed_rank_down_weight``, docs/roles.md).

DeepSeek-V3's ``q_a_proj``/``kv_a_proj_with_mqa`` map the width to a fixed rank and an
RMSNorm reads the result. Under the plain rank-down rules (σ² = 1/n²) the norm's input
vanishes as n^-1/2 at init while its one-step change stays Θ(1), so the norm's output
moves by Θ(√n) (issue 47 measured n^+0.25 at widths 64–512). The normed role's rules keep
the norm's input Θ(1) (N1.1, σ² = 1/n) and its relative change Θ(1). Here: the condition
terms as written, the verification catching the plain rules, and the real optimizers
(torch's AdamW, SGD and Muon with Kimi's scale) measured on the map and its norm.
"""

from __future__ import annotations

import math
from dataclasses import replace
from fractions import Fraction as F

import pytest
import torch

from spectral import derive
from spectral.catalog import catalog
from spectral.engine.conditions import chains, chain_terms
from spectral.engine.result import Derivation, Exponent
from spectral.engine.roles import ALL_ROLES
from spectral.engine.verify import check_terms
from spectral.measure.fit import log_slope

ROLE = "normed_rank_down_weight"


def test_the_terms_hold_the_norms_output_and_input():
    roles = tuple(r for r in ALL_ROLES if r.name in ("hidden_weight", ROLE))
    terms = [str(c) for chain in chains(2, roles) for c in chain_terms(chain)]
    assert "α_l ‖N(D_N⁽¹⁾)‖ ‖W⁽²⁾‖ = Θ(1/L)" in terms  # C1.2: the norm's output, Θ(1)
    assert "α_l ‖ΔN(D_N⁽¹⁾)‖ ‖W⁽²⁾‖ = Θ(1/L)" in terms  # C2.2: its relative change
    assert "α_l ‖ΔN(D_N⁽¹⁾)‖ ‖ΔW⁽²⁾‖ = Θ(1/L)" in terms  # C2.3
    assert terms[-2:] == ["‖D_N⁽¹⁾ h‖ = Θ(1)", "‖ΔD_N⁽¹⁾ h‖ = Θ(1)"]  # N1.1, N2.1


@pytest.mark.parametrize("name", ["adamw", "muon-kimi", "sgd"])
def test_the_explanations_cite_the_norms_input(name):
    d = derive(name, 2, all_roles=True)
    init, lr = d.entry(ROLE, "init_var"), d.entry(ROLE, "lr")
    assert init.condition == "N1.1" and "σ² = 1/n_in" in init.explanation
    assert lr.condition == "C2.2"
    assert "‖ΔN(D_N)‖ = Θ(1) = ‖ΔD_N h‖/‖D_N h‖ with N1.1 ‖D_N h‖ = Θ(1)" in lr.explanation
    groups = {c.label: c.terms for c in d.checks}
    assert groups["N1.1"] == groups["N2.1"] == 1


def _with(d: Derivation, hp: str, exponent: Exponent) -> Derivation:
    entries = tuple(
        replace(e, exponent=exponent) if (e.role, e.hp) == (ROLE, hp) else e for e in d.entries
    )
    return Derivation(**{**d.__dict__, "entries": entries})


@pytest.mark.parametrize("name", sorted(catalog()))
def test_the_plain_rank_down_init_fails_under_a_norm(name):
    """The plain rank-down map's init (1/n²) with the normed role's other rules: the norm's
    input is n^-1/2 (N1.1) and its relative change √n, every chain term through it √n too
    large: what issue 47 measured on DeepSeek-V3, caught by the verification."""
    d = derive(name, 2, all_roles=True)
    assert not check_terms(d).failing
    plain = d.rule("rank_down_weight", "init_var")
    assert plain == Exponent(F(-2), F(0))
    bad = _with(_with(d, "init_var", plain), "weight_decay", d.rule("rank_down_weight", "weight_decay"))
    failing = check_terms(bad).failing
    assert failing["N1.1"] == 1 and failing["C2.2"] >= 1 and failing["C2.3"] >= 1
    assert "N2.1" not in failing  # the norm's input moves by Θ(1): it is the ratio that fails
    assert {label for label in failing if label[0] == "R"} or "router_weight" not in d.roles


# --- the real optimizers, one step, on the map and the norm that reads it -------------------

WIDTHS = (256, 1024, 4096)
RANK, TOKENS, SEEDS = 16, 4, 4


def _rms_norm(x: torch.Tensor) -> torch.Tensor:
    return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + 1e-6)


def _optimizer(name: str, param: torch.nn.Parameter, lr: float) -> torch.optim.Optimizer:
    if name == "adamw":
        return torch.optim.AdamW([param], lr=lr, weight_decay=0.0)
    if name == "sgd":
        return torch.optim.SGD([param], lr=lr)
    return torch.optim.Muon([param], lr=lr, weight_decay=0.0, adjust_lr_fn="match_rms_adamw")


def _one_step(name: str, rules: dict[str, Exponent], width: int, seed: int) -> tuple[float, float]:
    """(RMS of the norm's input at init, RMS of the norm's one-step change) with one role's
    rules at ``width`` (base width 256, base init std 1/√256, a base lr per optimizer small
    enough that no step saturates the norm's output)."""
    r_n = width / WIDTHS[0]
    std = r_n ** (float(rules["init_var"].r_n) / 2) / math.sqrt(WIDTHS[0])
    lr = {"adamw": 1e-4, "sgd": 1e-4, "muon-kimi": 3e-4}[name] * r_n ** float(rules["lr"].r_n)
    g = torch.Generator().manual_seed(seed)
    h = torch.randn(TOKENS, width, generator=g, dtype=torch.float64)
    target = torch.randn(TOKENS, RANK, generator=g, dtype=torch.float64)
    w = torch.nn.Parameter(torch.randn(RANK, width, generator=g, dtype=torch.float64) * std)
    inputs = (h @ w.T).detach()
    before = _rms_norm(inputs)
    loss = (_rms_norm(h @ w.T) * target).sum()
    loss.backward()
    _optimizer(name, w, lr).step()
    after = _rms_norm(h @ w.detach().T)
    return _rms(inputs), _rms(after - before)


def _rms(x: torch.Tensor) -> float:
    return float(x.pow(2).mean().sqrt())


@pytest.mark.parametrize("name", ["adamw", "sgd", "muon-kimi"])
def test_the_norms_one_step_change_is_flat_across_widths(name):
    """Slopes in n of the norm's input at init and of the norm's one-step change, 3 seeds
    averaged per width: flat under the normed role; under the plain rank-down rules the
    input falls as n^-1/2 and the change grows as n^+1/2 (SGD's n^+1: its gradient passes
    the norm's 1/‖D h‖ too)."""
    d = derive(name, 2, all_roles=True)
    slopes = {}
    for role in (ROLE, "rank_down_weight"):
        runs = [[_one_step(name, d.rules[role], n, seed) for seed in range(SEEDS)] for n in WIDTHS]
        inputs = [sum(x for x, _ in at) / SEEDS for at in runs]
        changes = [sum(y for _, y in at) / SEEDS for at in runs]
        slopes[role] = (log_slope(WIDTHS, inputs), log_slope(WIDTHS, changes))
    normed_input, normed_change = slopes[ROLE]
    plain_input, plain_change = slopes["rank_down_weight"]
    assert normed_input is not None and abs(normed_input) < 0.05, slopes
    assert normed_change is not None and abs(normed_change) < 0.15, slopes
    assert plain_input is not None and abs(plain_input + 0.5) < 0.05, slopes
    want = 1.0 if name == "sgd" else 0.5
    assert plain_change is not None and abs(plain_change - want) < 0.15, slopes
