"""Hostile and careless input on the measuring and training commands (issue #22).

``spectral infer``, ``probe``, ``coord-check`` and ``sweep``: every numeric option is
range-checked before any work; every output file is checked (collisions, devices, dangling
links, ``--prefix`` escapes) before any work and written by the one atomic writer; the user's
code (tests/hostile_user.py) cannot hang, exit, or print into the output; a damaged
``runs.jsonl`` loses no good run. Each case asserts the exit code, one error line naming the
argument or file, and no traceback. In-process (:func:`spectral.cli.main`) where possible;
sweeps in subprocesses where a kill or a second process must be observed
(tests/sweep/test_hostile_sweep.py).
"""

from __future__ import annotations

import os
import re
from pathlib import Path

import pytest

pytest.importorskip("torch")

from spectral.cli import main  # noqa: E402

HERE = Path(__file__).resolve().parents[1]  # tests/: the shared helpers and workers


def run(argv: list[str], capsys) -> tuple[int, str, str]:
    code = main(argv)
    out, err = capsys.readouterr()
    return code, out, err


def error_line(err: str) -> str:
    """The one line of an error (argparse prints its usage above it)."""
    assert "Traceback" not in err, err
    lines = [ln for ln in err.splitlines() if "error:" in ln]
    assert len(lines) == 1, err
    return lines[0]


@pytest.fixture
def no_work(monkeypatch):
    """Any measurement or training fails the test: a refusal must come before the work."""

    def boom(*a, **k):
        raise AssertionError("the work started before the refusal")

    import spectral.coordcheck
    import spectral.infer
    import spectral.measure.probe
    import spectral.sweep.train

    monkeypatch.setattr(spectral.infer, "infer", boom)
    monkeypatch.setattr(spectral.measure.probe, "probe", boom)
    monkeypatch.setattr(spectral.coordcheck, "run_coord_check", boom)
    monkeypatch.setattr(spectral.sweep.train, "run_sweep", boom)
    monkeypatch.setattr(spectral.sweep.train, "tune_at_base", boom)


# --------------------------------------------------------------------------------------
# numeric and textual options: a usage error (exit 2) naming the option, before any work
# --------------------------------------------------------------------------------------

SWEEP = ["sweep", "--out", "OUT", "--tune", "none"]
COORD = ["coord-check", "--quiet"]
PROBE = ["probe", "adamw", "--quiet"]
INFER = ["infer", "torch.optim.AdamW", "--quiet"]

BAD_OPTIONS: list[tuple[list[str], str]] = [
    # sweep
    *[([*SWEEP, "--head-dim", v], "--head-dim") for v in ("0", "-1", "1e3", "abc", "99999999")],
    *[([*SWEEP, "--widths", v], "--widths") for v in ("0", "32,0", "-32", "32,x", "", ",", "10**9", "1" * 40, ",".join(["32"] * 40))],
    *[([*SWEEP, "--depths", v], "--depths") for v in ("0", "1,-2", "9999", "a")],
    *[([*SWEEP, "--depth", v], "--depth") for v in ("0", "-3", "1.5", "100000")],
    *[([*SWEEP, "--width", v], "--width") for v in ("0", "-32", "1e9")],
    *[([*SWEEP, "--base-width", v], "--base-width") for v in ("0", "-1", "inf")],
    *[([*SWEEP, "--base-depth", v], "--base-depth") for v in ("0", "nan")],
    *[([*SWEEP, "--init-std", v], "--init-std") for v in ("nan", "inf", "-inf", "0", "-0.02", "1e400", "x")],
    *[([*SWEEP, "--eps", v], "--eps") for v in ("-1", "nan", "inf", "2", "-1e-16")],
    *[([*SWEEP, "--min-lr-ratio", v], "--min-lr-ratio") for v in ("-0.1", "1.5", "nan")],
    *[([*SWEEP, "--seeds", v], "--seeds") for v in ("-1", ",".join(map(str, range(100))), "1" * 30, "x", "99999999999999999999")],
    *[([*SWEEP, "--seed", v], "--seed") for v in ("-1", "1e3", "99999999999999999999")],
    *[([*SWEEP, "--device", v], "--device") for v in ("bogus", "cuda:x", "cpu:0", "", "gpu", "cuda:99999")],
    *[([*SWEEP, "--steps", v], "--steps") for v in ("0", "-1", "1e9", "100000000")],
    *[([*SWEEP, "--batch-size", v], "--batch-size") for v in ("0", "-4", "10000000")],
    *[([*SWEEP, "--warmup", v], "--warmup") for v in ("-5", "x")],
    *[([*SWEEP, "--threads", v], "--threads") for v in ("0", "-2", "100000")],
    *[([*SWEEP, "--block-size", v], "--block-size") for v in ("0", "-8")],
    *[([*SWEEP, "--eval-batches", v], "--eval-batches") for v in ("0", "-1")],
    *[([*SWEEP, "--log2-lrs", v], "--log2-lrs") for v in ("-100", "40", "x")],
    *[([*SWEEP, "--n-bytes", v], "--n-bytes") for v in ("0", "-1", "10")],
    *[([*SWEEP, "--val-fraction", v], "--val-fraction") for v in ("0", "1", "-0.5", "nan")],
    *[([*SWEEP, "--vocab-size", v], "--vocab-size") for v in ("0", "1", "99999999999")],
    # coord-check
    *[([*COORD, "--seq-len", v], "--seq-len") for v in ("0", "-1", "9999999")],
    *[([*COORD, "--widths", v], "--widths") for v in ("0", "64", "64,-128", "10**9", "64," + "9" * 12)],
    *[([*COORD, "--depths", v], "--depths") for v in ("0,1", "2", "1,99999")],
    *[([*COORD, "--width", v], "--width") for v in ("0", "99999")],
    *[([*COORD, "--depth", v], "--depth") for v in ("0", "-1")],
    *[([*COORD, "--steps", v], "--steps") for v in ("0", "-1", "99999999")],
    *[([*COORD, "--batch", v], "--batch") for v in ("0", "-1")],
    *[([*COORD, "--seeds", v], "--seeds") for v in ("0", "1000")],
    *[([*COORD, "--lr", v], "--lr") for v in ("0", "-0.1", "nan", "inf")],
    *[([*COORD, "--others-lr", v], "--others-lr") for v in ("0", "nan")],
    *[([*COORD, "--weight-decay", v], "--weight-decay") for v in ("-1", "nan")],
    *[([*COORD, "--alpha-base", v], "--alpha-base") for v in ("0", "-1", "inf")],
    *[([*COORD, "--k", v], "--k") for v in ("0", "9")],
    *[([*COORD, "--threads", v], "--threads") for v in ("0", "-1")],
    *[([*COORD, "--vocab-size", v], "--vocab-size") for v in ("0", "1")],
    *[([*COORD, "--device", v], "--device") for v in ("bogus", "cuda:")],
    *[([*COORD, "--timeout", v], "--timeout") for v in ("0", "-1", "nan", "inf", "1e9")],
    *[([*COORD, "--plots", "p", "--prefix", v], "--prefix") for v in ("../escape", "a/b", "/abs", "..", ".", "", "x\\y")],
    # probe
    *[([*PROBE, "--rank", v], "--rank") for v in ("0", "-1", "99999")],
    *[([*PROBE, "--widths", v], "--widths") for v in ("0", "64", "64,99999", "x,y")],
    *[([*PROBE, "--d0", v], "--d0") for v in ("0", "-32", "99999")],
    *[([*PROBE, "--seeds", v], "--seeds") for v in ("0", "1000")],
    *[([*PROBE, "--noise", v], "--noise") for v in ("-1", "nan", "inf")],
    *[([*PROBE, "--device", v], "--device") for v in ("bogus", "tpu")],
    *[([*PROBE, "--timeout", v], "--timeout") for v in ("0", "nan")],
    # infer
    *[([*INFER, "--widths", v], "--widths") for v in ("64,128", "0,64,128", "64,128,99999", ",".join(["64"] * 20), "16,24,30", "a,b,c")],
    *[([*INFER, "--warmup", v], "--warmup") for v in ("-1", "51", "x")],
    *[([*INFER, "--threads", v], "--threads") for v in ("0", "-1", "100000")],
    *[([*INFER, "--eps", v], "--eps") for v in ("eps[x", "eps[", "eps]", "1eps", "eps[1][2]", "a b", "eps[-1]", "")],
    *[([*INFER, "--name", v], "--name") for v in ("Adam", "my adam", "a" * 65, "", "x/y", "ädam", "a\nb", "a;b")],
    *[([*INFER, "--kwargs", v], "--kwargs") for v in (
        "[" * 5000, '{"a": ' + "[" * 50 + "]" * 50 + "}", '{"a": "' + "x" * 20000 + '"}', "[1]", "1", "nope", "{")],
    *[([*INFER, "--group", v], "--group") for v in ("[" * 3000, "[]", "{")],
    *[([*INFER, "--timeout", v], "--timeout") for v in ("0", "-5", "nan", "1e12")],
]


