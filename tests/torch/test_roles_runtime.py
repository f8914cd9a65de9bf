"""The roles placed by their dimensions in the runtimes: a parameter classified with one
gets its init std, lr, weight decay and ε at any width (docs/roles.md).

A toy model has every new role: an embedding, a branch with a fixed-rank factorisation
(n → r → n), a per-channel vector and a depthwise conv, a pooler outside the residual
stream and a readout with a bias. At width 2× the base, each number must be the base
value times 2^a with ``a`` the derived exponent (tests/engine/test_roles.py pins the exponents).
"""

from __future__ import annotations

from fractions import Fraction

import pytest
import torch
from torch import nn

import json

from spectral import derive, scaling
from spectral.cli import main
from spectral.codegen import load_generated
from spectral.engine.roles import ALL_ROLES, EXTRA_ROLES, ROLE_NAMES
from spectral.transfer import plan

EXTRA = [r.name for r in EXTRA_ROLES]

BW, BD = 64, 2
RANK, VOCAB, KERNEL = 8, 512, 4

PATTERNS = {
    r"^emb\.weight$": "input_weight",
    r"\.down\.weight$": "rank_down_weight",
    r"\.up\.weight$": "rank_up_weight",
    r"\.a_log$": "hidden_vector",
    r"\.conv\.weight$": "hidden_vector",
    r"\.conv\.bias$": "hidden_bias",
    r"^pooler\.weight$": "outer_weight",
    r"^pooler\.bias$": "outer_bias",
    r"^head\.weight$": "output_weight",
    r"^head\.bias$": "output_bias",
}


class Block(nn.Module):
    def __init__(self, n: int):
        super().__init__()
        self.conv = nn.Conv1d(n, n, KERNEL, groups=n, padding=KERNEL - 1)  # depthwise
        self.down = nn.Linear(n, RANK, bias=False)
        self.up = nn.Linear(RANK, n, bias=False)
        self.a_log = nn.Parameter(torch.log(torch.arange(1, n + 1, dtype=torch.float32)))

    def forward(self, h: torch.Tensor) -> torch.Tensor:
        x = self.conv(h.transpose(1, 2))[..., : h.shape[1]].transpose(1, 2)
        return self.up(self.down(x)) * torch.exp(-self.a_log.exp() / len(self.a_log))


class Toy(nn.Module):
    def __init__(self, n: int, depth: int):
        super().__init__()
        self.emb = nn.Embedding(VOCAB, n)
        self.blocks = nn.ModuleList(Block(n) for _ in range(depth))
        self.pooler = nn.Linear(n, n)
        self.head = nn.Linear(n, VOCAB)

    def forward(self, idx: torch.Tensor) -> torch.Tensor:
        h = self.emb(idx)
        for b in self.blocks:
            h = h + b(h)
        return self.head(torch.tanh(self.pooler(h)))


@pytest.fixture(scope="module")
def cfgs(tmp_path_factory):
    folder = tmp_path_factory.mktemp("generated")
    kw = dict(base_width=BW, base_depth=BD, folder=folder, all_roles=True)
    return {
        "adamw": load_generated("adamw", None, 2, **kw),
        "muon-kimi+adamw": load_generated("muon-kimi", "adamw", 2, **kw),
    }


def _factor(optimizer: str, role: str, hp: str, r_n: int) -> float:
    """r_n^a for the derived width exponent ``a`` (the depth is the base depth here)."""
    return float(Fraction(r_n) ** derive(optimizer, 2, all_roles=True).rule(role, hp).r_n)


LR_AT_2X = {
    "rank_down_weight": 0.5,
    "rank_up_weight": 1.0,
    "hidden_vector": 1.0,
    "outer_weight": 0.5,
    "outer_bias": 1.0,
    "output_bias": 2.0,
}
"""Hand-derived lr factor at width 2× (tests/engine/test_roles.py::HAND, 2**a), the same for
AdamW and for Muon-Kimi on the block's fixed-rank factors (a hidden matrix's would be
1/√2 under Muon-Kimi)."""
FAMILIES = ["adamw", "muon-kimi+adamw"]


