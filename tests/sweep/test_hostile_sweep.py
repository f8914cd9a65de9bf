"""Hostile and careless input on ``spectral sweep``'s records (issue #22).

A damaged or foreign line of ``runs.jsonl`` is skipped with one warning naming the file and
line, and loses no good run; an unwritable ``runs.jsonl`` is refused before the first run;
two sweeps on one ``--out`` record every run exactly once; a sweep killed with SIGKILL and
resumed loses and duplicates nothing. The sweeps are tiny (widths 32, 64; 3 steps).
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

pytest.importorskip("torch")

from spectral.cli import main  # noqa: E402
from spectral.sweep import RUNS_FILE, read_runs  # noqa: E402
from spectral.sweep.records import LOCK_SUFFIX, append_run, check_appendable, sweep_lock  # noqa: E402

ROOT = Path(__file__).resolve().parents[2]

TINY = ["--device", "cpu", "--no-progress", "--widths", "32,64", "--depth", "1", "--depths", "1,2", "--width", "32",
        "--base-width", "32", "--base-depth", "1", "--log2-lrs=-8,-6", "--steps", "3", "--batch-size", "2",
        "--block-size", "8", "--eval-batches", "1", "--threads", "1", "--param", "sp", "--param", "mup",
        "--tune", "none"]
PLANNED = 12  # 2 parameterisations × (2 widths + 1 more depth) × 2 learning rates


@pytest.fixture(scope="module")
def text(tmp_path_factory) -> Path:
    import inspect

    path = tmp_path_factory.mktemp("data") / "text.txt"
    path.write_text(inspect.getsource(json) * 4, encoding="utf-8")
    return path


@pytest.fixture(scope="module")
def swept(tmp_path_factory, text) -> Path:
    """One finished tiny sweep; tests copy it."""
    out = tmp_path_factory.mktemp("swept") / "out"
    assert main(["sweep", *TINY, "--data", str(text), "--out", str(out)]) == 0
    return out


def _copy(swept: Path, tmp_path: Path) -> Path:
    out = tmp_path / "out"
    shutil.copytree(swept, out)
    return out


def _keys(path: Path) -> list[str]:
    """The key of every complete line, duplicates kept (a torn last line is not a run)."""
    keys = []
    for line in path.read_bytes().splitlines():
        try:
            keys.append(json.loads(line)["key"])
        except ValueError:
            continue
    return keys


# --------------------------------------------------------------------------------------
# damaged and foreign lines
# --------------------------------------------------------------------------------------

BAD_LINES: list[tuple[bytes, str]] = [
    (b"\xff\xfe not utf-8", "not UTF-8"),
    (b'{"key": "\xc3\x28"}', "not UTF-8"),
    (b"garbage text", "not a JSON line"),
    (b'{"key": [1, 2], "fingerprint": "f"}', "no string 'key'"),
    (b'{"key": {"a": 1}, "fingerprint": "f"}', "no string 'key'"),
    (b'{"key": null, "fingerprint": "f"}', "no string 'key'"),
    (b'{"key": "", "fingerprint": "f"}', "no string 'key'"),
    (b'{"key": "k"}', "no string 'fingerprint'"),
    (b'{"key": "k", "fingerprint": 7}', "no string 'fingerprint'"),
    (b'{"key": "k", "fingerprint": "f", "val_loss": "oops"}', "'val_loss' is \"oops\""),
    (b'{"key": "k", "fingerprint": "f", "val_loss": true}', "'val_loss' is true"),
    (b'{"key": "k", "fingerprint": "f", "val_loss": [1]}', "'val_loss'"),
    (b'{"key": "k", "fingerprint": "f", "val_loss": NaN}', "'val_loss'"),
    (b'{"key": "k", "fingerprint": "f", "val_loss": Infinity}', "'val_loss'"),
    (b'{"key": "k", "fingerprint": "f", "train_loss": "x"}', "'train_loss'"),
    (b'{"key": "k", "fingerprint": "f", "width": "64"}', "'width' is not an integer"),
    (b'{"key": "k", "fingerprint": "f", "width": 64.5}', "'width' is not an integer"),
    (b'{"key": "k", "fingerprint": "f", "depth": true}', "'depth' is not an integer"),
    (b'{"key": "k", "fingerprint": "f", "log2_lr": null}', "'log2_lr' is not an integer"),
    (b'{"key": "k", "fingerprint": "f", "settings": []}', "'settings' is not an object"),
    (b'{"key": "k", "fingerprint": "f", "diverged": "no"}', "'diverged' is not true or false"),
    (b'{"key": "k", "fingerprint": "f", "optimizer": 3}', "'optimizer' is not a string"),
    (b'{"key": "k", "fingerprint": "f", "parameterization": ["mup"]}', "'parameterization' is not a string"),
    (b"[1, 2, 3]", "a JSON list"),
    (b'"just a string"', "a JSON str"),
    (b"42", "a JSON int"),
    (b"null", "a JSON NoneType"),
    (b"[" * 100_000, "not a JSON line"),
    (b'{"key": "k", "fingerprint": "f"', "not a JSON line"),
    (b"\x00\x00{}", "not a JSON line"),
    (b'{"key": "k", "fingerprint": "f", "seed": ' + b"7" * 5001 + b"}", "an integer of 5001 digits in JSON"),
]


@pytest.mark.parametrize("line,why", BAD_LINES, ids=range(len(BAD_LINES)))
def test_read_runs_skips_a_damaged_line_with_one_warning(line, why, tmp_path):
    p = tmp_path / RUNS_FILE
    good = [{"key": "a", "fingerprint": "fa", "val_loss": 1.5}, {"key": "b", "fingerprint": "fb", "val_loss": None}]
    p.write_bytes(json.dumps(good[0]).encode() + b"\n" + line + b"\n" + json.dumps(good[1]).encode() + b"\n")
    warnings: list[str] = []
    assert read_runs(p, warn=warnings.append) == good
    assert len(warnings) == 1
    assert warnings[0].startswith(f"{p}:2: skipped: ") and why in warnings[0]


def test_read_runs_counts_a_key_once(tmp_path):
    p = tmp_path / RUNS_FILE
    p.write_text('{"key": "a", "fingerprint": "1"}\n{"key": "a", "fingerprint": "2"}\n')
    assert read_runs(p) == [{"key": "a", "fingerprint": "1"}]


def test_read_runs_of_an_unreadable_file_names_it(tmp_path):
    p = tmp_path / RUNS_FILE
    p.mkdir()
    with pytest.raises(Exception, match=str(p)):
        read_runs(p)


@pytest.mark.parametrize(
    "line",
    [b"\xff\xfe", b'{"key": [1]}', b'{"key": "x", "val_loss": "oops"}', b'{"key": "z", "fingerprint": "f", "val_loss": "oops"}'],
)
@pytest.mark.slow  # seconds on the 2-core CPU: out of pytest -m "not slow"
def test_resume_and_report_only_survive_a_damaged_line(line, swept, tmp_path, text, capsys, unplotted):
    out = _copy(swept, tmp_path)
    runs = out / "adamw" / RUNS_FILE
    before = runs.read_bytes()
    lines = before.splitlines(keepends=True)
    runs.write_bytes(b"".join(lines[:3]) + line + b"\n" + b"".join(lines[3:]))
    drift = json.loads((out / "adamw" / "drift.json").read_text())
    for extra in (["--report-only"], []):
        code = main(["sweep", *TINY, "--data", str(text), "--out", str(out), *extra])
        got, err = capsys.readouterr()
        assert code == 0, err
        assert "Traceback" not in err
        warnings = [ln for ln in err.splitlines() if ln.startswith("warning:")]
        assert warnings == [f"warning: {runs}:4: skipped: " + warnings[0].split(": skipped: ")[1]]
        assert json.loads((out / "adamw" / "drift.json").read_text()) == drift  # no good run lost
    assert len(read_runs(runs)) == PLANNED  # nothing trained again


@pytest.mark.slow  # seconds on the 2-core CPU: out of pytest -m "not slow"
def test_report_only_with_a_damaged_sweep_json(swept, tmp_path, text, capsys):
    out = _copy(swept, tmp_path)
    (out / "adamw" / "sweep.json").write_bytes(b"\xff{not json")
    code = main(["sweep", *TINY, "--data", str(text), "--out", str(out), "--report-only"])
    _, err = capsys.readouterr()
    assert code == 0 and "Traceback" not in err
    assert "sweep.json: ignored" in err


@pytest.mark.skipif(os.geteuid() == 0, reason="root writes read-only files")
def test_unwritable_runs_jsonl_is_refused_before_the_first_run(tmp_path, text, capsys, monkeypatch):
    import spectral.sweep.train

    def boom(*a, **k):
        raise AssertionError("trained before the refusal")

    monkeypatch.setattr(spectral.sweep.train, "train_run", boom)
    runs = tmp_path / "out" / "adamw" / RUNS_FILE
    runs.parent.mkdir(parents=True)
    runs.write_text("")
    runs.chmod(0o444)
    code = main(["sweep", *TINY, "--data", str(text), "--out", str(tmp_path / "out")])
    _, err = capsys.readouterr()
    assert code == 2 and f"{runs}: not writable" in err and len(err.splitlines()) == 1


@pytest.mark.parametrize("kind", ["folder", "dangling"])
def test_runs_jsonl_that_is_not_a_file_is_refused_before_the_first_run(kind, tmp_path, text, capsys, monkeypatch):
    import spectral.sweep.train

    monkeypatch.setattr(spectral.sweep.train, "train_run", lambda *a, **k: 1 / 0)
    runs = tmp_path / "out" / "adamw" / RUNS_FILE
    runs.parent.mkdir(parents=True)
    if kind == "folder":
        runs.mkdir()
    else:
        runs.symlink_to(tmp_path / "nowhere")
    code = main(["sweep", *TINY, "--data", str(text), "--out", str(tmp_path / "out")])
    _, err = capsys.readouterr()
    assert code == 2 and str(runs) in err and len(err.splitlines()) == 1


def test_check_appendable_and_append_name_the_file(tmp_path):
    folder = tmp_path / RUNS_FILE
    folder.mkdir()
    with pytest.raises(Exception, match=f"{folder}: not a regular file"):
        check_appendable(folder)
    with pytest.raises(Exception, match=f"{folder}: cannot append"):
        append_run(folder, {"key": "a", "fingerprint": "f"})


@pytest.mark.slow  # seconds on the 2-core CPU: out of pytest -m "not slow"
def test_the_lock_excludes_a_second_holder(tmp_path):
    runs = tmp_path / RUNS_FILE
    code = (
        "import sys, time; from spectral.sweep.records import sweep_lock\n"
        "with sweep_lock(sys.argv[1]):\n"
        "    print('held', flush=True); time.sleep(3)\n"
    )
    child = subprocess.Popen([sys.executable, "-c", code, str(runs)], stdout=subprocess.PIPE, text=True)
    try:
        assert child.stdout.readline().strip() == "held"
        waited: list[str] = []
        t0 = time.monotonic()
        with sweep_lock(runs, wait=waited.append):
            assert time.monotonic() - t0 > 0.5
        assert waited and str(runs) in waited[0]
    finally:
        child.wait(timeout=30)


# --------------------------------------------------------------------------------------
# two processes, and kill -9
# --------------------------------------------------------------------------------------


def _sweep_process(out: Path, text: Path, *extra: str) -> subprocess.Popen:
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    return subprocess.Popen(
        [sys.executable, "-m", "spectral.sweep", *TINY, "--data", str(text), "--out", str(out), *extra],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env, cwd=ROOT,
    )


def _held(lock: Path) -> bool:
    """Whether another process holds the sweep lock ``lock`` (tried without waiting)."""
    import fcntl

    if not lock.exists():
        return False
    fd = os.open(lock, os.O_RDWR)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        return True
    finally:
        os.close(fd)  # also releases the lock if this probe took it
    return False


@pytest.mark.slow
def test_two_sweeps_on_one_out_record_every_run_once(tmp_path, text, capsys):
    """A sweep in another process holds the lock; the same sweep started here meanwhile
    waits for it, then trains nothing (the second sweep runs in this process: a second
    interpreter importing torch would add seconds and test nothing more)."""
    out = tmp_path / "out"
    runs = out / "adamw" / RUNS_FILE
    other = _sweep_process(out, text)
    deadline = time.monotonic() + 240
    while time.monotonic() < deadline and other.poll() is None and not _held(Path(f"{runs}{LOCK_SUFFIX}")):
        time.sleep(0.01)
    assert other.poll() is None, "the other sweep ended before it was seen holding the lock"
    capsys.readouterr()
    code = main(["sweep", *TINY, "--data", str(text), "--out", str(out)])
    stdout, stderr = capsys.readouterr()
    results = other.communicate(timeout=300)
    assert other.returncode == 0 and code == 0, (results, stderr)
    assert "waiting for it to finish" in stdout  # it came while the other held the lock
    assert f"{PLANNED} runs planned, {PLANNED} already in" in stdout
    keys = _keys(runs)
    assert len(keys) == PLANNED and len(set(keys)) == PLANNED


@pytest.mark.slow
def test_kill_9_in_the_middle_then_resume_loses_and_duplicates_nothing(tmp_path, text, capsys):
    out = tmp_path / "out"
    runs = out / "adamw" / RUNS_FILE
    slow = ("--steps", "50")  # long enough runs (9 left after the 3rd) that the kill lands inside the sweep
    p = _sweep_process(out, text, *slow)
    deadline = time.monotonic() + 240
    while time.monotonic() < deadline and (not runs.exists() or len(runs.read_bytes().splitlines()) < 3):
        time.sleep(0.02)
    p.send_signal(signal.SIGKILL)
    p.communicate(timeout=60)
    done = _keys(runs)
    assert 3 <= len(done) < PLANNED, "the sweep finished before it was killed"
    # resumed in this process (a third interpreter importing torch again would add seconds
    # and test nothing more: what the kill left is on disk, the lock died with its holder)
    capsys.readouterr()
    code = main(["sweep", *TINY, "--data", str(text), "--out", str(out), *slow])
    stdout, stderr = capsys.readouterr()
    assert code == 0, stderr
    keys = _keys(runs)
    assert keys[: len(done)] == done  # what was recorded stays
    assert len(keys) == PLANNED and len(set(keys)) == PLANNED
    assert f"{PLANNED} runs planned, {len(done)} already in" in stdout


@pytest.mark.slow  # seconds on the 2-core CPU: out of pytest -m "not slow"
def test_wrote_lines_escape_a_newline_in_the_out_path(swept, tmp_path, text, capsys):
    """Issue 30: ``--out $'a\\nb'`` prints each written file on one line, the newline escaped."""
    out = tmp_path / "a\nb"
    shutil.copytree(swept, out)
    before = sorted(p.relative_to(out) for p in out.rglob("*"))
    code = main(["sweep", *TINY, "--data", str(text), "--out", str(out), "--report-only"])
    got, err = capsys.readouterr()
    assert code == 0, err
    wrote = [line for line in got.splitlines() if line.startswith("wrote ")]
    assert wrote and all(line.startswith(f"wrote {tmp_path}/a\\x0ab/") for line in wrote), got
    assert not [line for line in got.splitlines() if line.startswith("b/")]  # no half line
    assert sorted(p.relative_to(out) for p in out.rglob("*")) == before  # nothing else made


@pytest.mark.slow  # seconds on the 2-core CPU: out of pytest -m "not slow"
def test_planned_line_escapes_a_newline_in_the_out_path(swept, tmp_path, text, capsys):
    """Issue 39: the resumed sweep's "runs planned, already in OUT" line is one line too."""
    out = tmp_path / "a\nb"
    shutil.copytree(swept, out)
    code = main(["sweep", *TINY, "--data", str(text), "--out", str(out)])
    got, err = capsys.readouterr()
    assert code == 0, err
    lines = (got + err).splitlines()
    planned = [line for line in lines if "runs planned" in line]
    assert planned == [f"{PLANNED} runs planned, {PLANNED} already in {tmp_path}/a\\x0ab/adamw/runs.jsonl"]
    assert not [line for line in lines if line.startswith("b/")]  # no half line
