"""``spectral sweep --jobs N``: a sweep's runs trained in N worker processes at once.

The runs of a sweep are independent (each has its own seed, model, optimizer and batches),
so N of them can train side by side: each in a worker process with its share of the CPU
threads (``cores // N``, or ``--threads``), or on the one CUDA device they share. The
workers only train. This process plans the runs, decides which reuse an earlier run, writes
every record (one line appended when its run ends, :func:`~.records.append_run`, as the
sequential sweep does) and drives the one progress bar. A record is the sequential run's
except :data:`~.train.TIMING_KEYS` — bit for bit where both train with the same number of
threads per run (float32 sums split over threads in another order round differently).

The workers start once per command with the ``spawn`` method (torch is not safe to fork)
and serve every stage of it (the base tuning, the transfer sweep). Interrupted (Ctrl-C, an
error in a run): the runs not finished are dropped and every worker process is terminated;
``runs.jsonl`` holds only complete records, and the same command trains the rest.
"""

from __future__ import annotations

import os
import signal
from collections.abc import Callable, Sequence
from concurrent.futures import FIRST_COMPLETED, Future, ProcessPoolExecutor, wait
from concurrent.futures.process import BrokenProcessPool
from pathlib import Path
from typing import Any

from ..errors import SpecError
from .options import Job, SweepConfig
from .recipe import recipe
from .train import RunProgress, base_record, build_run, reused_record, train_run

__all__ = ["Workers", "cores", "makespan", "thread_share"]


def cores() -> int:
    """The CPU cores this process may run on."""
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:  # not on Linux
        return os.cpu_count() or 1


