"""`spectral codegen` and `spectral transfer` through the CLI entry point."""

from __future__ import annotations

import json

import pytest

from spectral.cli import main
from spectral.transfer import hparams, plan

# generated (also run on the --vendor form): only the codegen tests; transfer writes no module

BASE = ["--base-width", "256", "--base-depth", "4"]


@pytest.mark.generated
def test_codegen_writes_and_refuses_to_overwrite(tmp_path, capsys):
    out = tmp_path / "mup_config.py"
    assert main(["codegen", "muon-kimi", "--others", "adamw", *BASE, "-o", str(out)]) == 0
    text = out.read_text()
    assert "BASE_WIDTH = 256" in text and '"hidden_weight": "muon-kimi"' in text
    assert "spectral codegen muon-kimi --others adamw --k 2" in text
    out.write_text("# mine\n")
    capsys.readouterr()
    assert main(["codegen", "adamw", *BASE, "-o", str(out)]) == 2
    assert "exists" in capsys.readouterr().err
    assert out.read_text() == "# mine\n"
    assert main(["codegen", "adamw", *BASE, "-o", str(out), "--force"]) == 0
    assert '"hidden_weight": "adamw"' in out.read_text()


@pytest.mark.generated
def test_codegen_stdout_is_the_rendered_module(capsys):
    from spectral.codegen import render

    assert main(["codegen", "sgd", "--k", "3", *BASE]) == 0
    assert capsys.readouterr().out == render(
        "sgd",
        None,
        3,
        base_width=256,
        base_depth=4,
        command="spectral codegen sgd --k 3 --base-width 256 --base-depth 4",
    )


@pytest.mark.generated
def test_codegen_help_names_functions_the_module_defines():
    """Every name() the help text promises is a top-level function of the written module."""
    import ast
    import re

    from spectral.cli.codegen import CODEGEN_DESCRIPTION
    from spectral.codegen import render

    promised = set(re.findall(r"(\w+)\(\)", CODEGEN_DESCRIPTION))
    assert {"hparams", "apply_multipliers", "init_", "build_optimizers", "check"} <= promised
    tree = ast.parse(render("muon-kimi", "adamw", base_width=256, base_depth=4))
    defined = {n.name for n in tree.body if isinstance(n, ast.FunctionDef)} | {
        t.id
        for n in tree.body
        if isinstance(n, ast.Assign)
        for t in n.targets
        if isinstance(t, ast.Name)
    }
    assert promised <= defined


@pytest.mark.generated
def test_codegen_matrix_only_without_others_notes_it(tmp_path, capsys):
    assert main(["codegen", "muon", *BASE, "-o", str(tmp_path / "c.py")]) == 0
    assert "--others adamw" in capsys.readouterr().err


@pytest.mark.generated
def test_codegen_spec_file_in_either_slot(tmp_path, capsys):
    spec = tmp_path / "mine.toml"
    spec.write_text('name = "mine"\nupdate_norm = "n_in"\neps = "G / sqrt(n_in * n_out)"\n')
    out = tmp_path / "a.py"
    assert (
        main(["codegen", "muon", "--others", "mine", "--spec", str(spec), *BASE, "-o", str(out)])
        == 0
    )
    assert '"input_bias": "mine"' in out.read_text()
    out2 = tmp_path / "b.py"
    assert main(["codegen", "--spec", str(spec), "--others", "adamw", *BASE, "-o", str(out2)]) == 0
    assert '"hidden_weight": "mine"' in out2.read_text()
    capsys.readouterr()
    assert main(["codegen", "--others", "adamw", *BASE]) == 2
    assert "HIDDEN_OPT" in capsys.readouterr().err


def test_transfer_json_equals_hparams(capsys):
    args = ["transfer", "muon-kimi", "--others", "adamw", *BASE, "--width", "2048", "--depth", "32"]
    args += ["--lr", "0.01", "--init-std", "0.02", "--weight-decay", "0.1", "--format", "json"]
    assert main(args) == 0
    got = json.loads(capsys.readouterr().out)
    want = hparams(
        plan("muon-kimi", "adamw"), 256, 4, 2048, 32, lr=0.01, init_std=0.02, weight_decay=0.1
    )
    assert got == want
    # a plain weight decay / init std reaches the weights only: biases and norm gains get 0
    assert got["hidden_bias"]["weight_decay"] == got["input_bias"]["weight_decay"] == 0.0
    assert got["hidden_bias"]["init_std"] == got["input_bias"]["init_std"] == 0.0
    assert got["input_weight"]["weight_decay"] == 0.1


