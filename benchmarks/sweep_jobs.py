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


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--jobs", type=int, nargs="+", default=[1, 2], help="job counts (default: 1 2)")
    parser.add_argument("--rounds", type=int, default=3, help="rounds (at least 3)")
    parser.add_argument("--device", default="cpu")
    parser.add_argument("extra", nargs="*", help="more sweep arguments (after --), e.g. -- --widths 256,512")
    args = parser.parse_args(argv)
    rounds = max(3, args.rounds)

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
