"""What the hook-free form costs: the reference GPT with its built-in α vs the absorbed config.

    .venv/bin/python benchmarks/bench_absorbed.py [--optimizer muon-kimi --others adamw]
        [--width 256 --depth 8 --base-width 64 --base-depth 2 --batch 8 --block 128]
        [--steps 5 --rounds 15 --warmup 3 --threads 1 --json]

builtin: ``GPT(width, depth, multipliers=cfg)`` trained with the hooked config, which
multiplies by α in its forward pass. absorbed: the same class built with
``multipliers=None`` (it multiplies by 1.0) and trained with the config generated with
``--absorb-multipliers``: no hooks, each α carried by the init, lr, weight decay and eps of
the modules it scaled. Both do the same operations, so the ratio should be 1: the benchmark
shows that absorbing adds nothing to a step (the extra param groups included). Before
timing it checks that the two compute the same losses over 3 steps (relative 1e-5: the
products αW are rounded differently). Timing as in bench_hooks.py: alternating rounds of
``--steps`` full steps, process CPU time (robust on a shared machine, one thread) and wall
time; reported: median step times and the median per-round ratio absorbed/builtin (goal
≤ 1.005).
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys

import torch
from bench_hooks import CLOCKS, alternate  # benchmarks/ is on sys.path when run as a script
from bench_step import add_model_args

from spectral.codegen.torch import load_generated
from spectral.models import GPT


def setup(cfg, args, absorbed: bool):
    """Model, optimizer and one fixed batch."""
    torch.manual_seed(0)
    model = GPT(args.width, args.depth, block_size=args.block, multipliers=None if absorbed else cfg)
    cfg.init_(model, args.width, args.depth, 0.02)
    opt = cfg.build_optimizers(model, args.width, args.depth, lr=args.lr, weight_decay=0.1)
    problems = cfg.check(model, args.width, args.depth, opt)
    if problems:
        raise SystemExit("check() found problems:\n  " + "\n  ".join(problems))
    gen = torch.Generator().manual_seed(0)
    x = torch.randint(0, 256, (args.batch, args.block + 1), generator=gen)
    return model, opt, x[:, :-1].contiguous(), x[:, 1:].contiguous()


def losses(state, n: int) -> list[float]:
    model, opt, x, y = state
    out = []
    for _ in range(n):
        loss = torch.nn.functional.cross_entropy(model(x).flatten(0, 1), y.flatten())
        out.append(loss.item())
        loss.backward()
        opt.step()
        opt.zero_grad()
    return out


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    add_model_args(ap, depth=8, steps=5, rounds=15)
    ap.add_argument("--json", action="store_true", help="print one JSON object")
    args = ap.parse_args(argv)
    if args.threads:
        torch.set_num_threads(args.threads)
    others = None if args.others.lower() == "none" else args.others
    import tempfile

    folder = tempfile.mkdtemp()
    cfgs = {
        absorbed: load_generated(args.optimizer, others, 2, base_width=args.base_width,
                                 base_depth=args.base_depth, folder=folder, absorb=absorbed)
        for absorbed in (False, True)
    }
    same = {v: losses(setup(cfgs[v], args, v), 3) for v in (False, True)}
    worst = max(abs(a - b) / abs(a) for a, b in zip(same[False], same[True], strict=True))
    if worst > 1e-5:
        raise SystemExit(f"losses differ: builtin {same[False]}, absorbed {same[True]}")

    states = {"builtin": setup(cfgs[False], args, False), "absorbed": setup(cfgs[True], args, True)}
    times, ratios = alternate(states, "builtin", "absorbed", args)
    result = {
        "optimizer": args.optimizer + (f"+{others}" if others else ""),
        "width": args.width,
        "depth": args.depth,
        "base": [args.base_width, args.base_depth],
        "alpha": cfgs[False].multipliers(args.width, args.depth),
        "threads": torch.get_num_threads(),
        "torch": torch.__version__,
        "rounds": args.rounds,
        "steps_per_round": args.steps,
        "max_rel_loss_difference": worst,
    }
    for c in CLOCKS:
        result[f"builtin_step_ms_{c}"] = 1e3 * statistics.median(times["builtin"][c])
        result[f"absorbed_step_ms_{c}"] = 1e3 * statistics.median(times["absorbed"][c])
        result[f"median_ratio_{c}"] = statistics.median(ratios[c])
        q1, _, q3 = statistics.quantiles(ratios[c], n=4)
        result[f"ratio_quartiles_{c}"] = [round(q1, 4), round(q3, 4)]
    if args.json:
        print(json.dumps(result))
        return 0
    alpha = result["alpha"]
    print(
        f"{result['optimizer']}, GPT width {args.width} depth {args.depth} (base "
        f"{args.base_width} x {args.base_depth}: alpha in/hidden/out = {alpha['input']:.4g}/"
        f"{alpha['hidden']:.4g}/{alpha['output']:.4g}), batch {args.batch}x{args.block}, "
        f"{result['threads']} thread(s), torch {torch.__version__}"
    )
    print(f"  same losses over 3 steps: max relative difference {worst:.1e}")
    print(f"  medians of {args.rounds} alternating rounds x {args.steps} steps:")
    for c, what in (("cpu", "process CPU time (robust)"), ("wall", "wall time")):
        print(
            f"  {what:26s} builtin {result[f'builtin_step_ms_{c}']:8.2f} ms   absorbed "
            f"{result[f'absorbed_step_ms_{c}']:8.2f} ms   median absorbed/builtin "
            f"{result[f'median_ratio_{c}']:.4f} (quartiles {result[f'ratio_quartiles_{c}']}; "
            "goal <= 1.005)"
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