@pytest.mark.parametrize(
    "argv,option", BAD_OPTIONS, ids=[f"{a[0]}{a[-2]}={a[-1][:12]!r}" for a, _ in BAD_OPTIONS]
)
def test_bad_option_is_a_usage_error(argv, option, tmp_path, monkeypatch, capsys, no_work):
    monkeypatch.chdir(tmp_path)
    code, out, err = run(argv, capsys)
    assert code == 2, err
    assert option in error_line(err)
    assert out == ""
    assert not (tmp_path / "OUT").exists() and not (tmp_path / "p").exists()


def test_transfer_with_a_401_digit_width_is_one_line(capsys):
    argv = ["transfer", "adamw", "--base-width", "64", "--base-depth", "2", "--depth", "4", "--lr", "0.01",
            "--init-std", "0.02", "--width", "9" * 401]
    code, out, err = run(argv, capsys)
    assert code == 2 and out == ""
    assert "--width" in error_line(err) and "401 digits" in err


@pytest.mark.parametrize("width", [str(2**53 + 1), "1" + "0" * 30, "9" * 4000])
def test_transfer_refuses_sizes_beyond_2_53(width, capsys):
    argv = ["transfer", "adamw", "--base-width", "64", "--base-depth", "2", "--depth", "4", "--lr", "0.01",
            "--init-std", "0.02", "--width", width]
    code, _, err = run(argv, capsys)
    assert code == 2 and "--width" in error_line(err)


def test_sweep_cuda_without_a_gpu_is_refused_before_work(tmp_path, capsys, no_work):
    import torch

    if torch.cuda.is_available():
        pytest.skip("this machine has a GPU")
    code, out, err = run(["sweep", "--out", str(tmp_path / "o"), "--device", "cuda"], capsys)
    assert code == 2 and "--device cuda" in error_line(err)
    assert not (tmp_path / "o").exists()


@pytest.mark.parametrize("cmd", [PROBE, COORD])
def test_cuda_without_a_gpu_is_refused_before_work(cmd, capsys, no_work):
    import torch

    if torch.cuda.is_available():
        pytest.skip("this machine has a GPU")
    code, _, err = run([*cmd, "--device", "cuda:1"], capsys)
    assert code == 2 and "--device cuda:1" in error_line(err)


# --------------------------------------------------------------------------------------
# output files: refused before any work, one line naming the path
# --------------------------------------------------------------------------------------


def _target(kind: str, tmp_path: Path) -> tuple[str, str]:
    """An output path of a hostile kind, and a word the refusal must contain."""
    if kind == "dangling":
        link = tmp_path / "dangling.out"
        link.symlink_to(tmp_path / "nowhere" / "x")
        return str(link), "does not exist"
    if kind == "devnull":
        return "/dev/null", "/dev/null"
    if kind == "exists":
        (tmp_path / "there.out").write_text("keep")
        return str(tmp_path / "there.out"), "exists"
    if kind == "folder":
        (tmp_path / "afolder").mkdir()
        return str(tmp_path / "afolder"), "directory"
    if kind == "nofolder":
        return str(tmp_path / "missing" / "x.out"), "does not exist"
    if kind == "trailing":
        return str(tmp_path) + "/", "directory"
    if kind == "link-to-folder":
        (tmp_path / "real").mkdir()
        (tmp_path / "lnk").symlink_to(tmp_path / "real")
        return str(tmp_path / "lnk"), "directory"
    raise AssertionError(kind)


