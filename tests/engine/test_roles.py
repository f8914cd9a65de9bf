"""The roles placed by their dimensions (docs/roles.md): derived and verified for every
optimizer of the catalog and every block depth, and pinned against hand derivations.

Hand derivation (k ≥ 2; every factor of a block has ‖·‖_R = Θ(1) at init, α_l = 1/L):

* ``rank_down_weight`` D (r × n): σ² = min(1, r/n)/n = 1/n²; ‖ΔD‖ = 1 (C2.2); ΔL = 1/L, so
  G = ΔL·sqrt(n_in/n_out)/‖ΔD‖ = √n/L. AdamW ‖A‖_R = n_in = n: lr 1/n, wd n, ε = G/√(n·1)
  = 1/L. Muon-Kimi ‖A‖_R = 0.2·√n·√n: lr 1/n, wd n.
* ``normed_rank_down_weight`` D_N (r × n) under a norm: the block sees N(D_N h), Θ(1) at
  init; N1.1 ‖D_N h‖ = σ√n = Θ(1), so σ² = 1/n and ‖D_N‖_R = σ·n = √n. The first-order
  term α_l ‖ΔN(D_N)‖ ‖W‖ = 1/L gives ‖ΔN(D_N)‖ = ‖ΔD_N h‖/‖D_N h‖ = 1, so ‖ΔD_N‖ = 1
  (N2.1) and G = √n/L, as for D: the same lr and ε; wd = ‖A‖/‖D_N‖ is √n smaller. AdamW:
  lr 1/n, wd √n, ε 1/L. Muon-Kimi: lr 1/n, wd √n.
* ``rank_up_weight`` U (n × r): σ² = min(1, n)/1 = 1; ‖ΔU‖ = 1; G = (1/L)/√n. AdamW ‖A‖_R = 1:
  lr 1, wd 1, ε = G/√n = 1/(nL). Muon-Kimi ‖A‖_R = 0.2·√n·sqrt(1/n) = 0.2: lr 1, wd 1.
* ``outer_weight`` W_o (n × n, outside the blocks, α_o = 1): σ² = 1/n, ‖ΔW_o‖ = 1, ΔL = 1,
  G = 1. AdamW lr 1/n, wd n, ε = 1/n; Muon-Kimi ‖A‖_R = 0.2√n: lr 1/√n, wd √n.
* ``outer_bias`` (n × 1, α_o = 1): ‖Δb‖ = 1, G = n^(-1/2): AdamW lr 1, wd 1, ε = G/√n = 1/n.
* ``output_bias`` b_{L+1} (d × 1 under α_{L+1} = 1/n): B1.1 ‖b‖ = n (σ² = n²); B2.1
  ‖Δb‖ = n; G = 1/n. AdamW ‖A‖_R = 1: lr n, wd = ‖A‖/‖b‖ = 1/n, ε = G = 1/n.
* ``hidden_vector`` (n × 1 in a branch): ``hidden_bias``'s rules, lr 1, ε 1/(nL) for AdamW.
"""

from __future__ import annotations

import json
from fractions import Fraction as F
from pathlib import Path

import pytest

from spectral import derive
from spectral.catalog import catalog
from spectral.cli import main
from spectral.engine.conditions import generate, term_formula
from spectral.engine.result import CONVENTIONS
from spectral.engine.roles import ALL_ROLES, EXTRA_ROLES, ROLE_NAMES, role
from spectral.engine.verify import check_terms

NAMES = sorted(catalog())
H = F(1, 2)

