"""``python -m spectral.cli.coord_check_jax``: the JAX coordinate check from the command line.

Parses the options into a :class:`~spectral.coordcheck.jax.JaxCoordCheckConfig`, runs
:func:`~spectral.coordcheck.jax.run_coord_check_jax` with progress lines on standard error,
prints the slope table and writes the JSON; the check itself prints nothing.
"""

from __future__ import annotations

import argparse
import os
from collections.abc import Sequence

from ..coordcheck import DEFAULT_ALPHA_BASE, PARAMETERIZATIONS
from ..coordcheck.jax import JaxCoordCheckConfig, run_coord_check_jax, slope_table
from ..errors import SpecError
from . import options

__all__ = ["main"]


def main(argv: Sequence[str] | None = None) -> int:
    """``python -m spectral.cli.coord_check_jax``: run the check, print the table (exit 2 on
    bad input, 1 when a μP slope fails)."""
    import json
    import sys

    p = argparse.ArgumentParser(
        prog="python -m spectral.cli.coord_check_jax",
        description="Coordinate check of the flax residual MLP through the module "
        "`spectral codegen --framework jax` writes (CPU); the table of `spectral coord-check`.",
    )
    p.add_argument("--optimizer", default="adamw", help="optimizer of the hidden weights")
    p.add_argument("--others", default=None, help="optimizer of the other roles")
    # every number range-checked as spectral coord-check's (spectral.cli.options): a usage
    # error naming the option before any work, never NaN, inf or a size that cannot finish
    p.add_argument("--k", type=options.integer(1, 8), default=2, help="maps per residual block (default 2)")
    p.add_argument("--widths", type=options.integers(1, 8192, at_least=2, at_most=16),
                   default=(64, 128, 256, 512), metavar="N,N,...")
    p.add_argument("--depths", type=options.integers(1, 1024, at_least=2, at_most=16),
                   default=(4, 8, 16, 32, 64, 128), metavar="L,L,...")
    p.add_argument("--parameterizations", type=lambda s: tuple(s.split(",")), default=PARAMETERIZATIONS)
    p.add_argument("--steps", type=options.integer(1, 10_000), default=10)
    p.add_argument("--batch", type=options.integer(1, 4096), default=8)
    p.add_argument("--seeds", type=options.integer(1, 100), default=3)
    p.add_argument("--lr", type=options.floats(0.0, 1e6, lo_open=True), default=None, help="base lr of --optimizer")
    p.add_argument("--others-lr", type=options.floats(0.0, 1e6, lo_open=True), default=None,
                   help="base lr of --others")
    p.add_argument("--weight-decay", type=options.floats(0.0, 1e6), default=0.0)
    p.add_argument("--alpha-base", type=options.floats(0.0, 1e6, lo_open=True), default=DEFAULT_ALPHA_BASE["mlp"])
    p.add_argument("--json", metavar="FILE", help="write every point and slope as JSON")
    p.add_argument("--force", action="store_true", help="overwrite an existing --json FILE")
    p.add_argument("--quiet", action="store_true", help="no progress lines")
    args = p.parse_args(argv)
    try:
        cfg = JaxCoordCheckConfig(
            optimizer=args.optimizer,
            others=args.others,
            k=args.k,
            parameterizations=args.parameterizations,
            widths=args.widths,
            depths=args.depths,
            steps=args.steps,
            batch=args.batch,
            seeds=args.seeds,
            lr=args.lr,
            others_lr=args.others_lr,
            weight_decay=args.weight_decay,
            alpha_base=args.alpha_base,
        )
    except (SpecError, ValueError, KeyError) as exc:
        sys.stderr.write(f"error: {exc}\n")
        return 2
    if args.json and os.path.lexists(args.json) and not args.force:
        sys.stderr.write(f"error: {args.json} exists; pass --force to overwrite it\n")
        return 2

    def progress(line: str) -> None:
        if not args.quiet:
            sys.stderr.write(line + "\n")

    result = run_coord_check_jax(cfg, progress=progress)
    sys.stdout.write(slope_table(result))
    if args.json:
        from ..io import write_atomic

        try:
            write_atomic(args.json, json.dumps(result, indent=1) + "\n", force=args.force)
        except SpecError as exc:
            sys.stderr.write(f"error: {exc}\n")
            return 2
    if result["diverged"] is not None:  # as `spectral coord-check`: say where
        from ..coordcheck import divergence_text

        sys.stderr.write(f"error: the JAX MLP {divergence_text(result['diverged'])}; the check fails\n")
        return 1
    return 0 if result["pass"] else 1


if __name__ == "__main__":  # pragma: no cover
    raise SystemExit(main())