KINDS = ["dangling", "devnull", "exists", "folder", "nofolder", "trailing", "link-to-folder"]
OUTPUT_OPTIONS = [
    (["infer", "torch.optim.AdamW", "--quiet"], "-o"),
    (["infer", "torch.optim.AdamW", "--quiet"], "--json"),
    (["probe", "adamw", "--quiet"], "--json"),
    (["probe", "adamw", "--quiet"], "--markdown"),
    (["probe", "adamw", "--quiet"], "--plot"),
    (["coord-check", "--quiet"], "--json"),
]


@pytest.mark.parametrize("kind", KINDS)
@pytest.mark.parametrize("argv,option", OUTPUT_OPTIONS, ids=[f"{a[0]}{o}" for a, o in OUTPUT_OPTIONS])
def test_hostile_output_refused_before_work(argv, option, kind, tmp_path, capsys, no_work):
    path, word = _target(kind, tmp_path)
    code, out, err = run([*argv, option, path], capsys)
    assert code == 2, err
    line = error_line(err)
    assert option in line and word in line and path.rstrip("/") in line
    if kind == "exists":
        assert (tmp_path / "there.out").read_text() == "keep"
    if kind == "dangling":
        assert not (tmp_path / "nowhere").exists()


@pytest.mark.parametrize("kind", ["dangling", "devnull", "folder", "link-to-folder"])
@pytest.mark.parametrize("argv,option", OUTPUT_OPTIONS, ids=[f"{a[0]}{o}" for a, o in OUTPUT_OPTIONS])
def test_force_does_not_write_into_devices_or_through_dangling_links(argv, option, kind, tmp_path, capsys, no_work):
    path, _ = _target(kind, tmp_path)
    code, _, err = run([*argv, option, path, "--force"], capsys)
    assert code == 2 and option in error_line(err)


COLLISIONS = [
    ["infer", "torch.optim.AdamW", "--quiet", "-o", "{a}", "--json", "{a}"],
    ["infer", "torch.optim.AdamW", "--quiet", "-o", "{a}", "--json", "{d}/../a.out", "--force"],
    ["probe", "adamw", "--quiet", "--json", "{a}", "--markdown", "{a}"],
    ["probe", "adamw", "--quiet", "--json", "{a}", "--plot", "{a}", "--force"],
    ["probe", "adamw", "--quiet", "--markdown", "{a}", "--plot", "{link}"],
    ["coord-check", "--quiet", "--json", "{d}/p/x-width.png", "--plots", "{d}/p", "--prefix", "x"],
    ["coord-check", "--quiet", "--json", "{d}/p/mlp-adamw-depth.png", "--plots", "{d}/p", "--force"],
]


@pytest.mark.parametrize("argv", COLLISIONS, ids=range(len(COLLISIONS)))
def test_two_outputs_naming_one_file_are_refused_before_work(argv, tmp_path, capsys, no_work):
    a = tmp_path / "a.out"
    (tmp_path / "sub").mkdir()
    link = tmp_path / "link.out"
    link.symlink_to(a)
    a.write_text("keep") if "--force" in argv else None
    words = [w.format(a=a, d=tmp_path / "sub" if "../" in w else tmp_path, link=link) for w in argv]
    code, out, err = run(words, capsys)
    assert code == 2, err
    assert "same file" in error_line(err)
    if a.exists():
        assert a.read_text() == "keep"


def test_coord_check_prefix_without_plots_is_refused(capsys, no_work):
    code, _, err = run(["coord-check", "--quiet", "--prefix", "x"], capsys)
    assert code == 2 and "--prefix" in error_line(err)


def test_coord_check_existing_png_is_refused_before_work(tmp_path, capsys, no_work):
    (tmp_path / "p").mkdir()
    (tmp_path / "p" / "x-depth.png").write_bytes(b"keep")
    code, _, err = run(["coord-check", "--quiet", "--plots", str(tmp_path / "p"), "--prefix", "x"], capsys)
    assert code == 2 and "x-depth.png" in error_line(err) and "exists" in err
    assert (tmp_path / "p" / "x-depth.png").read_bytes() == b"keep"


def test_coord_check_dangling_png_link_is_refused(tmp_path, capsys, no_work):
    (tmp_path / "p").mkdir()
    (tmp_path / "p" / "x-width.png").symlink_to(tmp_path / "elsewhere.png")
    code, _, err = run(["coord-check", "--quiet", "--plots", str(tmp_path / "p"), "--prefix", "x", "--force"], capsys)
    assert code == 2 and "x-width.png" in error_line(err)
    assert not (tmp_path / "elsewhere.png").exists()


# --------------------------------------------------------------------------------------
# the user's code: NaN, inf, overflow, zero, exceptions, sys.exit, print, hangs
# --------------------------------------------------------------------------------------

SMALL = ["--widths", "64,96,128", "--quiet"]

INFER_USER = [
    ("NaNStep", 1, r"hostile_user\.NaNStep: .*made the weights NaN"),
    ("InfStep", 1, r"hostile_user\.InfStep: .*made the weights inf"),
    ("HugeStep", 1, r"hostile_user\.HugeStep: .*too large to measure"),
    ("ZeroStep", 1, r"hostile_user\.ZeroStep: .*exactly zero"),
    ("ExitStep0", 2, r"hostile_user\.ExitStep0 .*called sys\.exit\(0\)"),
    ("ExitStep3", 2, r"hostile_user\.ExitStep3 .*called sys\.exit\(3\)"),
    ("ExitStep5", 2, r"hostile_user\.ExitStep5 .*called sys\.exit\(5\)"),
    ("ExitStepText", 2, r"hostile_user\.ExitStepText .*called sys\.exit\('bye'\)"),
    ("ExitInit", 2, r"hostile_user\.ExitInit .*called sys\.exit\(4\)"),
    ("RaisingInit", 2, r"hostile_user\.RaisingInit\(.*raised RuntimeError: no such hardware$"),
    ("RaisingStep", 2, r"hostile_user\.RaisingStep: step\(\) .*raised KeyError"),
    ("MemoryStep", 2, r"hostile_user\.MemoryStep: step\(\) .*raised MemoryError"),
    ("NotAnOptimizer", 2, r"hostile_user\.NotAnOptimizer: .*not a torch\.optim\.Optimizer"),
    ("NoSuchClass", 2, r"hostile_user\.NoSuchClass: hostile_user has no attribute"),
]