def thread_share(jobs: int) -> int:
    """torch threads per run when ``jobs`` runs train at once: the cores split evenly."""
    return max(1, cores() // jobs)


def makespan(seconds: Sequence[float], jobs: int) -> float:
    """Wall time of runs taking ``seconds`` each, handed in this order to ``jobs`` workers
    (each run to the worker free first, as the process pool does)."""
    free = [0.0] * max(1, jobs)
    for s in seconds:
        i = free.index(min(free))
        free[i] += s
    return max(free)


# --------------------------------------------------------------------------------------
# the worker side
# --------------------------------------------------------------------------------------

_corpus: Any = None
_ticks: Any = None


def _start_worker(corpus: Any, ticks: Any) -> None:
    """Each worker once: keep the corpus and the step queue; leave Ctrl-C to the parent,
    which stops the workers itself (a worker interrupted mid-run would only report it)."""
    global _corpus, _ticks
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    _corpus, _ticks = corpus, ticks


def _train_one(task: int, job: Job, cfg: SweepConfig, folder: str, device: str, threads: int) -> dict[str, Any]:
    """Train one run in a worker: what :func:`~.train.train_run` returns, and the size."""
    import torch

    torch.set_num_threads(threads)
    rec = recipe(cfg.optimizer, job.parameterization, cfg, folder)
    model, opts = build_run(job, cfg, rec, _corpus.vocab_size, device)
    res = train_run(job, cfg, model, opts, _corpus, device, lambda steps: _ticks.put((task, steps)))
    return res | {"n_params": sum(p.numel() for p in model.parameters())}


# --------------------------------------------------------------------------------------
# the parent side
# --------------------------------------------------------------------------------------


class Workers:
    """N worker processes for the runs of every :func:`~.train.run_sweep` of one command.

    A context manager: leaving the block shuts the workers down (terminated, on an
    exception). The workers start with the first runs (:meth:`train`), which bring the
    corpus they keep. ``threads``: torch threads per run on the CPU (default:
    :func:`thread_share`); a config's ``threads`` (``--threads``) wins.
    """

    def __init__(self, jobs: int, threads: int | None = None):
        if jobs < 1:
            raise SpecError(f"--jobs must be at least 1, got {jobs}")
        self.jobs = jobs
        self.corpus: Any = None  # the workers' corpus: given with the first runs
        self.threads = threads or thread_share(jobs)
        self._pool: ProcessPoolExecutor | None = None
        self._ticks: Any = None
        self._tasks = 0  # runs handed out: a run's id, unique across sweeps (late step reports)

    def __enter__(self) -> Workers:
        return self

    def __exit__(self, kind: Any, exc: Any, tb: Any) -> None:
        if kind is None:
            self.close()
        else:
            self.terminate()

    def _executor(self, corpus: Any) -> ProcessPoolExecutor:
        if self._pool is not None and corpus is not self.corpus:  # another corpus: new workers
            self.close()
        if self._pool is None:
            self.corpus = corpus
            import multiprocessing

            ctx = multiprocessing.get_context("spawn")  # torch + fork is unsafe
            self._ticks = ctx.Queue()
            self._pool = ProcessPoolExecutor(
                self.jobs, mp_context=ctx, initializer=_start_worker, initargs=(self.corpus, self._ticks)
            )
        return self._pool

    def pids(self) -> list[int]:
        """The worker processes' ids (none before the first run or after shutdown)."""
        procs = getattr(self._pool, "_processes", None) or {}
        return sorted(procs)

    def close(self) -> None:
        """Shut the workers down after their work (nothing is running between sweeps)."""
        if self._pool is not None:
            self._pool.shutdown(wait=True)
            self._pool = None

    def terminate(self) -> None:
        """Stop every worker now, its run unfinished; nothing of that run is recorded."""
        pool, self._pool = self._pool, None
        if pool is None:
            return
        # the standard library (before 3.14's terminate_workers) cannot stop a running task:
        # terminate the pool's processes, then let it notice and shut down
        procs = list((getattr(pool, "_processes", None) or {}).values())
        for proc in procs:
            proc.terminate()
        pool.shutdown(wait=True, cancel_futures=True)
        for proc in procs:
            proc.join(timeout=10)
            if proc.is_alive():
                proc.kill()
                proc.join()

    def train(
        self,
        pending: Sequence[tuple[Job, Any, str, str]],
        cfg: SweepConfig,
        corpus: Any,
        folder: Path,
        device: str,
        data_sha: str,
        by_fp: dict[str, dict[str, Any]],
        done: Callable[[Job, str, dict[str, Any]], None],
        progress: RunProgress | None,
    ) -> None:
        """Train ``pending`` (``(job, recipe, fingerprint, key)`` in plan order) on ``corpus``
        in the workers; ``done(job, key, record)`` for each as it ends (a run whose fingerprint is
        in ``by_fp``, or is trained now for an earlier job, is reused, as sequentially)."""
        leaders: dict[str, int] = {}  # fingerprint -> the pending index that trains it
        followers: dict[str, list[int]] = {}
        for i, (job, rec, fp, key) in enumerate(pending):
            if fp in by_fp:
                done(job, key, reused_record(base_record(job, cfg, rec, fp, key, data_sha, device), by_fp[fp]))
            elif fp in leaders:
                followers.setdefault(fp, []).append(i)
            else:
                leaders[fp] = i
        if not leaders:
            return
        threads = cfg.threads or self.threads
        try:
            pool = self._executor(corpus)
            futures: dict[Future[dict[str, Any]], int] = {}
            task_of: dict[int, int] = {}  # pending index -> its task id
            for i in leaders.values():
                self._tasks += 1
                task_of[i] = self._tasks
                futures[pool.submit(_train_one, self._tasks, pending[i][0], cfg, str(folder), device, threads)] = i
            ticked = dict.fromkeys(task_of.values(), 0)  # steps shown, per task still running
            running, finished_runs = set(futures), 0

            def show() -> None:
                if progress is not None:
                    progress.describe(f"{cfg.optimizer}: {finished_runs}/{len(futures)} runs, "
                                      f"{min(self.jobs, len(running))} at a time")

            show()
            while running:
                finished, running = wait(running, timeout=0.25, return_when=FIRST_COMPLETED)
                self._drain(ticked, progress)
                for fut in sorted(finished, key=futures.__getitem__):
                    i = futures[fut]
                    job, rec, fp, key = pending[i]
                    res = fut.result()  # a run's error stops the sweep here
                    shown = ticked.pop(task_of[i])
                    if progress is not None:  # its steps not yet shown (a diverged run's too)
                        progress.advance(cfg.steps - shown)
                    record = base_record(job, cfg, rec, fp, key, data_sha, device) | res
                    by_fp[fp] = record
                    done(job, key, record)
                    for j in followers.get(fp, ()):
                        fjob, frec, ffp, fkey = pending[j]
                        base = base_record(fjob, cfg, frec, ffp, fkey, data_sha, device)
                        done(fjob, fkey, reused_record(base, record))
                    finished_runs += 1
                show()
        except BrokenProcessPool as exc:
            self.terminate()
            raise SpecError(f"a sweep worker process died ({exc}); the runs recorded so far are "
                            "kept: run the same command again to train the rest") from None
        except BaseException:  # Ctrl-C, a run's error: stop every worker, record nothing more
            self.terminate()
            raise

    def _drain(self, ticked: dict[int, int], progress: RunProgress | None) -> None:
        """Show the steps the workers reported (of runs still running)."""
        import queue

        while True:
            try:
                task, steps = self._ticks.get_nowait()
            except queue.Empty:
                return
            if task in ticked:  # a finished run's late report is already counted
                ticked[task] += steps
                if progress is not None:
                    progress.advance(steps)
