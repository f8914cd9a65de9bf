"""Training a sweep: one run, every pending run of a configuration, and the base tuning.

:func:`run_sweep` trains what ``runs.jsonl`` lacks and appends each result at once; a run's
key hashes its configuration *and* the HPs its recipe produced, so a restarted sweep skips
exactly the runs already on disk, and a run whose HPs equal an earlier one's reuses it
(``reused_from``). Progress goes to a :class:`RunProgress` (the CLI's bar) and log lines to a
callback; nothing prints. torch is imported inside the functions that train.
"""

from __future__ import annotations

import json
import math
import os
import time
from collections.abc import Callable, Sequence
from dataclasses import asdict
from pathlib import Path
from typing import Any, Protocol

from ..errors import SpecError
from ..text import for_terminal
from .options import Job, SweepConfig, lr_factor, plan, resolve_device
from .recipe import recipe
from .records import (
    META_FILE,
    RUNS_FILE,
    append_run,
    check_appendable,
    digest,
    read_runs,
    round_floats,
    sweep_lock,
)
from .tune import Choice, apply, base_configs, candidates, choose


__all__ = [
    "TIMING_KEYS",
    "RunProgress",
    "base_record",
    "build_run",
    "fingerprint",
    "keyed_plan",
    "log_line",
    "reused_record",
    "run_sweep",
    "train_run",
    "tune_at_base",
]


class RunProgress(Protocol):
    """Where :func:`run_sweep` reports the training steps it takes (the CLI: a rich bar)."""

    def start(self, description: str, total: int) -> None:
        """Begin: ``total`` steps to train."""

    def describe(self, description: str) -> None:
        """The run being trained now."""

    def advance(self, steps: int) -> None:
        """``steps`` more steps done (a diverged run's untrained steps count as done)."""

    def stop(self) -> None:
        """Done (also after an error)."""


def build_run(job: Job, cfg: SweepConfig, rec: Any, vocab_size: int, device: str):
    import torch

    from ..models.torch import GPT, Llama  # imports torch: only when a run is built

    torch.manual_seed(cfg.seed)
    multipliers = rec.multipliers(job.width, job.depth, cfg.multiplier)
    if cfg.model == "llama":
        model = Llama(job.width, job.depth, vocab_size=vocab_size, block_size=cfg.block_size,
                      head_dim=cfg.head_dim, init_std=cfg.init_std, multipliers=multipliers)
        rec.init_(model, job.width, job.depth, None)  # its own init is the base
        _scale_own_init(model, rec, cfg.init_scale)
    else:
        model = GPT(
            job.width,
            job.depth,
            vocab_size=vocab_size,
            block_size=cfg.block_size,
            head_dim=cfg.head_dim,
            multipliers=multipliers,
            experts=cfg.experts,
            top_k=cfg.top_k,
        )
        rec.init_(model, job.width, job.depth, cfg.init_stds)
    model.to(device)
    lr: float | dict[str, float] = job.lr
    if cfg.lr_scale:
        lr = {"default": job.lr} | {k: job.lr * v for k, v in cfg.lr_scale.items()}
    opts = rec.build_optimizers(
        model, job.width, job.depth, lr=lr, weight_decay=cfg.weight_decay, eps=cfg.eps,
        multiplier=cfg.multiplier,
    )
    return model, opts


def _scale_own_init(model: Any, rec: Any, init_scale: dict[str, float] | None) -> None:
    """``--init-scale`` on a model whose own init is the base: each role's values times its
    factor, at every width, keyed as the GPT's init stds are (the role, its optimizer,
    ``default``; a bias or norm role only by its own name: spectral.scaling.base_value)."""
    import torch

    from ..scaling import base_value

    if not init_scale:
        return
    optimizers = rec.module.OPTIMIZERS
    with torch.no_grad():
        for name, p in model.named_parameters():
            role = rec.module.classify(name, p)
            factor = base_value(init_scale, role, optimizers.get(role, ""), "init_std")
            if factor is not None:
                p.mul_(factor)