@pytest.mark.parametrize("cls,code,pattern", INFER_USER, ids=[c[0] for c in INFER_USER])
def test_infer_turns_user_code_into_the_contract(cls, code, pattern, capsys):
    got, out, err = run(["infer", f"hostile_user.{cls}", *SMALL], capsys)
    assert got == code, err
    assert "Traceback" not in err and out == ""
    first = err.splitlines()[0]
    assert first.startswith(f"error: hostile_user.{cls}")
    assert re.search(pattern, err, re.M), err


@pytest.mark.parametrize("cls", ["HangingStep", "StubbornHang", "HangingInit"])
def test_infer_time_limit(cls, capsys):
    code, out, err = run(["infer", f"hostile_user.{cls}", *SMALL, "--timeout", "0.5"], capsys)
    assert code == 2 and out == ""
    line = error_line(err)
    assert f"hostile_user.{cls}" in line and "did not return within 0.5 s" in line and "--timeout" in line


@pytest.mark.slow  # seconds on the 2-core CPU: out of pytest -m "not slow"
def test_infer_user_print_stays_out_of_the_toml(capsys):
    code, out, err = run(["infer", "hostile_user.PrintingSign", *SMALL], capsys)
    assert code == 0, err
    assert "stepping" not in out and "hello" not in out
    assert "stepping" in err
    assert out.startswith("# Inferred by")
    import tomllib

    assert tomllib.loads(out)["update_norm"] == "n_in"


@pytest.mark.slow  # seconds on the 2-core CPU: out of pytest -m "not slow"
def test_infer_name_accepted_by_the_spec_rules(tmp_path, capsys):
    code, out, err = run(["infer", "hostile_user.PrintingSign", *SMALL, "--name", "my-lion.v2+x_1"], capsys)
    assert code == 0, err
    assert 'name = "my-lion.v2+x_1"' in out


PROBE_USER = [
    ("nan_factory", 1, "NaN"),
    ("zero_factory", 1, "exactly zero"),
    ("int_factory", 2, "returned int, not a torch.optim.Optimizer"),
    ("raising_factory", 2, "raised ValueError: nope"),
    ("exiting_factory", 2, "called sys.exit(7)"),
    ("exiting_step_factory", 2, "called sys.exit(3)"),
]


@pytest.mark.parametrize("factory,code,word", PROBE_USER, ids=[c[0] for c in PROBE_USER])
def test_probe_turns_user_code_into_the_contract(factory, code, word, capsys):
    got, out, err = run(["probe", "adamw", "--factory", f"hostile_user:{factory}", "--widths", "64,128", "--quiet"], capsys)
    assert got == code, err
    assert "Traceback" not in err
    if code == 2:
        assert word in error_line(err) and out == ""
    else:
        assert word in out and "FAIL" in out


def test_probe_time_limit(capsys):
    argv = ["probe", "adamw", "--factory", "hostile_user:hanging_step_factory", "--widths", "64,128", "--quiet",
            "--timeout", "0.5"]
    code, out, err = run(argv, capsys)
    assert code == 2 and "did not return within 0.5 s" in error_line(err)


def test_probe_user_print_goes_to_stderr(tmp_path, capsys):
    argv = ["probe", "adamw", "--factory", "hostile_user:printing_factory", "--widths", "64,128", "--quiet"]
    code, out, err = run(argv, capsys)
    assert code in (0, 1), err
    assert "factory says hi" not in out and "factory says hi" in err


TINY_COORD = ["coord-check", "--quiet", "--widths", "16,32", "--depths", "1,2", "--steps", "2", "--seeds", "1",
              "--batch", "2", "--parameterizations", "mup"]


@pytest.mark.parametrize(
    "factory,word",
    [
        ("hanging_step_factory", "did not return within 1 s"),
        ("exiting_factory", "called sys.exit(7)"),
        ("int_factory", "returned int"),
    ],
)
def test_coord_check_turns_user_code_into_the_contract(factory, word, capsys):
    code, out, err = run([*TINY_COORD, "--factory", f"hostile_user:{factory}", "--timeout", "1"], capsys)
    assert code == 2, err
    line = error_line(err)
    assert word in line and f"hostile_user:{factory}" in line


def test_coord_check_nan_model_exits_1_naming_it(tmp_path, capsys):
    argv = [*TINY_COORD, "--factory", "hostile_user:nan_factory", "--json", str(tmp_path / "r.json")]
    code, out, err = run(argv, capsys)
    assert code == 1, err
    line = error_line(err)
    assert line == "error: model mlp diverged at step 1 (mup, n = 16, L = 1, seed 0): h_L is NaN; the check fails"
    assert (tmp_path / "r.json").is_file()


@pytest.mark.slow  # seconds on the 2-core CPU: out of pytest -m "not slow"
def test_coord_check_plots_written_by_the_atomic_writer(tmp_path, capsys):
    argv = [*TINY_COORD, "--plots", str(tmp_path / "p"), "--prefix", "t"]
    code, out, err = run(argv, capsys)
    assert code in (0, 1), err
    assert sorted(os.listdir(tmp_path / "p")) == ["t-depth.png", "t-width.png"]
    assert (tmp_path / "p" / "t-width.png").read_bytes()[:4] == b"\x89PNG"
    code, _, err = run(argv, capsys)  # again, no --force: refused before training
    assert code == 2 and "t-width.png" in error_line(err)


@pytest.mark.slow  # seconds on the 2-core CPU: out of pytest -m "not slow"
def test_probe_plot_refuses_to_overwrite_without_force(tmp_path, capsys):
    plot = tmp_path / "out.png"
    plot.write_bytes(b"keep")
    code, _, err = run(["probe", "adamw", "--quiet", "--widths", "64,128", "--plot", str(plot)], capsys)
    assert code == 2 and "out.png" in error_line(err)
    assert plot.read_bytes() == b"keep"
    code, _, err = run(["probe", "adamw", "--quiet", "--widths", "64,128", "--plot", str(plot), "--force"], capsys)
    assert code in (0, 1), err
    assert plot.read_bytes()[:4] == b"\x89PNG"
    assert [p.name for p in tmp_path.iterdir()] == ["out.png"]  # no temporary debris


