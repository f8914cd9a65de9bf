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
work), then register the module's and the function's names in :data:`COMMANDS`. Only the
module of the command that runs is imported; import heavy dependencies (torch, numpy,
matplotlib, pydantic) *inside* the handler too, so that a command pays only for what it
uses (``tests/cli/test_cli_imports.py``).
"""

from __future__ import annotations

import argparse
import errno
import importlib
import os
import sys
from collections.abc import Sequence
from types import ModuleType
from typing import NamedTuple

from ..errors import DerivationError, InternalError, SpectralError
from .common import EXIT_DERIVATION, EXIT_OK, EXIT_USAGE, console, emit

__all__ = ["COMMANDS", "Command", "build_parser", "console", "emit", "main"]


class Command(NamedTuple):
    """One subcommand: its one-line help and where its handlers live, imported only when the
    command runs (``spectral derive`` never imports the sweep, torch or matplotlib).

    ``module`` (under :mod:`spectral.cli`) defines ``configure_<function>(parser)`` and
    ``run_<function>(args) -> int``; the description shown by ``spectral COMMAND --help`` is
    ``description``, or the module's attribute ``description_attr`` (text computed there).
    """

    help: str
    module: str
    function: str
    description: str = ""
    description_attr: str = ""

    def handlers(self) -> ModuleType:
        """The module holding this command's handlers (imported on first use)."""
        return importlib.import_module(f"{__name__}.{self.module}")

    def configure(self, parser: argparse.ArgumentParser) -> None:
        """Add this command's arguments (and its description) to ``parser``."""
        module = self.handlers()
        if self.description_attr:
            parser.description = getattr(module, self.description_attr)
        getattr(module, f"configure_{self.function}")(parser)

    def run(self, args: argparse.Namespace) -> int:
        """Run the command on parsed ``args``; returns the exit code."""
        return int(getattr(self.handlers(), f"run_{self.function}")(args))


# --------------------------------------------------------------------------------------
# registry and entry point
# --------------------------------------------------------------------------------------

COMMANDS: dict[str, Command] = {
    "list": Command("list the optimizers in the catalog", "derive", "list"),
    "derive": Command(
        "derive verified μP hyperparameter rules for an optimizer",
        "derive",
        "derive",
        description="Derive the μP rules of OPTIMIZER (or of a TOML declaration, --spec) for "
        "residual blocks of k maps, verify them against every condition term, and print them.",
    ),
    "codegen": Command(
        "write a standalone PyTorch config module (μP rules, param groups, optimizers)",
        "codegen",
        "codegen",
        description_attr="CODEGEN_DESCRIPTION",
    ),
    "transfer": Command(
        "print the concrete per-role hyperparameters of a target model",
        "codegen",
        "transfer",
        description_attr="TRANSFER_DESCRIPTION",
    ),
    "sweep": Command(
        "learning-rate transfer sweep: train the reference GPT under sp, mup-k1 and mup",
        "sweep",
        "sweep",
        description="Train the reference GPT over base learning rates (powers of 2) x widths "
        "and x depths under sp, mup-k1 and mup; write runs.jsonl (resumable), tables, plots "
        "and the optimum drift. See spectral.sweep.",
    ),
    "coord-check": Command(
        "train the reference models a few steps over widths and depths; fit and judge slopes",
        "coord_check",
        "coord_check",
        description_attr="DESCRIPTION",
    ),
    "check": Command(
        "check a model across widths: each module's slopes against the rules' exponents",
        "check_widths",
        "check",
        description_attr="DESCRIPTION",
    ),
    "probe": Command(
        "measure a real optimizer's update norm and compare its width exponent with the "
        "declaration",
        "probe",
        "probe",
        description="One step of the real implementation (unit lr, no weight decay) on a "
        "low-rank gradient for each role's shape and widths 64..1024; fit the exponent of "
        "‖ΔW‖_R in n and compare it with the declared update_norm (mismatch > 0.1 fails).",
    ),
    "infer": Command(
        "measure a real optimizer class and write the declaration it fits (or say why none "
        "fits)",
        "infer",
        "infer",
        description_attr="INFER_DESCRIPTION",
    ),
    "tokenize": Command(
        "train a BPE tokenizer on local text and write token shards for spectral sweep --data",
        "tokenize",
        "tokenize",
        description="Train a byte-level BPE tokenizer (tokenizers) on the train split of the "
        "stdlib corpus or a text file and write nanoGPT-style uint16 shards (train.bin, "
        "val.bin), tokenizer.json and meta.json. No download.",
    ),
}
"""Subcommand name → :class:`Command`, in the order ``--help`` lists them. Names, help and
fixed descriptions only: a command's module is imported when that command runs (or its
``--help`` is asked for)."""


def build_parser(command: str | None = None, *, only: bool = False) -> argparse.ArgumentParser:
    """The ``spectral`` parser. Every subcommand is listed with its help; only ``command``'s
    arguments are added (its module imported), or every command's when ``command`` is None.
    ``only``: list ``command`` alone (what :func:`main` builds when the first word names the
    command: the other commands' parsers would change neither the parse nor a message)."""
    parser = argparse.ArgumentParser(
        prog="spectral",
        description="μP hyperparameter rules under joint width–depth scaling, for any optimizer.",
    )
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", required=True)
    for name, cmd in COMMANDS.items():
        if only and name != command:
            continue
        p = sub.add_parser(name, help=cmd.help, description=cmd.description or cmd.help)
        if command is None or name == command:
            cmd.configure(p)
    return parser


def _command_named(argv: Sequence[str]) -> str:
    """The subcommand ``argv`` names: its first word not an option (the top-level parser
    takes no option but ``--help``), or "" when there is none."""
    return next((word for word in argv if not word.startswith("-")), "")


def _error(message: str) -> None:
    # one line, whatever the message holds: user text reaches it (names, keys, paths)
    from ..text import for_terminal

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
    words = list(sys.argv[1:] if argv is None else argv)
    command = _command_named(words)
    # `spectral derive ...`: derive's parser alone (the top-level help, `spectral -h derive`
    # and an unknown command's error still list every command)
    parser = build_parser(command, only=command in COMMANDS and words[0] == command)
    try:
        args = parser.parse_args(words)
    except SystemExit as exc:  # argparse: --help (0) or bad usage (2)
        return int(exc.code) if isinstance(exc.code, int) else EXIT_USAGE
    try:
        code = COMMANDS[args.command].run(args)
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
