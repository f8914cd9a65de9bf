"""Training-step time of the reference GPT: generated μP config vs SP, same size, CPU.

    .venv/bin/python benchmarks/bench_step.py [--optimizer muon-kimi --others adamw]
        [--width 256 --depth 4 --base-width 64 --base-depth 2 --batch 8 --block 128]
        [--steps 3 --rounds 21 --threads 1 --clock cpu|wall --compile --json]

μP: ``spectral codegen`` output for the optimizer(s); the model gets its multipliers,
``init_`` and ``build_optimizers`` (one param group per role, scaled HPs). SP: the same
model with every multiplier 1 and the same optimizer implementations over one param group
each (hidden matrices / the rest), as a plain training script would build them.

The two are measured in alternating rounds (so a busy machine slows both alike); each
round times ``--steps`` full steps (forward, backward, optimizer step, zero_grad) after
warm-up. Reported: the median step time of each and the median over rounds of the
per-round ratio μP/SP (target ≤ 1.02: μP is the same computation with other numbers).
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import statistics
import sys
import tempfile
import time
from pathlib import Path

import torch
import torch.nn.functional as F

from spectral.codegen import render
from spectral.models import GPT
from spectral.torch import CompositeOptimizer


def load_config(hidden: str, others: str | None, base_width: int, base_depth: int):
    src = render(hidden, others, base_width=base_width, base_depth=base_depth)
    path = Path(tempfile.mkdtemp()) / "bench_mup_config.py"
    path.write_text(src)
    spec = importlib.util.spec_from_file_location("bench_mup_config", path)
    mod = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = mod  # as an import does (dataclasses look it up)
    spec.loader.exec_module(mod)
    return mod


def sp_optimizers(cfg, model, lr: float):
    """SP: the same implementations, one group per optimizer, unscaled HPs."""
    by_kind: dict[str, list[torch.nn.Parameter]] = {}
    for name, p in model.named_parameters():
        by_kind.setdefault(cfg.OPTIMIZERS[cfg.classify(name, p)], []).append(p)
    return CompositeOptimizer(
        {kind: cfg.FACTORIES[kind]([{"params": ps, "lr": lr}]) for kind, ps in by_kind.items()}
    )


def setup(cfg, args, mup: bool):
    torch.manual_seed(0)
    model = GPT(args.width, args.depth, block_size=args.block, multipliers=cfg if mup else None)
    model.to(args.device)
    if mup:
        cfg.init_(model, args.width, args.depth, 0.02)
        opts = cfg.build_optimizers(model, args.width, args.depth, lr=args.lr)
    else:
        opts = sp_optimizers(cfg, model, args.lr)
    run = torch.compile(model) if args.compile else model
    gen = torch.Generator().manual_seed(0)
    x = torch.randint(0, 256, (args.batch, args.block + 1), generator=gen).to(args.device)
    return run, opts, x[:, :-1].contiguous(), x[:, 1:].contiguous()


def step(run, opts, x, y) -> None:
    loss = F.cross_entropy(run(x).flatten(0, 1), y.flatten())
    loss.backward()
    opts.step()
    opts.zero_grad()


def time_steps(state, n: int, clock) -> float:
    run, opts, x, y = state
    t0 = clock()
    for _ in range(n):
        step(run, opts, x, y)
    return (clock() - t0) / n


def add_model_args(ap: argparse.ArgumentParser, *, depth: int, steps: int, rounds: int) -> None:
    """The model, optimizer and timing options this benchmark shares with bench_hooks.py."""
    ap.add_argument("--optimizer", default="muon-kimi")
    ap.add_argument("--others", default="adamw", help="'none' for a single optimizer")
    ap.add_argument("--width", type=int, default=256)
    ap.add_argument("--depth", type=int, default=depth)
    ap.add_argument("--base-width", type=int, default=64)
    ap.add_argument("--base-depth", type=int, default=2)
    ap.add_argument("--batch", type=int, default=8)
    ap.add_argument("--block", type=int, default=128)
    ap.add_argument("--lr", type=float, default=1e-3)
    ap.add_argument("--steps", type=int, default=steps, help="timed steps per round")
    ap.add_argument("--warmup", type=int, default=3)
    ap.add_argument("--rounds", type=int, default=rounds)
    ap.add_argument("--threads", type=int, default=1, help="torch threads (0: torch's default)")


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    add_model_args(ap, depth=4, steps=3, rounds=21)
    ap.add_argument(
        "--clock",
        choices=("cpu", "wall"),
        default="cpu",
        help="cpu: this process's CPU time (robust on a shared, loaded machine; use with "
        "--threads 1); wall: elapsed time",
    )
    ap.add_argument("--compile", action="store_true", help="torch.compile the model")
    ap.add_argument("--device", default="cpu", help="cpu (default) or cuda (needs --clock wall)")
    ap.add_argument("--json", action="store_true", help="print one JSON object")
    args = ap.parse_args(argv)
    if args.threads:
        torch.set_num_threads(args.threads)
    others = None if args.others.lower() == "none" else args.others
    cfg = load_config(args.optimizer, others, args.base_width, args.base_depth)

    if args.device != "cpu" and args.clock == "cpu":
        ap.error("--clock cpu measures host CPU time; use --clock wall with --device cuda")

    def clock() -> float:
        if args.device.startswith("cuda"):
            torch.cuda.synchronize()
        return time.process_time() if args.clock == "cpu" else time.perf_counter()

    states = {"mup": setup(cfg, args, True), "sp": setup(cfg, args, False)}
    for state in states.values():
        time_steps(state, args.warmup, clock)
    times: dict[str, list[float]] = {"mup": [], "sp": []}
    ratios = []
    for r in range(args.rounds):
        order = ("mup", "sp") if r % 2 == 0 else ("sp", "mup")
        got = {k: time_steps(states[k], args.steps, clock) for k in order}
        for k, v in got.items():
            times[k].append(v)
        ratios.append(got["mup"] / got["sp"])

    result = {
        "optimizer": cfg.OPTIMIZERS["hidden_weight"] + (f"+{others}" if others else ""),
        "width": args.width,
        "depth": args.depth,
        "batch": args.batch,
        "block": args.block,
        "compile": args.compile,
        "threads": torch.get_num_threads(),
        "clock": args.clock,
        "device": args.device,
        "torch": torch.__version__,
        "mup_step_ms": 1e3 * statistics.median(times["mup"]),
        "sp_step_ms": 1e3 * statistics.median(times["sp"]),
        "median_ratio": statistics.median(ratios),
        "ratios": [round(x, 4) for x in ratios],
    }
    if args.json:
        print(json.dumps(result))
    else:
        print(
            f"{result['optimizer']}, GPT width {args.width} depth {args.depth}, batch "
            f"{args.batch}x{args.block}, {result['threads']} thread(s), {args.clock} clock"
            f"{', compiled' if args.compile else ''}, torch {torch.__version__}"
        )
        print(f"  muP step  {result['mup_step_ms']:8.2f} ms (median of {args.rounds} rounds)")
        print(f"  SP  step  {result['sp_step_ms']:8.2f} ms")
        print(f"  median muP/SP ratio {result['median_ratio']:.4f}  (target <= 1.02)")
        print(f"  per-round ratios {result['ratios']}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