# --------------------------------------------------------------------------------------
# issue 30: huge integers in JSON, a diverging model, odd paths, clashing outputs, newlines
# --------------------------------------------------------------------------------------

HUGE = "1" * 5001


@pytest.mark.parametrize("option", ["--kwargs", "--group"])
@pytest.mark.parametrize(
    "value,word",
    [
        ('{"x": ' + HUGE + "}", "an integer of 5001 digits in JSON (at most 30)"),
        ('{"x": [-' + HUGE + "]}", "an integer of 5001 digits in JSON (at most 30)"),
        ('{"x": 1e999}', "the number 1e999 in JSON is beyond the range of a float"),
        ('{"x": NaN}', "NaN in JSON: JSON has no NaN or Infinity"),
    ],
    ids=["int", "negative-int", "1e999", "NaN"],
)
def test_infer_json_option_with_a_number_python_cannot_hold(option, value, word, tmp_path, capsys, no_work):
    argv = [*INFER, option, value, "-o", str(tmp_path / "o.toml"), "--json", str(tmp_path / "r.json")]
    code, out, err = run(argv, capsys)
    assert code == 2 and out == ""
    line = error_line(err)
    assert line.startswith(f"error: {option}: {word}")
    assert len(line) < 200  # the 5,001 digits are not echoed
    assert os.listdir(tmp_path) == []


def test_adapter_json_file_with_a_huge_integer_is_one_line(tmp_path, capsys, no_work):
    adapter = tmp_path / "adapter.json"
    adapter.write_text('{"input": ["embed"], "final": ' + HUGE + "}")
    argv = [*TINY_COORD, "--model-factory", "hostile_user:printing_model", "--adapter", str(adapter),
            "--json", str(tmp_path / "r.json"), "--plots", str(tmp_path / "p")]
    code, out, err = run(argv, capsys)
    assert code == 2 and out == ""
    assert error_line(err) == (
        f"error: --adapter {adapter}: cannot read it: an integer of 5001 digits in JSON (at most 30)"
    )
    assert os.listdir(tmp_path) == ["adapter.json"]


@pytest.mark.slow  # trains until it diverges
def test_coord_check_model_that_diverges_while_training_says_where(tmp_path, capsys, monkeypatch):
    monkeypatch.chdir(tmp_path)
    argv = [*TINY_COORD, "--steps", "3", "--model-factory", "hostile_user:diverging_model"]
    code, out, err = run(argv, capsys)
    assert code == 1, err  # as probe and infer: the measurement says the rules do not hold
    assert error_line(err) == (
        "error: model hostile_user:diverging_model diverged at step 1 (mup, n = 16, L = 1, "
        "seed 0): the output is NaN; the check fails"
    )
    assert "parameterization" in out  # the table is still shown
    assert os.listdir(tmp_path) == []  # no output asked for, none written


@pytest.mark.slow  # trains until it diverges
def test_coord_check_json_of_a_diverged_model_records_where(tmp_path, capsys):
    argv = [*TINY_COORD, "--steps", "3", "--model-factory", "hostile_user:diverging_model",
            "--json", str(tmp_path / "r.json")]
    code, _, err = run(argv, capsys)
    assert code == 1, err
    import json

    result = json.loads((tmp_path / "r.json").read_text())
    assert result["pass"] is False
    assert result["diverged"] == {"parameterization": "mup", "axis": "width", "width": 16, "depth": 1,
                                  "seed": 0, "step": 1, "metric": "out", "value": "NaN"}
    assert os.listdir(tmp_path) == ["r.json"]


def _fifo_or_folder(kind: str, tmp_path: Path) -> Path:
    path = tmp_path / ("models.py" if kind == "fifo" else "models")
    if kind == "fifo":
        if not hasattr(os, "mkfifo"):
            pytest.skip("no FIFOs on this platform")
        os.mkfifo(path)
    else:
        path.mkdir()
    return path


@pytest.mark.parametrize(
    "kind,why",
    [("folder", "is a directory, not a file"), ("fifo", "is a FIFO (named pipe), not a regular file")],
)
@pytest.mark.parametrize("option", ["--model-factory", "--factory"])
def test_factory_path_that_is_a_folder_or_fifo_says_so(kind, why, option, tmp_path, capsys, no_work):
    path = _fifo_or_folder(kind, tmp_path)
    before = sorted(os.listdir(tmp_path))
    code, out, err = run([*COORD, option, f"{path}:make", "--json", str(tmp_path / "r.json")], capsys)
    assert code == 2 and out == ""
    assert error_line(err) == f"error: {option} {path}:make: {path} {why}"
    assert sorted(os.listdir(tmp_path)) == before


@pytest.mark.parametrize("kind", ["folder", "fifo"])
def test_adapter_file_that_is_a_folder_or_fifo_says_so(kind, tmp_path, capsys, no_work):
    path = tmp_path / "adapter.json"
    if kind == "fifo":
        os.mkfifo(path)
    else:
        path.mkdir()
    argv = [*COORD, "--model-factory", "hostile_user:printing_model", "--adapter", str(path)]
    code, _, err = run(argv, capsys)
    assert code == 2
    line = error_line(err)
    assert line.startswith(f"error: --adapter {path}: is a ")
    assert ("directory" if kind == "folder" else "not a regular file") in line


@pytest.mark.parametrize(
    "argv",
    [
        ["--json", "{x}", "--plots", "{x}"],
        ["--json", "{x}", "--plots", "{x}/"],
        ["--json", "{x}", "--plots", "{d}/sub/../X"],
        ["--json", "{x}", "--plots", "{x}", "--force"],
        ["--plots", "{x}", "--json", "{x}/mlp-adamw-width.png"],
    ],
    ids=range(5),
)
def test_coord_check_json_and_plots_clash_is_refused_creating_nothing(argv, tmp_path, capsys, no_work):
    x = tmp_path / "X"
    words = [w.format(x=x, d=tmp_path) for w in argv]
    code, out, err = run([*COORD, *words], capsys)
    assert code == 2 and out == ""
    assert "same file" in error_line(err)
    assert os.listdir(tmp_path) == []


