"""Print one class's width slopes as the slow traced-class test measures them.

Not a test module: the numbers docs/your-model.md quotes for issue 38's classes come from
it. ``python traced_slopes.py CLASS`` (run in tests/families, or with it on sys.path)
prints, as JSON, each quantity's width slope (h0, logits, dlogits, branch:<name>) over
widths 64/128/256 at depth 2, pooled over ``--seeds`` twins per width (8 by default, the
control's in the tests and what the docs quote; the slow test pools 4 for every class of
test_traced_classes.py: ``--seeds 4`` prints its numbers)
(tests/families/test_model_classes.py ``measured_slopes``), under the Muon-Kimi + AdamW
config (``--config muon``) or AdamW on every role (``--config adamw``). CLASS is a key of
traced_classes.TRACED_CLASSES or ``llama`` (the control). ``--widths`` and ``--lr``
change the widths and the base learning rate, ``--eps`` the base epsilon (AdamW's ε, which
the rules scale per role; the optimizers' own default when not given); ``--problems`` prints
the check's own lines after the slopes. For the control only, ``--batch ROWS,SEQ`` and
``--vocab V`` change its token batch (8,32: 248 tokens with a next-token label) and its
vocabulary (128).
"""

from __future__ import annotations

import argparse
import functools
import json
import os
import sys
import tempfile
import warnings
from pathlib import Path

os.environ.setdefault("OMP_NUM_THREADS", "1")
sys.path[:0] = [str(Path(__file__).resolve().parent), str(Path(__file__).resolve().parents[1])]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("name")
    parser.add_argument("--config", choices=("muon", "adamw"), default="muon")
    parser.add_argument("--seeds", type=int, default=8)
    parser.add_argument("--lr", type=float, default=1e-2)
    parser.add_argument("--widths", default="64,128,256")
    parser.add_argument("--eps", type=float, default=None)
    parser.add_argument("--batch", default=None)
    parser.add_argument("--vocab", type=int, default=None)
    parser.add_argument("--problems", action="store_true")
    args = parser.parse_args()
    if args.name != "llama" and (args.batch or args.vocab):
        parser.error("--batch and --vocab change the llama control only")
    warnings.filterwarnings("ignore")

    import test_model_classes as classes
    from float32_muon import use_float32_newton_schulz
    from traced_classes import TRACED_CLASSES

    from spectral.codegen import load_generated

    use_float32_newton_schulz()  # as the slow tests do
    classes.WIDTHS[:] = [int(w) for w in args.widths.split(",")]
    optimizers = ("muon-kimi", "adamw") if args.config == "muon" else ("adamw",)
    cfg = load_generated(
        *optimizers,
        base_width=64,
        base_depth=2,
        folder=tempfile.mkdtemp(),
        all_roles=True,
    )
    if args.name == "llama":
        classes.VOCAB = args.vocab or classes.VOCAB  # llama() and token_batch() read it
        build, batch = classes.llama, classes.token_batch
        if args.batch:
            rows, seq = (int(n) for n in args.batch.split(","))
            batch = functools.partial(classes.token_batch, rows, seq)
    else:
        build, batch = TRACED_CLASSES[args.name]
    if args.eps is not None:  # measured_slopes passes the lr alone: AdamW's epsilon beside it
        check, eps = classes.check_widths, args.eps
        classes.check_widths = lambda *a, base, **kw: check(*a, base={**base, "eps": eps}, **kw)
    slopes, problems = classes.measured_slopes(cfg, build, batch(), seeds=args.seeds, lr=args.lr)
    print(json.dumps({k: round(v, 3) for k, v in slopes.items()}, indent=1))
    if args.problems:
        print("\n".join(problems))


if __name__ == "__main__":
    main()
