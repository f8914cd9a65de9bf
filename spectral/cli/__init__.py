"""The ``spectral`` command line: a thin layer over the API.

Exit codes: 0 success, 1 the conditions could not be turned into rules
(:class:`~spectral.errors.DerivationError`) or a measurement says they do not hold (a failing
``probe``, an ``infer`` that fits no rule, a ``coord-check`` whose model diverged: NaN or
inf), 2 bad usage or bad input (argparse errors,
:class:`~spectral.errors.SpecError`, unknown optimizers, refusing to overwrite a file).
Bad input never shows a traceback: every :class:`~spectral.errors.SpectralError` is caught
in :func:`main` and printed as ``error: <message>``.

Adding a subcommand: write ``_configure_<name>(parser)`` (adds its arguments) and
``_run_<name>(args) -> int`` (does the work), then register them in :data:`COMMANDS`.
Import heavy dependencies (torch, numpy, matplotlib, pydantic) *inside* the handler, so
that ``spectral derive`` and ``spectral list`` stay fast and never import them.
"""

from __future__ import annotations

import argparse
import errno
import os
import sys
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from ..errors import DerivationError, SpectralError
from ..measure.fit import SLOPE_TOLERANCE_COORD
from ..render import FORMATS  # the formats render.render() knows: one list
from ..text import for_terminal
from . import check_widths as _check_widths
from . import coord_check as _checks
from . import codegen as cli_codegen
from . import infer as cli_infer
from . import probe as cli_probe
from .common import UsageError as _UsageError
from .common import add_output_options as _add_output_options
from .common import EXIT_DERIVATION, EXIT_OK, EXIT_USAGE, console, emit

__all__ = ["COMMANDS", "Command", "build_parser", "console", "emit", "main"]



@dataclass(frozen=True)
class Command:
    """One subcommand: its one-line help, how to add its arguments, how to run it."""

    help: str
    configure: Callable[[argparse.ArgumentParser], None]
    run: Callable[[argparse.Namespace], int]
    description: str = ""


# --------------------------------------------------------------------------------------
# spectral list
# --------------------------------------------------------------------------------------


def _configure_list(p: argparse.ArgumentParser) -> None:
    p.add_argument("--format", choices=("table", "json"), default="table", help="output format")
    _add_output_options(p)


def _run_list(args: argparse.Namespace) -> int:
    from ..catalog import catalog
    from ..render import catalog_rows

    rows = catalog_rows(catalog().values())
    if args.format == "json":
        import json

        emit(json.dumps(rows, indent=2, ensure_ascii=False) + "\n", args)
        return EXIT_OK
    from ..render import catalog_table

    emit(None, args, renderable=catalog_table(rows))
    return EXIT_OK


# --------------------------------------------------------------------------------------
# spectral derive
# --------------------------------------------------------------------------------------


def _configure_derive(p: argparse.ArgumentParser) -> None:
    which = p.add_mutually_exclusive_group(required=True)
    which.add_argument(
        "optimizer", nargs="?", metavar="OPTIMIZER", help="a catalog name (see `spectral list`)"
    )
    which.add_argument("--spec", metavar="FILE.toml", help="an optimizer declared in a TOML file")
    p.add_argument("--k", type=int, default=2, help="maps per residual block (default 2)")
    p.add_argument("--format", choices=FORMATS, default="table", help="output format")
    p.add_argument(
        "--standalone", action="store_true", help="LaTeX: wrap the table in a compilable document"
    )
    p.add_argument(
        "--explain",
        action="store_true",
        help="add, per entry, the condition that fixed it, and the verification summary",
    )
    p.add_argument(
        "--all-roles",
        action="store_true",
        help="table, markdown, latex: also derive the roles placed by their dimensions: "
        "output_bias, outer_weight, outer_bias, rank_down_weight, rank_up_weight, "
        "hidden_vector (docs/roles.md); --format json always lists them (a no-op there)",
    )
    p.add_argument(
        "--input-kind",
        choices=("image", "language"),
        default=None,
        help="input-weight init variance: σ²_base/d₀ (image) or σ²_base (language)",
    )
    _add_output_options(p)


def _run_derive(args: argparse.Namespace) -> int:
    from ..catalog import derive

    if args.standalone and args.format != "latex":
        raise _UsageError("--standalone applies only to --format latex")
    if args.spec is not None:
        from ..engine.spec_file import load_spec

        optimizer: Any = load_spec(args.spec)
    else:
        optimizer = args.optimizer
    # JSON is the machine-readable listing of every role a model may need, so it always
    # carries the roles placed by their dimensions; the human formats stay the paper's
    # tables (their golden files) unless --all-roles asks for the rest.
    d = derive(optimizer, k=args.k, all_roles=args.all_roles or args.format == "json")

    from .. import render

    if args.format == "table":
        emit(
            None, args, renderable=render.table(d, explain=args.explain, input_kind=args.input_kind)
        )
    elif args.format == "markdown":
        emit(render.markdown(d, explain=args.explain, input_kind=args.input_kind), args)
    elif args.format == "latex":
        emit(
            render.latex(
                d, standalone=args.standalone, explain=args.explain, input_kind=args.input_kind
            ),
            args,
        )
    else:
        emit(render.json_text(d, explain=args.explain), args)
    return EXIT_OK


# --------------------------------------------------------------------------------------
# registry and entry point
# --------------------------------------------------------------------------------------