@pytest.mark.parametrize("family", FAMILIES)
def test_param_groups_carry_each_new_roles_numbers(cfgs, family):
    cfg = cfgs[family]
    width = 2 * BW
    model = Toy(width, BD)
    wd = {"default": 0.1, "output_bias": 0.1, "hidden_vector": 0.1, "outer_bias": 0.1}
    groups = cfg.param_groups(model, width, BD, lr=0.01, weight_decay=wd, patterns=PATTERNS)
    by_role = {g["role"]: g for g in groups}
    assert set(LR_AT_2X) <= set(by_role)
    hidden, _, others = family.partition("+")
    for role, factor in LR_AT_2X.items():
        g = by_role[role]
        trained_by = hidden if role.startswith("rank_") or not others else others
        assert g["optimizer"] == trained_by, role
        assert g["lr"] == pytest.approx(0.01 * factor, rel=1e-12), role
        assert g["weight_decay"] == pytest.approx(0.1 * _factor(trained_by, role, "weight_decay", 2)), role
        if trained_by == "adamw":  # ε: 1e-8 · 2^a (AdamW's ε of each role: 1/n at r_L = 1)
            assert g["eps"] == pytest.approx(1e-8 * _factor("adamw", role, "eps", 2)), role
    # AdamW's output bias: lr ×2, decay ÷2, ε ÷2 at twice the width
    assert by_role["output_bias"]["weight_decay"] == pytest.approx(0.05)
    assert by_role["output_bias"]["eps"] == pytest.approx(5e-9)


def _std(p: torch.Tensor) -> float:
    return float(p.detach().double().std())


@pytest.mark.parametrize("family", FAMILIES)
def test_init_gives_each_new_role_its_std_and_keeps_vectors(cfgs, family):
    cfg = cfgs[family]
    width = 4 * BW  # r_n = 4
    torch.manual_seed(0)
    model = Toy(width, BD)
    a_log = model.blocks[0].a_log.detach().clone()
    conv = model.blocks[0].conv.weight.detach().clone()
    cfg.init_(model, width, BD, init_std=0.02, patterns=PATTERNS)
    b = model.blocks[0]
    # the model's own values stay: A_log and a depthwise kernel (fan-in K = Θ(1))
    assert torch.equal(b.a_log, a_log) and torch.equal(b.conv.weight, conv)
    assert torch.count_nonzero(b.conv.bias) == 0  # a bias: 0 unless named
    assert torch.count_nonzero(model.head.bias) == 0 and torch.count_nonzero(model.pooler.bias) == 0
    assert _std(b.down.weight) == pytest.approx(0.02 / 4, rel=0.1)  # σ² ∝ 1/n²
    assert _std(b.up.weight) == pytest.approx(0.02, rel=0.1)  # σ² = Θ(1)
    assert _std(model.pooler.weight) == pytest.approx(0.02 / 2, rel=0.1)  # σ² ∝ 1/n
    # named: the output bias grows as r_n (α_out·b = Θ(1)), a vector is drawn
    named = {"default": 0.02, "output_bias": 0.02, "hidden_vector": 0.02}
    cfg.init_(model, width, BD, init_std=named, patterns=PATTERNS)
    assert _std(model.head.bias) == pytest.approx(0.02 * 4, rel=0.15)
    assert _std(b.a_log) == pytest.approx(0.02, rel=0.15)
    hp = cfg.hparams(width, BD, lr=0.01, init_std=named)
    assert hp["output_bias"]["init_std"] == pytest.approx(0.08)
    assert hp["rank_down_weight"]["init_std"] == pytest.approx(0.005)