_OPT_KEYS = ("lr", "weight_decay", "eps", "betas", "momentum", "nesterov", "adjust_lr_fn", "ns_steps",
             "ns_coefficients", "amsgrad", "maximize")


def fingerprint(job: Job, cfg: SweepConfig, rec: Any, model: Any, opts: list[Any], data_sha: str) -> str:
    """Hash of everything that determines a run's outcome, the parameterisation's name excluded."""
    names = {id(p): n for n, p in model.named_parameters()}
    per_param = {}
    for opt in opts:
        for g in opt.param_groups:
            settings = {k: g[k] for k in _OPT_KEYS if k in g}
            for p in g["params"]:
                per_param[names[id(p)]] = [type(opt).__name__, settings]
    if cfg.model == "llama":  # its own init (seeded, in the settings) times init_'s factors
        stds: Any = rec.init_factors(model, job.width, job.depth)
    else:
        stds = rec.init_stds(model, job.width, job.depth, cfg.init_stds)
    mult = [model.alpha_input, model.alpha_hidden, model.alpha_output]
    # an --ablate swap is in the HPs above, not in the fingerprint: a swap that changes no
    # number (a rule μP and SP share, a weight decay of 0) reuses μP's run
    settings = {k: v for k, v in cfg.settings().items() if k != "ablation"}
    return digest(
        round_floats([job.width, job.depth, job.log2_lr, settings, data_sha, stds, mult, per_param])
    )


def train_run(job: Job, cfg: SweepConfig, model: Any, opts: list[Any], corpus: Any, device: str, tick: Any = None) -> dict[str, Any]:
    import torch
    import torch.nn.functional as F

    for opt in opts:
        for g in opt.param_groups:
            g["peak_lr"] = g["lr"]
    gen = torch.Generator().manual_seed(cfg.seed)
    params = [p for p in model.parameters() if p.requires_grad]
    model.train()
    losses: list[float] = []
    diverged_at = None
    t0 = time.perf_counter()
    for step in range(cfg.steps):
        f = lr_factor(step, cfg.steps, cfg.warmup_steps, cfg.min_lr_ratio)
        for opt in opts:
            for g in opt.param_groups:
                g["lr"] = g["peak_lr"] * f
        x, y = corpus.train_batch(cfg.batch_size, cfg.block_size, gen, device)
        logits = model(x)
        loss = F.cross_entropy(logits.reshape(-1, logits.size(-1)), y.reshape(-1))
        lv = float(loss.detach())
        if not math.isfinite(lv):
            diverged_at = step
            break
        losses.append(lv)
        for opt in opts:
            opt.zero_grad(set_to_none=True)
        loss.backward()
        if cfg.grad_clip:
            # torch's clip is the exact one here: the GPT applies the multipliers in its
            # forward pass (the recipe's config is never the hook-free form, whose
            # carriers would need the config's clip_grad_norm_)
            torch.nn.utils.clip_grad_norm_(params, cfg.grad_clip)
        for opt in opts:
            opt.step()
        if tick is not None:
            tick(1)
    val_loss = None
    if diverged_at is None:
        model.eval()
        tot = 0.0
        with torch.no_grad():
            batches = corpus.val_batches(cfg.eval_batches, cfg.batch_size, cfg.block_size, device)
            for x, y in batches:
                logits = model(x)
                tot += float(F.cross_entropy(logits.reshape(-1, logits.size(-1)), y.reshape(-1)))
        val_loss = tot / len(batches)
        if not math.isfinite(val_loss):
            diverged_at, val_loss = cfg.steps, None
    tail = losses[-10:]
    return {
        "val_loss": val_loss,
        "train_loss": (sum(tail) / len(tail)) if tail and diverged_at is None else None,
        "diverged": diverged_at is not None,
        "diverged_at": diverged_at,
        "steps_done": len(losses),
        "seconds": round(time.perf_counter() - t0, 3),
    }


