"""Hostile input: whatever a user types, the CLI answers with an exit code and one line.

Every case runs the real command line in-process (:func:`spectral.cli.main`) and asserts
the contract of the README: exit code 0, 1 (no rule exists) or 2 (bad input); on failure
exactly one ``error:`` line on standard error, no traceback, nothing on standard output,
no terminal control characters in what is printed; and the state of every file involved.
"""

from __future__ import annotations

import json
import os
import re
from pathlib import Path

import pytest

from spectral.cli import main

CONTROL = re.compile(r"[\x00-\x08\x0b-\x1f\x7f-\x9f\u200b-\u200f\u202a-\u202e\u2066-\u2069]")


def run(args: list[str], capsys) -> tuple[int, str, str]:
    code = main(args)
    out, err = capsys.readouterr()
    return code, out, err


def assert_contract(code: int, out: str, err: str, *, allowed=(0, 1, 2)) -> None:
    assert code in allowed, (code, err)
    assert "Traceback" not in err and "Traceback" not in out
    assert not CONTROL.search(err.replace("\n", "")), repr(err)
    if code != 0:
        lines = err.splitlines()
        assert len(lines) == 1 and lines[0].startswith("error: "), repr(err)
        assert out == ""


def spec_file(tmp_path: Path, body: str, name: str = "s.toml") -> Path:
    path = tmp_path / name
    path.write_text(body, encoding="utf-8")
    return path


def toml_string(text: str) -> str:
    """A TOML basic string holding ``text`` exactly."""
    out = []
    for ch in text:
        if ch in "\\\"" or ord(ch) < 0x20 or ord(ch) == 0x7F:
            out.append(f"\\u{ord(ch):04x}")
        else:
            out.append(ch)
    return '"' + "".join(out) + '"'


# --------------------------------------------------------------------------------------
# expressions (update_norm and eps of a spec file)
# --------------------------------------------------------------------------------------

EXPRESSIONS = [
    "__import__('os').system('touch pwned')",
    "eval('1')",
    "exec('x=1')",
    "open('/etc/passwd')",
    "lambda: 0",
    "n_in.__class__",
    "n_in.real",
    "n_in[0]",
    "[n_in]",
    "{n_in}",
    "{'a': n_in}",
    "(n_in, n_out)",
    "n_in if L else n_out",
    "n_in and n_out",
    "n_in or n_out",
    "not n_in",
    "n_in < n_out",
    "n_in == n_out",
    "~n_in",
    "n_in @ n_out",
    "n_in // 2",
    "n_in % 2",
    "n_in << 2",
    "n_in ^ 2",
    "n_in | 2",
    "n_in & 2",
    "n_in**n_in",
    "n_in**L",
    "n_in**1e9",
    "n_in**99",
    "n_in**(1/99)",
    "2**99999",
    "10**10**10",
    "(999**16)**16 * (999**16)**16 * (999**16)**16 * (999**16)**16 * (999**16)**16",
    "((999**16)**16)**16",
    "max(n_in, sqrt(-1))",
    "max(n_in, 0**-1)",
    "max(n_in, (-8)**(1/3))",
    "min(n_in, sqrt(-1))",
    "max(n_in, -1)",
    "1/0",
    "n_in/0",
    "0",
    "-1",
    "-n_in",
    "n_in - n_in",
    "n_in - n_out",
    "0*n_in",
    "sqrt(-n_in)",
    "sqrt(n_in - n_in)",
    "ｎ_in",
    "𝐧_in",
    "ℒ",
    "n_in * Ｌ",
    "n\u200b_in",
    "n_in\u202e",
    "n_in\x00",
    "\x1b[2Jn_in",
    "n_in\n+ L",
    "\ufeffn_in",
    "",
    " ",
    "(",
    ")",
    "n_in +",
    "** n_in",
    "sqrt()",
    "sqrt(n_in, n_out)",
    "sqrt(x=n_in)",
    "max(n_in)",
    "max()",
    "min(n_in)",
    "foo(n_in)",
    "n_in(1)",
    "n_in.max(1)",
    "x",
    "N_IN",
    "n",
    "nan",
    "inf",
    "1e400",
    "1e-400",
    "float('nan')",
    "1j",
    "None",
    "True",
    "...",
    "'n_in'",
    "b'n_in'",
    "f'{n_in}'",
    "n_in; n_out",
    "n_in = 1",
    "import os",
    "(" * 60 + "n_in" + ")" * 60,
    "n_in" + " * n_in" * 150,
    "n_in + " * 120 + "1",
    "9" * 500,
    "1e1000000",
    "0.1**16 * 0.1**16 * 0.1**16 * 0.1**16 * 0.1**16 * 0.1**16 * 0.1**16",
    "123456789",
    "1/1234567",
    "sqrt(n_in)**17",
    "n_in**-17",
    "n_in**(17/2)",
    "n_in**(1/17)",
    "n_in**(n_out/2)",
    "n_in**sqrt(2)",
    "n_in + L",
    "max(n_in, L)",
    "min(n_in, L) * G",
    "sqrt(n_in/n_out) * G",
    "n_in",
    "G",
    "max(1, n_out/n_in)",
    "0.2 * sqrt(max(n_in, n_out))",
]