def test_coord_check_plots_folder_is_made_only_after_the_work(tmp_path, capsys, monkeypatch):
    """A failure during the check (here the model factory) leaves no empty --plots folder."""
    code, _, err = run([*TINY_COORD, "--model-factory", "hostile_user:raising_model",
                        "--plots", str(tmp_path / "a" / "b")], capsys)
    assert code == 2 and "cannot build" in error_line(err)
    assert os.listdir(tmp_path) == []


@pytest.mark.parametrize("where", ["a file", "a dangling link", "under a file"])
def test_coord_check_plots_folder_that_cannot_be_made_is_refused_before_work(where, tmp_path, capsys, no_work):
    (tmp_path / "f").write_text("keep")
    if where == "a dangling link":
        (tmp_path / "lnk").symlink_to(tmp_path / "nowhere")
    plots = {"a file": "f", "a dangling link": "lnk", "under a file": "f/sub/p"}[where]
    before = sorted(os.listdir(tmp_path))
    code, _, err = run([*COORD, "--plots", str(tmp_path / plots)], capsys)
    assert code == 2 and "--plots" in error_line(err)
    assert sorted(os.listdir(tmp_path)) == before and (tmp_path / "f").read_text() == "keep"
    assert not (tmp_path / "nowhere").exists()


@pytest.mark.slow  # seconds on the 2-core CPU: out of pytest -m "not slow"
def test_coord_check_wrote_lines_escape_a_newline_in_the_path(tmp_path, capsys):
    """The --plots folder (made at the end, --json inside it) has a newline and rich markup
    in its name: each "wrote" line is one line, the newline escaped, the markup literal."""
    folder = tmp_path / "a\nb[red]"
    argv = [*TINY_COORD, "--plots", str(folder), "--prefix", "t", "--json", str(folder / "r.json")]
    code, out, err = run(argv, capsys)
    assert code in (0, 1), err
    wrote = [line for line in out.splitlines() if line.startswith("wrote ")]
    escaped = str(folder).replace("\n", "\\x0a")
    assert wrote == [f"wrote {escaped}/t-width.png", f"wrote {escaped}/t-depth.png"]
    assert sorted(os.listdir(folder)) == ["r.json", "t-depth.png", "t-width.png"]


def test_adapter_toml_file_with_a_huge_integer_is_one_line(tmp_path, capsys, no_work):
    adapter = tmp_path / "adapter.toml"
    adapter.write_text(f'input = ["embed"]\nfinal = {HUGE}\n')
    argv = [*TINY_COORD, "--model-factory", "hostile_user:printing_model", "--adapter", str(adapter),
            "--plots", str(tmp_path / "p")]
    code, out, err = run(argv, capsys)
    assert code == 2 and out == ""
    assert error_line(err) == (
        f"error: --adapter {adapter}: cannot read it: invalid TOML: an integer of more than 4300 digits"
    )
    assert os.listdir(tmp_path) == ["adapter.toml"]


@pytest.mark.slow
def test_coord_check_output_past_float32_squares_is_a_divergence(tmp_path):
    """Output x 1e30: the loss is finite but every gradient's square overflows float32,
    AdamW's update is 0 and nothing moves; named, exit 1 (it exited 0 with slopes '—'), and
    the generated configs' folder is gone from $TMPDIR when the process ends."""
    import subprocess
    import sys

    tmp = tmp_path / "tmp"
    tmp.mkdir()
    env = {**os.environ, "TMPDIR": str(tmp), "PYTHONPATH": str(HERE)}
    argv = [*TINY_COORD, "--model-factory", "hostile_user:huge_output_model"]
    p = subprocess.run(
        [sys.executable, "-m", "spectral", *argv], capture_output=True, text=True, env=env, timeout=600
    )
    assert p.returncode == 1, p.stderr
    assert error_line(p.stderr) == (
        "error: model hostile_user:huge_output_model diverged at step 0 (mup, n = 16, L = 1, "
        "seed 0): the output is 7.58e+28, past 1.84e+19, where a gradient's square overflows "
        "float32 (the optimizer's update is then 0); the check fails"
    )
    assert [n for n in os.listdir(tmp) if n.startswith("spectral-")] == []


def test_infer_module_that_prints_when_imported_is_kept_apart(tmp_path, monkeypatch, capsys):
    """`spectral infer this.X`: the module's output at import (the Zen of Python) is
    captured, not let through on our stderr; the error is the one line."""
    (tmp_path / "loud_module.py").write_text(
        "import sys\nfor i in range(21):\n    print('zen', i)\nsys.stderr.write('to stderr\\n')\n"
    )
    monkeypatch.syspath_prepend(str(tmp_path))
    code, out, err = run(["infer", "loud_module.X"], capsys)
    assert code == 2 and out == ""
    assert err.splitlines() == [
        "error: loud_module.X: loud_module has no attribute 'X'"
    ], err


# --------------------------------------------------------------------------------------
# spectral sweep: every option checked against the model and the rules before any folder,
# file or run (issue 50): a role the model has not, an exponent or value beyond float32
# --------------------------------------------------------------------------------------

SWEEP_SMALL = ["sweep", "--out", "OUT", "--device", "cpu", "--widths", "32,64", "--depths", "2", "--steps", "2",
         "--log2-lrs=-8,-7", "--n-bytes", "20000"]
