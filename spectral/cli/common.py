"""Helpers shared by the subcommands: the console, output, progress bars, JSON files.

Only the CLI prints or writes files; rich is imported inside these functions.
"""

from __future__ import annotations

import argparse
import json
import math
import sys
from typing import Any

from ..errors import SpecError, SpectralError

__all__ = [
    "EXIT_DERIVATION",
    "EXIT_OK",
    "EXIT_USAGE",
    "UsageError",
    "add_output_options",
    "console",
    "emit",
    "progress",
    "renderable_text",
    "write_json",
]


EXIT_OK, EXIT_DERIVATION, EXIT_USAGE = 0, 1, 2


class UsageError(SpectralError):
    """Inconsistent options (exit code 2)."""


def console(*, stderr: bool = False, file: Any = None, width: int | None = None) -> Any:
    """A rich Console (imported lazily; only the CLI owns one)."""
    from rich.console import Console

    return Console(stderr=stderr, file=file, width=width, soft_wrap=False)


def renderable_text(renderable: Any, *, width: int = 120) -> str:
    """Plain text of a rich renderable (no colour), for ``-o FILE``."""
    import io

    buf = io.StringIO()
    console(file=buf, width=width).print(renderable)
    return buf.getvalue()


def emit(text: str | None, args: argparse.Namespace, *, renderable: Any = None) -> None:
    """Print the output, or write it to ``args.output`` (atomically; ``--force`` overwrites).

    Give ``text`` for plain output, or ``renderable`` for a rich object (printed with
    colour to a terminal, written as plain text to a file).
    """
    output = getattr(args, "output", None)
    if output:
        from ..io import write_atomic

        data = text if text is not None else renderable_text(renderable)
        try:
            write_atomic(output, data, force=getattr(args, "force", False))
        except OSError as exc:
            raise SpecError(f"cannot write {output}: {exc.strerror or exc}") from None
        return
    if text is not None:
        sys.stdout.write(text)
        sys.stdout.flush()
    else:
        console().print(renderable)


def add_output_options(p: argparse.ArgumentParser) -> None:
    p.add_argument("-o", "--output", metavar="FILE", help="write to FILE instead of stdout")
    p.add_argument("--force", action="store_true", help="overwrite FILE if it exists")


def write_json(path: str, data: Any, force: bool) -> None:
    from ..io import write_atomic

    def clean(o: Any) -> Any:
        if isinstance(o, float) and not math.isfinite(o):
            return None
        if isinstance(o, dict):
            return {k: clean(v) for k, v in o.items()}
        if isinstance(o, (list, tuple)):
            return [clean(v) for v in o]
        return o

    try:
        write_atomic(
            path, json.dumps(clean(data), indent=1, ensure_ascii=False) + "\n", force=force
        )
    except OSError as exc:
        raise SpecError(f"cannot write {path}: {exc.strerror or exc}") from None


def progress(total: int, description: str):
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

    return Progress(
        TextColumn("[bold]{task.description}"),
        BarColumn(),
        MofNCompleteColumn(),
        TimeElapsedColumn(),
        TextColumn("{task.fields[what]}"),
        console=console(stderr=True),
        transient=True,
    )