def test_transfer_per_role_values_json_equals_hparams(capsys):
    """Role, optimizer and default keys on every base value, and --d-in, reach hparams as
    given: the JSON is exactly what the generated module's hparams returns."""
    args = ["transfer", "muon-kimi", "--others", "adamw", *BASE, "--width", "1024", "--depth", "8"]
    args += ["--lr", "muon-kimi=0.02,default=3e-4,output_weight=1e-4"]
    args += ["--init-std", "default=0.02,output_weight=0,hidden_bias=0.01"]
    args += ["--weight-decay", "hidden_weight=0.1,default=0", "--eps", "default=1e-10"]
    args += ["--multiplier", "hidden=2,output_weight=0.5", "--d-in", "32", "--format", "json"]
    assert main(args) == 0
    got = json.loads(capsys.readouterr().out)
    want = hparams(
        plan("muon-kimi", "adamw"),
        256,
        4,
        1024,
        8,
        lr={"muon-kimi": 0.02, "default": 3e-4, "output_weight": 1e-4},
        init_std={"default": 0.02, "output_weight": 0.0, "hidden_bias": 0.01},
        weight_decay={"hidden_weight": 0.1, "default": 0.0},
        eps={"default": 1e-10},
        multiplier={"hidden": 2.0, "output_weight": 0.5},
        d_in=32,
    )
    assert got == want
    # spot values: the role keys win over optimizer keys over default
    no_dense = hparams(plan("muon-kimi", "adamw"), 256, 4, 1024, 8, lr=1.0, init_std=0.02)
    assert got["input_weight"]["init_std"] == no_dense["input_weight"]["init_std"] / 32**0.5
    assert got["output_weight"]["init_std"] == 0.0
    assert got["hidden_bias"]["init_std"] > 0.0 and got["input_bias"]["init_std"] == 0.0
    assert got["hidden_weight"]["weight_decay"] > 0.0
    assert [got[r]["weight_decay"] for r in got if r != "hidden_weight"] == [0.0] * 5
    assert got["output_weight"]["lr"] == 1e-4 * no_dense["output_weight"]["lr"]
    eps_plain = hparams(plan("muon-kimi", "adamw"), 256, 4, 1024, 8, lr=1.0, eps=1e-10)
    assert got["input_weight"]["eps"] == eps_plain["input_weight"]["eps"]


def test_transfer_per_optimizer_values_and_table(capsys):
    args = ["transfer", "muon", "--others", "adamw", *BASE, "--width", "1024", "--depth", "8"]
    args += ["--lr", "muon=0.02,adamw=3e-4", "--init-std", "0.02", "--eps", "adamw=1e-10"]
    assert main(args) == 0
    out = capsys.readouterr().out
    assert "muon+adamw, k = 2: (256, 4) → (1024, 8), r_n = 4, r_L = 2" in out
    hidden = next(line for line in out.splitlines() if line.startswith("hidden_weight"))
    assert hidden.split()[1:] == ["muon", "0.5", "0.01", "0.02", "0", "—"]
    inp = next(line for line in out.splitlines() if line.startswith("input_weight"))
    assert inp.split()[-1] == "2.5e-11"


def _row(out: str, role: str) -> list[str]:
    return next(line for line in out.splitlines() if line.startswith(role)).split()[1:]


def test_transfer_table_footnotes_the_input_std_without_d_in(capsys):
    """Without --d-in the input_weight std is an embedding's, marked and footnoted; with it
    the row holds σ/sqrt(d_in) and the footnote is gone."""
    args = ["transfer", "adamw", *BASE, "--width", "512", "--depth", "4"]
    args += ["--lr", "0.01", "--init-std", "0.02"]
    assert main(args) == 0
    out = capsys.readouterr().out
    assert _row(out, "input_weight")[2] == "0.02*"
    assert "* input_weight: an embedding is drawn with this std, a dense input layer with\n" in out
    assert "std/sqrt(d_in); pass --d-in N to print that number" in out
    assert main([*args, "--d-in", "16"]) == 0
    out = capsys.readouterr().out
    assert _row(out, "input_weight")[2] == "0.005" and "--d-in" not in out
    # bias roles print 0 init std and 0 weight decay by default, their lr as usual
    assert main([*args, "--weight-decay", "0.1"]) == 0
    out = capsys.readouterr().out
    assert _row(out, "hidden_bias")[2:5:2] == ["0", "0"]
    assert _row(out, "hidden_weight")[4] != "0"


