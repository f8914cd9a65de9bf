"""What FSDP2 costs a whole-matrix optimizer: the gathered step vs the one-process step.

    .venv/bin/python benchmarks/bench_fsdp.py [--optimizer muon-kimi --others adamw]
        [--width 128 --depth 4 --batch 8 --block 64 --rounds 11 --steps 3 --json]

Two CPU processes (gloo, one torch thread each) hold the reference GPT twice: whole (the
one-process run, each rank its own copy) and sharded with fully_shard (per block, then
the model), both built by the generated module's build_optimizers. Rounds alternate
between the two so a busy machine slows both alike. Per round and rank, after warm-up,
the mean over --steps of: the training step (forward, backward, opt.step, zero_grad),
opt.step alone, and, on the sharded model, the collectives the gathered step adds,
timed alone: all-gathering every whole-matrix parameter and its gradient
(DTensor.full_tensor) and the owners' broadcasts of the new matrices. A round's time is
the slower rank's (the ranks wait for each other); reported: the median over rounds, in
milliseconds (wall clock: collectives wait rather than compute).
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import socket
import statistics
import sys
import tempfile
import time
import warnings
from pathlib import Path

import torch
import torch.distributed as dist
import torch.multiprocessing as mp
import torch.nn.functional as F

from spectral.torch.optim.sharded import full_tensor

WORLD = 2
warnings.filterwarnings("ignore", message=".*DTensor random operators.*")


def load_config(path: str):
    spec = importlib.util.spec_from_file_location("bench_fsdp_config", path)
    mod = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = mod  # as an import does (dataclasses look it up)
    spec.loader.exec_module(mod)
    return mod


def build(cfg, args, mesh=None):
    from torch.distributed.fsdp import fully_shard

    from spectral.models import GPT

    model = GPT(args.width, args.depth, block_size=args.block, multipliers=cfg)
    torch.manual_seed(0)
    cfg.init_(model, args.width, args.depth, 0.02)
    if mesh is not None:
        for block in model.transformer.h:
            fully_shard(block, mesh=mesh)
        fully_shard(model, mesh=mesh)
    opt = cfg.build_optimizers(model, args.width, args.depth, lr=args.lr)
    return model, opt


def timed(fn, n: int) -> float:
    dist.barrier()
    t0 = time.perf_counter()
    for _ in range(n):
        fn()
    return (time.perf_counter() - t0) / n * 1e3


def worker(rank: int, port: int, config: str, args, out: str) -> None:
    from torch.distributed.device_mesh import init_device_mesh

    torch.set_num_threads(1)
    dist.init_process_group(
        "gloo", init_method=f"tcp://127.0.0.1:{port}", rank=rank, world_size=WORLD
    )
    mesh = init_device_mesh("cpu", (WORLD,))
    cfg = load_config(config)
    gen = torch.Generator().manual_seed(0)
    seq = torch.randint(0, 256, (args.batch, args.block + 1), generator=gen)
    x, y = seq[:, :-1], seq[:, 1:]
    runs = {"one": build(cfg, args), "fsdp": build(cfg, args, mesh)}
    gathered = [
        part
        for part in runs["fsdp"][1].parts.values()
        if isinstance(part, cfg.GatheredOptimizer)
    ]

    def backward(model):
        F.cross_entropy(model(x).flatten(0, 1), y.flatten()).backward()

    def train_step(name):
        model, opt = runs[name]
        backward(model)
        opt.step()
        opt.zero_grad()

    def opt_step(name):  # the gradient of a backward done once, stepped again
        runs[name][1].step()

    @torch.no_grad()
    def gather():
        for part in gathered:
            for p in (p for g in part.param_groups for p in g["params"]):
                full_tensor(p.grad)  # what GatheredOptimizer.step does
                full_tensor(p.detach())

    @torch.no_grad()
    def broadcast():
        for part in gathered:
            for p, replica, group, src in part._slots:
                full = replica if replica is not None else torch.empty(p.shape)
                dist.broadcast(full, src=src, group=group)

    for name in runs:  # warm-up
        for _ in range(args.warmup):
            train_step(name)
    rows: dict[str, list[float]] = {}
    for _ in range(args.rounds):
        this = {}
        for name in runs:
            this[f"{name}_train_step"] = timed(lambda n=name: train_step(n), args.steps)
            backward(runs[name][0])
            this[f"{name}_opt_step"] = timed(lambda n=name: opt_step(n), args.steps)
            if name == "fsdp" and gathered:
                this["fsdp_gather"] = timed(gather, args.steps)
                this["fsdp_broadcast"] = timed(broadcast, args.steps)
            runs[name][1].zero_grad()
        values = torch.tensor(list(this.values()), dtype=torch.float64)
        dist.all_reduce(values, op=dist.ReduceOp.MAX)  # a round takes the slower rank
        for key, value in zip(this, values.tolist(), strict=True):
            rows.setdefault(key, []).append(value)
    if rank == 0:
        numel = sum(
            p.numel() for part in gathered for g in part.param_groups for p in g["params"]
        )
        with open(out, "w") as fh:
            json.dump({"rows": rows, "gathered_numel": numel}, fh)
    dist.barrier()
    dist.destroy_process_group()


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--optimizer", default="muon-kimi")
    ap.add_argument("--others", default="adamw", help="'none' for a single optimizer")
    ap.add_argument("--width", type=int, default=128)
    ap.add_argument("--depth", type=int, default=4)
    ap.add_argument("--base-width", type=int, default=64)
    ap.add_argument("--base-depth", type=int, default=2)
    ap.add_argument("--batch", type=int, default=8)
    ap.add_argument("--block", type=int, default=64)
    ap.add_argument("--lr", type=float, default=1e-3)
    ap.add_argument("--steps", type=int, default=3, help="timed steps per round")
    ap.add_argument("--warmup", type=int, default=2)
    ap.add_argument("--rounds", type=int, default=11)
    ap.add_argument("--json", action="store_true", help="print one JSON object")
    args = ap.parse_args(argv)
    from spectral.codegen import render

    others = None if args.others.lower() == "none" else args.others
    folder = Path(tempfile.mkdtemp())
    config = folder / "bench_fsdp_config.py"
    config.write_text(
        render(args.optimizer, others, base_width=args.base_width, base_depth=args.base_depth)
    )
    out = folder / "bench.json"
    mp.spawn(worker, args=(_free_port(), str(config), args, str(out)), nprocs=WORLD)
    raw = json.loads(out.read_text())
    median = {k: statistics.median(v) for k, v in raw["rows"].items()}
    result = {
        "optimizer": args.optimizer,
        "others": others,
        "width": args.width,
        "depth": args.depth,
        "batch": args.batch,
        "block": args.block,
        "rounds": args.rounds,
        "gathered_numel": raw["gathered_numel"],
        "median_ms": {k: round(v, 3) for k, v in median.items()},
    }
    if args.json:
        print(json.dumps(result))
        return 0
    label = args.optimizer + (f" + {others}" if others else "")
    print(f"{label}, GPT({args.width}, {args.depth}), batch {args.batch} x {args.block}, ")
    print(f"2 gloo processes on CPU, median of {args.rounds} rounds (ms, slower rank):")
    names = {
        "train_step": "training step (fwd, bwd, opt.step)",
        "opt_step": "opt.step",
    }
    for key, text in names.items():
        one, fsdp = median[f"one_{key}"], median[f"fsdp_{key}"]
        print(f"  {text:36s} one process {one:9.2f}   FSDP2 {fsdp:9.2f}")
    if "fsdp_gather" in median:
        print(f"  {'all-gather params + grads':36s} {median['fsdp_gather']:9.2f}")
        print(f"  {'broadcast new matrices':36s} {median['fsdp_broadcast']:9.2f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