HAND: dict[str, dict[str, dict[str, tuple[F | int, F | int]]]] = {
    "adamw": {
        "output_bias": dict(multiplier=(-1, 0), init_var=(2, 0), lr=(1, 0), weight_decay=(-1, 0), eps=(-1, 0)),
        "outer_weight": dict(multiplier=(0, 0), init_var=(-1, 0), lr=(-1, 0), weight_decay=(1, 0), eps=(-1, 0)),
        "outer_bias": dict(multiplier=(0, 0), init_var=(0, 0), lr=(0, 0), weight_decay=(0, 0), eps=(-1, 0)),
        "rank_down_weight": dict(multiplier=(0, -1), init_var=(-2, 0), lr=(-1, 0), weight_decay=(1, 0), eps=(0, -1)),
        "normed_rank_down_weight": dict(multiplier=(0, -1), init_var=(-1, 0), lr=(-1, 0), weight_decay=(H, 0), eps=(0, -1)),
        "rank_up_weight": dict(multiplier=(0, -1), init_var=(0, 0), lr=(0, 0), weight_decay=(0, 0), eps=(-1, -1)),
        "hidden_vector": dict(multiplier=(0, -1), init_var=(0, 0), lr=(0, 0), weight_decay=(0, 0), eps=(-1, -1)),
    },
    "muon-kimi": {
        "outer_weight": dict(multiplier=(0, 0), init_var=(-1, 0), lr=(-H, 0), weight_decay=(H, 0)),
        "rank_down_weight": dict(multiplier=(0, -1), init_var=(-2, 0), lr=(-1, 0), weight_decay=(1, 0)),
        "normed_rank_down_weight": dict(multiplier=(0, -1), init_var=(-1, 0), lr=(-1, 0), weight_decay=(H, 0)),
        "rank_up_weight": dict(multiplier=(0, -1), init_var=(0, 0), lr=(0, 0), weight_decay=(0, 0)),
    },
}


def exponents(d, r: str) -> dict[str, tuple[F, F]]:
    return {hp: (e.r_n, e.r_L) for hp, e in d.rules[r].items()}


@pytest.mark.parametrize("optimizer", sorted(HAND))
def test_hand_derived_exponents(optimizer):
    d = derive(optimizer, 2, all_roles=True)
    for r, want in HAND[optimizer].items():
        assert exponents(d, r) == {hp: (F(a), F(b)) for hp, (a, b) in want.items()}, r
    # Muon-Kimi trains matrices only: the vector roles go to --others
    if optimizer == "muon-kimi":
        assert not {"output_bias", "outer_bias", "hidden_vector"} & set(d.roles)


@pytest.mark.parametrize("k", [1, 2, 3])
@pytest.mark.parametrize("name", NAMES)
def test_every_new_role_is_derived_and_every_term_holds(name, k):
    d = derive(name, k, all_roles=True)
    omitted = dict(d.omitted)
    for r in EXTRA_ROLES:
        if r.is_bias and not d.spec.applies_to_biases:  # out of the declaration's scope
            assert r.name not in d.roles and r.name not in omitted
        elif k < r.min_k:  # said so, never silently
            assert r.name not in d.roles
            assert omitted[r.name].startswith(f"not derived at k = {k}: a fixed-rank factor")
        else:
            assert r.name in d.roles and set(d.rules[r.name]) == set(d.hps), r.name
    assert list(d.roles) == [r for r in (*ROLE_NAMES, *(x.name for x in EXTRA_ROLES)) if r in d.roles]
    # every term, listed one by one (the oracle), holds; the factor-by-factor check agrees
    oracle = check_terms(d, enumerate_subsets=True)
    fast = check_terms(d)
    assert not oracle.failing and not fast.failing
    assert oracle.counts == fast.counts
    roles = tuple(r for r in ALL_ROLES if r.name in d.roles)
    terms = list(generate(k, roles))
    a, b = term_formula(roles)
    assert len(terms) == a + b * 2**k
    assert len(terms) == sum(n for label, n in oracle.counts.items() if label not in CONVENTIONS)
    # each role is a factor of some init term and some update term
    for r in d.roles:
        assert {c.kind for c in terms if any(f.role == r for f in c.factors)} == {"init", "update"}, r