def test_a_default_config_refuses_the_new_roles_in_one_line(tmp_path):
    cfg = load_generated("adamw", None, 2, base_width=BW, base_depth=BD, folder=tmp_path)
    assert "output_bias" not in cfg.RULES  # the default module is unchanged
    with pytest.raises(ValueError, match=r"^parameter 'blocks\.0\.a_log' has role hidden_vector, a role placed by its dimensions, .*--all-roles") as e:
        cfg.init_(Toy(BW, BD), BW, BD, patterns=PATTERNS)
    assert "\n" not in str(e.value)


def test_a_k1_config_refuses_a_fixed_rank_factor(tmp_path):
    cfg = load_generated(
        "adamw", None, 1, base_width=BW, base_depth=BD, folder=tmp_path, all_roles=True
    )
    model = Toy(BW, BD)
    with pytest.raises(ValueError, match=r"has role rank_down_weight, a fixed-rank factor.*--k 2"):
        cfg.init_(model, BW, BD, patterns=PATTERNS)
    with pytest.raises(ValueError, match=r"fixed-rank factor"):
        cfg.param_groups(model, BW, BD, lr=0.01, patterns=PATTERNS)


def test_plan_assigns_the_new_roles_like_the_paper_assigns_its_own():
    """The hidden optimizer takes the block's matrices (the fixed-rank factors too), the
    others optimizer everything outside the blocks and every vector."""
    p = plan("muon-kimi", "adamw", all_roles=True)
    assert {r: p.optimizers[r] for r in EXTRA} == {
        "output_bias": "adamw",
        "outer_weight": "adamw",
        "outer_bias": "adamw",
        "rank_down_weight": "muon-kimi",
        "normed_rank_down_weight": "muon-kimi",
        "rank_up_weight": "muon-kimi",
        "hidden_vector": "adamw",
    }
    assert p.uncovered == () and p.omitted == {}
    assert set(plan("muon-kimi", "adamw").optimizers) == set(ROLE_NAMES)  # default unchanged
    alone = plan("muon", all_roles=True)  # matrix-only: the vectors are left uncovered
    assert alone.uncovered == ("input_bias", "hidden_bias", "output_bias", "outer_bias", "hidden_vector")
    k1 = plan("muon-kimi", "adamw", k=1, all_roles=True)
    assert set(k1.omitted) == {"rank_down_weight", "normed_rank_down_weight", "rank_up_weight"}
    assert k1.uncovered == ()
    assert "derive with k ≥ 2" in k1.omitted["rank_up_weight"]


def test_the_runtime_tables_match_the_engine():
    """spectral.scaling is standard library only (vendored into modules): its role tables
    must say what the engine's roles say."""
    assert scaling.EXTRA_ROLES == tuple(r.name for r in EXTRA_ROLES)
    assert set(scaling.LAYER_OF) == {r.name for r in ALL_ROLES}
    assert all(scaling.LAYER_OF[r.name] == r.layer for r in ALL_ROLES)
    assert set(scaling.BIAS_ROLES) == {r.name for r in ALL_ROLES if r.is_bias}
    assert scaling.MIN_K == {r.name: r.min_k for r in ALL_ROLES if r.min_k > 1}


def test_transfer_and_codegen_cli_take_all_roles(capsys):
    args = ["--base-width", "64", "--base-depth", "2"]
    assert main(["transfer", "adamw", *args, "--width", "128", "--depth", "2", "--lr", "0.01",
                 "--init-std", "0.02", "--all-roles", "--format", "json"]) == 0
    hp = json.loads(capsys.readouterr().out)
    assert hp["output_bias"]["lr"] == pytest.approx(0.02) and hp["rank_down_weight"]["lr"] == 0.005
    assert main(["codegen", "muon-kimi", "--others", "adamw", *args, "--all-roles"]) == 0
    text = capsys.readouterr().out
    assert "--all-roles" in text.splitlines()[3] and '"rank_up_weight": "muon-kimi"' in text
