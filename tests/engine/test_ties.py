"""Tied embeddings, decided by the engine: input_weight and output_weight may share one
matrix when every rule but the multiplier (applied in the forward pass) is the same."""

from __future__ import annotations

import json
from fractions import Fraction as F

import pytest

from spectral import catalog, derive
from spectral.cli import main

H = F(1, 2)


@pytest.mark.parametrize("k", [1, 2])
@pytest.mark.parametrize("name", sorted(catalog()))
def test_tie_verdict_is_the_comparison_of_the_json_rules(name, k):
    """Independently of ``tie_differences``: compare the two roles' JSON rules."""
    d = derive(name, k=k)
    doc = d.to_dict()
    a, b = doc["rules"]["input_weight"], doc["rules"]["output_weight"]
    differ = [hp for hp in a if hp != "multiplier" and a[hp] != b.get(hp)]
    assert doc["tie_embeddings"] == {
        "allowed": not differ,
        "differences": [
            {"hp": hp, "input_weight": a[hp], "output_weight": b[hp]} for hp in differ
        ],
    }
    assert d.tie_allowed == (not differ)
    # the multiplier always differs (α_0 = Θ(1), α_{L+1} = Θ(1/n)): it is not a reason
    assert a["multiplier"] != b["multiplier"]


def test_eighteen_of_twenty_one_allow_ties():
    refused = {name for name in catalog() for k in (1, 2) if not derive(name, k=k).tie_allowed}
    assert len(catalog()) == 21
    assert refused == {"sso", "scion", "normuon"}


@pytest.mark.parametrize(
    "name,lr,wd",
    [
        # update size n⁰ whichever way the matrix is read: lr n⁰ (input) vs n¹ (output)
        ("sso", ((0, 0), (1, 0)), ((0, 0), (-1, 0))),
        ("scion", ((0, 0), (1, 0)), ((0, 0), (-1, 0))),
        # rows equalised: Θ(1) on the tall input matrix, Muon's √(n_in/n_out) on the wide output
        ("normuon", ((0, 0), (H, 0)), ((0, 0), (-H, 0))),
    ],
)
@pytest.mark.parametrize("k", [1, 2])
def test_refusals_name_the_entries_that_differ(name, lr, wd, k):
    got = {
        t.hp: ((t.input_weight.r_n, t.input_weight.r_L), (t.output_weight.r_n, t.output_weight.r_L))
        for t in derive(name, k=k).tie_differences()
    }
    as_f = lambda pair: tuple((F(a), F(b)) for a, b in pair)  # noqa: E731
    assert got == {"lr": as_f(lr), "weight_decay": as_f(wd)}


def test_cli_json_has_the_field(capsys):
    assert main(["derive", "sso", "--format", "json"]) == 0
    tie = json.loads(capsys.readouterr().out)["tie_embeddings"]
    assert tie["allowed"] is False
    assert [d["hp"] for d in tie["differences"]] == ["lr", "weight_decay"]
    assert main(["derive", "muon-kimi", "--format", "json"]) == 0
    assert json.loads(capsys.readouterr().out)["tie_embeddings"] == {"allowed": True, "differences": []}
