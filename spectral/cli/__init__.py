"""The ``spectral`` command line: a thin layer over the API.

Exit codes: 0 success, 1 the conditions could not be turned into rules
(:class:`~spectral.errors.DerivationError`) or a measurement says they do not hold (a failing
``probe``, an ``infer`` that fits no rule, a ``coord-check`` whose model diverged: NaN or
inf), 2 bad usage or bad input (argparse errors,
:class:`~spectral.errors.SpecError`, unknown optimizers, refusing to overwrite a file).
Bad input never shows a traceback: every :class:`~spectral.errors.SpectralError` is caught
in :func:`main` and printed as ``error: <message>``, except an
:class:`~spectral.errors.InternalError` (a bug of spectral's), whose traceback is the report.

Adding a subcommand: in its module ``spectral/cli/<module>.py`` write
``configure_<name>(parser)`` (adds its arguments) and ``run_<name>(args) -> int`` (does the
work), then register them in :data:`COMMANDS`.
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

from ..errors import DerivationError, InternalError, SpectralError
from ..measure.fit import SLOPE_TOLERANCE_COORD
from ..text import for_terminal
from . import check_widths as cli_check_widths
from . import codegen as cli_codegen
from . import coord_check as cli_coord_check
from . import derive as cli_derive
from . import infer as cli_infer
from . import probe as cli_probe
from . import sweep as cli_sweep
from . import tokenize as cli_tokenize
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
# registry and entry point
# --------------------------------------------------------------------------------------

COMMANDS: dict[str, Command] = {
    "list": Command("list the optimizers in the catalog", cli_derive.configure_list, cli_derive.run_list),
    "derive": Command(
        "derive verified μP hyperparameter rules for an optimizer",
        cli_derive.configure_derive,
        cli_derive.run_derive,
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
        cli_sweep.configure_sweep,
        cli_sweep.run_sweep,
        description="Train the reference GPT over base learning rates (powers of 2) x widths "
        "and x depths under sp, mup-k1 and mup; write runs.jsonl (resumable), tables, plots "
        "and the optimum drift. See spectral.sweep.",
    ),
    "coord-check": Command(
        "train the reference models a few steps over widths and depths; fit and judge slopes",
        cli_coord_check.configure_coord_check,
        cli_coord_check.run_coord_check,
        description="Coordinate check: train the residual MLP or the GPT for a few steps under "
        "sp, mup-k1 and mup across a width sweep and a depth sweep; fit the log-log slope of "
        f"‖h_L‖_R and ‖h_L(t) − h_L(0)‖_R at the last step (pass: |slope| ≤ "
        f"{SLOPE_TOLERANCE_COORD:g}); JSON, PNGs and a table.",
    ),
    "check": Command(
        "check a model across widths: each module's slopes against the rules' exponents",
        cli_check_widths.configure_check,
        cli_check_widths.run_check,
        description=cli_check_widths.DESCRIPTION,
    ),
    "probe": Command(
        "measure a real optimizer's update norm and compare its width exponent with the "
        "declaration",
        cli_probe.configure_probe,
        cli_probe.run_probe,
        description="One step of the real implementation (unit lr, no weight decay) on a "
        "low-rank gradient for each role's shape and widths 64..1024; fit the exponent of "
        "‖ΔW‖_R in n and compare it with the declared update_norm (mismatch > 0.1 fails).",
    ),
    "infer": Command(
        "measure a real optimizer class and write the declaration it fits (or say why none "
        "fits)",
        cli_infer.configure_infer,
        cli_infer.run_infer,
        description=cli_infer.INFER_DESCRIPTION,
    ),
    "tokenize": Command(
        "train a BPE tokenizer on local text and write token shards for spectral sweep --data",
        cli_tokenize.configure_tokenize,
        cli_tokenize.run_tokenize,
        description="Train a byte-level BPE tokenizer (tokenizers) on the train split of the "
        "stdlib corpus or a text file and write nanoGPT-style uint16 shards (train.bin, "
        "val.bin), tokenizer.json and meta.json. No download.",
    ),
}
"""Subcommand name → :class:`Command`, in the order ``--help`` lists them. Each command's
module (``spectral/cli/<module>.py``) defines ``configure_<command>(parser)`` and
``run_<command>(args) -> int``."""


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
        if isinstance(exc, InternalError):  # a bug of spectral's: its traceback is the report
            raise
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
