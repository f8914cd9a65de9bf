"""``spectral infer``: declarations measured from real implementations derive the catalog's rules.

Small width ranges (64..256) keep every inference to a few seconds; the full default range
(64..512) is what docs/catalog.md reports.
"""

from __future__ import annotations

import doctest
import json
from fractions import Fraction

import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("pytorch_optimizer")

import spectral.infer  # noqa: E402
from spectral import SpecError, derive  # noqa: E402
from spectral.cli import main  # noqa: E402
from spectral.infer import infer, load_target, round_exponent  # noqa: E402

WIDTHS = (64, 128, 256)
SMALL = (64, 96, 128, 192)
"""For Shampoo, whose matrix roots make 256 the costly width, and NorMuon's CLI test (its
Newton-Schulz the same: 29 s over 64..256, 12 s here, loaded; the same declaration, every
role's interval containing its rounded exponent: input [-0.07, 0.11] -> 0, hidden
[-0.02, 0.10] -> 0, output [0.43, 0.55] -> 1/2, against [-0.03, 0.07], [-0.02, 0.10] and
[0.47, 0.53] over 64..256)."""


@pytest.fixture(autouse=True)
def _float32_newton_schulz(monkeypatch):
    """torch.optim.Muon's and pytorch-optimizer's NorMuon's Newton-Schulz in float32
    (tests/float32_muon.py): what is inferred is an exponent in n (a rational, rounded from a
    fit over widths 64..256), which bfloat16's ~1e-2 relative rounding does not move, and the
    bfloat16 iteration was two thirds of a Muon inference's time on this CPU (14.5 of 21.8 s,
    cProfile)."""
    import pytorch_optimizer.optimizer.muon.normuon as normuon
    import torch.optim._muon as muon
    from float32_muon import newton_schulz_float32

    monkeypatch.setattr(muon, "_zeropower_via_newtonschulz", newton_schulz_float32)
    bfloat16_iteration = normuon.zero_power_via_newton_schulz_5

    def float32_iteration(g, *args, **kwargs):
        return bfloat16_iteration(g, *args, **{**kwargs, "dtype": torch.float32})

    monkeypatch.setattr(normuon, "zero_power_via_newton_schulz_5", float32_iteration)


def rules(optimizer) -> dict:
    return derive(optimizer, k=2).to_dict()["rules"]


def run(target: str, kwargs: dict | None = None, **kw):
    kw.setdefault("widths", SMALL if target.endswith("Shampoo") else WIDTHS)
    return infer(load_target(target, kwargs), **kw)


# ------------------------------------------------------------------------------------
# the five the issue names: the inferred declaration derives the catalog's rules
# ------------------------------------------------------------------------------------

SAME = [
    ("torch.optim.AdamW", None, "adamw", "auto", "n_in", "G/(sqrt(n_in)*sqrt(n_out))"),
    ("torch.optim.SGD", None, "sgd", "auto", "G*sqrt(n_in)/sqrt(n_out)", None),
    (
        "torch.optim.Muon",
        {"adjust_lr_fn": "match_rms_adamw"},
        "muon-kimi",
        "auto",
        "n_in/sqrt(min(n_in, n_out))",
        None,
    ),
    ("pytorch_optimizer.Lion", None, "lion", "auto", "n_in", None),
    ("pytorch_optimizer.Shampoo", None, "shampoo", "matrices", "sqrt(n_in)/sqrt(n_out)", "G**2"),
]


@pytest.mark.slow  # measures real implementations across widths
@pytest.mark.parametrize(
    "target,kwargs,name,scope,update_norm,eps", SAME, ids=[c[2] for c in SAME]
)
def test_inferred_declaration_derives_the_catalog_rules(target, kwargs, name, scope, update_norm, eps):
    res = run(target, kwargs, applies_to=scope)
    assert res.fits, res.explain()
    assert res.update_norm == update_norm
    assert (res.eps.expression if res.eps else None) == eps
    assert rules(res.spec()) == rules(name)