ROLES = "its roles: input_weight, hidden_weight, output_weight, input_bias, hidden_bias"
SWEEP_PLANS: list[tuple[list[str], str]] = [
    # an unknown role, or one with a newline: named, nothing made (it left OUT/adamw/generated/)
    (["--ablate", "--ablate-variant", "lr.bogus=0.5"], f"--ablate-variant lr.bogus=0.5: the dense GPT (no --experts) has no bogus ({ROLES})"),
    (["--ablate", "--ablate-variant", "lr.hid\nden=0.5"], "has no hid\\x0aden"),
    # an exponent beyond what the rule can carry at the target width (it trained the base runs first)
    (["--ablate", "--ablate-variant", "init.hidden_weight=1e308"],
     "--ablate-variant init.hidden_weight=1e+308: at the target width 64 (r_n = 2) hidden_weight's init_std would "
     "leave float32, the runs' dtype; the exponent must be within [-143.4, 133.6] here"),
    (["--ablate", "--ablate-variant", "init.hidden_weight=134"], "the exponent must be within [-143.4, 133.6] here"),
    (["--ablate", "--ablate-variant", "wd.hidden_weight=1e308"], "weight_decay would leave float32, the runs' dtype; "
                                                                  "the exponent must be at most 1023 here"),
    (["--ablate", "--ablate-variant", "lr.output_weight=-200"], "output_weight's lr would leave float32"),
    (["--ablate", "--ablate-variant", "lr.router_weight=-1"], "has no router_weight"),
    # a role the model has not: ten identical runs and a fit of noise before
    (["--fit-exponent", "lr.router_weight"], f"--fit-exponent lr.router_weight: the dense GPT (no --experts) has no "
                                             f"router_weight ({ROLES}); --experts N gives the GPT a router"),
    (["--fit-exponent", "init.router_weight"], "has no router_weight"),
    (["--fit-exponent", "lr.adamw"], "--fit-exponent lr.adamw: name a role (multiplier.KEY: or a layer, input, hidden or output), not 'adamw'"),
    (["--fit-exponent", "multiplier.default"], "name a role (multiplier.KEY"),
    # a key that names nothing: blamed on the option typed, not on --init-scale / --multiplier /
    # --lr-scale, which carry its values inside
    (["--fit-exponent", "init.bogus"], "error: --fit-exponent init.bogus: name a role (multiplier.KEY: or a layer, "
                                       "input, hidden or output), not 'bogus'; the model's roles: input_weight, "),
    (["--fit-exponent", "multiplier.bogus"], "error: --fit-exponent multiplier.bogus: name a role"),
    (["--tune", "lr.bogus=1,2"], "error: --tune: unknown key(s) bogus; use roles"),
    (["--tune", "init.bogus=1,2"], "error: --tune: unknown key(s) bogus; use roles"),
    (["--lr-scale", "router_weight=2"], "--lr-scale: the dense GPT (no --experts) has no router_weight"),
    (["--init-scale", "router_weight=2"], "--init-scale: the dense GPT (no --experts) has no router_weight"),
    (["--tune", "lr.router_weight=1,2"], "--tune lr.router_weight: the dense GPT (no --experts) has no router_weight"),
    (["--model", "llama", "--fit-exponent", "lr.router_weight"], "the Llama (--model llama) has no router_weight"),
    # base values the rules carry beyond float32 at some size
    (["--lr-scale", "input_weight=1e308"], "at width 32, depth 2 (adamw, sp, log2 η -8): the rules give input_weight lr "
                                           "3.91e+305, beyond float32"),
    (["--multiplier", "1e300"], "the rules give input_weight multiplier 1e+300, beyond float32"),
    (["--tune", "init.hidden_weight=1,1e300"], "the rules give hidden_weight init_std 2e+298, beyond float32, the runs' "
                                               "dtype (1.4e-45 to 3.4e+38); change --init-std, --init-scale or --tune"),
    (["--fit-exponent", "lr.hidden_weight", "--lr-scale", "hidden_weight=2e40"],
     "change --log2-lrs, --lr-scale or --log2-factors"),
]


@pytest.mark.parametrize("extra,message", SWEEP_PLANS, ids=range(len(SWEEP_PLANS)))
def test_sweep_plan_refused_before_anything_is_made(extra, message, tmp_path, monkeypatch, capsys, no_work):
    monkeypatch.chdir(tmp_path)
    code, out, err = run([*SWEEP_SMALL, *extra], capsys)
    assert code == 2, err
    assert message in error_line(err)
    assert out == "" and os.listdir(tmp_path) == []


@pytest.mark.parametrize(
    "extra",
    [["--experts", "4", "--fit-exponent", "lr.router_weight"], ["--fit-exponent", "multiplier.hidden"],
     ["--ablate", "--ablate-variant", "init.hidden_weight=133"], ["--ablate", "--ablate-variant", "eps.input_weight=-1"],
     ["--init-scale", "hidden_weight=1e39"]],
)
def test_sweep_plan_within_the_bounds_reaches_the_work(extra, tmp_path, monkeypatch, capsys, no_work):
    """The checks refuse no more than they must: the router with --experts, a layer's name,
    an exponent at the edge of the range, a std still within float32: the work starts."""
    monkeypatch.chdir(tmp_path)
    with pytest.raises(AssertionError, match="the work started before the refusal"):
        run([*SWEEP_SMALL, *extra], capsys)


def test_exponent_range_is_what_float32_holds():
    from spectral.sweep.checks import FLOAT32_MAX, FLOAT32_SMALLEST, exponent_range

    lo, hi = exponent_range(0.02, 2.0)
    assert 0.02 * 2.0**hi == pytest.approx(FLOAT32_MAX) and 0.02 * 2.0**lo == pytest.approx(FLOAT32_SMALLEST)
    assert exponent_range(0.0, 4.0) == (float("-inf"), 1023 / 2)


# --------------------------------------------------------------------------------------
# the time limit's alarm (spectral.measure.guard, issue 50): one shot, never into the
# guard's own clean-up, nothing left armed afterwards
# --------------------------------------------------------------------------------------


def _no_alarm_left(previous) -> None:
    import signal

    assert signal.getitimer(signal.ITIMER_REAL) == (0.0, 0.0)
    assert signal.getsignal(signal.SIGALRM) == previous


def test_time_limit_expires_once_and_leaves_no_alarm():
    import signal
    import time

    from spectral.errors import TimeLimitExceeded
    from spectral.measure.guard import user_code

    previous = signal.getsignal(signal.SIGALRM)
    started = time.monotonic()
    with pytest.raises(TimeLimitExceeded, match=r"^sleeping did not return within 0\.2 s "):
        with user_code("sleeping", 0.2):
            time.sleep(5)
    assert time.monotonic() - started < 1.0
    _no_alarm_left(previous)
    time.sleep(1.2)  # the old alarm repeated every second: nothing may fire now