@pytest.mark.parametrize("expr", EXPRESSIONS, ids=range(len(EXPRESSIONS)))
def test_hostile_expressions(expr, tmp_path, capsys, monkeypatch):
    monkeypatch.chdir(tmp_path)
    path = spec_file(tmp_path, f"name = \"x\"\nupdate_norm = {toml_string(expr)}\n")
    code, out, err = run(["derive", "--spec", str(path), "--format", "json"], capsys)
    assert_contract(code, out, err)
    if code == 0:
        json.loads(out)
    assert sorted(os.listdir(tmp_path)) == ["s.toml"]  # nothing created (no "pwned")


@pytest.mark.parametrize("expr", EXPRESSIONS[::3], ids=range(len(EXPRESSIONS[::3])))
def test_hostile_eps_expressions(expr, tmp_path, capsys):
    path = spec_file(tmp_path, f"name = \"x\"\nupdate_norm = \"n_in\"\neps = {toml_string(expr)}\n")
    code, out, err = run(["derive", "--spec", str(path)], capsys)
    assert_contract(code, out, err)


LOOK_ALIKES = ["ｎ_in", "𝐧_in", "ℒ", "n_in * Ｌ", "𝖦"]


@pytest.mark.parametrize("expr", LOOK_ALIKES)
def test_look_alike_letters_are_refused_with_their_code_point(expr, tmp_path, capsys):
    path = spec_file(tmp_path, f"name = \"x\"\nupdate_norm = {toml_string(expr)}\n")
    code, _, err = run(["derive", "--spec", str(path)], capsys)
    assert code == 2
    assert "expressions are ASCII" in err and ("\\u" in err or "\\U" in err)


# --------------------------------------------------------------------------------------
# spec files: fields, keys, labels, bytes
# --------------------------------------------------------------------------------------

