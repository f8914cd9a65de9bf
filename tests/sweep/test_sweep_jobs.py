"""``spectral sweep --jobs N``: runs in worker processes give the sequential sweep's records
(all but the time they took), resume as it does, and stop cleanly when interrupted."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

torch = pytest.importorskip("torch")

from spectral.sweep import RUNS_FILE, SweepConfig, plan, read_runs, run_sweep  # noqa: E402
from spectral.sweep.data import load_data, stdlib_bytes  # noqa: E402
from spectral.sweep.parallel import Workers, makespan, thread_share  # noqa: E402
from spectral.sweep.train import TIMING_KEYS  # noqa: E402


def _toy(**kw) -> SweepConfig:
    base = dict(
        optimizer="adamw",
        parameterizations=("sp", "mup"),
        widths=(32, 64),
        depth=1,
        depths=(1,),
        width=32,
        base_width=32,
        base_depth=1,
        log2_lrs=(-8, -6),
        steps=3,
        batch_size=2,
        block_size=8,
        head_dim=32,
        eval_batches=1,
        threads=1,  # the same threads per run in both: the same float32 sums, to the bit
    )
    base.update(kw)
    return SweepConfig(**base)


@pytest.fixture(scope="module")
def corpus(tmp_path_factory):
    f = tmp_path_factory.mktemp("data") / "text.txt"
    f.write_bytes(stdlib_bytes(4000))
    return load_data(f, n_bytes=None)


def _untimed(records):
    return sorted(
        json.dumps({k: v for k, v in r.items() if k not in TIMING_KEYS}, sort_keys=True) for r in records
    )


class _Steps:
    """A RunProgress that counts the steps shown."""

    def __init__(self):
        self.total = self.shown = 0

    def start(self, description, total):
        self.total = total

    def describe(self, description):
        pass

    def advance(self, steps):
        self.shown += steps

    def stop(self):
        pass


def test_makespan_hands_runs_to_the_worker_free_first():
    assert makespan([3, 1, 1, 1], 1) == 6
    assert makespan([3, 1, 1, 1], 2) == 3  # 3 | 1+1+1
    assert makespan([1, 1, 3], 2) == 4  # 1+3 | 1: in order, not the best packing
    assert makespan([], 4) == 0
    assert thread_share(10**6) == 1 and thread_share(1) >= 1


@pytest.mark.slow  # spawns two workers (each imports torch) and trains 8 runs twice
def test_jobs_records_equal_the_sequential_sweeps(tmp_path: Path, corpus):
    cfg = _toy()
    seq = run_sweep(cfg, tmp_path / "one", corpus)
    steps = _Steps()
    with Workers(2) as workers:
        par = run_sweep(cfg, tmp_path / "two", corpus, progress=steps, workers=workers)
        assert len(workers.pids()) == 2
        # the plan's order, as the sequential sweep returns them; records equal but the time
        assert [r["key"] for r in par] == [r["key"] for r in seq]
        assert _untimed(par) == _untimed(seq)
        assert _untimed(read_runs(tmp_path / "two" / RUNS_FILE)) == _untimed(read_runs(tmp_path / "one" / RUNS_FILE))
        # at the base width SP and μP are one run: trained once, reused once, as sequentially
        assert sum("reused_from" in r for r in par) == sum("reused_from" in r for r in seq) == 2
        assert steps.shown == steps.total == cfg.steps * (len(seq) - 2)

        # resumable as the sequential sweep: a lost run (torn line) is trained again, alone
        path = tmp_path / "two" / RUNS_FILE
        lines = path.read_text().splitlines()
        trained = next(i for i, line in enumerate(lines) if "reused_from" not in line)
        kept = lines[:trained] + lines[trained + 1:]
        path.write_text("\n".join(kept) + "\n" + lines[trained][:30])
        steps = _Steps()
        again = run_sweep(cfg, tmp_path / "two", corpus, progress=steps, workers=workers)
        assert steps.total == cfg.steps  # one run to train
        assert _untimed(again) == _untimed(seq)
    assert workers.pids() == []


@pytest.mark.slow  # spawns two workers
def test_interrupted_jobs_stop_every_worker_and_keep_only_whole_records(tmp_path: Path, corpus):
    cfg = _toy(parameterizations=("mup",), widths=(64,), log2_lrs=(-10, -9, -8, -7, -6, -5), steps=12)
    runs = tmp_path / RUNS_FILE
    seen: set[int] = set()

    class Interrupt(_Steps):
        def advance(self, steps):  # Ctrl-C once a run is recorded and others are training
            seen.update(workers.pids())
            if runs.is_file() and runs.read_text():
                raise KeyboardInterrupt
            super().advance(steps)

    workers = Workers(2)
    with pytest.raises(KeyboardInterrupt), workers:
        run_sweep(cfg, tmp_path, corpus, progress=Interrupt(), workers=workers)
    assert len(seen) == 2 and workers.pids() == []
    for pid in seen:
        with pytest.raises(ProcessLookupError):  # every worker terminated (and reaped)
            os.kill(pid, 0)
    text = runs.read_text()
    assert text.endswith("\n")
    done = [json.loads(line) for line in text.splitlines()]  # every line a whole record
    planned = len(plan(cfg))  # both axes: 12 runs, none reused
    assert 1 <= len(done) < planned
    # the same sweep again trains exactly the rest
    steps = _Steps()
    rest = run_sweep(cfg, tmp_path, corpus, progress=steps)
    assert steps.total == cfg.steps * (planned - len(done))
    assert len(rest) == len(read_runs(runs)) == planned


def _sweep(out: Path, text: Path, *words: str) -> int:
    from spectral.cli import main

    return main(["sweep", "--device", "cpu", "--no-progress", "--out", str(out), "--data", str(text),
                 "--widths", "32,64", "--depth", "1", "--depths", "1,2", "--width", "32", "--base-width", "32",
                 "--base-depth", "1", "--log2-lrs=-8,-6", "--steps", "3", "--batch-size", "2", "--block-size", "8",
                 "--eval-batches", "1", "--threads", "1", "--param", "sp", "--param", "mup", *words])


@pytest.mark.slow  # spawns two workers
def test_the_command_with_jobs(tmp_path: Path, capsys, monkeypatch):
    import spectral.sweep.train as sweep_train

    text = tmp_path / "text.txt"
    text.write_bytes(stdlib_bytes(4000))
    assert _sweep(tmp_path / "two", text, "--jobs", "2") == 0
    two = read_runs(tmp_path / "two" / "adamw" / RUNS_FILE)
    assert len(two) == 12 and (tmp_path / "two" / "adamw" / "summary.md").is_file()

    def boom(*a, **k):
        raise AssertionError("a run recorded by --jobs 2 was trained again")

    monkeypatch.setattr(sweep_train, "train_run", boom)  # one process resumes what workers wrote
    assert _sweep(tmp_path / "two", text) == 0
    monkeypatch.undo()
    capsys.readouterr()
    # --estimate --jobs 2: the runs timed with a worker's threads, then handed to 2 workers
    assert _sweep(tmp_path / "three", text, "--estimate", "--jobs", "2") == 0
    out = capsys.readouterr().out
    (line,) = [ln for ln in out.splitlines() if ln.startswith("{")]
    est = json.loads(line)["estimate"]
    assert (est["jobs"], est["threads_per_run"], est["runs"]) == (2, 1, 10)  # 2 of 12 reused
    assert est["seconds"] <= est["run_seconds"] + est["overhead_s"] + 0.1
    assert "with --jobs 2" in out and not (tmp_path / "three").exists()


def test_jobs_must_be_a_positive_count(tmp_path: Path, capsys):
    from spectral.cli import main

    assert main(["sweep", "--out", str(tmp_path / "o"), "--jobs", "0"]) == 2
    assert "--jobs" in capsys.readouterr().err and not (tmp_path / "o").exists()
