"""DeepSeek-V3 at fixed latent ranks across widths: the normed rank-down role against the
plain one, beside a Llama control (issue 47 item 6).

For each model, ``check_widths`` at widths 64, 128, 256 (Muon-Kimi + AdamW, --all-roles,
base 64 x 2) and, per module, the width exponent of its output at init, of its own one-step
change and of its whole one-step change (its input's change included: what a norm after a
rank-down map amplifies downstream). Run from the repository root:

    .venv/bin/python benchmarks/deepseek_normed.py --seeds 4
    .venv/bin/python benchmarks/deepseek_normed.py --seeds 3 --optimizers adamw
    .venv/bin/python benchmarks/deepseek_normed.py --seeds 3 --along-rows
    .venv/bin/python benchmarks/deepseek_normed.py --seeds 2 --along-rows --optimizers adamw \
        --widths 128,256,512,1024

``--along-rows`` measures, instead, what the fixed rank costs (the note check() gives on
such a model): the one-step change of kv_a_proj_with_mqa's input seen through its weights
at init, W0 (x1 - x0), against a Llama control's k_proj and v_proj. The input's change has a
part along the map's rows (the backward pass through the map put it there), which a map to
a fixed rank amplifies as (n/rank)^(1/2); a square map does not.

Seconds per model on this 2-core CPU: about 30 at --seeds 2.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import warnings
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from spectral.codegen import load_generated  # noqa: E402
from spectral.measure.fit import log_slope  # noqa: E402
from spectral.torch import check_widths  # noqa: E402
from tests.families.test_model_classes import deepseek_v3, llama  # noqa: E402

WIDTHS = [64, 128, 256]
PLAIN = {r"self_attn\.(q_a_proj|kv_a_proj_with_mqa)\.weight$": "rank_down_weight"}
SHOWN = ("q_a_proj", "kv_a_proj", "q_b_proj", "kv_b_proj", "o_proj", "q_proj", "k_proj")


def measure(cfg, build, patterns, seeds: int) -> None:
    torch.manual_seed(0)
    model = build(WIDTHS[0], 2)
    cfg.apply_multipliers(model, WIDTHS[0], 2, patterns=patterns)
    cfg.init_(model, WIDTHS[0], 2)
    report = check_widths(
        cfg.CONFIG, model, WIDTHS, factory=lambda w: build(w, 2), base={"lr": 1e-3},
        seeds=seeds, timeout=None,
    )
    print(f"problems: {report.problems}")
    print(f"  {'module':46} {'role':24} {'init':>6} {'own step':>9} {'whole step':>11}")
    for row in report.rows:
        if any(s in row.name for s in SHOWN):
            whole = log_slope(WIDTHS, row.total)
            print(f"  {row.name:46} {row.role:24} {row.init_slope:+6.2f} "
                  f"{row.step_slope:+9.2f} {whole:+11.2f}")


def along_rows(cfg, build, suffixes, seeds: int, widths: list[int]) -> None:
    """Per module ending in one of ``suffixes``: the width exponent of rms(W0 (x1 - x0))
    after one step at lr 1e-3 (seeds averaged), over ``widths`` and per octave."""
    found: dict[str, list[float]] = {}
    for width in widths:
        values: dict[str, list[float]] = {}
        for seed in range(seeds):
            torch.manual_seed(seed)
            model = build(width, 2)
            cfg.apply_multipliers(model, width, 2)
            cfg.init_(model, width, 2)
            optimizer = cfg.build_optimizers(model, width, 2, lr=1e-3)
            modules = {n: m for n, m in model.named_modules() if n.endswith(suffixes)}
            inputs: dict[str, torch.Tensor] = {}
            for name, module in modules.items():
                module.register_forward_pre_hook(
                    lambda _m, args, name=name, into=inputs: into.__setitem__(
                        name, args[0].detach().clone()
                    )
                )
            torch.manual_seed(100 + seed)
            ids = torch.randint(0, 128, (2, 16))
            model(ids, labels=ids).loss.backward()
            before = dict(inputs)
            weights = {n: m.weight.detach().clone() for n, m in modules.items()}
            optimizer.step()
            with torch.no_grad():
                model(ids)
            for name in modules:
                seen = (inputs[name] - before[name]) @ weights[name].T
                values.setdefault(name, []).append(seen.pow(2).mean().sqrt().item())
        for name, v in values.items():
            found.setdefault(name, []).append(sum(v) / len(v))
    for name, v in found.items():
        octaves = ", ".join(
            f"{log_slope(widths[i:i + 2], v[i:i + 2]):+.2f}" for i in range(len(v) - 1)
        )
        print(f"  {name:46} W0 (x1 - x0) ~ n^{log_slope(widths, v):+.2f} (per step: {octaves})")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seeds", type=int, default=2)
    parser.add_argument(
        "--optimizers", default="muon-kimi,adamw",
        help="the config's optimizers, comma-separated (default: muon-kimi,adamw)",
    )
    parser.add_argument(
        "--along-rows", action="store_true",
        help="measure the input's change seen through each map (what the fixed rank costs)",
    )
    parser.add_argument(
        "--widths", default="64,128,256",
        help="with --along-rows: the widths, comma-separated (default: 64,128,256)",
    )
    args = parser.parse_args()
    warnings.simplefilter("ignore")
    with tempfile.TemporaryDirectory() as folder:
        cfg = load_generated(*args.optimizers.split(","), base_width=64, base_depth=2,
                             folder=folder, all_roles=True)
        if args.along_rows:
            for label, build, suffixes in (
                ("DeepSeek-V3 (ranks 48, 32 + 8)", deepseek_v3, ("kv_a_proj_with_mqa", "q_a_proj")),
                ("Llama control", llama, ("k_proj", "v_proj")),
            ):
                widths = [int(w) for w in args.widths.split(",")]
                print(f"\n{label}, seeds {args.seeds}, widths {widths}")
                along_rows(cfg, build, suffixes, args.seeds, widths)
            return
        for label, build, patterns in (
            ("DeepSeek-V3, normed rank-down (the default)", deepseek_v3, None),
            ("DeepSeek-V3, plain rank-down (patterns=)", deepseek_v3, PLAIN),
            ("Llama control", llama, None),
        ):
            print(f"\n{label}, seeds {args.seeds}")
            measure(cfg, build, patterns, args.seeds)


if __name__ == "__main__":
    main()