SPEC_BODIES = [
    'name = "x"\nupdate_norm = "n_in"\n"\x1b[2J\x1b[31mevil" = 1\n',
    'name = "x"\nupdate_norm = "n_in"\n"a\\nerror: forged" = 1\n',
    'name = "x"\nupdate_norm = "n_in"\n"\\u202eevil" = 1\n',
    'name = "x"\nupdate_norm = "n_in"\nunknown = 1\n',
    'name = "x"\n',
    'update_norm = "n_in"\n',
    "",
    "\n\n",
    'name = 1\nupdate_norm = "n_in"\n',
    'name = "x"\nupdate_norm = 1\n',
    'name = "x"\nupdate_norm = ["n_in"]\n',
    'name = "x"\nupdate_norm = {a = 1}\n',
    'name = "x"\nupdate_norm = true\n',
    'name = "X Y"\nupdate_norm = "n_in"\n',
    'name = "../../etc/passwd"\nupdate_norm = "n_in"\n',
    'name = ""\nupdate_norm = "n_in"\n',
    f'name = "{"a" * 65}"\nupdate_norm = "n_in"\n',
    'name = "x\\u0000"\nupdate_norm = "n_in"\n',
    'name = "x"\nupdate_norm = "n_in"\napplies_to = "some"\n',
    'name = "x"\nupdate_norm = "n_in"\napplies_to = 1\n',
    'name = "x"\nupdate_norm = "n_in"\neps_label = "\\u0085"\n',
    'name = "x"\nupdate_norm = "n_in"\neps_label = "\\u202eesrever"\n',
    'name = "x"\nupdate_norm = "n_in"\neps_label = "\\u200b"\n',
    'name = "x"\nupdate_norm = "n_in"\neps_label = "a\\u2028b"\n',
    'name = "x"\nupdate_norm = "n_in"\neps_label = "\\u001b[31m"\n',
    'name = "x"\nupdate_norm = "n_in"\neps_label = ""\n',
    'name = "x"\nupdate_norm = "n_in"\neps_label = "   "\n',
    f'name = "x"\nupdate_norm = "n_in"\neps_label = "{"e" * 200}"\n',
    'name = "x"\nupdate_norm = "n_in"\nsummary = "\\u009b31m"\n',
    f'name = "x"\nupdate_norm = "n_in"\nsummary = "{"s" * 300}"\n',
    'name = "x"\nupdate_norm = "n_in"\nsummary = "---"\n',
    'name = "x"\nupdate_norm = "n_in"\nsummary = "- item"\n',
    'name = "x"\nupdate_norm = "n_in"\nsummary = "~~struck~~ $$x$$ <b>x</b> [l](u) # h"\n',
    'name = "x"\nupdate_norm = "n_in"\nsummary = "\\\\input{/etc/passwd}"\n',
    'name = "x"\nupdate_norm = "n_in"\neps_key = "a b"\neps = "1"\n',
    'name = "x"\nupdate_norm = "n_in"\neps_key = "lambda"\neps = "1"\n',
    'name = "x"\nupdate_norm = "n_in"\neps_index = -1\neps = "1"\n',
    'name = "x"\nupdate_norm = "n_in"\neps_index = 99\neps = "1"\n',
    'name = "x"\nupdate_norm = "n_in"\neps_index = "0"\neps = "1"\n',
    'name = "x"\nupdate_norm = "n_in"\neps_index = 0\n',
    'name = "x"\nupdate_norm = "n_in"\neps_key = "\\u001b"\neps = "1"\n',
    "name = \"x\"\nupdate_norm = 'n_in'\n[table]\na = 1\n",
    "[[a]]\nb = 1\n",
    "name = \"x\"\nname = \"y\"\nupdate_norm = \"n_in\"\n",
    "name = \"x\nupdate_norm = \"n_in\"\n",
    "a = " + "[" * 200 + "]" * 200 + "\n",
    "a = " + "{b = " * 100 + "1" + "}" * 100 + "\n",
    "\ufeffname = \"x\"\nupdate_norm = \"n_in\"\n",
    'name = "x"\r\nupdate_norm = "n_in"\r\n',
    'name = "x"\nupdate_norm = "n_in"\neps = "G**2"\neps_label = "Adam ε"\nsummary = "sign"\n',
]


@pytest.mark.parametrize("body", SPEC_BODIES, ids=range(len(SPEC_BODIES)))
@pytest.mark.parametrize("fmt", ["table", "markdown", "latex", "json"])
def test_hostile_spec_files(body, fmt, tmp_path, capsys):
    path = spec_file(tmp_path, body)
    code, out, err = run(["derive", "--spec", str(path), "--format", fmt, "--explain"], capsys)
    assert_contract(code, out, err)
    if code == 0:
        assert not CONTROL.search(out.replace("\n", "").replace("\r", "")), repr(out)
        if fmt == "json":
            json.loads(out)
        if fmt == "markdown":
            for line in out.splitlines():  # no user text starts a rule, list or heading
                assert not re.match(r"^(---|- |\+ |~~)", line), line


BYTES = [
    b"\xff\xfe\x00n",
    b"name = \"x\"\nupdate_norm = \"n_in\xff\"\n",
    b"\x00" * 10,
    b"name = \"x\"\x00\nupdate_norm = \"n_in\"\n",
    b"a" * (64 * 1024 + 1),
    b"# " + b"x" * 70000,
]


@pytest.mark.parametrize("data", BYTES, ids=range(len(BYTES)))
def test_hostile_spec_bytes(data, tmp_path, capsys):
    path = tmp_path / "s.toml"
    path.write_bytes(data)
    code, out, err = run(["derive", "--spec", str(path)], capsys)
    assert_contract(code, out, err)
    assert code == 2


def test_spec_that_is_a_directory_or_missing(tmp_path, capsys):
    for target in (tmp_path, tmp_path / "missing.toml", tmp_path / "a\x1b[2J.toml"):
        code, out, err = run(["derive", "--spec", str(target)], capsys)
        assert_contract(code, out, err)
        assert code == 2


def test_bom_is_accepted(tmp_path, capsys):
    path = spec_file(tmp_path, "\ufeffname = \"x\"\nupdate_norm = \"n_in\"\n")
    code, out, err = run(["derive", "--spec", str(path), "--format", "json"], capsys)
    assert code == 0, err
    assert json.loads(out)["optimizer"] == "x"