@pytest.mark.slow  # seconds on the 2-core CPU: out of pytest -m "not slow"
def test_cli_adamw_toml_derives_like_the_catalog(tmp_path, capsys):
    out, js = tmp_path / "adamw.toml", tmp_path / "adamw.json"
    argv = ["infer", "torch.optim.AdamW", "-o", str(out), "--json", str(js), "--quiet"]
    assert main([*argv, "--widths", "64,128,256"]) == 0
    text = out.read_text(encoding="utf-8")
    assert text.startswith("# Inferred by `spectral infer torch.optim.AdamW`")
    assert 'update_norm = "n_in"\n' in text and 'eps_key = "eps"\n' in text
    capsys.readouterr()
    assert main(["derive", "--spec", str(out), "--format", "json"]) == 0
    # the JSON lists every role, those placed by their dimensions too
    expected = derive("adamw", k=2, all_roles=True).to_dict()["rules"]
    assert json.loads(capsys.readouterr().out)["rules"] == expected
    data = json.loads(js.read_text(encoding="utf-8"))
    assert data["fits"] is True and data["update_norm"] == "n_in"
    hidden = data["roles"]["hidden_weight"]["n"]
    assert hidden["rounded"] == "1" and hidden["interval"][0] < 1 < hidden["interval"][1]
    assert data["eps"]["n"]["hidden_weight"]["rounded"] == "-1"
    assert data["eps"]["G"]["rounded"] == "1"
    # an existing file is refused before a minute of measuring
    assert main([*argv, "--widths", "64,128,256"]) == 2
    assert "exists; pass --force" in capsys.readouterr().err


@pytest.mark.slow  # measures across widths
def test_cli_group_keys_normuon(tmp_path, capsys):
    """NorMuon steps only groups with use_muon=True (the others with its own AdamW at
    adamw_lr); --group sets it, and the inferred declaration derives the catalog's rules."""
    out = tmp_path / "normuon.toml"
    argv = ["infer", "pytorch_optimizer.NorMuon", "--group", '{"use_muon": true}', "-o", str(out)]
    widths = ",".join(map(str, SMALL))
    assert main([*argv, "--applies-to", "matrices", "--widths", widths, "--quiet"]) == 0
    text = out.read_text(encoding="utf-8")
    assert "param group use_muon=True" in text
    assert 'update_norm = "sqrt(n_in)/sqrt(min(n_in, n_out))"' in text
    from spectral.engine.spec_file import load_spec

    assert rules(load_spec(out)) == rules("normuon")


@pytest.mark.slow  # measures across widths
def test_shampoo_biases_measure_consistently_so_auto_covers_them():
    """pytorch-optimizer's Shampoo on a vector steps by g/‖g‖ — the n × 1 case of its matrix
    step — so the measurement extends to biases; the catalog (the paper) declares matrices."""
    res = run("pytorch_optimizer.Shampoo", eps=None)
    assert res.fits and res.applies_to == "all"
    inferred, catalog = rules(res.spec()), rules("shampoo")
    assert {r: v for r, v in inferred.items() if r in catalog} == {
        r: {hp: e for hp, e in v.items() if hp != "eps"} for r, v in catalog.items()
    }
    assert set(inferred) - set(catalog) == {"input_bias", "hidden_bias"}


@pytest.mark.slow  # measures across widths
def test_torch_muon_default_departs_on_the_input_layer():
    """torch's adjust_lr_fn='original' scales lr by sqrt(max(1, n_out/n_in)): the idealised
    Muon's input-layer step ‖A‖_R = sqrt(d0/n) becomes Θ(1), and only that rule differs."""
    res = run("torch.optim.Muon")
    assert res.fits and res.update_norm == "sqrt(n_in)/sqrt(min(n_in, n_out))"
    assert res.eps is not None and res.eps.expression is None and "inert" in res.eps.why
    inferred, catalog = rules(res.spec()), rules("muon")
    differ = {
        (r, hp) for r in catalog for hp in catalog[r] if inferred[r][hp] != catalog[r][hp]
    }
    assert differ == {("input_weight", "lr"), ("input_weight", "weight_decay")}
    assert inferred["input_weight"]["lr"] == {"r_n": "0", "r_L": "0"}


# ------------------------------------------------------------------------------------
# no single declaration: say why, with the numbers
# ------------------------------------------------------------------------------------


@pytest.mark.slow  # seconds on the 2-core CPU: out of pytest -m "not slow"
def test_lamb_trust_ratio_is_refused_with_numbers():
    res = run("pytorch_optimizer.Lamb")
    assert not res.fits and res.update_norm is None
    with pytest.raises(SpecError, match="no single declaration fits"):
        res.toml()
    (weights,) = [p for p in res.problems if "depends on the weights" in p]
    assert "scaling W by 4 scaled ‖ΔW‖_R by ×" in weights and "‖W‖^0.9" in weights
    assert "trust ratio" in weights