COMMANDS: dict[str, Command] = {
    "list": Command("list the optimizers in the catalog", _configure_list, _run_list),
    "derive": Command(
        "derive verified μP hyperparameter rules for an optimizer",
        _configure_derive,
        _run_derive,
        description="Derive the μP rules of OPTIMIZER (or of a TOML declaration, --spec) for "
        "residual blocks of k maps, verify them against every condition term, and print them.",
    ),
    "codegen": Command(
        "write a standalone PyTorch config module (μP rules, param groups, optimizers)",
        cli_codegen.configure_codegen,
        cli_codegen.run_codegen,
        description=cli_codegen.CODEGEN_DESCRIPTION,
    ),
    "transfer": Command(
        "print the concrete per-role hyperparameters of a target model",
        cli_codegen.configure_transfer,
        cli_codegen.run_transfer,
        description=cli_codegen.TRANSFER_DESCRIPTION,
    ),
    "sweep": Command(
        "learning-rate transfer sweep: train the reference GPT under sp, mup-k1 and mup",
        lambda p: _sweep().configure_parser(p),
        lambda args: _sweep().run_from_args(args),
        description="Train the reference GPT over base learning rates (powers of 2) x widths "
        "and x depths under sp, mup-k1 and mup; write runs.jsonl (resumable), tables, plots "
        "and the optimum drift. See spectral.sweep.",
    ),
}
"""Subcommand name → :class:`Command`, in the order ``--help`` lists them."""


COMMANDS["coord-check"] = Command(
    "train the reference models a few steps over widths and depths; fit and judge slopes",
    _checks.configure_coord_check,
    _checks.run_coord_check_cmd,
    description="Coordinate check: train the residual MLP or the GPT for a few steps under sp, "
    "mup-k1 and mup across a width sweep and a depth sweep; fit the log-log slope of ‖h_L‖_R and "
    f"‖h_L(t) − h_L(0)‖_R at the last step (pass: |slope| ≤ {SLOPE_TOLERANCE_COORD:g}); "
    "JSON, PNGs and a table.",
)
COMMANDS["check"] = Command(
    "check a model across widths: each module's slopes against the rules' exponents",
    _check_widths.configure_check,
    _check_widths.run_check,
    description=_check_widths.DESCRIPTION,
)
COMMANDS["probe"] = Command(
    "measure a real optimizer's update norm and compare its width exponent with the declaration",
    cli_probe.configure_probe,
    cli_probe.run_probe_cmd,
    description="One step of the real implementation (unit lr, no weight decay) on a low-rank "
    "gradient for each role's shape and widths 64..1024; fit the exponent of ‖ΔW‖_R in n and "
    "compare it with the declared update_norm (mismatch > 0.1 fails).",
)

COMMANDS["infer"] = Command(
    "measure a real optimizer class and write the declaration it fits (or say why none fits)",
    cli_infer.configure_infer,
    cli_infer.run_infer,
    description=cli_infer.INFER_DESCRIPTION,
)


COMMANDS["tokenize"] = Command(
    "train a BPE tokenizer on local text and write token shards for spectral sweep --data",
    lambda p: _tokenize().configure(p),
    lambda args: _tokenize().run(args),
    description="Train a byte-level BPE tokenizer (tokenizers) on the train split of the stdlib "
    "corpus or a text file and write nanoGPT-style uint16 shards (train.bin, val.bin), "
    "tokenizer.json and meta.json. No download.",
)


def _tokenize():
    from . import tokenize  # numpy and tokenizers only when the command runs

    return tokenize


def _sweep():
    from . import sweep  # stdlib-only at import; torch is imported when a sweep trains

    return sweep


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="spectral",
        description="μP hyperparameter rules under joint width–depth scaling, for any optimizer.",
    )
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", required=True)
    for name, cmd in COMMANDS.items():
        p = sub.add_parser(name, help=cmd.help, description=cmd.description or cmd.help)
        cmd.configure(p)
        p.set_defaults(_run=cmd.run)
    return parser


def _error(message: str) -> None:
    # one line, whatever the message holds: user text reaches it (names, keys, paths)
    sys.stderr.write(f"error: {for_terminal(message)}\n")
    sys.stderr.flush()


def main(argv: Sequence[str] | None = None) -> int:
    """Run the CLI; returns the exit code (the console script passes it to ``sys.exit``)."""
    if sys.stdout is None:  # started with standard output closed
        sys.stdout = _ClosedOutput()
    # Output that the terminal's encoding cannot show is escaped, never a traceback.
    for stream in (sys.stdout, sys.stderr):
        reconfigure = getattr(stream, "reconfigure", None)
        if reconfigure is not None:
            reconfigure(errors="backslashreplace")
    parser = build_parser()
    try:
        args = parser.parse_args(argv)
    except SystemExit as exc:  # argparse: --help (0) or bad usage (2)
        return int(exc.code) if isinstance(exc.code, int) else EXIT_USAGE
    try:
        code = int(args._run(args))
        sys.stdout.flush()  # a full disk or a closed pipe shows here, not at exit
        return code
    except BrokenPipeError:  # `spectral list | head`
        _silence_stdout()
        return EXIT_OK
    except OSError as exc:  # standard output unwritable: /dev/full, a closed descriptor
        _silence_stdout()
        _error(f"cannot write the output: {exc.strerror or exc}")
        return EXIT_USAGE
    except DerivationError as exc:
        _error(str(exc))
        return EXIT_DERIVATION
    except SpectralError as exc:
        _error(str(exc))
        return EXIT_USAGE
    except KeyboardInterrupt:
        _error("interrupted")
        return 130


class _ClosedOutput:
    """Stands in for a standard output that was closed (``spectral ... >&-``)."""

    def write(self, text: str) -> int:
        raise OSError(errno.EBADF, "standard output is closed")

    def flush(self) -> None:
        pass


def _silence_stdout() -> None:
    """Send what is left of standard output nowhere, so the flush at exit cannot fail."""
    try:
        sys.stdout = open(os.devnull, "w")  # noqa: SIM115 - lives until the process ends
    except OSError:
        sys.stdout = _ClosedOutput()


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