@pytest.mark.parametrize(
    "extra,message",
    [
        (["--lr", "fast"], "expected a number"),
        (["--lr", "muon=0.02"], "error: lr: no value for input_weight (trained by adamw)"),
        (["--lr", "sgd=0.1,muon=1,adamw=1"], "error: --lr: unknown key(s) sgd; use roles ("),
        (
            ["--lr", "0.1", "--weight-decay", "hiden_weight=0.1"],
            "--weight-decay: unknown key(s) hiden_weight; use roles (input_weight, "
            "hidden_weight, output_weight, router_weight, input_bias, hidden_bias), optimizers used here "
            "(adamw, muon) or default",
        ),
        (["--lr", "0.1", "--multiplier", "inptu=2"], "layers (input, hidden, output)"),
        (["--lr", "0.1", "--width", "0"], "positive integer"),
        (["--lr", "0.1", "--d-in", "0"], "argument --d-in: expected a positive integer"),
        (["--lr", "-1"], "error: --lr: expected a number >= 0, got -1\n"),
        (["--lr=-1"], "error: --lr: expected a number >= 0, got -1\n"),
        (["--lr", "0.1", "--init-std=-0.02"], "error: --init-std: expected a number >= 0"),
        (
            ["--lr", "0.1", "--weight-decay", "hidden_weight=-0.1"],
            "error: --weight-decay: expected a number >= 0, got hidden_weight=-0.1\n",
        ),
        (["--lr", "0.1", "--eps", "adamw=-1e-8"], "--eps: expected a number >= 0"),
        (["--lr", "0.1,adamw=1"], "expected KEY=VALUE pairs"),
        (["--lr", "muon=1,MUON=2"], "muon is given twice"),
        (["--lr", "muon=inf,adamw=1"], "expected a finite number"),
    ],
)
def test_transfer_bad_input_exits_2(extra, message, capsys):
    args = ["transfer", "muon", "--others", "adamw", *BASE, "--width", "512", "--depth", "8"]
    args += ["--init-std", "0.02", *extra]
    assert main(args) == 2
    err = capsys.readouterr().err
    assert message in err
    assert "Traceback" not in err
    if err.startswith("error:"):  # our own checks: one line
        assert err.count("\n") == 1


def test_transfer_spec_with_eps_rule_needs_eps(tmp_path, capsys):
    """A --spec optimizer has no default ε: --eps must give one (any key that reaches it)."""
    spec = tmp_path / "mine.toml"
    spec.write_text('name = "mine"\nupdate_norm = "n_in"\neps = "G / sqrt(n_in * n_out)"\n')
    args = ["transfer", "--spec", str(spec), *BASE, "--width", "512", "--depth", "8"]
    args += ["--lr", "0.1", "--init-std", "0.02"]
    assert main(args) == 2
    assert capsys.readouterr().err == (
        "error: --eps: mine has an ε rule and no default ε is known for it; give its base "
        "value, e.g. --eps mine=1e-8\n"
    )
    from spectral.engine.spec_file import load_spec

    mine = plan("mine", catalog={"mine": load_spec(spec)})
    want = hparams(mine, 256, 4, 512, 8, lr=0.1, init_std=0.02, eps=1e-8)
    for eps in ("1e-8", "mine=1e-8", "default=1e-8"):
        assert main([*args, "--eps", eps, "--format", "json"]) == 0
        assert json.loads(capsys.readouterr().out) == want


@pytest.mark.parametrize(
    "options, message",
    [
        (
            ["--framework", "jax", "--absorb-multipliers"],
            "error: --absorb-multipliers applies to --framework torch only: the JAX runtime "
            "has no hook-free form (its model applies multipliers(width, depth) itself)\n",
        ),
        (
            ["--framework", "torchtitan", "--vendor"],
            "error: --vendor applies to --framework torch and jax only: the torchtitan module "
            "imports spectral.torch (pip install spectral-mup)\n",
        ),
        (
            ["--framework", "megatron", "--vendor"],
            "error: --vendor applies to --framework torch and jax only: the megatron module "
            "imports spectral.torch (pip install spectral-mup)\n",
        ),
    ],
    ids=["jax-absorb", "torchtitan-vendor", "megatron-vendor"],
)
def test_codegen_refuses_a_form_the_target_cannot_write(tmp_path, capsys, options, message):
    """A form the target has not got is a usage error (2) of one line, and no file is
    written: the JAX module has no hook-free form, the torchtitan one imports spectral."""
    out = tmp_path / "c.py"
    capsys.readouterr()
    assert main(["codegen", "adamw", *BASE, *options, "-o", str(out)]) == 2
    captured = capsys.readouterr()
    assert captured.err == message and captured.out == ""
    assert list(tmp_path.iterdir()) == []
    # the same refusal from Python (before anything is derived: an unknown name is not read)
    from spectral.codegen import render
    from spectral.errors import SpecError

    framework = options[1]
    kwargs = {"absorb": True} if framework == "jax" else {"vendor": True}
    with pytest.raises(SpecError) as info:
        render("no-such-optimizer", base_width=256, base_depth=4, framework=framework, **kwargs)
    assert str(info.value) == message.removeprefix("error: ").rstrip("\n")
