"""DeepSeek-V3 at fixed latent ranks across widths: the normed rank-down role against the
plain one, beside a Llama control (issue 47 item 6).

For each model, ``check_widths`` at widths 64, 128, 256 (Muon-Kimi + AdamW, --all-roles,
base 64 x 2) and, per module, the width exponent of its output at init, of its own one-step
change and of its whole one-step change (its input's change included: what a norm after a
rank-down map amplifies downstream). Run from the repository root:

    .venv/bin/python benchmarks/deepseek_normed.py --seeds 4
    .venv/bin/python benchmarks/deepseek_normed.py --seeds 3 --optimizers adamw

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


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seeds", type=int, default=2)
    parser.add_argument(
        "--optimizers", default="muon-kimi,adamw",
        help="the config's optimizers, comma-separated (default: muon-kimi,adamw)",
    )
    args = parser.parse_args()
    warnings.simplefilter("ignore")
    with tempfile.TemporaryDirectory() as folder:
        cfg = load_generated(*args.optimizers.split(","), base_width=64, base_depth=2,
                             folder=folder, all_roles=True)
        for label, build, patterns in (
            ("DeepSeek-V3, normed rank-down (the default)", deepseek_v3, None),
            ("DeepSeek-V3, plain rank-down (patterns=)", deepseek_v3, PLAIN),
            ("Llama control", llama, None),
        ):
            print(f"\n{label}, seeds {args.seeds}")
            measure(cfg, build, patterns, args.seeds)


if __name__ == "__main__":
    main()
