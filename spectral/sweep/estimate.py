"""``--estimate``: what a sweep would train, and how long it would take on this device.

Trains a few short, unrecorded runs per size and writes nothing; progress lines go to a
``log`` callback (the CLI prints them).
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path
from typing import Any

from .options import Job, SweepConfig, resolve_device
from .recipe import recipe
from .records import RUNS_FILE, read_runs
from .train import build_run, keyed_plan, train_run

__all__ = ["estimate"]


def estimate(
    cfgs: list[SweepConfig],
    out: str | os.PathLike[str],
    corpus: Any,
    *,
    log: Callable[[str], None] | None = None,
    jobs: int = 1,
) -> dict[str, Any]:
    """The runs that ``cfgs`` (run in this order) would train, and their wall time measured here.

    Runs already in ``out/runs.jsonl`` and runs whose HPs equal an earlier one's (reused) are
    not counted. At each distinct size one short run of ``n1`` and one of ``n2`` steps (after a
    throwaway run that pays for the device's start) give ``seconds(steps) = a + b·steps``: ``b``
    is the time per training step, ``a`` the fixed part (evaluation; the model build is timed
    and added). The planning itself (every run's HPs, on the meta device) is timed too and
    added once (``overhead_s``). Loading the data is not counted. Trains nothing that is
    recorded; writes nothing.

    ``jobs`` (``--jobs N``): the steps are timed with a worker's share of the threads
    (:func:`~.parallel.thread_share`, or ``threads``), and each config's runs are handed in
    order to N workers (:func:`~.parallel.makespan`; the configs run one after another). Not
    modelled: N runs contending for memory bandwidth and caches, and the workers' start (a
    few seconds, once): ``benchmarks/sweep_jobs.py`` measures both.
    """
    import tempfile

    with tempfile.TemporaryDirectory(prefix="spectral-estimate-") as tmp:
        return _estimate(cfgs, Path(out), corpus, Path(tmp), log, jobs)


def _estimate(cfgs: list[SweepConfig], out: Path, corpus: Any, tmp: Path, log: Any, jobs: int = 1) -> dict[str, Any]:
    import torch

    from .parallel import makespan, thread_share

    cfg0 = cfgs[0]
    device = resolve_device(cfg0.device)
    if jobs > 1 and not device.startswith("cuda"):
        torch.set_num_threads(cfg0.threads or thread_share(jobs))  # as each worker trains
    elif cfg0.threads:
        torch.set_num_threads(cfg0.threads)
    existing = read_runs(out / RUNS_FILE)
    known_keys = {r["key"] for r in existing}
    known_fps = {r["fingerprint"] for r in existing if not r.get("reused_from")}
    sizes: dict[tuple[int, int], int] = {}
    steps_of: dict[tuple[int, int], list[int]] = {}
    batches: list[list[tuple[tuple[int, int], int]]] = []  # per config, its runs' (size, steps)
    t_plan = time.perf_counter()  # the sweep plans the same way before it trains: part of its time
    for cfg in cfgs:
        batches.append([])
        for job, _, fp, key in keyed_plan(cfg, tmp, corpus):
            if key in known_keys or fp in known_fps:
                continue
            known_fps.add(fp)
            size = (job.width, job.depth)
            sizes[size] = sizes.get(size, 0) + 1
            steps_of.setdefault(size, []).append(cfg.steps)
            batches[-1].append((size, cfg.steps))
    overhead = time.perf_counter() - t_plan
    n1, n2 = 3, 23
    rows = []
    say = log or (lambda msg: None)
    first = True
    cost: dict[tuple[int, int], tuple[float, float]] = {}  # size -> (fixed s, s per step)
    rec = recipe(cfg0.optimizer, "mup", cfg0, tmp)  # SP and μP cost the same per step
    for size in sorted(sizes, key=lambda wd: (wd[1], wd[0])):
        job = Job("mup", size[0], size[1], min(cfg0.log2_lrs))
        times = {}
        for n in ((n1,) if first else ()) + (n1, n2):
            c = replace(cfg0, steps=n, warmup=1)
            t0 = time.perf_counter()
            model, opts = build_run(job, c, rec, corpus.vocab_size, device)
            if device.startswith("cuda"):
                torch.cuda.synchronize()
            build = time.perf_counter() - t0
            res = train_run(job, c, model, opts, corpus, device)
            if device.startswith("cuda"):
                torch.cuda.synchronize()
            times[n] = (build, res["seconds"])
        first = False
        per_step = max(0.0, (times[n2][1] - times[n1][1]) / (n2 - n1))
        fixed = max(0.0, times[n2][1] - per_step * n2) + times[n2][0]
        cost[size] = (fixed, per_step)
        total = sum(fixed + per_step * st for st in steps_of[size])
        rows.append({"width": size[0], "depth": size[1], "runs": sizes[size], "steps": sum(steps_of[size]),
                     "ms_per_step": round(per_step * 1e3, 3), "fixed_s": round(fixed, 3), "seconds": round(total, 1)})
        say(f"n={size[0]:<5d} L={size[1]:<3d} {sizes[size]:4d} runs  {per_step * 1e3:8.2f} ms/step  "
            f"+{fixed:.2f} s/run  → {total:7.1f} s")
    seconds = sum(r["seconds"] for r in rows)
    extra: dict[str, Any] = {}
    if jobs > 1:  # each config's runs on N workers; the configs one after another
        seconds = sum(makespan([cost[sz][0] + cost[sz][1] * st for sz, st in b], jobs) for b in batches)
        extra = {"jobs": jobs, "threads_per_run": torch.get_num_threads(),
                 "run_seconds": round(sum(r["seconds"] for r in rows), 1)}
    return {
        "optimizer": cfg0.optimizer,
        "device": device,
        "device_name": torch.cuda.get_device_name(device) if device.startswith("cuda") else "cpu",
        "torch": torch.__version__,
        "runs": sum(r["runs"] for r in rows),
        "steps": sum(r["steps"] for r in rows),
        "seconds": round(seconds + overhead, 1),
        "overhead_s": round(overhead, 1),
        "sizes": rows,
    } | extra