def keyed_plan(cfg: SweepConfig, folder: Path, corpus: Any) -> list[tuple[Job, Any, str, str]]:
    """Every job of ``cfg`` with its recipe, fingerprint and key, planned on the meta device
    (a run's key needs its HPs, not its weights). The config modules go to ``folder``."""
    import torch

    data_sha = corpus.description.get("sha256") or digest(corpus.description)
    recipes = {p: recipe(cfg.optimizer, p, cfg, folder) for p in cfg.parameterizations}
    planned = []
    for job in plan(cfg):
        rec = recipes[job.parameterization]
        with torch.device("meta"):
            model, opts = build_run(job, cfg, rec, corpus.vocab_size, "meta")
        fp = fingerprint(job, cfg, rec, model, opts, data_sha)
        ident = [fp, job.parameterization, cfg.optimizer]
        if cfg.ablation:  # its own record even where it changes no number (reused, then)
            ident.append(cfg.settings()["ablation"])
        planned.append((job, rec, fp, digest(ident)))
    return planned


def run_sweep(
    cfg: SweepConfig,
    out: str | os.PathLike[str],
    corpus: Any,
    *,
    progress: RunProgress | None = None,
    command: str | None = None,
    log: Callable[[str], None] | None = None,
    warn: Callable[[str], None] | None = None,
    workers: Any = None,
) -> list[dict[str, Any]]:
    """Run every pending job of ``cfg``, appending each result to ``out/runs.jsonl``.

    Returns the records of this sweep's jobs (those already on disk included). The steps
    trained go to ``progress``, a line per run to ``log``, a damaged line of ``runs.jsonl``
    to ``warn`` (and is skipped). The folder's lock (:func:`~.records.sweep_lock`) is held
    throughout: a second sweep on the same folder waits, then trains only what is missing.
    ``workers`` (:class:`~.parallel.Workers`, ``--jobs N``): the runs train in its worker
    processes, N at a time; this process alone writes the records, each when its run ends.
    """
    out = Path(out)
    try:
        out.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise SpecError(f"{out}: cannot create the sweep's folder ({exc.strerror or exc})") from None
    runs_path = out / RUNS_FILE
    check_appendable(runs_path)
    say = log or (lambda msg: None)
    with sweep_lock(runs_path, wait=say):
        return _run_locked(cfg, out, corpus, progress, command, say, warn, workers)


def _run_locked(cfg, out: Path, corpus, progress, command, say, warn, workers) -> list[dict[str, Any]]:
    import torch

    from ..io import write_atomic

    device = resolve_device(cfg.device)
    if cfg.threads:
        torch.set_num_threads(cfg.threads)
    runs_path = out / RUNS_FILE
    data_sha = corpus.description.get("sha256") or digest(corpus.description)
    meta = {
        "config": asdict(cfg) | {"device": device},
        "settings": cfg.settings(),
        "data": corpus.description,
        "command": command,
        "torch": torch.__version__,
    }
    write_atomic(out / META_FILE, json.dumps(meta, indent=2, sort_keys=True) + "\n", force=True)

    existing = read_runs(runs_path, warn=warn)
    by_key = {r["key"]: r for r in existing}
    by_fp = {r["fingerprint"]: r for r in existing if not r.get("reused_from")}
    planned = keyed_plan(cfg, out / "generated", corpus)
    pending = [t for t in planned if t[3] not in by_key]

    results: list[dict[str, Any]] = [by_key[k] for *_, k in planned if k in by_key]
    # each fingerprint trains once: a later job with the same HPs reuses it
    todo_steps = cfg.steps * len({fp for _, _, fp, _ in pending if fp not in by_fp})
    shown = for_terminal(str(runs_path))  # a path holding a newline stays one line
    say(f"{len(planned)} runs planned, {len(planned) - len(pending)} already in {shown}")

    if progress is not None:
        progress.start(cfg.optimizer, todo_steps)

    def record_done(job: Job, key: str, record: dict[str, Any]) -> None:
        append_run(runs_path, record)
        by_key[key] = record
        results.append(record)
        say(log_line(job, record))

    try:
        if workers is not None:
            known = len(results)
            workers.train(pending, cfg, corpus, out / "generated", device, data_sha, by_fp, record_done, progress)
            order = {key: i for i, (*_, key) in enumerate(planned)}  # as one process returns them
            results[known:] = sorted(results[known:], key=lambda r: order[r["key"]])
            return results
        for job, rec, fp, key in pending:
            base = base_record(job, cfg, rec, fp, key, data_sha, device)
            if fp in by_fp:
                record = reused_record(base, by_fp[fp])
            else:
                if progress is not None:
                    progress.describe(f"{cfg.optimizer} {job.parameterization} n={job.width} L={job.depth} lr=2^{job.log2_lr}")
                model, opts = build_run(job, cfg, rec, corpus.vocab_size, device)
                tick = progress.advance if progress is not None else None
                res = train_run(job, cfg, model, opts, corpus, device, tick)
                if progress is not None and res["steps_done"] < cfg.steps:
                    progress.advance(cfg.steps - res["steps_done"])
                record = base | res | {"n_params": sum(p.numel() for p in model.parameters())}
                by_fp[fp] = record
            record_done(job, key, record)
    finally:
        if progress is not None:
            progress.stop()
    return results


