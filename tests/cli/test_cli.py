"""The command line: exit codes, output files, errors without tracebacks, lean imports."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

from spectral import catalog, derive, render
from spectral.cli import COMMANDS, main
from spectral.optimizers import MODULES


def run(*args: str, cwd=None, env=None) -> subprocess.CompletedProcess:
    full_env = {**os.environ, **(env or {})}
    return subprocess.run(
        [sys.executable, "-m", "spectral", *args],
        capture_output=True,
        text=True,
        encoding="utf-8",
        cwd=cwd,
        env=full_env,
        timeout=60,
        stdin=subprocess.DEVNULL,
    )


def bad_spec(tmp_path, body: str, name: str = "bad.toml"):
    path = tmp_path / name
    path.write_text(body, encoding="utf-8")
    return path


# --------------------------------------------------------------------------------------
# in-process (fast)
# --------------------------------------------------------------------------------------


@pytest.mark.parametrize("fmt", ["markdown", "latex", "json"])
def test_derive_prints_the_renderer_output(capsys, fmt):
    assert main(["derive", "adamw", "--k", "2", "--format", fmt]) == 0
    out = capsys.readouterr().out
    # JSON lists every role; the other formats the paper's tables
    assert out == render.render(derive("adamw", k=2, all_roles=fmt == "json"), fmt)


def test_derive_table_default(capsys):
    assert main(["derive", "muon-kimi"]) == 0
    out = capsys.readouterr().out
    assert "μP rules for muon-kimi (k = 2)" in out
    # four role columns at the default 80 columns: rich wraps "Hidden weights" in its header
    assert all(word in out for word in ("Hidden", "Router", "weights"))


def test_flags_reach_the_renderer(capsys):
    argv = ["derive", "sgd", "--k", "1", "--format", "latex", "--standalone", "--input-kind",
            "image", "--explain"]  # fmt: skip
    assert main(argv) == 0
    d = derive("sgd", k=1)
    assert capsys.readouterr().out == render.latex(
        d, standalone=True, explain=True, input_kind="image"
    )
    assert main(["derive", "sgd", "--format", "json", "--explain"]) == 0
    assert "explain" in json.loads(capsys.readouterr().out)


def test_list(capsys):
    assert main(["list", "--format", "json"]) == 0
    rows = json.loads(capsys.readouterr().out)
    assert [r["name"] for r in rows] == list(catalog())
    assert set(rows[0]) == {"name", "applies_to", "update_norm", "eps", "summary", "paper"}
    assert main(["list"]) == 0
    assert "adamw" in capsys.readouterr().out


@pytest.mark.parametrize(
    ("argv", "code", "words"),
    [
        (["derive", "nope"], 2, "known optimizers: adafactor, adam, adamw, adan"),
        (["derive", "adamw", "--k", "0"], 2, "k must be an integer from 1"),
        (["derive", "adamw", "--standalone"], 2, "--standalone applies only to --format latex"),
        (["derive"], 2, "one of the arguments"),
        (["derive", "adamw", "--spec", "x.toml"], 2, "not allowed with"),
        (["derive", "adamw", "--format", "html"], 2, "invalid choice"),
        (["frobnicate"], 2, "invalid choice"),
        ([], 2, "required"),
    ],
)
def test_usage_errors(capsys, argv, code, words):
    assert main(argv) == code
    err = capsys.readouterr().err
    assert words in err and "Traceback" not in err


def test_subcommands_are_registered():
    assert {"list", "derive"} <= set(COMMANDS)


@pytest.mark.parametrize("argv", [["--help"], ["-h", "derive"], ["--help", "sweep"]])
def test_top_level_help_lists_every_command(capsys, argv):
    """`spectral derive ...` builds derive's parser alone; the top-level help (asked before
    any command word) still lists them all."""
    assert main(argv) == 0
    out = capsys.readouterr().out
    assert out.startswith("usage: spectral [-h] COMMAND ...")
    listed = {line.split()[0] for line in out.splitlines() if line.startswith("    ") and line[4] != " "}
    assert listed == set(COMMANDS), out


@pytest.mark.parametrize(
    "argv",
    [
        ["derive", "adamw"],
        ["derive", "--spec", "x.toml", "--k", "3", "--format", "latex", "--standalone"],
        ["derive", "muon", "--all-roles", "--horizon", "--input-kind", "image", "-o", "t.md"],
        ["list", "--format", "json"],
    ],
)
def test_a_commands_own_parser_parses_as_the_whole_one(argv):
    from spectral.cli import build_parser

    alone = build_parser(argv[0], only=True)
    assert [a.dest for a in alone._subparsers._group_actions] == ["command"]  # type: ignore[union-attr]
    assert vars(alone.parse_args(argv)) == vars(build_parser().parse_args(argv))


def test_a_commands_help_is_the_same_alone(capsys):
    from spectral.cli import build_parser

    assert main(["derive", "--help"]) == 0
    alone = capsys.readouterr().out
    with pytest.raises(SystemExit):
        build_parser().parse_args(["derive", "--help"])
    assert capsys.readouterr().out == alone and "--all-roles" in alone


# --------------------------------------------------------------------------------------
# -o FILE
# --------------------------------------------------------------------------------------


def test_output_file_refuses_to_overwrite(tmp_path, capsys):
    out = tmp_path / "rules.json"
    out.write_text("keep me", encoding="utf-8")
    assert main(["derive", "adamw", "--format", "json", "-o", str(out)]) == 2
    assert "exists; pass --force" in capsys.readouterr().err
    assert out.read_text(encoding="utf-8") == "keep me"
    assert main(["derive", "adamw", "--format", "json", "-o", str(out), "--force"]) == 0
    expected = render.json_text(derive("adamw", k=2, all_roles=True))
    assert out.read_text(encoding="utf-8") == expected
    assert list(tmp_path.iterdir()) == [out], "no temporary files left behind"


def test_output_file_table_is_plain_text(tmp_path):
    out = tmp_path / "rules.txt"
    assert main(["derive", "shampoo", "-o", str(out)]) == 0
    text = out.read_text(encoding="utf-8")
    assert "Shampoo ε" in text and "\x1b[" not in text


@pytest.mark.slow  # seconds on the 2-core CPU: out of pytest -m "not slow"
def test_output_into_missing_folder(tmp_path, capsys):
    assert main(["derive", "adamw", "-o", str(tmp_path / "no" / "such.md")]) == 2
    assert "does not exist" in capsys.readouterr().err


# --------------------------------------------------------------------------------------
# subprocess: what a user sees
# --------------------------------------------------------------------------------------


@pytest.mark.slow  # seconds on the 2-core CPU: out of pytest -m "not slow"
def test_exit_codes_and_no_tracebacks(tmp_path):
    ok = run("derive", "adamw", "--format", "json")
    assert ok.returncode == 0
    assert json.loads(ok.stdout) == derive("adamw", k=2, all_roles=True).to_dict()

    unknown = run("derive", "adamw-typo")
    assert unknown.returncode == 2
    assert unknown.stderr.startswith("error: unknown optimizer 'adamw-typo'")
    for name in catalog():
        assert name in unknown.stderr

    incomparable = run(
        "derive", "--spec", str(bad_spec(tmp_path, 'name = "b"\nupdate_norm = "n_in + L"\n'))
    )
    assert incomparable.returncode == 1, incomparable.stderr
    assert (
        incomparable.stderr.startswith("error: ")
        and "not a single power of n and L" in incomparable.stderr
    )

    for p in (ok, unknown, incomparable):
        assert "Traceback" not in p.stderr


@pytest.mark.slow  # seconds on the 2-core CPU: out of pytest -m "not slow"
def test_bad_toml_names_file_and_field_and_runs_nothing(tmp_path):
    spec = bad_spec(
        tmp_path, "name = \"x\"\nupdate_norm = \"__import__('os').system('touch x')\"\n"
    )
    p = run("derive", "--spec", "bad.toml", cwd=tmp_path)
    assert p.returncode == 2
    assert p.stderr.startswith("error: bad.toml: update_norm: ")
    assert "Traceback" not in p.stderr
    assert sorted(f.name for f in tmp_path.iterdir()) == [spec.name], "nothing was created"

    bad_spec(tmp_path, 'name = "x"\nupdate_norm = "n_in"\nwat = 1\n', "extra.toml")
    p = run("derive", "--spec", "extra.toml", "--format", "json", cwd=tmp_path)
    assert p.returncode == 2 and p.stderr.startswith("error: extra.toml: wat: unknown field")
    assert "Traceback" not in p.stderr and p.stdout == ""


@pytest.mark.slow  # seconds on the 2-core CPU: out of pytest -m "not slow"
def test_unusual_spec_derives_end_to_end(tmp_path):
    bad_spec(
        tmp_path, 'name = "odd"\nupdate_norm = "n_in**(3/4) * max(1, n_out/n_in)"\n', "odd.toml"
    )
    p = run("derive", "--spec", "odd.toml", "--format", "markdown", "--explain", cwd=tmp_path)
    assert p.returncode == 0, p.stderr
    assert "μP rules for odd (k = 2) — verified:" in p.stdout and "r_n³ᐟ⁴" in p.stdout


# Never imported by the commands of the engine and the rules: the other commands' packages
# and the heavy libraries (a module counts with all its submodules).
NOT_FOR_THE_ENGINE = (
    "spectral.sweep", "spectral.coordcheck", "spectral.codegen", "spectral.cli.sweep",
    "spectral.cli.coord_check", "spectral.cli.check_widths", "spectral.cli.probe",
    "spectral.cli.infer", "spectral.cli.tokenize", "torch", "matplotlib", "numpy", "pydantic",
)
# deriving one catalog optimizer imports its declaration alone, not the other 20, and
# builds none of its implementation records (optimizers/entry.py); its JSON is json.dumps of
# data: no template (jinja2), no terminal (rich), no table layout
NOT_FOR_ADAMW = NOT_FOR_THE_ENGINE + tuple(
    f"spectral.optimizers.{m}" for m in MODULES if m != "adamw"
) + ("spectral.optimizers.entry", "jinja2", "rich", "spectral.templating", "spectral.render.layout")


@pytest.mark.parametrize(
    ("argv", "forbidden"),
    [
        (["derive", "adamw"], NOT_FOR_THE_ENGINE),
        (["derive", "adamw", "--format", "json"], NOT_FOR_ADAMW),
        (["list"], NOT_FOR_THE_ENGINE),
        # transfer's handlers share spectral/cli/codegen.py with codegen's; it must still not
        # import the code generator (spectral.codegen) or anything heavier
        (["transfer", "adamw", "--base-width", "8", "--base-depth", "2", "--width", "16",
          "--depth", "4", "--lr", "1", "--init-std", "1"], NOT_FOR_THE_ENGINE),
    ],
    ids=["derive", "derive-json", "list", "transfer"],
)
@pytest.mark.slow  # seconds on the 2-core CPU: out of pytest -m "not slow"
def test_engine_commands_import_no_heavy_modules(argv, forbidden):
    """The one check that the commands of the engine and the rules load only what they need:
    no other command's module (the registry imports a command's handlers only when it runs),
    no sweep, coordinate check or code generator, no torch, matplotlib, numpy or pydantic."""
    code = (
        "import contextlib, io, sys\n"
        "from spectral.cli import main\n"
        "with contextlib.redirect_stdout(io.StringIO()):\n"
        f"    rc = main({argv!r})\n"
        f"heavy = sorted(m for m in sys.modules if any(m == f or m.startswith(f + '.') for f in {forbidden!r}))\n"
        "sys.stderr.write('HEAVY=' + ','.join(heavy))\n"
        "sys.exit(rc)\n"
    )
    p = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert p.returncode == 0, p.stderr
    assert p.stderr.endswith("HEAVY="), p.stderr


@pytest.mark.parametrize("fmt", ["json", "latex", "table"])
@pytest.mark.slow  # seconds on the 2-core CPU: out of pytest -m "not slow"
def test_output_is_deterministic_across_hash_seeds(fmt):
    outs = {
        run("derive", "adamw", "--format", fmt, "--explain", env={"PYTHONHASHSEED": seed}).stdout
        for seed in ("0", "12345")
    }
    assert len(outs) == 1