def test_markdown_of_a_hostile_summary_renders_as_text(tmp_path, capsys):
    path = spec_file(
        tmp_path, 'name = "x"\nupdate_norm = "n_in"\nsummary = "- item ~~s~~ $$m$$ | x"\n'
    )
    code, out, _ = run(["derive", "--spec", str(path), "--format", "markdown"], capsys)
    assert code == 0
    assert "\\- item \\~\\~s\\~\\~ \\$\\$m\\$\\$ \\| x" in out


# --------------------------------------------------------------------------------------
# arguments
# --------------------------------------------------------------------------------------

DERIVE_ARGS = [
    ["derive"],
    ["derive", "nosuch"],
    ["derive", "adamw", "--k", "0"],
    ["derive", "adamw", "--k", "-1"],
    ["derive", "adamw", "--k", "abc"],
    ["derive", "adamw", "--k", "1.5"],
    ["derive", "adamw", "--k", "10**9"],
    ["derive", "adamw", "--k", "99999999999999999999"],
    ["derive", "adamw", "--format", "html"],
    ["derive", "adamw", "--standalone"],
    ["derive", "adamw", "--input-kind", "audio"],
    ["derive", "adamw", "--spec", "x.toml"],
    ["derive", "ADAMW"],
    ["derive", "adam w"],
    ["derive", "\x1b[31madamw"],
    ["derive", "adamw\u202e"],
    ["derive", "../adamw"],
    ["derive", ""],
    ["derive", "-"],
    ["derive", "--"],
    ["nosuchcommand"],
    [],
    ["list", "--format", "yaml"],
    ["list", "extra"],
    ["codegen"],
    ["codegen", "adamw"],
    ["codegen", "adamw", "--base-width", "0", "--base-depth", "2"],
    ["codegen", "adamw", "--base-width", "-64", "--base-depth", "2"],
    ["codegen", "adamw", "--base-width", "64.5", "--base-depth", "2"],
    ["codegen", "adamw", "--base-width", "nan", "--base-depth", "2"],
    ["codegen", "adamw", "--base-width", "64", "--base-depth", "0"],
    ["codegen", "adamw", "--base-width", "64", "--base-depth", "2", "--others", "adamw"],
    ["codegen", "adamw", "--base-width", "64", "--base-depth", "2", "--others", "nosuch"],
    ["codegen", "adamw", "--base-width", "64", "--base-depth", "2", "--k", "0"],
    ["codegen", "nosuch", "--base-width", "64", "--base-depth", "2"],
]

TRANSFER = ["transfer", "adamw", "--base-width", "64", "--base-depth", "2"]
TRANSFER_ARGS = [
    [*TRANSFER, "--width", "128", "--depth", "4", "--lr", "-1"],
    [*TRANSFER, "--width", "128", "--depth", "4", "--lr", "nan"],
    [*TRANSFER, "--width", "128", "--depth", "4", "--lr", "inf"],
    [*TRANSFER, "--width", "128", "--depth", "4", "--lr", "1e400"],
    [*TRANSFER, "--width", "128", "--depth", "4", "--lr", "abc"],
    [*TRANSFER, "--width", "128", "--depth", "4", "--lr", "0.01", "--init-std", "-0.02"],
    [*TRANSFER, "--width", "128", "--depth", "4", "--lr", "0.01", "--weight-decay", "-0.1"],
    [*TRANSFER, "--width", "128", "--depth", "4", "--lr", "0.01", "--eps", "-1"],
    [*TRANSFER, "--width", "0", "--depth", "4", "--lr", "0.01"],
    [*TRANSFER, "--width", "-128", "--depth", "4", "--lr", "0.01"],
    [*TRANSFER, "--width", "1e400", "--depth", "4", "--lr", "0.01"],
    [*TRANSFER, "--width", "10**400", "--depth", "4", "--lr", "0.01"],
    [*TRANSFER, "--width", "1e300", "--depth", "4", "--lr", "0.01", "--format", "json"],
    [*TRANSFER, "--width", "128", "--depth", "1e300", "--lr", "0.01", "--format", "json"],
    [*TRANSFER, "--width", "1e-300", "--depth", "4", "--lr", "0.01", "--format", "json"],
    [*TRANSFER, "--width", "128", "--depth", "4"],
    [*TRANSFER, "--width", "128", "--depth", "4", "--lr", "0.01", "--format", "xml"],
    [*TRANSFER, "--width", "128", "--depth", "4", "--lr", "adamw=0.01,sgd=1"],
    [*TRANSFER, "--width", "128", "--depth", "4", "--lr", "=0.01"],
    [*TRANSFER, "--width", "128", "--depth", "4", "--lr", "adamw="],
    [*TRANSFER, "--width", "128", "--depth", "4", "--lr", "\x1b[2J=1"],
    [*TRANSFER, "--width", "128", "--depth", "4", "--lr", "0.01", "--format", "json"],
]


