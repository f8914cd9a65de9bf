"""What third-party libraries log or warn, kept off the CLI's standard error.

transformers logs through its own loggers (``Model config: bos_token_id must be ...``,
deprecation notices) and torch warns through :mod:`warnings`; on the command line those
lines would sit beside the one line a command prints, so :func:`third_party_kept` collects
them while the command runs: spectral's own warnings (and the user's code's) are returned
as notes to print, the others are kept apart, printed only where the command has a
``--verbose`` flag and it is given.
"""

from __future__ import annotations

import importlib.util
import logging
import sys
import sysconfig
import warnings
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path

__all__ = ["Kept", "third_party_kept"]

LIBRARIES = ("transformers", "torch", "huggingface_hub", "accelerate", "tokenizers", "safetensors")
"""The loggers (and their children) whose records are collected."""


@dataclass
class Kept:
    """What the block logged or warned, one line each, in order, without repeats."""

    notes: list[str] = field(default_factory=list)
    """spectral's own warnings and the user's code's: printed as ``note:`` lines."""
    third_party: list[str] = field(default_factory=list)
    """The libraries' log records and warnings, as ``LIBRARY: message``."""


class _Collect(logging.Handler):
    def __init__(self, into: list[str]):
        super().__init__(logging.WARNING)
        self.into = into

    def emit(self, record: logging.LogRecord) -> None:
        try:
            text = record.getMessage()
        except Exception:  # noqa: BLE001 - a record whose arguments do not format
            text = str(record.msg)
        _add(self.into, f"{record.name.partition('.')[0]}: {_one_line(text)}")


def _one_line(text: str) -> str:
    lines = str(text).strip().splitlines()
    return lines[0] if lines else ""


def _add(into: list[str], line: str) -> None:
    if line not in into:
        into.append(line)


def _library_folders() -> list[tuple[Path, str | None]]:
    """(folder, name): the installed packages' folders (the package named by the path under
    them), then the standard library's (named ``python``)."""
    paths = sysconfig.get_paths()
    found = [(Path(paths[k]).resolve(), None) for k in ("purelib", "platlib") if k in paths]
    return [*found, *((Path(paths[k]).resolve(), "python") for k in ("stdlib", "platstdlib") if k in paths)]


def _library(filename: str, folders: list[tuple[Path, str | None]]) -> str | None:
    """The installed package (or ``python``, the standard library) a warning was raised
    in; None for spectral's own code and the user's."""
    try:
        path = Path(filename).resolve()
    except (OSError, ValueError):
        return "python"
    if Path(__file__).resolve().parents[1] in path.parents:  # the spectral package
        return None
    for folder, name in folders:
        if folder in path.parents:
            return name or path.relative_to(folder).parts[0].removesuffix(".py")
    return None


@contextmanager
def third_party_kept() -> Iterator[Kept]:
    """Collect the block's log records of :data:`LIBRARIES` and its warnings (restoring
    every logger and the warning filters afterwards)."""
    kept = Kept()
    handler = _Collect(kept.third_party)
    if "transformers" in sys.modules or importlib.util.find_spec("transformers") is not None:
        # transformers adds its stderr handler when a logger is first asked for: now, so
        # that it is here to be set aside (its logging module alone, not the library)
        from transformers.utils import logging as hf_logging

        hf_logging.get_logger("transformers")
    saved = []
    for name in LIBRARIES:
        logger = logging.getLogger(name)
        saved.append((logger, list(logger.handlers), logger.propagate))
        logger.handlers = [handler]
        logger.propagate = False
    try:
        with warnings.catch_warnings(record=True) as seen:
            warnings.simplefilter("always")
            try:
                yield kept
            finally:
                folders = _library_folders()
                for w in seen:
                    line = _one_line(str(w.message))
                    library = _library(w.filename, folders)
                    if library is not None:
                        _add(kept.third_party, f"{library}: {line}")
                    else:
                        _add(kept.notes, line)
    finally:
        for logger, handlers, propagate in saved:
            logger.handlers = handlers
            logger.propagate = propagate
