"""Checking an optimizer the catalog does not know: ``--spec FILE.toml --factory MODULE:FN``.

The user optimizer is signum (sign of momentum): ``pytorch_optimizer.SignSGD``. Its step
``sign(m)`` on a low-rank gradient is an ``n_out × n_in`` sign pattern of spectral norm
``Θ(sqrt(n_in n_out))``, so ``‖ΔW‖_R = sqrt(n_in / n_out) · ‖ΔW‖_2 = Θ(n_in)``: declared
``update_norm = "n_in"`` (exponent 1 for hidden and output weights, 0 for the input weight
and the biases). A declaration wrong by ``n^½`` must fail the probe, naming both exponents.
"""

from __future__ import annotations

import json
import sys
import textwrap

import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("pytorch_optimizer")

from spectral.cli import main  # noqa: E402
from spectral.errors import SpecError  # noqa: E402
from spectral.engine.spec_file import load_spec  # noqa: E402

# generated (also run on the --vendor form): only the tests that load a generated module
# (coord-check does; probe measures the optimizer alone)

FACTORY = textwrap.dedent(
    """
    import pytorch_optimizer

    CALLS = []

    def make_signum(groups, **kwargs):
        opt = pytorch_optimizer.SignSGD(groups, **kwargs)
        CALLS.append(type(opt).__name__)
        return opt

    def boom(groups, **kwargs):
        raise RuntimeError("no optimizer today\\nsecond line")

    def not_an_optimizer(groups, **kwargs):
        return [groups]

    NOT_CALLABLE = 3
    """
)

SIGNUM = 'name = "signum"\nupdate_norm = "n_in"\napplies_to = "all"\n'
SIGNUM_WRONG = 'name = "signum"\nupdate_norm = "sqrt(n_in)"\napplies_to = "all"\n'
WIDTHS = "64,128,256,512"


@pytest.fixture
def files(tmp_path, monkeypatch):
    """``signum.toml``, ``wrong.toml`` and an importable factory module in ``tmp_path``."""
    module = f"user_factory_{tmp_path.name.replace('-', '_')}"
    (tmp_path / f"{module}.py").write_text(FACTORY)
    (tmp_path / "signum.toml").write_text(SIGNUM)
    (tmp_path / "wrong.toml").write_text(SIGNUM_WRONG)
    monkeypatch.syspath_prepend(str(tmp_path))
    yield tmp_path, module
    sys.modules.pop(module, None)


def _one_line_error(capsys, match: str) -> str:
    err = capsys.readouterr().err
    assert err.startswith("error: ") and err.count("\n") == 1, err
    assert "Traceback" not in err
    assert match in err, err
    return err


# --------------------------------------------------------------------------------------
# spectral probe
# --------------------------------------------------------------------------------------


@pytest.mark.slow  # probes across widths
def test_probe_signum_spec_with_factory_passes(files, capsys):
    tmp, module = files
    out = tmp / "probe.json"
    factory = f"{tmp / (module + '.py')}:make_signum"  # a path to a .py file
    argv = ["probe", "--spec", str(tmp / "signum.toml"), "--factory", factory]
    rc = main([*argv, "--widths", WIDTHS, "--json", str(out), "--quiet"])
    data = json.loads(out.read_text())
    assert rc == 0 and data["pass"] is True
    assert data["optimizer"] == "signum"
    assert data["implementation"].endswith(":make_signum")
    rows = {r["role"]: r for r in data["rows"]}
    assert list(rows) == [
        "input_weight",
        "hidden_weight",
        "output_weight",
        "input_bias",
        "hidden_bias",
    ]
    expected = {
        "input_weight": 0.0,
        "hidden_weight": 1.0,
        "output_weight": 1.0,
        "input_bias": 0.0,
        "hidden_bias": 0.0,
    }
    for role, exponent in expected.items():
        assert rows[role]["declared"] == exponent
        assert rows[role]["measured"] == pytest.approx(exponent, abs=0.05)
    assert "measured: signum = " in capsys.readouterr().out


@pytest.mark.slow  # probes across widths
def test_probe_signum_declared_wrong_by_half_fails(files, capsys):
    tmp, module = files
    out = tmp / "probe.json"
    rc = main(
        [
            "probe",
            "--spec",
            str(tmp / "wrong.toml"),
            "--factory",
            f"{module}:make_signum",  # a dotted module on sys.path
            "--widths",
            WIDTHS,
            "--json",
            str(out),
            "--quiet",
        ]
    )
    assert rc == 1
    text = capsys.readouterr().out
    rows = {r["role"]: r for r in json.loads(out.read_text())["rows"]}
    hidden = rows["hidden_weight"]
    assert hidden["declared"] == 0.5 and hidden["pass"] is False
    assert hidden["measured"] == pytest.approx(1.0, abs=0.05)
    assert f"{hidden['declared']:+.2f}" in text and f"{hidden['measured']:+.3f}" in text
    assert "FAIL" in text
    assert rows["input_weight"]["pass"] and not rows["output_weight"]["pass"]
    assert sys.modules[module].CALLS  # the user's factory built what was measured


