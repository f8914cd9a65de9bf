"""``spectral infer``: a declaration measured from a real optimizer class.

Registered in :data:`spectral.cli.COMMANDS`. torch and the optimizer's package are imported
inside the handler only. Exit codes: 0 a declaration was written, 1 no single declaration
fits the measurement (the reasons, with the numbers, go to stderr), 2 bad input.
"""

from __future__ import annotations

import argparse
import contextlib
import io
import sys

from ..errors import SpecError
from ..measure.guard import DEFAULT_TIMEOUT
from . import options
from .common import EXIT_DERIVATION, EXIT_OK, emit, write_json, wrote

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
        "--widths",
        type=options.integers(1, 4096, at_least=3, at_most=12),
        default=None,
        help="widths, three to twelve, larger than 32 and at most 4096 (default 64,128,256,512)",
    )
    p.add_argument(
        "--warmup",
        type=options.integer(0, 50),
        default=None,
        help="steps before the measured one (default 6: RAdam's rectification starts at step 6)",
    )
    p.add_argument(
        "--eps",
        type=options.eps_option,
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
    p.add_argument(
        "--name",
        type=options.spec_name,
        default=None,
        help="the declaration's name: 1-64 of a-z, 0-9, '-', '_', '+', '.' (default: the class, "
        "lower case)",
    )
    p.add_argument(
        "--threads",
        type=options.integer(1, 1024),
        default=1,
        help="torch threads (default 1: the matrices are small, and extra threads only "
        "contend on a shared machine)",
    )
    p.add_argument(
        "--timeout",
        type=options.timeout,
        default=DEFAULT_TIMEOUT,
        metavar="SECONDS",
        help=f"time limit of one measurement (one build and its steps; default {DEFAULT_TIMEOUT:g})",
    )
    p.add_argument("--quiet", action="store_true", help="no progress or summary on stderr")


def _json_option(text: str | None, option: str) -> dict:
    """``--kwargs`` / ``--group``: a JSON object, bounded in size and nesting
    (:func:`spectral.cli.options.json_object`); a refusal is one ``error:`` line."""
    if text is None:
        return {}
    try:
        return options.json_object()(text)
    except argparse.ArgumentTypeError as exc:
        raise SpecError(f"{option}: {exc}") from None


def run_infer(args: argparse.Namespace) -> int:
    from .common import console
    from ..infer import DEFAULT_WIDTHS, WARMUP, infer, load_target

    from ..measure.guard import user_code
    from ..io import check_distinct, check_output

    # every output refused now, not after minutes of measuring
    check_distinct({"-o": args.output, "--json": args.json})
    for option, path in (("-o", args.output), ("--json", args.json)):
        if path is not None:
            check_output(path, force=args.force, option=option)
    kwargs, group = _json_option(args.kwargs, "--kwargs"), _json_option(args.group, "--group")
    from ..measure.common import D0

    if args.widths is not None and min(args.widths) <= D0:
        raise SpecError(f"--widths: need at least three widths, all larger than d0 = {D0}; got {args.widths}")
    eps = None if args.eps == "none" else args.eps
    # the user's print()s go to stderr: stdout carries the TOML
    import torch  # noqa: F401 - imported before the time limit starts: it is not the user's time

    with contextlib.redirect_stdout(sys.stderr):
        # what the module prints as it is imported (`this` prints the Zen of Python) is
        # captured and dropped: it is neither the TOML nor one of our lines
        chatter = io.StringIO()
        with user_code(f"importing {args.target.strip()}", args.timeout), contextlib.redirect_stdout(
            chatter
        ), contextlib.redirect_stderr(chatter):
            target = load_target(args.target, kwargs, group)
        run = dict(
            widths=args.widths or DEFAULT_WIDTHS,
            warmup=WARMUP if args.warmup is None else args.warmup,
            eps=eps,
            name=args.name,
            applies_to=args.applies_to,
            threads=args.threads,
            timeout=args.timeout,
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
        wrote(
            args.output,
            f": update_norm = {result.update_norm}{eps_text}, applies_to = "
            f"{result.applies_to} ({result.seconds:.0f} s)",
            stderr=True,
        )
    return EXIT_OK
