"""Benchmark: ``spectral derive adamw --format json`` against its import floor.

The floor is what no change to spectral can remove: a new interpreter importing sympy
(``python -c "import sympy"``), since deriving is sympy's work. The command should take at
most 1.1× the floor. Both run as new processes, alternating (so a load that comes and goes
touches both alike), after one warm-up run each (the OS file cache).

Run from the repository root::

    .venv/bin/python benchmarks/cli_import.py              # 25 runs of each
    .venv/bin/python benchmarks/cli_import.py --runs 40

Prints the wall-clock and CPU (user + system of the child) medians and minima of each and
the ratio of the medians; on a loaded machine the CPU column is the steadier one. Then what
the command imports beyond the floor, from ``-X importtime`` (each module's own time, the
minimum over 9 runs): what is left to cut. The children run with bytecode caches written and
read (``PYTHONDONTWRITEBYTECODE`` removed from their environment), as an installed package
runs. Not a test: it reports, it does not fail.

``--instructions`` adds the instructions each executes (one run of each under valgrind's
callgrind, ``PYTHONHASHSEED=0``; about a minute): a count the load of a shared machine does not
move, so two versions of the code compare exactly; it is not the bar, which is wall time.
"""

from __future__ import annotations

import argparse
import collections
import os
import re
import resource
import shutil
import statistics
import subprocess
import sys
import time

TARGET_RATIO = 1.1

FLOOR = [sys.executable, "-c", "import sympy"]
COMMAND = [sys.executable, "-m", "spectral", "derive", "adamw", "--format", "json"]


# as installed: .pyc files written on the first run and read after it
ENV = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}


def _children_cpu() -> float:
    r = resource.getrusage(resource.RUSAGE_CHILDREN)
    return r.ru_utime + r.ru_stime


def _once(cmd: list[str]) -> tuple[float, float]:
    start, start_cpu = time.perf_counter(), _children_cpu()
    subprocess.run(cmd, check=True, capture_output=True, stdin=subprocess.DEVNULL, env=ENV)
    return time.perf_counter() - start, _children_cpu() - start_cpu


def _import_times(cmd: list[str]) -> dict[str, int]:
    """Module → its own import time in µs, from ``python -X importtime``."""
    argv = [cmd[0], "-X", "importtime", *cmd[1:]]
    err = subprocess.run(argv, check=True, capture_output=True, text=True, env=ENV).stderr
    times = {}
    for line in err.splitlines():
        parts = line.removeprefix("import time:").split("|")
        if len(parts) == 3 and parts[0].strip().isdigit():
            times[parts[2].strip()] = int(parts[0])
    return times


def instructions(cmd: list[str]) -> int:
    """Instructions ``cmd`` executes, counted by callgrind (bytecode cached by a run before)."""
    subprocess.run(cmd, check=True, capture_output=True, env=ENV)
    argv = ["valgrind", "--tool=callgrind", "--callgrind-out-file=/dev/null", *cmd]
    env = ENV | {"PYTHONHASHSEED": "0"}
    err = subprocess.run(argv, check=True, capture_output=True, text=True, env=env).stderr
    found = re.search(r"Collected : (\d+)", err)
    if found is None:
        raise RuntimeError(f"no count in callgrind's output: {err[-500:]}")
    return int(found.group(1))


def beyond_floor(repeats: int = 9) -> dict[str, float]:
    """Modules the command imports and the floor does not → own time in ms (min of repeats)."""
    floor: dict[str, list[int]] = collections.defaultdict(list)
    command: dict[str, list[int]] = collections.defaultdict(list)
    for _ in range(repeats):
        for module, us in _import_times(FLOOR).items():
            floor[module].append(us)
        for module, us in _import_times(COMMAND).items():
            command[module].append(us)
    return {m: min(us) / 1e3 for m, us in command.items() if m not in floor}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=25, help="runs of each (at least 20)")
    parser.add_argument(
        "--instructions",
        action="store_true",
        help="also count the instructions of one run of each (valgrind's callgrind)",
    )
    args = parser.parse_args(argv)
    if args.instructions and shutil.which("valgrind") is None:
        parser.error("--instructions needs valgrind on the PATH")
    runs = max(20, args.runs)

    load_before = os.getloadavg()[0]
    for cmd in (FLOOR, COMMAND):  # warm the OS file cache
        _once(cmd)
    wall: dict[str, list[float]] = {"floor": [], "command": []}
    cpu: dict[str, list[float]] = {"floor": [], "command": []}
    for _ in range(runs):
        for key, cmd in (("floor", FLOOR), ("command", COMMAND)):
            w, c = _once(cmd)
            wall[key].append(w)
            cpu[key].append(c)

    labels = {
        "floor": 'python -c "import sympy"',
        "command": "python -m spectral derive adamw --format json",
    }
    width = max(map(len, labels.values()))
    print(f"{runs} alternating runs of each, new processes; times in ms; 1-minute load average "
          f"{load_before:.2f} before, {os.getloadavg()[0]:.2f} after")
    print(f"{'what':<{width}}  {'wall med':>9}  {'wall min':>9}  {'cpu med':>9}  {'cpu min':>9}")
    for key, label in labels.items():
        print(
            f"{label:<{width}}  {statistics.median(wall[key]) * 1e3:>9.1f}"
            f"  {min(wall[key]) * 1e3:>9.1f}  {statistics.median(cpu[key]) * 1e3:>9.1f}"
            f"  {min(cpu[key]) * 1e3:>9.1f}"
        )
    ratio_wall = statistics.median(wall["command"]) / statistics.median(wall["floor"])
    ratio_cpu = statistics.median(cpu["command"]) / statistics.median(cpu["floor"])
    print(
        f"command / floor, medians: wall {ratio_wall:.3f}×, cpu {ratio_cpu:.3f}× "
        f"(target ≤ {TARGET_RATIO}×)"
    )

    if args.instructions:
        floor_ir, command_ir = instructions(FLOOR), instructions(COMMAND)
        print(
            f"instructions (callgrind, PYTHONHASHSEED=0): floor {floor_ir / 1e6:,.1f} M, "
            f"command {command_ir / 1e6:,.1f} M: {command_ir / floor_ir:.3f}×"
        )

    extra = beyond_floor()
    groups: collections.Counter[str] = collections.Counter()
    for module, ms in extra.items():
        top = module.split(".")
        groups[".".join(top[:2]) if top[0] == "spectral" else top[0]] += ms
    print(
        f"\nimported beyond the floor (-X importtime, own time, min of 9): "
        f"{sum(extra.values()):.1f} ms in {len(extra)} modules"
    )
    for group, ms in groups.most_common(12):
        print(f"  {ms:7.1f} ms  {group}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
