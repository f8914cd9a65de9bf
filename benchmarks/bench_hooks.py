"""What apply_multipliers' forward hooks cost: the reference GPT with its built-in α vs hooks.

    .venv/bin/python benchmarks/bench_hooks.py [--optimizer muon-kimi --others adamw]
        [--width 256 --depth 8 --base-width 64 --base-depth 2 --batch 8 --block 128]
        [--steps 5 --rounds 15 --warmup 3 --threads 1 --json]

builtin: ``GPT(width, depth, multipliers=cfg)``, which multiplies by α in its forward pass.
hooks: the same class built with ``multipliers=None`` (α = 1 in its forward pass), marked
``applies_mup_multipliers = False`` on the instance, and given ``cfg.apply_multipliers``:
forward hooks scale the embedding outputs (α_in), the ends of the 2·depth residual branches
(α_hidden) and the logits (α_out). Both get the same seed, ``cfg.init_`` and
``cfg.build_optimizers``; before timing, the benchmark checks that they compute the same
losses, bit for bit, so it times one computation done two ways. The hooks model still does
the reference model's multiplications by 1.0 as well, so its overhead is over-counted a
little, never under-counted.

The default size has α_hidden = α_out = 1/4 (r_n = r_L = 4; α_in is 1 at every size under
the Muon-Kimi + AdamW rules). The two are timed in alternating rounds (a busy machine slows
both alike), each round ``--steps`` full steps (forward, backward, optimizer step,
zero_grad), in wall time and in this process's CPU time, which is the robust number on a
shared machine (with one thread). Reported: the median step time of each, and the median
over rounds of the per-round ratio hooks/builtin (target ≤ 1.02).
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time

import torch
import torch.nn.functional as F
from bench_step import add_model_args, load_config, step  # benchmarks/ is on sys.path when run as a script

from spectral.models import GPT

CLOCKS = {"wall": time.perf_counter, "cpu": time.process_time}


def setup(cfg, args, hooks: bool):
    """Model, optimizer and one fixed batch; identical numbers for both variants."""
    torch.manual_seed(0)
    if hooks:
        model = GPT(args.width, args.depth, block_size=args.block, multipliers=None)
        model.applies_mup_multipliers = False  # its forward now multiplies by 1.0 only
        handle = cfg.apply_multipliers(model, args.width, args.depth)
        placed = sum(len(v) for v in handle.modules.values())
        if placed != 2 * args.depth + 3:  # wte, wpe, 2 branch ends per layer, lm_head
            raise SystemExit(f"expected {2 * args.depth + 3} hooked modules, got {placed}")
    else:
        model = GPT(args.width, args.depth, block_size=args.block, multipliers=cfg)
    cfg.init_(model, args.width, args.depth, 0.02)
    opt = cfg.build_optimizers(model, args.width, args.depth, lr=args.lr, weight_decay=0.1)
    problems = cfg.check(model, args.width, args.depth, opt)
    if problems:
        raise SystemExit("check() found problems:\n  " + "\n  ".join(problems))
    gen = torch.Generator().manual_seed(0)
    x = torch.randint(0, 256, (args.batch, args.block + 1), generator=gen)
    return model, opt, x[:, :-1].contiguous(), x[:, 1:].contiguous()


def losses(args, cfg, hooks: bool, n: int) -> list[float]:
    """The first n training losses of a fresh model (for the apples-to-apples check)."""
    model, opt, x, y = setup(cfg, args, hooks)
    out = []
    for _ in range(n):
        loss = F.cross_entropy(model(x).flatten(0, 1), y.flatten())
        out.append(loss.item())
        loss.backward()
        opt.step()
        opt.zero_grad()
    return out


def time_steps(state, n: int) -> dict[str, float]:
    """Seconds per step over n steps, on both clocks."""
    model, opt, x, y = state
    start = {k: clock() for k, clock in CLOCKS.items()}
    for _ in range(n):
        step(model, opt, x, y)
    return {k: (clock() - start[k]) / n for k, clock in CLOCKS.items()}


def alternate(states: dict, base: str, other: str, args) -> tuple[dict, dict[str, list[float]]]:
    """Warm both up, then ``args.rounds`` rounds of ``args.steps`` steps each, the order
    alternating: per state and clock the round times, and per clock the ratios other/base."""
    for state in states.values():
        time_steps(state, args.warmup)
    times = {v: {c: [] for c in CLOCKS} for v in states}
    ratios: dict[str, list[float]] = {c: [] for c in CLOCKS}
    for r in range(args.rounds):
        order = (base, other) if r % 2 == 0 else (other, base)
        got = {v: time_steps(states[v], args.steps) for v in order}
        for c in CLOCKS:
            for v in states:
                times[v][c].append(got[v][c])
            ratios[c].append(got[other][c] / got[base][c])
    return times, ratios


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    add_model_args(ap, depth=8, steps=5, rounds=15)
    ap.add_argument("--json", action="store_true", help="print one JSON object")
    args = ap.parse_args(argv)
    if args.threads:
        torch.set_num_threads(args.threads)
    others = None if args.others.lower() == "none" else args.others
    cfg = load_config(args.optimizer, others, args.base_width, args.base_depth)
    alpha = cfg.multipliers(args.width, args.depth)

    # Apples to apples: the same losses, bit for bit, over a few steps.
    same = {v: losses(args, cfg, v, 3) for v in (False, True)}
    if same[False] != same[True]:
        raise SystemExit(f"losses differ: builtin {same[False]}, hooks {same[True]}")

    states = {"builtin": setup(cfg, args, False), "hooks": setup(cfg, args, True)}
    times, ratios = alternate(states, "builtin", "hooks", args)

    result = {
        "optimizer": cfg.OPTIMIZERS["hidden_weight"] + (f"+{others}" if others else ""),
        "width": args.width,
        "depth": args.depth,
        "base": [args.base_width, args.base_depth],
        "alpha": alpha,
        "batch": args.batch,
        "block": args.block,
        "threads": torch.get_num_threads(),
        "torch": torch.__version__,
        "rounds": args.rounds,
        "steps_per_round": args.steps,
        "same_losses": same[True],
    }
    for c in CLOCKS:
        result[f"builtin_step_ms_{c}"] = 1e3 * statistics.median(times["builtin"][c])
        result[f"hooks_step_ms_{c}"] = 1e3 * statistics.median(times["hooks"][c])
        result[f"median_ratio_{c}"] = statistics.median(ratios[c])
        q1, _, q3 = statistics.quantiles(ratios[c], n=4)
        result[f"ratio_quartiles_{c}"] = [round(q1, 4), round(q3, 4)]
        result[f"ratios_{c}"] = [round(x, 4) for x in ratios[c]]
    if args.json:
        print(json.dumps(result))
        return 0
    print(
        f"{result['optimizer']}, GPT width {args.width} depth {args.depth} (base "
        f"{args.base_width} x {args.base_depth}: alpha in/hidden/out = {alpha['input']:.4g}/"
        f"{alpha['hidden']:.4g}/{alpha['output']:.4g}), batch {args.batch}x{args.block}, "
        f"{result['threads']} thread(s), torch {torch.__version__}"
    )
    print(f"  same losses over 3 steps: {same[True]}")
    print(f"  medians of {args.rounds} alternating rounds x {args.steps} steps:")
    for c, what in (("cpu", "process CPU time (robust)"), ("wall", "wall time")):
        print(
            f"  {what:26s} builtin {result[f'builtin_step_ms_{c}']:8.2f} ms   hooks "
            f"{result[f'hooks_step_ms_{c}']:8.2f} ms   median hooks/builtin "
            f"{result[f'median_ratio_{c}']:.4f} (quartiles {result[f'ratio_quartiles_{c}']}; "
            "target <= 1.02)"
        )
    print(f"  per-round ratios (cpu) {result['ratios_cpu']}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
