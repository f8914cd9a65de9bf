"""Helpers shared by the subcommands: the console, output, progress bars, JSON files.

Only the CLI prints or writes files; rich is imported inside these functions.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import sys
from typing import Any

from ..errors import SpecError, SpectralError, first_line
from ..text import for_terminal

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
    "wrote",
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
    if output is not None:  # -o '' is an error (write_atomic says so), not stdout
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


def wrote(path: str | os.PathLike[str], detail: str = "", *, stderr: bool = False) -> None:
    """Print ``wrote PATH`` and ``detail`` as one line, on standard output (a command whose
    output is the files) or standard error (one whose output is on stdout): the path through
    :func:`~spectral.text.for_terminal`, so a name holding a newline or an escape sequence
    shows escaped and cannot split the line or drive the terminal."""
    stream = sys.stderr if stderr else sys.stdout
    stream.write(f"wrote {for_terminal(os.fsdecode(os.fspath(path)))}{detail}\n")
    stream.flush()


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


def load_callable(text: str, *, option: str = "--factory") -> Any:
    """The callable named by ``MODULE:CALLABLE`` (``option``'s value, for the messages).

    ``MODULE`` is a dotted importable module (``my_pkg.opts``) or a path to a ``.py`` file
    (``path/to/file.py``, imported with its folder on ``sys.path``, so that it can import
    its sibling modules); ``CALLABLE`` a name in it (``make`` or ``Factory.make``). Importing
    the module is what the user asked for; every failure is a one-line :class:`SpecError`.
    """
    obj = load_object(text, option=option)
    if not callable(obj):
        attr = text.strip().rpartition(":")[2]
        raise SpecError(f"{option} {text}: {attr} is a {type(obj).__name__}, not a callable")
    return obj


def load_object(text: str, *, option: str) -> Any:
    """The object named by ``MODULE:NAME``, as :func:`load_callable` finds it."""
    import importlib
    import importlib.util
    from pathlib import Path

    def fail(why: str) -> SpecError:
        return SpecError(f"{option} {text}: {why}")

    module_text, colon, attr = text.strip().rpartition(":")
    if not colon or not module_text or not attr:
        raise fail(
            "expected MODULE:CALLABLE (a dotted module or a path to a .py file, ':', then a "
            "function name), e.g. my_module:make or path/to/file.py:make"
        )
    if module_text.endswith(".py") or "/" in module_text or "\\" in module_text:
        from ..io import file_problem

        path = Path(module_text)
        problem = file_problem(path)  # before importing: a FIFO would block the read
        if problem == "no such file":
            raise fail(f"no such file {module_text}")
        if problem is not None:
            raise fail(f"{module_text} {problem}")
        stem = path.stem if path.stem.isidentifier() else "user_factory"
        name, n = stem, 0
        while name in sys.modules:  # never shadow a module already imported under that name
            n += 1
            name = f"{stem}_{n}"
        spec = importlib.util.spec_from_file_location(name, path)
        if spec is None or spec.loader is None:
            raise fail(f"cannot import {module_text} as a Python module")
        module = importlib.util.module_from_spec(spec)
        sys.modules[name] = module  # as an import would: dataclasses and pickle look here
        folder = str(path.resolve().parent)  # as `python file.py` would: siblings import
        sys.path.insert(0, folder)
        try:
            spec.loader.exec_module(module)
        except Exception as exc:  # the user's code: any failure is bad input
            del sys.modules[name]
            raise fail(f"importing {module_text} raised {first_line(exc)}") from None
        except SystemExit as exc:  # the module's own sys.exit() must not become ours
            del sys.modules[name]
            raise fail(f"importing {module_text} called sys.exit({exc.code!r})") from None
        finally:
            if folder in sys.path:
                sys.path.remove(folder)
    else:
        try:
            module = importlib.import_module(module_text)
        except ModuleNotFoundError as exc:
            if exc.name and (module_text == exc.name or module_text.startswith(exc.name + ".")):
                raise fail(f"no module named {exc.name!r} (is it on PYTHONPATH?)") from None
            raise fail(f"importing {module_text} raised {first_line(exc)}") from None
        except Exception as exc:
            raise fail(f"importing {module_text} raised {first_line(exc)}") from None
        except SystemExit as exc:
            raise fail(f"importing {module_text} called sys.exit({exc.code!r})") from None
    obj: Any = module
    for part in attr.split("."):
        if not hasattr(obj, part):
            found = sorted(
                n for n, v in vars(module).items() if callable(v) and not n.startswith("_")
            )
            listing = ", ".join(found[:12]) + (", ..." if len(found) > 12 else "")
            raise fail(
                f"{module_text} has no attribute {attr!r}"
                + (f"; its callables: {listing}" if found else "")
            )
        obj = getattr(obj, part)
    return obj


def load_adapter(text: str) -> dict[str, Any]:
    """``--adapter``: an Adapter's fields, from ``FILE.py:NAME`` (or ``MODULE:NAME``; an
    ``Adapter`` or a dict of its fields) or from a ``.toml`` / ``.json`` file holding the
    fields (at the top level or in an ``adapter`` table); checked, every regular expression
    compiled, and returned as a dict the generated module's ``adapter=`` takes."""
    import re
    from pathlib import Path

    from ..torch.model.classify import as_adapter  # torch: a coordinate check needs it anyway

    def fail(why: str) -> SpecError:
        return SpecError(f"--adapter {text}: {why}")

    path = Path(text)
    if path.suffix in (".toml", ".json"):
        from ..io import read_user_file
        from ..text import load_json, load_toml

        try:
            raw = read_user_file(path, max_bytes=1 << 20).decode("utf-8")
        except SpecError as exc:  # "PATH: no such file", "PATH: is a directory, ..."
            raise SpecError(f"--adapter {exc}") from None
        except UnicodeDecodeError:
            raise fail("cannot read it: not UTF-8 text") from None
        try:
            data: Any = load_toml(raw) if path.suffix == ".toml" else load_json(raw, max_depth=16)
        except ValueError as exc:  # one line already: bad syntax, a 5,000-digit number
            raise fail(f"cannot read it: {exc}") from None
        if isinstance(data, dict) and set(data) == {"adapter"}:
            data = data["adapter"]
    else:
        data = load_object(text, option="--adapter")
    if hasattr(data, "_asdict") and hasattr(data, "_fields"):  # an Adapter (a NamedTuple)
        data = data._asdict()
    if not isinstance(data, dict):
        raise fail(f"expected an Adapter or a dict of its fields, got {type(data).__name__}")
    try:
        fields = as_adapter(data)._asdict()  # type: ignore[union-attr]
    except (ValueError, TypeError) as exc:
        raise fail(first_line(exc)) from None
    patterns = [fields["detect"], fields["final"], fields["detect_type"]]
    patterns += [*fields["input"], *fields["branches"], *fields["output"]]
    patterns += [*fields["embeddings"], *(pattern for pattern, _ in fields["roles"])]
    for pattern in patterns:
        try:
            re.compile(pattern)
        except (re.error, TypeError) as exc:
            raise fail(f"pattern {pattern!r} is no regular expression ({exc})") from None
    from ..scaling import unknown_role

    for pattern, role in fields["roles"]:
        problem = unknown_role(pattern, role)
        if problem is not None:
            raise fail(problem)
    for what in ("input", "branches", "output", "roles"):
        if not fields[what]:
            raise fail(
                f"no {what}: an adapter names the modules of each multiplier and the role "
                "of each parameter"
            )
    return fields
