"""Cost of stepping fused experts one matrix at a time, CPU.

    .venv/bin/python benchmarks/bench_experts.py [--optimizer muon-kimi] [--experts 8]
        [--width 256 --inner 512] [--layers 2] [--rounds 21 --threads 1 --json]

Two optimizers over the same numbers: (a) fused, 2 x layers 3-D parameters (E, 2I, n) and
(E, n, I) (Hugging Face Mixtral's gate_up_proj / down_proj), stepped by
spectral.torch.optim.experts.SlicedOptimizer over the real implementation (one leaf view per
expert matrix, gradients pointed at the slices); (b) separate, the same E x 2 x layers
matrices as 2-D parameters given to the real implementation directly (a list of
nn.Linear). Gradients are fixed random tensors, so only the optimizer step is timed. The
two are measured in alternating rounds; reported: the median step time of each and the
median over rounds of the per-round ratio fused / separate (the overhead of slicing).
"""

from __future__ import annotations

import argparse
import json
import statistics
import time
from typing import Any

import torch

from spectral.torch.optim.experts import SlicedOptimizer

IMPLEMENTATIONS = {
    "muon-kimi": lambda groups: torch.optim.Muon(
        groups, lr=0.02, weight_decay=0.0, adjust_lr_fn="match_rms_adamw"
    ),
    "adamw": lambda groups: torch.optim.AdamW(groups, lr=1e-3, weight_decay=0.0),
}


def _fused(args: Any) -> tuple[list[torch.nn.Parameter], torch.optim.Optimizer]:
    e, n, i = args.experts, args.width, args.inner
    params = []
    for _ in range(args.layers):
        params.append(torch.nn.Parameter(torch.randn(e, 2 * i, n) * 0.02))
        params.append(torch.nn.Parameter(torch.randn(e, n, i) * 0.02))
    for p in params:
        p.grad = torch.randn_like(p)
    factory = IMPLEMENTATIONS[args.optimizer]
    opt = SlicedOptimizer(factory, [{"params": params, "expert_layout": "out_in"}])
    return params, opt


def _separate(args: Any) -> tuple[list[torch.nn.Parameter], torch.optim.Optimizer]:
    e, n, i = args.experts, args.width, args.inner
    params = []
    for _ in range(args.layers):
        params += [torch.nn.Parameter(torch.randn(2 * i, n) * 0.02) for _ in range(e)]
        params += [torch.nn.Parameter(torch.randn(n, i) * 0.02) for _ in range(e)]
    for p in params:
        p.grad = torch.randn_like(p)
    return params, IMPLEMENTATIONS[args.optimizer]([{"params": params}])


def _time(opt: torch.optim.Optimizer, steps: int) -> float:
    start = time.perf_counter()
    for _ in range(steps):
        opt.step()
    return (time.perf_counter() - start) / steps


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--optimizer", choices=sorted(IMPLEMENTATIONS), default="muon-kimi")
    parser.add_argument("--experts", type=int, default=8)
    parser.add_argument("--width", type=int, default=256)
    parser.add_argument("--inner", type=int, default=512)
    parser.add_argument("--layers", type=int, default=2)
    parser.add_argument("--steps", type=int, default=3)
    parser.add_argument("--rounds", type=int, default=21)
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    torch.manual_seed(0)
    torch.set_num_threads(args.threads)
    _, fused = _fused(args)
    _, separate = _separate(args)
    for opt in (fused, separate):  # warm-up: state allocated
        _time(opt, 1)
    times: dict[str, list[float]] = {"fused": [], "separate": []}
    ratios = []
    for _ in range(args.rounds):
        a = _time(fused, args.steps)
        b = _time(separate, args.steps)
        times["fused"].append(a)
        times["separate"].append(b)
        ratios.append(a / b)
    result = {
        "optimizer": args.optimizer,
        "matrices": 2 * args.layers * args.experts,
        "shapes": [[2 * args.inner, args.width], [args.width, args.inner]],
        "fused_ms": 1e3 * statistics.median(times["fused"]),
        "separate_ms": 1e3 * statistics.median(times["separate"]),
        "ratio": statistics.median(ratios),
        "threads": args.threads,
    }
    if args.json:
        print(json.dumps(result))
        return
    print(
        f"{args.optimizer}: {result['matrices']} expert matrices "
        f"({2 * args.inner}x{args.width}, {args.width}x{args.inner}); step "
        f"fused {result['fused_ms']:.2f} ms, separate {result['separate_ms']:.2f} ms, "
        f"median ratio {result['ratio']:.3f} ({args.threads} thread)"
    )


if __name__ == "__main__":
    main()