@pytest.mark.parametrize("k", [1, 2, 3])
@pytest.mark.parametrize("name", NAMES)
def test_laws_between_roles(name, k):
    """Shapes with the same place and dimensions get the same rules, whatever the optimizer."""
    d = derive(name, k, all_roles=True)
    rules = {r: exponents(d, r) for r in d.roles}
    if "hidden_bias" in rules:  # an n-vector in a branch: hidden_vector is hidden_bias
        assert rules["hidden_vector"] == rules["hidden_bias"]
        assert rules["outer_bias"] == rules["input_bias"]  # an n-vector outside, α = Θ(1)
        assert rules["output_bias"]["multiplier"] == rules["output_weight"]["multiplier"]
    # outside the blocks, applied once: no multiplier to apply, whatever the optimizer
    assert rules["outer_weight"]["multiplier"] == (0, 0)
    if k >= 2:  # width → fixed in a block: the router's rules, its own multiplier aside
        down = {hp: e for hp, e in rules["rank_down_weight"].items() if hp != "multiplier"}
        assert down == {hp: e for hp, e in rules["router_weight"].items() if hp != "multiplier"}
        assert rules["rank_down_weight"]["multiplier"] == rules["hidden_weight"]["multiplier"]
        assert rules["rank_up_weight"]["multiplier"] == rules["hidden_weight"]["multiplier"]
        assert derive(name, 3, all_roles=True).rules["rank_up_weight"] == d.rules["rank_up_weight"]
        # a norm reading it: the init variance 1/n (N1.1: the norm's input Θ(1)) instead of
        # 1/n², so ‖D_N‖ is √n larger and the weight decay (Δ2) √n smaller; the step, the
        # gradient and so the lr and ε are the rank-down map's, whatever the optimizer
        normed, plain = rules["normed_rank_down_weight"], rules["rank_down_weight"]
        shift = {"init_var": (F(1), F(0)), "weight_decay": (-H, F(0))}
        for hp, (a, b) in plain.items():
            da, db = shift.get(hp, (F(0), F(0)))
            assert normed[hp] == (a + da, b + db), (name, hp)


def test_the_default_set_is_unchanged():
    """Without all_roles a derivation has the paper's roles and the router, as before."""
    for name in NAMES:
        assert set(derive(name, 2).roles) <= set(ROLE_NAMES)
    assert derive("adamw", 2).verification_summary.startswith("3 + 6·2^k = 27 condition terms")


def test_output_bias_effect_on_the_logits_is_width_independent():
    """α_{L+1}·(lr of the bias) is Θ(1) for AdamW (a sign-like step moves each entry by lr);
    as input_bias (lr Θ(1)) the effect would shrink as 1/n, the failure of issue 26."""
    d = derive("adamw", 2, all_roles=True)
    alpha, lr = d.rule("output_bias", "multiplier"), d.rule("output_bias", "lr")
    assert alpha.r_n + lr.r_n == 0 and alpha.r_L + lr.r_L == 0
    assert alpha.r_n + d.rule("input_bias", "lr").r_n == -1


def test_cli_json_lists_the_new_roles_and_what_it_omits(capsys):
    assert main(["derive", "adamw", "--all-roles", "--format", "json"]) == 0
    data = json.loads(capsys.readouterr().out)
    assert list(data["rules"]) == [r.name for r in ALL_ROLES]
    assert data["rules"]["output_bias"]["lr"] == {"r_n": "1", "r_L": "0"}
    assert "omitted" not in data
    assert main(["derive", "muon-kimi", "--k", "1", "--all-roles", "--format", "json"]) == 0
    data = json.loads(capsys.readouterr().out)
    assert "rank_up_weight" not in data["rules"]
    assert set(data["omitted"]) == {"rank_down_weight", "normed_rank_down_weight", "rank_up_weight"}
    assert "derive with k ≥ 2" in data["omitted"]["rank_up_weight"]


@pytest.mark.parametrize("optimizer", sorted(HAND))
def test_cli_json_lists_the_new_roles_by_default(optimizer, capsys):
    """`spectral derive OPTIMIZER --format json`, without --all-roles, lists every role a
    model may need with its hand-derived exponents, verified: the top-level flag and, with
    --explain, every check group (their terms include the new roles'); --all-roles there is
    a no-op, byte for byte. Muon-Kimi updates matrices only: its vectors (output_bias,
    outer_bias, hidden_vector) are the other optimizer's in a hybrid."""
    assert main(["derive", optimizer, "--format", "json"]) == 0
    text = capsys.readouterr().out
    data = json.loads(text)
    assert data["verified"] is True and "omitted" not in data
    listed = set(derive(optimizer, 2).roles) | set(HAND[optimizer])  # the paper's, the new
    assert list(data["rules"]) == [r.name for r in ALL_ROLES if r.name in listed]
    for name, hps in HAND[optimizer].items():
        assert {
            hp: (F(e["r_n"]), F(e["r_L"])) for hp, e in data["rules"][name].items()
        } == {hp: (F(a), F(b)) for hp, (a, b) in hps.items()}, name
    assert main(["derive", optimizer, "--format", "json", "--all-roles"]) == 0
    assert capsys.readouterr().out == text
    assert main(["derive", optimizer, "--format", "json", "--explain"]) == 0
    explain = json.loads(capsys.readouterr().out)["explain"]
    assert explain["checks"] and all(c["holds"] for c in explain["checks"])
    cited = {e["role"] for e in explain["entries"] if e["condition"]}
    assert set(HAND[optimizer]) <= cited