@pytest.mark.parametrize("args", DERIVE_ARGS + TRANSFER_ARGS, ids=range(len(DERIVE_ARGS + TRANSFER_ARGS)))
@pytest.mark.slow  # seconds on the 2-core CPU: out of pytest -m "not slow"
def test_hostile_arguments(args, tmp_path, capsys, monkeypatch):
    monkeypatch.chdir(tmp_path)
    code = main(args)
    out, err = capsys.readouterr()
    assert code in (0, 1, 2), (code, err)
    assert "Traceback" not in err
    assert not CONTROL.search(err.replace("\n", "")), repr(err)
    if code == 0 and "--format" in args and args[args.index("--format") + 1] == "json":
        json.loads(out)  # strict JSON: no Infinity, no NaN
        assert "Infinity" not in out and "NaN" not in out
    assert os.listdir(tmp_path) == []  # nothing written without -o


@pytest.mark.parametrize(
    "path",
    [
        "a\\xzz.toml",
        'q"""x.toml',
        "q'''x.toml",
        "new\nline.toml",
        "tab\there.toml",
        "ünï.toml",
        "\x1b[2J.toml",
        "x\u202e.toml",
        "{{ jinja }}.toml",
        "{% raw %}.toml",
    ],
)
def test_codegen_with_a_hostile_spec_path_compiles(path, tmp_path, capsys, monkeypatch):
    monkeypatch.chdir(tmp_path)
    try:
        (tmp_path / path).write_text('name = "mine"\nupdate_norm = "n_in"\n', encoding="utf-8")
    except (OSError, ValueError):
        pytest.skip("the file system refuses this name")
    out_file = tmp_path / "cfg.py"
    code, _, err = run(
        ["codegen", "--spec", path, "--base-width", "64", "--base-depth", "2", "-o", str(out_file)],
        capsys,
    )
    assert code == 0, err
    source = out_file.read_text(encoding="utf-8")
    assert source.isascii()
    compile(source, "cfg.py", "exec")


# --------------------------------------------------------------------------------------
# issue 30: a config loaded by path, unregistered; a misspelt role; a path with a newline
# --------------------------------------------------------------------------------------

LOAD_BY_PATH = """
import importlib.util, json, sys
for path in sys.argv[1:]:
    spec = importlib.util.spec_from_file_location("cfg_by_path", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)  # not put in sys.modules: how a config file is often loaded
    assert "cfg_by_path" not in sys.modules
    print(json.dumps(module.hparams(256, 8, lr=1e-3, init_std=0.02), sort_keys=True))
"""


@pytest.mark.parametrize("framework", ["torch", "jax"])
@pytest.mark.slow  # seconds on the 2-core CPU: out of pytest -m "not slow"
def test_both_config_forms_load_by_path_without_registration(framework, tmp_path, capsys):
    """Both forms loaded in one new process, the --vendor one first (before anything has
    imported spectral there), each by path and never put in sys.modules."""
    import subprocess
    import sys

    pytest.importorskip(framework)
    if framework == "jax":
        pytest.importorskip("optax")
    paths = []
    for vendor in (True, False):
        path = tmp_path / f"cfg_{framework}_{'vendored' if vendor else 'importing'}.py"
        args = ["codegen", "adamw", "--base-width", "64", "--base-depth", "2", "--framework", framework,
                "-o", str(path)]
        code, out, err = run([*args, *(["--vendor"] if vendor else [])], capsys)
        assert code == 0, err
        paths.append(str(path))
    r = subprocess.run([sys.executable, "-c", LOAD_BY_PATH, *paths], capture_output=True, text=True,
                       timeout=300)
    assert r.returncode == 0, r.stderr
    vendored, importing = (json.loads(line) for line in r.stdout.splitlines())
    assert vendored == importing and vendored["hidden_weight"]["lr"] > 0