@pytest.mark.slow  # probes across widths
def test_probe_factory_replaces_a_catalog_implementation(files):
    """lion declares ``n_in`` too; measured through the user's factory, not Lion."""
    from spectral.measure.probe import probe

    _, module = files
    __import__(module)
    calls = sys.modules[module].CALLS
    res = probe("lion", factory=sys.modules[module].make_signum, widths=(64, 128, 256))
    assert res.implementation == f"{module}:make_signum"
    assert res.passed and len(calls) == 5 * 3


def test_probe_spec_of_a_catalog_name_uses_its_implementation(tmp_path):
    """A spec named like a catalog optimizer, without --factory: the built-in one runs,
    and the spec's (here deliberately wrong) declaration is what it is compared with."""
    (tmp_path / "adamw.toml").write_text('name = "adamw"\nupdate_norm = "n_in * n_out"\n')
    out = tmp_path / "p.json"
    argv = ["probe", "--spec", str(tmp_path / "adamw.toml"), "--widths", "64,128"]
    rc = main([*argv, "--json", str(out), "--quiet"])
    data = json.loads(out.read_text())
    assert data["implementation"] == "torch.optim.AdamW"
    rows = {r["role"]: r for r in data["rows"]}
    assert rows["hidden_weight"]["declared"] == 2.0
    assert rows["input_weight"]["declared"] == 1.0
    assert rc == 1


# --------------------------------------------------------------------------------------
# spectral coord-check
# --------------------------------------------------------------------------------------


@pytest.mark.generated
@pytest.mark.slow  # seconds on the 2-core CPU: out of pytest -m "not slow"
def test_coord_check_signum_spec_with_factory(files):
    tmp, module = files
    out = tmp / "cc.json"
    rc = main(
        [
            "coord-check",
            "--spec",
            str(tmp / "signum.toml"),
            "--factory",
            f"{module}:make_signum",
            "--widths",
            "32,64",
            "--depths",
            "2,4",
            "--steps",
            "2",
            "--seeds",
            "1",
            "--parameterizations",
            "mup",
            "--json",
            str(out),
            "--plots",
            str(tmp),
            "--quiet",
        ]
    )
    assert rc == 0
    data = json.loads(out.read_text())
    cfg = data["config"]
    assert cfg["optimizer"] == "signum" and cfg["others"] is None
    assert cfg["spec"] == {"name": "signum", "update_norm": "n_in", "applies_to": "all"}
    assert cfg["factory"] == f"{module}:make_signum"
    keys = {(s["parameterization"], s["axis"], s["metric"]) for s in data["slopes"]}
    assert keys == {("mup", a, m) for a in ("width", "depth") for m in ("h", "delta_h")}
    assert all(isinstance(s["slope"], float) for s in data["slopes"])
    # one model per point: mup x (2 widths + 2 depths) x 1 seed, each with the user's SignSGD
    assert sys.modules[module].CALLS == ["SignSGD"] * 4
    assert len(data["points"]) == 4 * 3
    assert (tmp / "mlp-signum-width.png").stat().st_size > 0


@pytest.mark.generated
def test_coord_check_user_spec_gets_the_rules_of_its_declaration(files):
    """signum declares what lion declares, so every parameter gets lion's lr; only the
    implementation (the user's) differs."""
    from spectral.coordcheck import CoordCheckConfig, build

    tmp, module = files
    __import__(module)
    mod = sys.modules[module]
    spec = load_spec(tmp / "signum.toml")
    sizes = {"widths": (16, 64), "depths": (1, 4), "lr": 0.01}
    user = build(CoordCheckConfig(spec=spec, factory=mod.make_signum, **sizes), "mup", 64, 4, 0)
    lion = build(CoordCheckConfig(optimizer="lion", **sizes), "mup", 64, 4, 0)
    assert user.hparams.keys() == lion.hparams.keys()
    for name, h in user.hparams.items():
        assert h["optimizer"] == "signum"
        assert h["lr"] == pytest.approx(lion.hparams[name]["lr"])
    # n_in, like adamw: the hidden lr falls like 1/r_n (r_n = 64/16, r_L = 4/1)
    assert user.hparams["blocks.0.layers.0.weight"]["lr"] == pytest.approx(0.01 / 4)
    assert mod.CALLS == ["SignSGD"]