GOLDEN = Path(__file__).parents[1] / "golden"


@pytest.mark.parametrize(("optimizer", "k"), [("adamw", 2), ("muon-kimi", 1)])
def test_cli_tables_stay_the_papers(optimizer, k, tmp_path, capsys):
    """The human formats of `spectral derive` are byte for byte the golden files, which
    hold the paper's roles and the router only (written before the roles placed by their
    dimensions existed, and unchanged since)."""
    argv = ["derive", optimizer, "--k", str(k)]
    for fmt, suffix in (("markdown", "md"), ("latex", "tex")):
        assert main([*argv, "--format", fmt]) == 0
        assert capsys.readouterr().out == (GOLDEN / f"{optimizer}-k{k}.{suffix}").read_text(
            encoding="utf-8"
        )
    out = tmp_path / "table.txt"  # -o: plain text at 120 columns, as the golden's console
    assert main([*argv, "--format", "table", "-o", str(out)]) == 0
    text = out.read_text(encoding="utf-8")
    assert text == (GOLDEN / f"{optimizer}-k{k}.table.txt").read_text(encoding="utf-8")
    assert not any(r.name in text for r in EXTRA_ROLES)


@pytest.mark.parametrize("fmt", ["table", "markdown", "latex"])
def test_rendered_tables_name_what_is_omitted(fmt, capsys):
    assert main(["derive", "adamw", "--k", "1", "--all-roles", "--format", fmt]) == 0
    out = capsys.readouterr().out
    assert "rank" in out and "not derived at k = 1" in " ".join(out.split())


def test_roles_are_described_by_their_dimensions():
    n, one = role("hidden_weight").n_in, role("input_weight").n_in
    assert (role("rank_down_weight").n_in, role("rank_down_weight").n_out) == (n, one)
    assert (role("rank_up_weight").n_in, role("rank_up_weight").n_out) == (one, n)
    assert role("output_bias").layer == "output" and role("output_bias").is_bias
    assert not role("output_bias").readout and role("output_weight").readout
    assert role("outer_weight").layer == "outer" and not role("outer_weight").in_block
    assert role("hidden_vector").in_block and role("hidden_vector").is_bias


def test_role_for_places_every_role_by_its_dimensions():
    """role_for is the table of docs/roles.md: each role once, with the dimensions and
    the kind its own declaration has; a shape no role holds is one line."""
    from spectral.engine.roles import _BY_SHAPE, _NORMED, role_for

    assert sorted([*_BY_SHAPE.values(), *_NORMED.values()]) == sorted(r.name for r in ALL_ROLES)
    n = role("hidden_weight").n_in
    for (where, kind, in_grows, out_grows), name in _BY_SHAPE.items():
        r = role(name)
        assert role_for(where, kind, in_grows, out_grows) == name
        assert (r.n_in == n, r.n_out == n) == (in_grows, out_grows), name
        assert r.is_bias == (kind != "matrix"), name
        assert r.in_block == (where in ("branch", "router")), name
        # a norm reading the output changes the rules of a rank-down map only: every other
        # map's output is Θ(1) at init already
        normed = role_for(where, kind, in_grows, out_grows, normed=True)
        assert normed == _NORMED.get(name, name) and role(normed).normed == (name in _NORMED)
        assert (role(normed).n_in, role(normed).n_out) == (r.n_in, r.n_out)
    with pytest.raises(ValueError, match=r"^no role for a matrix of shape r × r .* in the branch;"):
        role_for("branch", "matrix", False, False)
    with pytest.raises(ValueError, match="r × n"):
        role_for("outside", "matrix", True, False)  # width → fixed outside: a readout