@pytest.mark.slow  # seconds on the 2-core CPU: out of pytest -m "not slow"
def test_vendored_torch_config_builds_dataclasses_and_an_optimizer_unregistered(tmp_path, capsys):
    """The vendored module's dataclasses (Adapter, the rules) work when it was never put in
    sys.modules: apply_multipliers, init_ and build_optimizers on a model."""
    pytest.importorskip("torch")
    import importlib.util

    import torch

    from hostile_user import _Tiny  # Llama's module names (tests/ is on sys.path)

    path = tmp_path / "cfg.py"
    code, _, err = run(["codegen", "adamw", "--base-width", "32", "--base-depth", "2", "--vendor", "-o",
                        str(path)], capsys)
    assert code == 0, err
    spec = importlib.util.spec_from_file_location("cfg_unregistered", path)
    cfg = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(cfg)
    model = _Tiny(64, 4)
    cfg.apply_multipliers(model, 64, 4)
    cfg.init_(model, 64, 4, init_std=0.02)
    opt = cfg.build_optimizers(model, 64, 4, lr=1e-3)
    assert isinstance(opt, torch.optim.Optimizer)
    assert cfg.check(model, 64, 4, opt) == []
    model(torch.zeros(2, 8, dtype=torch.long)).sum().backward()
    opt.step()


@pytest.mark.parametrize("patterns", [{".*": "hidden_wieght"}, [(r"\.weight$", "output_weigth")]])
def test_misspelt_role_in_patterns_is_named_torch(patterns, tmp_path):
    torch = pytest.importorskip("torch")
    from hostile_user import _Tiny

    from spectral.codegen import load_generated

    cfg = load_generated("adamw", base_width=16, base_depth=1, folder=tmp_path)
    (pattern, role), = patterns.items() if isinstance(patterns, dict) else patterns
    want = f"pattern {pattern!r} maps to unknown role {role!r} (roles: input_weight, hidden_weight, "
    model = _Tiny(16, 1)
    before = [p.detach().clone() for p in model.parameters()]
    for call in (
        lambda: cfg.apply_multipliers(model, 16, 1, patterns=patterns),
        lambda: cfg.init_(model, 16, 1, init_std=0.02, patterns=patterns),
        lambda: cfg.build_optimizers(model, 16, 1, lr=1e-3, patterns=patterns, multipliers_in_forward=True),
    ):
        with pytest.raises(ValueError) as info:
            call()
        assert str(info.value).startswith(want), info.value
        assert "match no role pattern" not in str(info.value)
    assert all(torch.equal(a, b) for a, b in zip(before, model.parameters(), strict=True))
    assert not any(m._forward_hooks or m._forward_pre_hooks for m in model.modules())


def test_misspelt_role_in_patterns_is_named_jax():
    pytest.importorskip("jax")
    pytest.importorskip("optax")
    import jax.numpy as jnp

    from spectral.jax.labels import labels

    params = {"dense": {"kernel": jnp.zeros((4, 4)), "bias": jnp.zeros(4)}}
    with pytest.raises(ValueError) as info:
        labels(params, patterns={".*": "hidden_wieght"})
    assert str(info.value).startswith("pattern '.*' maps to unknown role 'hidden_wieght' (roles: input_weight")


def test_codegen_wrote_line_escapes_a_newline_in_the_path(tmp_path, capsys):
    path = tmp_path / "a\nb\x1b[31m.py"
    code, out, err = run(["codegen", "adamw", "--base-width", "64", "--base-depth", "2", "-o", str(path)], capsys)
    assert code == 0, err
    escaped = str(tmp_path) + "/a\\x0ab\\x1b[31m.py"
    assert err == f"wrote {escaped} (adamw, k = 2)\n"
    assert out == "" and path.is_file()


@pytest.mark.parametrize("field", ["bogus", "update_norm"])
def test_spec_with_a_5001_digit_integer_is_one_line(field, tmp_path, capsys):
    """tomllib converts integer literals with int(), which refuses past 4,300 digits."""
    path = spec_file(tmp_path, f'name = "x"\n{field} = {"9" * 5001}\n')
    code, out, err = run(["derive", "--spec", str(path), "-o", str(tmp_path / "rules.md")], capsys)
    assert_contract(code, out, err)
    assert code == 2
    assert err == f"error: {path}: invalid TOML: an integer of more than 4300 digits\n"
    assert os.listdir(tmp_path) == ["s.toml"]