@pytest.mark.generated
def test_coord_check_factory_replaces_a_catalog_implementation(files):
    from spectral.coordcheck import CoordCheckConfig, build

    _, module = files
    __import__(module)
    mod = sys.modules[module]
    cfg = CoordCheckConfig(
        optimizer="lion", factory=mod.make_signum, widths=(16, 32), depths=(1, 2)
    )
    s = build(cfg, "mup", 32, 2, 0)
    assert mod.CALLS == ["SignSGD"]
    assert {h["optimizer"] for h in s.hparams.values()} == {"lion"}
    assert cfg.to_dict()["factory"] == f"{module}:make_signum"


@pytest.mark.generated
def test_load_generated_keeps_a_user_spec_apart_from_the_catalog(tmp_path):
    from spectral.codegen import load_generated

    user = load_spec(_write(tmp_path, "adamw.toml", 'name = "adamw"\nupdate_norm = "n_in"\n'))
    kw = {"base_width": 16, "base_depth": 1, "folder": tmp_path / "gen"}
    mod_user = load_generated(user, None, 2, **kw)
    mod_cat = load_generated("adamw", None, 2, **kw)
    assert mod_user is not mod_cat
    assert mod_user.__file__ != mod_cat.__file__
    assert load_generated(user, None, 2, **kw) is mod_user  # cached per spec


def _write(folder, name: str, text: str):
    path = folder / name
    path.write_text(text)
    return path


# --------------------------------------------------------------------------------------
# bad input: exit 2, one line, no traceback
# --------------------------------------------------------------------------------------


@pytest.mark.generated
@pytest.mark.parametrize(
    ("factory", "match"),
    [
        ("nosuchmodule_spectral_test:fn", "no module named 'nosuchmodule_spectral_test'"),
        ("{module}:missing", "has no attribute 'missing'; its callables: boom, make_signum"),
        ("{module}", "expected MODULE:CALLABLE"),
        ("{module}:NOT_CALLABLE", "NOT_CALLABLE is a int, not a callable"),
        ("no/such/file.py:fn", "no such file no/such/file.py"),
        ("{module}:boom", "raised RuntimeError: no optimizer today"),
        ("{module}:not_an_optimizer", "returned list, not a torch.optim.Optimizer"),
    ],
)
@pytest.mark.parametrize("command", ["probe", "coord-check"])
def test_bad_factory_is_a_one_line_error(files, capsys, command, factory, match):
    tmp, module = files
    spec = str(tmp / "signum.toml")
    argv = [command, "--spec", spec, "--factory", factory.format(module=module)]
    small = ["--widths", "64,128"]
    if command == "coord-check":
        small += ["--depths", "1,2", "--steps", "1", "--seeds", "1"]
    assert main([*argv, *small, "--quiet"]) == 2
    _one_line_error(capsys, match)


@pytest.mark.parametrize("command", ["probe", "coord-check"])
def test_missing_spec_file_is_a_one_line_error(files, capsys, command):
    tmp, module = files
    argv = [command, "--spec", str(tmp / "nope.toml"), "--factory", f"{module}:make_signum"]
    assert main([*argv, "--quiet"]) == 2
    _one_line_error(capsys, "nope.toml: no such file")


@pytest.mark.parametrize(
    ("command", "match"),
    [
        ("probe", "declares 'signum', which has no built-in implementation; pass --factory"),
        ("coord-check", "'signum' is not a catalog declaration"),
    ],
)
def test_user_spec_without_factory_is_a_one_line_error(files, capsys, command, match):
    tmp, _ = files
    assert main([command, "--spec", str(tmp / "signum.toml"), "--quiet"]) == 2
    _one_line_error(capsys, match)


@pytest.mark.parametrize(
    ("argv", "match"),
    [
        (["probe", "adamw", "--spec", "{tmp}/signum.toml"], "give OPTIMIZER or --spec"),
        (["probe", "adamw", "lion", "--factory", "{module}:make_signum"], "one OPTIMIZER"),
        (["probe", "all", "--factory", "{module}:make_signum"], "one OPTIMIZER"),
        (["probe"], "name an OPTIMIZER (or 'all'), or give --spec"),
        (["coord-check", "--optimizer", "adamw", "--spec", "{tmp}/signum.toml"], "not both"),
    ],
)
def test_inconsistent_options(files, capsys, argv, match):
    tmp, module = files
    assert main([a.format(tmp=tmp, module=module) for a in argv] + ["--quiet"]) == 2
    _one_line_error(capsys, match)


def test_library_errors_name_the_factory():
    from spectral.coordcheck import CoordCheckConfig
    from spectral.measure.probe import probe

    def boom(groups, **kwargs):
        raise ValueError("bad lr")

    with pytest.raises(SpecError, match=r"factory .*boom raised ValueError: bad lr"):
        probe("adamw", factory=boom, widths=(64, 128))
    with pytest.raises(SpecError, match="factory must be callable, got int"):
        CoordCheckConfig(factory=3)