TIMING_KEYS = ("seconds",)
"""The record fields that measure time, not the run: the only ones a run trained in another
process (``--jobs``) or on a busier machine may change."""

_RESULT_KEYS = ("val_loss", "train_loss", "diverged", "diverged_at", "steps_done", "seconds", "n_params")


def base_record(job: Job, cfg: SweepConfig, rec: Any, fp: str, key: str, data_sha: str, device: str) -> dict[str, Any]:
    """What a run's record says before it is trained: its identity, HPs' source and data."""
    return {
        "key": key,
        "fingerprint": fp,
        "optimizer": cfg.optimizer,
        "parameterization": job.parameterization,
        "width": job.width,
        "depth": job.depth,
        "log2_lr": job.log2_lr,
        "lr": job.lr,
        "settings": cfg.settings(),
        "data_sha256": data_sha,
        "hp_source": rec.source,
        "device": device,
    }


def reused_record(base: dict[str, Any], src: dict[str, Any]) -> dict[str, Any]:
    """The record of a run whose HPs equal the trained run ``src``'s: its results, reused."""
    return base | {k: src[k] for k in _RESULT_KEYS if k in src} | {"reused_from": src["key"]}


def log_line(job: Job, record: dict[str, Any]) -> str:
    """The line the sweep logs for a finished (or reused) run."""
    v = record["val_loss"]
    return (
        f"{job.parameterization:7s} n={job.width:<5d} L={job.depth:<3d} log2_lr={job.log2_lr:<4d} "
        + ("diverged" if record["diverged"] else f"val_loss={v:.4f}")
        + (" (reused)" if "reused_from" in record else f" {record['seconds']:.1f}s")
    )


def tune_at_base(
    cfg: SweepConfig,
    tune: Sequence[tuple[str, tuple[float, ...]]],
    seeds: Sequence[int],
    out: Path,
    train: Callable[[SweepConfig], None],
    warn: Callable[[str], None] | None = None,
    rule: str = "fit",
) -> tuple[SweepConfig, Choice]:
    """Stage 1 of ``--tune``: every candidate × η × seed at the base size only (each config
    given to ``train``), then the winner (:func:`spectral.sweep.tune.choose`, by ``rule``). Returns ``cfg``
    with the winner's values, and the choice (the CLI reports it)."""
    cands = candidates(cfg.multiplier, tune)
    keys = tuple(k for k, _ in tune)
    for c in cands:
        for sc in base_configs(cfg, c, seeds):
            train(sc)
    choice = choose(read_runs(out / RUNS_FILE, warn=warn), cfg, cands, seeds, keys, rule)
    if not choice.complete:
        raise SpecError(f"{out / RUNS_FILE} lacks some base-size runs of the η grid (and --tune's values); "
                        "run the sweep (without --report-only) to finish them")
    if choice.winner is None:
        raise SpecError(f"--tune: no candidate reached a finite loss at the base size "
                        f"({cfg.base_width} × {cfg.base_depth}); widen --log2-lrs or the --tune values")
    return apply(cfg, choice.chosen), choice