def test_time_limit_alarm_in_the_guards_own_frames_raises_nothing(monkeypatch):
    """The alarm that fired again while the first expiry unwound into the guard (a gc pass
    over a 10**6-layer model takes seconds) raised a second time there: two tracebacks, the
    timer left running, and SIGALRM killed the process (exit -14). Handed a frame of the
    guard's own, the handler raises nothing; after the block it does nothing at all."""
    import signal
    import sys
    import time

    import spectral.measure.guard as guard
    from spectral.errors import TimeLimitExceeded

    frames = []
    flush = guard._let_pending_signals_run
    monkeypatch.setattr(guard, "_let_pending_signals_run", lambda: frames.append(sys._getframe(1)))
    with pytest.raises(TimeLimitExceeded):
        with guard.user_code("sleeping", 0.1):
            time.sleep(5)
    monkeypatch.setattr(guard, "_let_pending_signals_run", flush)
    [own] = frames
    assert own.f_code is guard.user_code._stop.__code__
    previous = signal.getsignal(signal.SIGALRM)
    block = guard.user_code("waiting", 30)
    with block:
        assert block._fire(signal.SIGALRM, own) is None  # in the guard: no interruption
        with pytest.raises(guard._Expired):
            block._fire(signal.SIGALRM, sys._getframe())  # in the user's code: one
    assert block._fire(signal.SIGALRM, sys._getframe()) is None  # after the block: nothing
    _no_alarm_left(previous)


@pytest.mark.parametrize("timeout", [0, -1, float("nan"), float("inf"), True, "5"])
def test_time_limit_that_is_no_positive_number_is_refused(timeout):
    from spectral.errors import SpecError
    from spectral.measure.guard import user_code

    with pytest.raises(SpecError, match="timeout: expected a positive number of seconds"):
        user_code("x", timeout)


@pytest.mark.parametrize("timeout", [1e300, 2.0**70, 10**40])
def test_time_limit_past_what_an_alarm_holds_runs_as_no_limit(timeout):
    """A finite limit too long for time_t (1e300 s) raised a bare OverflowError from
    setitimer ("timestamp out of range for platform time_t"), out of check(timeout=1e300)
    too; the alarm is set to the longest it holds and taken back after the block."""
    import signal

    from spectral.measure.guard import LONGEST_ALARM, user_code

    previous = signal.getsignal(signal.SIGALRM)
    with user_code("x", timeout):
        left = signal.getitimer(signal.ITIMER_REAL)[0]
    assert LONGEST_ALARM - 60 < left <= LONGEST_ALARM
    _no_alarm_left(previous)


def test_nested_time_limits_restore_the_outer_one():
    import signal
    import time

    from spectral.errors import TimeLimitExceeded
    from spectral.measure.guard import user_code

    previous = signal.getsignal(signal.SIGALRM)
    with pytest.raises(TimeLimitExceeded, match="^inner"):
        with user_code("outer", 30):
            try:
                with user_code("inner", 0.1):
                    time.sleep(5)
            finally:
                left, interval = signal.getitimer(signal.ITIMER_REAL)
                assert 25 < left <= 30 and interval == 0.0  # the outer limit, one shot
    with pytest.raises(TimeLimitExceeded, match="^outer"):
        with user_code("outer", 0.2):
            with user_code("inner", 30):  # the outer ends first: it stays in charge
                time.sleep(5)
    _no_alarm_left(previous)


def test_time_limit_waits_for_a_packages_import_to_finish(tmp_path, monkeypatch):
    """An import of an installed package cut short leaves a half-made module for the rest of
    the process (torch's triton, imported by the first step a limit interrupted, broke every
    later test's torch); the interruption waits for it, then reaches the user's code."""
    import sys
    import time

    import spectral.measure.guard as guard
    from spectral.errors import TimeLimitExceeded

    (tmp_path / "slow_package_50.py").write_text("import time\ntime.sleep(0.6)\nDONE = True\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.setattr(guard, "_installed_folders", lambda: (str(tmp_path) + "/",))
    with pytest.raises(TimeLimitExceeded):
        with guard.user_code("importing and sleeping", 0.1):
            import slow_package_50  # noqa: F401

            time.sleep(5)
    assert sys.modules.pop("slow_package_50").DONE is True


JAX_BAD = [("--lr", v) for v in ("nan", "inf", "-0.1", "0")] + [
    ("--others-lr", "nan"), ("--weight-decay", "-1"), ("--alpha-base", "inf"), ("--k", "0"), ("--k", "99"),
    ("--steps", "1000000000"), ("--batch", "0"), ("--seeds", "100000"), ("--widths", "64,999999999"),
    ("--widths", "64"), ("--depths", "0,4"), ("--steps", "1e3"),
]


@pytest.mark.parametrize("option,value", JAX_BAD, ids=[f"{o}={v}" for o, v in JAX_BAD])
def test_jax_coord_check_numbers_are_refused_before_work(option, value, tmp_path, capsys, monkeypatch):
    """python -m spectral.cli.coord_check_jax took any int or float (NaN, inf, negative, a
    billion steps); it checks them as spectral coord-check does."""
    pytest.importorskip("jax")
    import spectral.cli.coord_check_jax as jax_cli

    monkeypatch.setattr(jax_cli, "run_coord_check_jax", lambda *a, **k: pytest.fail("the work started"))
    with pytest.raises(SystemExit) as stop:
        jax_cli.main([option, value, "--json", str(tmp_path / "out.json"), "--quiet"])
    assert stop.value.code == 2
    assert f"argument {option}:" in error_line(capsys.readouterr().err)
    assert os.listdir(tmp_path) == []


@pytest.mark.parametrize("command", ["sweep", "tokenize"])
@pytest.mark.parametrize("where", ["under a file", "unwritable"])
def test_out_folder_that_cannot_be_made_is_refused_before_work(command, where, tmp_path, monkeypatch, capsys, no_work):
    """A --out that mkdir would refuse: one line before the data is read or the tokenizer
    trained (tokenize trained its BPE first; the sweep loaded the corpus first)."""
    import spectral.sweep.tokenize as tokenize

    monkeypatch.setattr(tokenize, "_train", lambda *a, **k: pytest.fail("the work started"))
    if where == "under a file":
        (tmp_path / "f").write_text("")
        out, ancestor = tmp_path / "f" / "sub", "is not a folder"
    else:
        if os.geteuid() == 0:
            pytest.skip("root writes anywhere")
        (tmp_path / "ro").mkdir(mode=0o555)
        out, ancestor = tmp_path / "ro" / "sub", "is not writable"
    argv = [command, "--out", str(out), "--n-bytes", "2048"]
    if command == "sweep":
        argv += ["--device", "cpu"]
    code, _, err = run(argv, capsys)
    assert code == 2 and f"--out {out}: cannot create it" in error_line(err) and ancestor in err
    assert not out.exists()