@pytest.mark.slow  # seconds on the 2-core CPU: out of pytest -m "not slow"
def test_prodigy_self_adapting_lr_is_refused_with_numbers(tmp_path, capsys):
    js = tmp_path / "prodigy.json"
    argv = ["infer", "pytorch_optimizer.Prodigy", "--widths", "64,128,256", "--quiet"]
    assert main([*argv, "--json", str(js)]) == 1
    err = capsys.readouterr().err
    assert err.startswith("error: pytorch_optimizer.Prodigy: no single declaration fits")
    assert "not proportional to the learning rate: lr ×4 changed ‖ΔW‖_R/lr by ×" in err
    assert "Prodigy" in err and "Traceback" not in err
    data = json.loads(js.read_text(encoding="utf-8"))
    assert data["fits"] is False and data["spec"] is None and data["problems"]
    assert data["roles"]["hidden_weight"]["lr_exponent"] > 0.5  # ‖ΔW‖ ∝ lr^{>1.5}


@pytest.mark.slow  # seconds on the 2-core CPU: out of pytest -m "not slow"
def test_torch_adafactor_relative_step_is_weight_dependent():
    res = run("torch.optim.Adafactor", eps=None)
    assert not res.fits
    assert any("depends on the weights" in p and "×4" in p for p in res.problems)
    # eps2 = 1 turns the relative step off (the generated module's default): no weight
    # dependence is left (the factored second moment is sign-like only for rank-1 gradients,
    # so its exponents at rank 4 drift across widths: see docs/catalog.md)
    off = run("torch.optim.Adafactor", {"eps": [None, 1.0]}, eps=None)
    assert not any("depends on the weights" in p for p in off.problems)
    assert all(abs(r.weight) < 0.1 for r in off.roles)


# ------------------------------------------------------------------------------------
# pieces
# ------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "value,low,high,expected",
    [
        (0.994, 0.964, 1.024, Fraction(1)),
        (-0.488, -0.573, -0.404, Fraction(-1, 2)),
        (0.33, 0.30, 0.36, Fraction(1, 3)),
        (0.37, 0.35, 0.39, None),
        (0.5, 0.1, 0.9, None),
        (float("nan"), 0.0, 1.0, None),
    ],
)
def test_round_exponent(value, low, high, expected):
    assert round_exponent(value, low, high) == expected


def test_doctests():
    import importlib
    import pkgutil

    failures = tried = 0
    for info in pkgutil.iter_modules(spectral.infer.__path__):  # the package's modules
        f, t = doctest.testmod(importlib.import_module(f"spectral.infer.{info.name}"))
        failures, tried = failures + f, tried + t
    assert failures == 0 and tried >= 5


def test_norm_is_the_probes():
    from spectral.infer import rms_norm
    from spectral.measure.probe import rms_operator_norm

    gen = torch.Generator().manual_seed(0)
    for shape in [(96, 32), (32, 96), (80, 80), (50,)]:
        m = torch.randn(shape, generator=gen, dtype=torch.float64)
        assert rms_norm(m, torch) == pytest.approx(rms_operator_norm(m, torch), rel=1e-6)


@pytest.mark.parametrize(
    "argv,message",
    [
        (["nosuchpackage.Opt"], "nosuchpackage.Opt: no module named 'nosuchpackage'"),
        (["torch.optim.AdamWW"], "torch.optim has no attribute 'AdamWW'; its optimizers: "),
        (["torch.nn.Linear"], "torch.nn.Linear: a type, not a torch.optim.Optimizer subclass"),
        (["AdamW"], "expected MODULE.CLASS"),
        (["torch.optim.AdamW", "--kwargs", "[1]"], "--kwargs: expected a JSON object"),
        (["torch.optim.AdamW", "--kwargs", "{bad"], "--kwargs: not valid JSON"),
        (["torch.optim.AdamW", "--kwargs", '{"bogus": 1}'], "takes no argument 'bogus'"),
        (["torch.optim.AdamW", "--kwargs", '{"lr": 1}'], "the measurement sets it"),
        (["torch.optim.AdamW", "--eps", "nosuch", "--widths", "64,128,256"], "has no argument 'nosuch'"),
        (["torch.optim.AdamW", "--widths", "16,64,128"], "all larger than d0 = 32"),
        (["torch.optim.AdamW", "--kwargs", '{"betas": 3}'], "torch.optim.AdamW("),
    ],
)
def test_bad_input_is_one_line(argv, message, capsys):
    assert main(["infer", *argv, "--quiet"]) == 2
    err = capsys.readouterr().err
    assert err.startswith("error: ") and err.count("\n") == 1 and "Traceback" not in err, err
    assert message in err, err
