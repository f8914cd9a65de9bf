"""spectral.transfer: role assignment of hybrids and the concrete numbers (no torch)."""

from __future__ import annotations

import math
from fractions import Fraction

import pytest

from spectral import derive
from spectral.catalog import catalog
from spectral.errors import SpecError
from spectral.scaling import BaseValues
from spectral.transfer import DEFAULT_EPS, hparams, plan, scale_rules

PAIRS = [(256, 4), (512, 4), (2048, 32), (96, 3), (1000, 7)]


def _power(x: Fraction, e: Fraction) -> float:
    """``x**e`` from the exact rational power ``x**numerator``, then a root: independent
    of the float exponents the code under test uses."""
    return float(x**e.numerator) ** (1 / e.denominator)


def expected(opt: str, role: str, hp: str, base: float, w: int, d: int, bw=256, bd=4) -> float:
    e = derive(opt, 2).rule(role, hp)
    return base * _power(Fraction(w, bw), e.r_n) * _power(Fraction(d, bd), e.r_L)


def test_hybrid_assignment_follows_the_paper():
    """The hidden optimizer takes the matrices inside the blocks (the router too: see
    docs/router.md), the others optimizer the embeddings, the head and every vector."""
    p = plan("muon-kimi", "adamw")
    assert p.optimizers == {
        "input_weight": "adamw",
        "hidden_weight": "muon-kimi",
        "output_weight": "adamw",
        "router_weight": "muon-kimi",
        "input_bias": "adamw",
        "hidden_bias": "adamw",
    }
    assert p.uncovered == ()
    assert p.label == "muon-kimi+adamw"


def test_matrix_only_without_others_leaves_biases_uncovered():
    p = plan("muon")
    assert set(p.optimizers) == {"input_weight", "hidden_weight", "output_weight", "router_weight"}
    assert set(p.optimizers.values()) == {"muon"}
    assert p.uncovered == ("input_bias", "hidden_bias")


def test_all_roles_optimizer_alone_takes_everything():
    p = plan("adamw")
    assert set(p.optimizers.values()) == {"adamw"} and len(p.optimizers) == 6


def test_others_equal_to_hidden_is_refused():
    with pytest.raises(SpecError, match="itself"):
        plan("adamw", "adamw")


@pytest.mark.parametrize("opt", list(catalog()))
@pytest.mark.parametrize("w,d", PAIRS)
def test_hparams_equal_engine_rules_times_base(opt, w, d):
    p = plan(opt)
    hp = hparams(
        p, 256, 4, w, d, lr=0.01, init_std=0.02, weight_decay=0.1, eps=1e-8, multiplier=2.0
    )
    d2 = derive(opt, 2)
    assert set(hp) == set(d2.roles)
    for role in d2.roles:
        got = hp[role]
        assert math.isclose(got["lr"], expected(opt, role, "lr", 0.01, w, d), rel_tol=1e-12)
        bias = role.endswith("_bias")  # biases and norm gains: no decay, zero init by default
        wd = 0.0 if bias else expected(opt, role, "weight_decay", 0.1, w, d)
        assert math.isclose(got["weight_decay"], wd, rel_tol=1e-12)
        assert math.isclose(
            got["multiplier"], expected(opt, role, "multiplier", 2.0, w, d), rel_tol=1e-12
        )
        var = 0.0 if bias else expected(opt, role, "init_var", 0.02**2, w, d)
        assert math.isclose(got["init_std"], math.sqrt(var), rel_tol=1e-12)
        if d2.spec.has_eps:
            assert math.isclose(got["eps"], expected(opt, role, "eps", 1e-8, w, d), rel_tol=1e-12)
        else:
            assert "eps" not in got


def test_base_model_returns_base_values():
    hp = hparams(plan("muon-kimi", "adamw"), 256, 4, 256, 4, lr=3e-3, init_std=0.02)
    for role, v in hp.items():
        std = 0.0 if role.endswith("_bias") else 0.02
        assert v["lr"] == 3e-3 and v["init_std"] == std and v["multiplier"] == 1.0, role


def test_per_optimizer_base_values_and_default_eps():
    p = plan("muon", "adamw")
    hp = hparams(p, 256, 4, 1024, 16, lr={"muon": 0.02, "adamw": 3e-4}, init_std=0.02)
    assert hp["hidden_weight"]["lr"] == pytest.approx(0.02)  # Muon hidden lr is width-free
    assert hp["input_weight"]["lr"] == pytest.approx(3e-4)
    assert hp["input_weight"]["eps"] == pytest.approx(DEFAULT_EPS["adamw"] / 4)
    assert "eps" not in hp["hidden_weight"]
    with pytest.raises(ValueError, match="no value for input_weight"):
        hparams(p, 256, 4, 1024, 16, lr={"muon": 0.02}, init_std=0.02)


def test_paper_example_muon_kimi_adamw():
    hp = hparams(plan("muon-kimi", "adamw"), 256, 4, 2048, 32, lr=0.01, init_std=0.02)
    h = hp["hidden_weight"]
    assert h["multiplier"] == pytest.approx(1 / 8)  # α/r_L
    assert h["lr"] == pytest.approx(0.01 / math.sqrt(8))  # η/√r_n
    assert h["init_std"] == pytest.approx(0.02 / math.sqrt(8))  # σ²/r_n
    assert hp["output_weight"]["multiplier"] == pytest.approx(1 / 8)  # α/r_n
    assert hp["hidden_bias"]["eps"] == pytest.approx(1e-8 / 64)  # ε/(r_n r_L)


def test_bad_sizes_and_missing_eps_default():
    with pytest.raises(ValueError, match="positive"):
        scale_rules({}, {}, 256, 4, 0, 4, BaseValues(lr=1.0, init_std=1.0))
    rules = {
        "hidden_weight": {
            hp: (0.0, 0.0) for hp in ("multiplier", "init_var", "lr", "weight_decay", "eps")
        }
    }
    with pytest.raises(ValueError, match="pass eps"):
        scale_rules({"hidden_weight": "mine"}, rules, 1, 1, 2, 2, BaseValues(lr=1.0, init_std=1.0))
    out = scale_rules(
        {"hidden_weight": "mine"}, rules, 1, 1, 2, 2, BaseValues(lr=1.0, init_std=1.0, eps=1e-3)
    )
    assert out["hidden_weight"]["eps"] == 1e-3


def test_base_values_are_one_checked_object():
    assert BaseValues.of({"lr": 0.1}).given() == {"lr": 0.1}
    assert BaseValues.of({"lr": 0.1, "weight_decay": 0.2}).weight_decay == 0.2
    with pytest.raises(TypeError, match="unknown keyword.s. weight_deacy; the base values are lr"):
        BaseValues.of({"lr": 0.1, "weight_deacy": 0.1}, "hparams")
    with pytest.raises(TypeError, match="missing the base value lr"):
        scale_rules({}, {}, 1, 1, 1, 1, BaseValues())
