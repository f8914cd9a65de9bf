"""Rules along the horizon D and the batch B: the laws, the timescale identity, declarations."""

from __future__ import annotations

from fractions import Fraction

import pytest
import sympy as sp

from spectral import SpecError, derive
from spectral.catalog import catalog
from spectral.engine.axes import ADAM_SDE, HORIZON, LINEAR_BATCH, SQRT_BATCH, axis_rules, laws
from spectral.engine.spec_file import load_spec
from spectral.spec import Law, OptimizerSpec
from spectral.symbols import G, n_in, n_out

NAMES = sorted(catalog())


def _rules(d, role):
    return {a.hp: a for a in d.along(role)}


@pytest.mark.parametrize("name", NAMES)
def test_weight_decay_keeps_the_timescale_exactly(name):
    # τ = B/(ηλD): η·λ·D/B is r_D^(h + w + 1) r_B^(c + v - 1); both exponents are exactly 0
    d = derive(name, k=2, all_roles=True)
    assert d.roles
    for r in d.roles:
        a = _rules(d, r)
        lr, wd = a["lr"], a["weight_decay"]
        assert isinstance(lr.horizon, Fraction) and isinstance(wd.batch, Fraction)
        assert lr.horizon + wd.horizon + 1 == 0
        assert lr.batch + wd.batch - 1 == 0
        assert ("eps" in a) == d.spec.has_eps
        assert list(a) == [h for h in ("lr", "weight_decay", "eps", "momentum") if h in a]


@pytest.mark.parametrize(
    ("name", "lr", "wd", "eps", "momentum"),
    [
        # Malladi et al.'s square-root rule for Adam: η √κ, ε/√κ, 1 - β times κ
        ("adamw", ("-8/25", "1/2"), ("-17/25", "1/2"), ("0", "-1/2"), ("0", "1")),
        ("adam", ("-8/25", "1/2"), ("-17/25", "1/2"), ("0", "-1/2"), ("0", "1")),
        # SGD: linear in B, so weight decay does not move with B at all
        ("sgd", ("-8/25", "1"), ("-17/25", "0"), None, ("0", "0")),
        ("muon", ("-8/25", "1/2"), ("-17/25", "1/2"), None, ("0", "0")),
        ("lion", ("-8/25", "1/2"), ("-17/25", "1/2"), None, ("0", "0")),
    ],
)
def test_known_rules(name, lr, wd, eps, momentum):
    a = _rules(derive(name), "hidden_weight")
    pair = lambda x: (str(x.horizon), str(x.batch))  # noqa: E731
    assert pair(a["lr"]) == lr and pair(a["weight_decay"]) == wd
    assert pair(a["momentum"]) == momentum
    assert (pair(a["eps"]) if "eps" in a else None) == (eps if eps else None)


def test_defaults_and_what_is_assumed():
    cat = catalog()
    # declared from their own literature: not assumptions
    assert laws(cat["adamw"])[1] is ADAM_SDE[0] and not ADAM_SDE[0].assumed
    assert not laws(cat["sgd"])[1].assumed and not laws(cat["muon"])[0].assumed
    # the rest: the defaults, marked assumed, by the update's degree in the gradient
    assert laws(cat["lion"]) == (HORIZON, SQRT_BATCH) and SQRT_BATCH.assumed
    assert laws(cat["adamw"])[0] is HORIZON and HORIZON.assumed
    assert HORIZON.exponent == sp.Rational(-8, 25)
    sgd_like = OptimizerSpec(name="sgd-like", update_norm=sp.sqrt(n_in / n_out) * G)
    assert laws(sgd_like)[1] is LINEAR_BATCH
    basis = _rules(derive("lion"), "hidden_weight")["lr"].basis
    assert "assumed" in basis and "2409.19913" in basis and "2205.10287" in basis
    assert _rules(derive("lion"), "hidden_weight")["momentum"].basis == "held"


def test_a_law_with_no_default_is_held_and_said_so():
    # not homogeneous in G: no batch rule of thumb applies, lr is held along B
    spec = OptimizerSpec(name="odd", update_norm=n_in + G)
    assert laws(spec)[1] is None
    (lr, wd, m) = axis_rules(spec, ("hidden_weight",))
    assert lr.batch == 0 and "held" in lr.basis and wd.batch == 1 and m.batch == 0


def test_law_validation():
    with pytest.raises(SpecError, match="exact rational"):
        Law(0.5, "x")  # type: ignore[arg-type]
    with pytest.raises(SpecError, match="exact rational"):
        Law(sp.Rational(9, 2), "x")
    with pytest.raises(SpecError, match="source"):
        Law(sp.Rational(1, 2), " ")
    assert Law(1, "x").exponent == sp.Integer(1)
    with pytest.raises(SpecError, match="eps_batch: only meaningful"):
        OptimizerSpec(name="e", update_norm=n_in, eps_batch=Law(1, "x"))
    with pytest.raises(SpecError, match="lr_batch: expected a Law"):
        OptimizerSpec(name="e", update_norm=n_in, lr_batch=0.5)  # type: ignore[arg-type]


def test_spec_file_declares_laws(tmp_path):
    path = tmp_path / "my.toml"
    path.write_text(
        """
name = "my-adam"
update_norm = "n_in"
eps = "G / sqrt(n_in * n_out)"

[lr_horizon]
exponent = "-0.25"
source = "measured: spectral sweep --steps"

[lr_batch]
exponent = "1/2"
source = "Malladi et al. 2022"
assumed = true

[momentum_batch]
exponent = 1
source = "Malladi et al. 2022"
""",
        encoding="utf-8",
    )
    spec = load_spec(path)
    assert spec.lr_horizon == Law(sp.Rational(-1, 4), "measured: spectral sweep --steps")
    assert spec.lr_batch is not None and spec.lr_batch.assumed
    a = _rules(derive(spec), "hidden_weight")
    assert (a["lr"].horizon, a["weight_decay"].horizon) == (Fraction(-1, 4), Fraction(-3, 4))
    assert a["momentum"].batch == 1 and a["eps"].batch == 0 and a["eps"].basis == "held"


@pytest.mark.parametrize(
    ("table", "words"),
    [
        ('exponent = "x"\nsource = "s"', "lr_horizon.exponent: 'x' must be a fraction"),
        ('exponent = "1e-99999999"\nsource = "s"', "must be a fraction"),
        ('exponent = "9/2"\nsource = "s"', "lr_horizon: law exponent"),
        ('exponent = "1/0"\nsource = "s"', "must be a fraction"),
        ('exponent = 0.5\nsource = "s"', "lr_horizon.exponent"),
        ('exponent = "1"', "lr_horizon.source: required field is missing"),
        ('exponent = "1"\nsource = "s"\nextra = 1', "lr_horizon.extra: unknown field"),
    ],
)
def test_bad_law_tables(tmp_path, table, words):
    path = tmp_path / "bad.toml"
    path.write_text(f'name = "b"\nupdate_norm = "n_in"\n[lr_horizon]\n{table}\n', encoding="utf-8")
    with pytest.raises(SpecError, match=f"^{str(path)}: ") as info:
        load_spec(path)
    assert words in str(info.value)
