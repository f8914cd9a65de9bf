"""Benchmark: end-to-end cost of the block depth ``k`` (``spectral derive`` and ``codegen``).

Verification bounds the ``4 + 3·2^k`` condition terms factor by factor instead of listing
them, and ``codegen`` derives once, so neither command should grow with ``k``. Targets
(issue 10):

* ``spectral derive adamw --k 16`` and ``--k 64`` each take at most 1.5 × ``--k 2``;
* ``spectral codegen adamw --k K`` takes at most 1.2 × ``spectral derive adamw --k K``.

Every measurement is a new process started the same way (``python -m spectral``, output
to ``/dev/null``), so start-up is the same for all of them; the commands are run in
alternation, round after round, so drifting machine load hits all of them alike; the
median of each is compared. Two clocks are recorded per run: wall time, and the CPU time
(user + system) the child process used. On a machine shared with other work the wall
time mostly measures the other work (a single-threaded process waits for a core), so
the targets are checked on CPU time unless ``--clock wall`` is given; both are printed.
Run from the repository root::

    .venv/bin/python benchmarks/bench_k.py                 # 9 rounds, CPU clock
    .venv/bin/python benchmarks/bench_k.py --rounds 15 --ks 2 16 64 --clock wall

Prints a table of medians and ratios; exits 1 if a ratio misses its target (``--no-check``
only reports).
"""

from __future__ import annotations

import argparse
import resource
import statistics
import subprocess
import sys
import time

DERIVE_RATIO = 1.5
"""Largest ``derive --k K`` / ``derive --k 2`` median ratio allowed."""
CODEGEN_RATIO = 1.2
"""Largest ``codegen --k K`` / ``derive --k K`` median ratio allowed."""
BASE_K = 2


def command(kind: str, k: int, optimizer: str) -> list[str]:
    cmd = [sys.executable, "-m", "spectral", kind, optimizer, "--k", str(k)]
    if kind == "codegen":
        cmd += ["--base-width", "64", "--base-depth", "2"]
    return cmd


def _children_cpu() -> float:
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def run_once(cmd: list[str]) -> tuple[float, float]:
    """``(wall, cpu)`` seconds of one run of ``cmd`` in a new process."""
    cpu, start = _children_cpu(), time.perf_counter()
    done = subprocess.run(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, check=False)
    wall, cpu = time.perf_counter() - start, _children_cpu() - cpu
    if done.returncode != 0:
        raise SystemExit(f"{' '.join(cmd[2:])} exited {done.returncode}: {done.stderr.decode()}")
    return wall, cpu


Case = tuple[str, int]


def measure(ks: list[int], rounds: int, optimizer: str) -> dict[Case, list[tuple[float, float]]]:
    """``(wall, cpu)`` seconds per (command, k), the commands alternating within each round."""
    cases = [(kind, k) for k in ks for kind in ("derive", "codegen")]
    for case in cases:  # warm the file-system cache and byte-code before timing
        run_once(command(*case, optimizer))
    times: dict[Case, list[tuple[float, float]]] = {case: [] for case in cases}
    for r in range(rounds):
        order = cases if r % 2 == 0 else cases[::-1]
        for case in order:
            times[case].append(run_once(command(*case, optimizer)))
    return times


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rounds", type=int, default=9, help="alternating rounds (default 9)")
    ap.add_argument("--ks", type=int, nargs="+", default=[2, 16, 64], help="block depths")
    ap.add_argument("--optimizer", default="adamw")
    ap.add_argument(
        "--clock", choices=("cpu", "wall"), default="cpu", help="clock the targets are checked on"
    )
    ap.add_argument("--no-check", action="store_true", help="report only; always exit 0")
    args = ap.parse_args(argv)
    ks = sorted(set(args.ks) | {BASE_K})
    times = measure(ks, args.rounds, args.optimizer)
    wall = {case: statistics.median(t[0] for t in ts) for case, ts in times.items()}
    cpu = {case: statistics.median(t[1] for t in ts) for case, ts in times.items()}
    checked = cpu if args.clock == "cpu" else wall
    failed = []
    print(f"{args.optimizer}: median of {args.rounds} alternating runs, a new process each")
    for name, med in (("wall", wall), ("cpu", cpu)):
        base = med[("derive", BASE_K)]
        print(f"\n{name} clock" + (" (targets checked)" if med is checked else ""))
        print(f"{'k':>4}  {'derive s':>9}  {'/ k=2':>6}  {'codegen s':>9}  {'/ derive':>8}")
        for k in ks:
            d, c = med[("derive", k)], med[("codegen", k)]
            print(f"{k:>4}  {d:9.3f}  {d / base:6.2f}  {c:9.3f}  {c / d:8.2f}")
            if med is not checked:
                continue
            if k != BASE_K and d / base > DERIVE_RATIO:
                failed.append(f"derive --k {k} is {d / base:.2f} × --k {BASE_K} (≤ {DERIVE_RATIO})")
            if c / d > CODEGEN_RATIO:
                failed.append(f"codegen --k {k} is {c / d:.2f} × derive (≤ {CODEGEN_RATIO})")
    for line in failed:
        print("MISSED:", line)
    return 1 if failed and not args.no_check else 0


if __name__ == "__main__":
    sys.exit(main())
