"""Benchmark: runs per hour of ``spectral sweep`` with ``--jobs 1`` and ``--jobs N``.

One invocation times the same small sweep — the cpu preset's model, tokens and 120 steps on
fewer sizes and rates (12 μP runs by default) — with each job count, alternating the order
each round (so a load that comes and goes touches every count alike), each time in a fresh
output folder and a new process: the whole command as a user waits for it (planning,
starting the workers, training, the reports). ``--jobs 1`` trains in the command's process
with torch's default threads (all cores); ``--jobs N`` in N workers with cores/N threads each.

Run from the repository root::

    .venv/bin/python benchmarks/sweep_jobs.py                  # --jobs 1 and 2, 3 rounds
    .venv/bin/python benchmarks/sweep_jobs.py --jobs 1 4 8 --device cuda --rounds 3
    .venv/bin/python benchmarks/sweep_jobs.py --in-process     # about a minute on 2 idle cores

``--in-process`` measures the steady state instead, in this one process: the workers are
started once (their start-up, spawning and importing torch, timed on its own; this process
warmed by two one-step runs as well), then the same
8 runs (the cpu preset's model at widths 32 and 64, 4 rates, ``--steps`` 40) are trained by
``run_sweep`` alone (its runs in this process with all cores' threads, as ``--jobs 1``) and
by the N workers (cores/N threads each), alternating, a fresh folder each time, 3 rounds:
the runs per hour of a long sweep, whose fixed costs (imports, reports, starting the
workers) a few-minute command would otherwise mix in. It checks that both record the same
runs (keys) and prints the ratio of the medians. A third arm trains the same runs in this
process at one worker's thread share (cores/N): N workers can at best train N runs in the
time one takes alone at that share, so ``--jobs 1``'s wall over a 1/N of that arm's is the
ceiling no scheduling passes on these cores (how far torch's threads speed up one run is
what it measures), printed beside the ratio.

Prints a table: per job count the wall time of each round, the median, runs per hour at the
median and the speed-up over the first count, and each round's 1-minute load average before
and after it (on a shared machine, others' work: two OpenMP threads of ``--jobs 1`` on busy
cores slow down far more than two one-thread workers do, so a loaded round flatters
``--jobs N``; ``-- --threads 1`` gives every count one thread per run). Not a test: it
reports, it does not fail.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from dataclasses import replace
from pathlib import Path

SWEEP = [
    "--preset", "cpu", "--param", "mup", "--widths", "32,64", "--depths", "2,4",
    "--log2-lrs=-9,-8,-7,-6", "--no-progress",
]
"""The cpu preset (the GPT at base 32 × 2, 120 steps, batch 16 × 64 tokens) on sizes
(32, 2), (64, 2), (32, 4) and four rates: 12 runs."""


def _runs(out: Path) -> int:
    return sum(len(p.read_text().splitlines()) for p in out.glob("*/runs.jsonl"))


def _once(jobs: int, device: str, extra: list[str], folder: Path) -> tuple[float, int]:
    out = folder / f"jobs{jobs}-{time.monotonic_ns()}"
    cmd = [sys.executable, "-m", "spectral", "sweep", *SWEEP, "--device", device, "--jobs", str(jobs),
           "--out", str(out), *extra]
    env = {k: v for k, v in os.environ.items() if k != "OMP_NUM_THREADS"}  # torch's defaults
    start = time.perf_counter()
    subprocess.run(cmd, check=True, stdout=subprocess.DEVNULL, stdin=subprocess.DEVNULL, env=env)
    return time.perf_counter() - start, _runs(out)


def in_process(jobs: int, rounds: int, steps: int) -> int:
    """The steady state: run_sweep alone against ``jobs`` workers started once."""
    from spectral.sweep import SweepConfig, run_sweep
    from spectral.sweep.data import load_data, stdlib_bytes
    from spectral.sweep.parallel import Workers, cores, thread_share

    with tempfile.TemporaryDirectory(prefix="spectral-bench-jobs-") as tmp:
        text = Path(tmp) / "text.txt"
        text.write_bytes(stdlib_bytes(2**20))
        corpus = load_data(text, n_bytes=None)
        cpu = dict(  # the cpu preset's model, batch and context; fewer sizes, rates, steps
            optimizer="adamw", parameterizations=("mup",), widths=(32, 64), depth=2, depths=(2,),
            width=32, base_width=32, base_depth=2, head_dim=32, log2_lrs=(-9, -8, -7, -6),
            steps=steps, batch_size=16, block_size=64, eval_batches=2, device="cpu",
        )
        one = SweepConfig(**cpu, threads=cores())  # --jobs 1: this process, every core
        many = SweepConfig(**cpu)  # --jobs N: each worker's share (Workers' threads)
        # the ceiling's measure: the same runs in this process with one worker's thread share
        share = SweepConfig(**cpu, threads=thread_share(jobs))
        walls: dict[int, list[float]] = {1: [], jobs: [], 0: []}
        keys: dict[int, list[str]] = {}
        with Workers(jobs) as workers:
            start = time.perf_counter()
            warm = SweepConfig(**{**cpu, "steps": 1, "log2_lrs": (-9,)})
            run_sweep(warm, Path(tmp) / "warm", corpus, workers=workers)
            startup = time.perf_counter() - start
            run_sweep(replace(warm, threads=cores()), Path(tmp) / "warm-one", corpus)  # this process's first runs
            print(f"{jobs} workers started and warmed (spawn, import torch, 2 one-step runs) in "
                  f"{startup:.1f} s", flush=True)
            for r in range(rounds):
                for n in ((1, jobs, 0) if r % 2 == 0 else (0, jobs, 1)):
                    load = os.getloadavg()[0]
                    start = time.perf_counter()
                    cfg = {1: one, jobs: many, 0: share}[n]
                    records = run_sweep(cfg, Path(tmp) / f"r{r}-j{n}", corpus, workers=workers if n == jobs else None)
                    walls[n].append(time.perf_counter() - start)
                    keys.setdefault(n, sorted(rec["key"] for rec in records))
                    label = f"--jobs {n}" if n else f"one process, {share.threads} thread(s)"
                    print(f"round {r + 1}: {label}: {len(records)} runs in {walls[n][-1]:.1f} s "
                          f"(1-minute load average {load:.2f} before, {os.getloadavg()[0]:.2f} after)",
                          flush=True)
    if not keys[1] == keys[jobs] == keys[0]:
        raise SystemExit(f"--jobs {jobs} recorded other runs than --jobs 1")
    runs = len(keys[1])
    print(f"\nin-process steady state: {runs} runs of {steps} steps (cpu preset model, widths 32 and 64), "
          f"{cores()} cores, {rounds} rounds alternating")
    print(f"{'jobs':>4}  {'rounds (s)':<24}  {'median s':>8}  {'runs/hour':>9}")
    for n in (1, jobs):
        med = statistics.median(walls[n])
        print(f"{n:>4}  {', '.join(f'{w:.1f}' for w in walls[n]):<24}  {med:>8.1f}  {runs / med * 3600:>9.0f}")
    ratio = statistics.median(walls[1]) / statistics.median(walls[jobs])
    # N workers can at best train N runs in the time one run takes at a worker's thread share
    # alone in this process: the ratio no scheduling of these runs can pass on these cores
    alone = statistics.median(walls[0])
    ceiling = statistics.median(walls[1]) / (alone / jobs)
    print(f"{'':>4}  {', '.join(f'{w:.1f}' for w in walls[0]):<24}  {alone:>8.1f}  {runs / alone * 3600:>9.0f}"
          f"  (one process, {share.threads} thread(s) per run: a worker's share, alone)")
    print(f"runs per hour, --jobs {jobs} / --jobs 1 (medians): {ratio:.2f}x (issue 51's bar: 1.6x); "
          f"starting the workers: {startup:.1f} s once per command")
    print(f"ceiling: {jobs} runs side by side, each as fast as alone at {share.threads} thread(s): "
          f"{ceiling:.2f}x; --jobs {jobs} reaches {ratio / ceiling:.0%} of it (the rest: what side by side "
          f"costs: shared caches and memory bandwidth, the workers' messages)")
    print(json.dumps({"in_process": {"jobs": jobs, "runs": runs, "steps": steps, "startup_s": round(startup, 2),
                                     "walls_s": {str(n): [round(w, 2) for w in walls[n]] for n in (1, jobs)},
                                     "alone_walls_s": [round(w, 2) for w in walls[0]],
                                     "ratio": round(ratio, 3), "ceiling": round(ceiling, 3),
                                     "one_process_share_threads": share.threads}}, sort_keys=True))
    return 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--jobs", type=int, nargs="+", default=[1, 2], help="job counts (default: 1 2)")
    parser.add_argument("--rounds", type=int, default=3, help="rounds (at least 3)")
    parser.add_argument("--device", default="cpu")
    parser.add_argument("--in-process", action="store_true",
                        help="the steady state in this process: --jobs 1 against the last count, workers started once")
    parser.add_argument("--steps", type=int, default=40, help="with --in-process: steps per run (default 40)")
    parser.add_argument("extra", nargs="*", help="more sweep arguments (after --), e.g. -- --widths 256,512")
    args = parser.parse_args(argv)
    rounds = max(3, args.rounds)
    if args.in_process:
        return in_process(max(args.jobs), rounds, args.steps)

    walls: dict[int, list[float]] = {n: [] for n in args.jobs}
    loads: dict[int, list[tuple[float, float]]] = {n: [] for n in args.jobs}  # others' work shows here
    runs: dict[int, int] = {}
    with tempfile.TemporaryDirectory(prefix="spectral-bench-jobs-") as tmp:
        for r in range(rounds):
            order = args.jobs if r % 2 == 0 else list(reversed(args.jobs))
            for n in order:
                load = os.getloadavg()[0]
                wall, count = _once(n, args.device, args.extra, Path(tmp))
                loads[n].append((round(load, 2), round(os.getloadavg()[0], 2)))
                walls[n].append(wall)
                runs.setdefault(n, count)
                if count != runs[n]:
                    raise SystemExit(f"--jobs {n}: {count} runs, then {runs[n]}")
                print(f"round {r + 1}: --jobs {n}: {count} runs in {wall:.1f} s "
                      f"(1-minute load average {loads[n][-1][0]:.2f} before, {loads[n][-1][1]:.2f} after)",
                      flush=True)

    cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count()
    print(f"\nspectral sweep {' '.join(SWEEP)} --device {args.device} {' '.join(args.extra)}".rstrip())
    print(f"{cores} cores; {rounds} rounds, order alternating; wall time of the whole command")
    print(f"{'jobs':>4}  {'runs':>4}  {'rounds (s)':<24}  {'median s':>8}  {'runs/hour':>9}  {'speed-up':>8}")
    first = statistics.median(walls[args.jobs[0]])
    rows = []
    for n in args.jobs:
        med = statistics.median(walls[n])
        per_hour = runs[n] / med * 3600
        rows.append({"jobs": n, "runs": runs[n], "walls_s": [round(w, 2) for w in walls[n]],
                     "median_s": round(med, 2), "runs_per_hour": round(per_hour, 1),
                     "speedup": round(first / med, 3), "load_before_after": loads[n]})
        shown = ", ".join(f"{w:.1f}" for w in walls[n])
        print(f"{n:>4}  {runs[n]:>4}  {shown:<24}  {med:>8.1f}  {per_hour:>9.0f}  {first / med:>7.2f}×")
    print(json.dumps({"sweep_jobs": rows, "device": args.device, "cores": cores}, sort_keys=True))
    return 0


if __name__ == "__main__":
    sys.exit(main())
