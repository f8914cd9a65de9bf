"""Benchmark: how fast rules are derived, in-process and end to end.

(a) the whole catalog × k ∈ {1, 2, 3, 4}, derived in one process, repeated; target ≤ 100 ms.
(b) ``spectral derive adamw --format json`` as a subprocess; target ≤ 0.5 s.

Run from the repository root::

    .venv/bin/python benchmarks/bench_derive.py            # 20 and 15 repeats
    .venv/bin/python benchmarks/bench_derive.py --repeat 50 --runs 30

The in-process benchmark runs twice: with the engine's ``functools`` caches (the Θ-scale
of expressions) cleared before each repeat, i.e. a cold derivation, and with them warm, as
a long-lived process sees it. Prints a table of medians; exits 1 if a median misses its target
(``--no-check`` only reports).
"""

from __future__ import annotations

import argparse
import resource
import statistics
import subprocess
import sys
import time

TARGET_CATALOG_S = 0.100
TARGET_CLI_S = 0.5
KS = (1, 2, 3, 4)


def _clear_caches() -> None:
    """Empty every ``functools`` cache in the engine (not the catalog), so repeats are cold."""
    import functools

    import spectral

    for name, module in list(sys.modules.items()):
        if not (name == "spectral" or name.startswith("spectral.")) or module is None:
            continue
        for obj in vars(module).values():
            if isinstance(obj, functools._lru_cache_wrapper) and obj is not spectral.catalog:
                obj.cache_clear()


def bench_catalog(repeat: int, *, cold: bool) -> tuple[list[float], list[float]]:
    from spectral import catalog, derive

    names = list(catalog())
    for name in names:  # warm imports and the catalog
        derive(name, k=2)
    times, cpu = [], []
    for _ in range(repeat):
        if cold:
            _clear_caches()
        start, start_cpu = time.perf_counter(), time.process_time()
        for name in names:
            for k in KS:
                d = derive(name, k=k)
                assert d.verified
        times.append(time.perf_counter() - start)
        cpu.append(time.process_time() - start_cpu)
    return times, cpu


def _children_cpu() -> float:
    r = resource.getrusage(resource.RUSAGE_CHILDREN)
    return r.ru_utime + r.ru_stime


def bench_cli(runs: int) -> tuple[list[float], list[float]]:
    cmd = [sys.executable, "-m", "spectral", "derive", "adamw", "--format", "json"]
    subprocess.run(cmd, check=True, capture_output=True)  # warm the OS file cache
    times, cpu = [], []
    for _ in range(runs):
        start, start_cpu = time.perf_counter(), _children_cpu()
        subprocess.run(cmd, check=True, capture_output=True, stdin=subprocess.DEVNULL)
        times.append(time.perf_counter() - start)
        cpu.append(_children_cpu() - start_cpu)
    return times, cpu


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=20, help="in-process repeats (≥ 20)")
    parser.add_argument("--runs", type=int, default=15, help="subprocess runs (≥ 15)")
    parser.add_argument("--no-check", action="store_true", help="do not fail on a missed target")
    args = parser.parse_args(argv)

    from spectral import catalog

    n = len(catalog())
    rows = []
    for cold in (True, False):
        times, cpu = bench_catalog(max(1, args.repeat), cold=cold)
        kind = "caches cleared" if cold else "caches warm"
        label = f"catalog ({n} optimizers) × k∈{{1,2,3,4}}, in-process, {kind}"
        rows.append((label, times, cpu, TARGET_CATALOG_S))
    times, cpu = bench_cli(max(1, args.runs))
    rows.append(("spectral derive adamw --format json (subprocess)", times, cpu, TARGET_CLI_S))

    # Wall-clock medians are what the targets are about; CPU time (user + system) shows
    # whether a slow wall clock is this code or a busy machine.
    width = max(len(r[0]) for r in rows)
    print(
        f"{'benchmark':<{width}}  {'runs':>4}  {'median':>9}  {'min':>9}  {'cpu med':>9}"
        f"  {'target':>8}  ok"
    )
    failed = False
    for label, times, cpu, target in rows:
        med = statistics.median(times)
        ok = med <= target
        failed |= not ok
        print(
            f"{label:<{width}}  {len(times):>4}  {med * 1e3:>7.1f}ms  {min(times) * 1e3:>7.1f}ms"
            f"  {statistics.median(cpu) * 1e3:>7.1f}ms  {target * 1e3:>6.0f}ms  {'yes' if ok else 'NO'}"
        )
    return 1 if failed and not args.no_check else 0


if __name__ == "__main__":
    sys.exit(main())
