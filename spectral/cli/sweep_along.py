"""``spectral sweep --steps S1,S2,… / --batch-sizes B1,B2,…``: the sweep along the training
horizon and the batch (:mod:`spectral.sweep.along`), its arguments and their checks.

Every argument is checked here, before any folder is made or any data is read.
"""

from __future__ import annotations

import argparse
from typing import Any

from ..errors import SpecError
from ..sweep.along import Along, optimizer_laws
from . import options

__all__ = ["alongs_from_args", "base_steps", "configure_along"]

STEPS_HELP = ("training steps; several (e.g. 50,100,200,400): the sweep along the horizon at the base size, the "
              "optimal η's exponent in the tokens fitted (base: --base-steps)")


def configure_along(p: argparse.ArgumentParser) -> None:
    """``--batch-sizes`` and ``--base-steps`` (``--steps`` itself is the sweep's)."""
    p.add_argument("--batch-sizes", type=options.integers(1, 65536, at_least=2, at_most=32, distinct=True),
                   metavar="B1,B2,…",
                   help="the sweep along the batch at the base size, the tokens held (steps = base steps × "
                        "--batch-size / B): the optimal η's exponent in B fitted; --batch-size is the base")
    p.add_argument("--together", action="store_true",
                   help="pair --widths with --steps one to one (e.g. --widths 32,128 --steps 100,400: 4x the width "
                        "with 4x the steps), the first pair the base (--base-width): width-only transfer (μP, η and "
                        "λ unchanged along the steps) against μP plus the horizon rules, paired by seed")
    p.add_argument("--base-steps", type=options.integer(1, 10_000_000),
                   help="with several --steps or --batch-sizes: the base run's steps (default: the smallest of "
                        "--steps)")


def base_steps(args: argparse.Namespace, preset: dict[str, Any]) -> int:
    """The steps of the base run: ``--base-steps``, else the smallest of ``--steps``, else the preset's."""
    if getattr(args, "base_steps", None) is not None:
        return int(args.base_steps)
    if args.steps:
        return min(args.steps)
    return int(preset["steps"])


def alongs_from_args(args: argparse.Namespace, cfgs: list[Any], tune: list[Any], fit_keys: list[Any]) -> list[Along]:
    """The axes asked for (none: the width-depth sweep), every argument checked."""
    steps = tuple(args.steps or ())
    if args.together:
        return [_together(args, cfgs, tune, fit_keys)]
    horizon = len(steps) > 1
    if not horizon and not args.batch_sizes:
        if args.base_steps is not None:
            raise SpecError("--base-steps is the base of the sweep along the horizon or the batch; "
                            "give several --steps or --batch-sizes too")
        return []
    what = "--steps with several values" if horizon else "--batch-sizes"
    _refuse(what, args, tune, fit_keys, widths=True)
    if not horizon and steps and args.base_steps is not None and steps[0] != args.base_steps:
        raise SpecError(f"--steps {steps[0]} and --base-steps {args.base_steps}: one base run; give one of them")
    if len(set(steps)) != len(steps):
        raise SpecError(f"--steps: a value is given twice in {','.join(map(str, steps))}")
    cfg = cfgs[0]
    base = cfg.steps
    if horizon and base not in steps:
        raise SpecError(f"--base-steps {base} is not one of --steps {','.join(map(str, steps))}")
    if args.batch_sizes and cfg.batch_size not in args.batch_sizes:
        raise SpecError(f"--batch-size {cfg.batch_size} (the base) is not one of --batch-sizes "
                        f"{','.join(map(str, args.batch_sizes))}")
    _check_grids(what, cfgs)
    out = []
    if horizon:
        out.append(Along("horizon", steps, base, cfg.batch_size))
    if args.batch_sizes:
        a = Along("batch", tuple(args.batch_sizes), base, cfg.batch_size)
        for b in a.values:
            a.steps_batch(b)  # each batch divides the base's tokens
        out.append(a)
    return out


def _refuse(what: str, args: argparse.Namespace, tune: list[Any], fit_keys: list[Any], *, widths: bool) -> None:
    """The options these sweeps plan themselves (``--widths`` too unless paired with ``--steps``)."""
    for flag, given in (("--fit-exponent", fit_keys), ("--ablate", args.ablate), ("--tune", tune),
                        ("--param", args.params), ("--widths", args.widths and widths), ("--depths", args.depths),
                        ("--width", args.width), ("--depth", args.depth)):
        if given:
            raise SpecError(f"{what} sweeps μP at the base size (--base-width, --base-depth) over --log2-lrs, "
                            f"and fits η's exponent itself: drop {flag}" + (" (or give --tune none)" if flag == "--tune"
                                                                            else ""))


def _check_grids(what: str, cfgs: list[Any]) -> None:
    """Every optimizer's η grid: at least three consecutive log2 η (a vertex per point)."""
    for c in cfgs:
        lrs = sorted(c.log2_lrs)
        if len(lrs) < 3 or lrs != list(range(lrs[0], lrs[0] + len(lrs))):
            raise SpecError(f"--log2-lrs: {what} needs at least three consecutive integers (a parabola's "
                            f"vertex per point), got {','.join(map(str, lrs))}")
        optimizer_laws(c.optimizer)  # a hybrid whose parts' laws differ is refused here


def _together(args: argparse.Namespace, cfgs: list[Any], tune: list[Any], fit_keys: list[Any]) -> Along:
    """``--together``: ``--widths`` paired with ``--steps``, the first pair the base, every
    argument checked."""
    steps, widths = tuple(args.steps or ()), tuple(args.widths or ())
    if len(steps) < 2 or len(widths) != len(steps):
        raise SpecError(f"--together pairs --widths with --steps one to one (at least two pairs): got "
                        f"{len(widths)} widths and {len(steps)} steps")
    if args.batch_sizes:
        raise SpecError("--together moves the width and the steps; sweep --batch-sizes on its own")
    _refuse("--together", args, tune, fit_keys, widths=False)
    for name, values in (("--widths", widths), ("--steps", steps)):
        if list(values) != sorted(set(values)):
            raise SpecError(f"--together: {name} {','.join(map(str, values))} must rise strictly (pair by pair)")
    cfg = cfgs[0]
    if (widths[0], steps[0]) != (cfg.base_width, cfg.steps):
        raise SpecError(f"--together: the first pair ({widths[0]} wide, {steps[0]} steps) is the base; "
                        f"--base-width {cfg.base_width} and --base-steps {cfg.steps} must name it")
    _check_grids("--together", cfgs)
    return Along("together", steps, cfg.steps, cfg.batch_size, widths)
