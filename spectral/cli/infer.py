"""``spectral infer``: a declaration measured from a real optimizer class.

Registered in :data:`spectral.cli.COMMANDS`. torch and the optimizer's package are imported
inside the handler only. Exit codes: 0 a declaration was written, 1 no single declaration
fits the measurement (the reasons, with the numbers, go to stderr), 2 bad input.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from ..errors import SpecError
from .common import EXIT_DERIVATION, EXIT_OK, emit, write_json

__all__ = ["INFER_DESCRIPTION", "configure_infer", "run_infer"]

INFER_DESCRIPTION = (
    "Measure a real optimizer class (MODULE.CLASS) the way `spectral probe` does — a few "
    "warm-up steps, then ‖ΔW‖_R/lr for each role's shape over widths 64..512, at gradient "
    "ranks 1 and 4, two seeds and ‖∇W‖_2 = 0.1, 1, 10 — fit the exponents of n_in, n_out and "
    "G with 95% intervals, round them to small fractions where the interval allows, and "
    "write the TOML declaration that `spectral derive --spec` reads (the measurements as "
    "comments). If the step depends on the weights, is not proportional to the lr, or its "
    "exponents do not round, it says why with the numbers and exits 1 instead of guessing."
)


def _widths(text: str) -> tuple[int, ...]:
    try:
        vals = tuple(int(v) for v in text.replace(" ", "").split(",") if v)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected comma-separated integers, got {text!r}") from None
    if len(vals) < 3 or min(vals) < 1:
        raise argparse.ArgumentTypeError(f"expected at least three positive widths, got {text!r}")
    return vals


def configure_infer(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "target",
        metavar="MODULE.CLASS",
        help="the optimizer class, e.g. torch.optim.AdamW or pytorch_optimizer.Lion",
    )
    p.add_argument(
        "--kwargs",
        metavar="JSON",
        default=None,
        help='constructor arguments as a JSON object, e.g. \'{"adjust_lr_fn": "match_rms_adamw"}\' '
        "(lists become tuples; lr is set by the measurement, weight_decay defaults to 0)",
    )
    p.add_argument(
        "--group",
        metavar="JSON",
        default=None,
        help='keys of the parameter group, e.g. \'{"use_muon": true}\' for NorMuon / AdaMuon',
    )
    p.add_argument("-o", "--output", metavar="FILE.toml", help="write the declaration here")
    p.add_argument("--json", metavar="FILE", help="write the fits, intervals and checks as JSON")
    p.add_argument("--force", action="store_true", help="overwrite existing files")
    p.add_argument(
        "--widths", type=_widths, default=None, help="widths, at least three (default 64,128,256,512)"
    )
    p.add_argument(
        "--warmup",
        type=int,
        default=None,
        help="steps before the measured one (default 6: RAdam's rectification starts at step 6)",
    )
    p.add_argument(
        "--eps",
        default="auto",
        metavar="auto|none|KEY|KEY[I]",
        help="which constructor argument is the ε (default: detect eps, epsilon, *_eps and "
        "declare it when it regularises the step)",
    )
    p.add_argument(
        "--applies-to",
        choices=("auto", "matrices"),
        default="auto",
        help="auto: biases too when they measure consistently (default); matrices: skip them",
    )
    p.add_argument("--name", default=None, help="the declaration's name (default: the class, lower case)")
    p.add_argument(
        "--threads",
        type=int,
        default=1,
        help="torch threads (default 1: the matrices are small, and extra threads only "
        "contend on a shared machine)",
    )
    p.add_argument("--quiet", action="store_true", help="no progress or summary on stderr")


def _json_object(text: str | None, option: str) -> dict:
    if text is None:
        return {}
    try:
        value = json.loads(text)
    except json.JSONDecodeError as exc:
        raise SpecError(f"{option}: not valid JSON ({exc.msg} at character {exc.pos}): {text!r}") from None
    if not isinstance(value, dict):
        raise SpecError(f"{option}: expected a JSON object {{\"name\": value, ...}}, got {text!r}")
    return value


def run_infer(args: argparse.Namespace) -> int:
    from .common import console
    from ..infer import DEFAULT_WIDTHS, WARMUP, infer, load_target

    kwargs = _json_object(args.kwargs, "--kwargs")
    group = _json_object(args.group, "--group")
    for path in (args.output, args.json):
        if path and Path(path).exists() and not args.force:
            raise SpecError(f"{path} exists; pass --force to overwrite it")  # before measuring
    if args.threads < 1:
        raise SpecError(f"--threads must be positive, got {args.threads}")
    eps = None if args.eps.strip().lower() == "none" else args.eps.strip()
    target = load_target(args.target, kwargs, group)
    run = dict(
        widths=args.widths or DEFAULT_WIDTHS,
        warmup=WARMUP if args.warmup is None else args.warmup,
        eps=eps,
        name=args.name,
        applies_to=args.applies_to,
        threads=args.threads,
    )
    if args.quiet:
        result = infer(target, **run)
    else:
        with console(stderr=True).status(f"infer {target.label}") as status:
            result = infer(
                target, progress=lambda what: status.update(f"infer {target.label}: {what}"), **run
            )
    if args.json:
        write_json(args.json, result.to_dict(), args.force)
    if not result.fits:
        sys.stderr.write(f"error: {result.explain()}\n")
        sys.stderr.flush()
        return EXIT_DERIVATION
    emit(result.toml(), args)
    if not args.quiet and args.output:
        eps_text = f", eps = {result.eps.expression}" if result.eps and result.eps.expression else ""
        sys.stderr.write(
            f"wrote {args.output}: update_norm = {result.update_norm}{eps_text}, applies_to = "
            f"{result.applies_to} ({result.seconds:.0f} s)\n"
        )
    return EXIT_OK
