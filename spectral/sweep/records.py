"""A sweep's results on disk: ``runs.jsonl`` (one JSON line per run) and ``sweep.json``.

Each finished run is appended at once (:func:`append_run`: one write, flush, fsync), so a
crash loses at most the run in progress. :func:`read_runs` keeps every good record and skips
every other line — torn by a crash, damaged (invalid UTF-8, not JSON), or foreign (not an
object, no string ``key`` or ``fingerprint``, a ``val_loss`` that is not a number) — telling
``warn`` the file and line of each damaged one; a key seen twice counts once. A run's key and
fingerprint are short digests of JSON (:func:`digest`).

Two sweeps on one folder: :func:`sweep_lock` holds an exclusive ``flock`` on
``runs.jsonl.lock`` beside the records for as long as a sweep plans, trains and appends.
Why a lock and not per-process files merged on read: a sweep decides what to train from
what is recorded, so two sweeps that do not wait for each other both train every pending
run (twice the work, and each run recorded twice); with the lock the second sweep waits,
then finds the first one's runs recorded and trains only what is still missing. The kernel
drops a ``flock`` when its process dies (kill -9 included), so no stale lock survives a
crash; the lock file itself stays and is harmless.
"""

from __future__ import annotations

import hashlib
import json
import math
import os
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from ..errors import SpecError
from ..text import load_json

__all__ = [
    "LOCK_SUFFIX",
    "META_FILE",
    "RUNS_FILE",
    "append_run",
    "check_appendable",
    "digest",
    "read_runs",
    "round_floats",
    "sweep_lock",
]

RUNS_FILE = "runs.jsonl"
META_FILE = "sweep.json"
LOCK_SUFFIX = ".lock"


def _reason(exc: OSError) -> str:
    return exc.strerror or str(exc)


def check_appendable(path: str | os.PathLike[str]) -> None:
    """Refuse, before any run, a ``runs.jsonl`` that cannot take another line: not a
    regular file, or not writable (also the folder, when the file is still to be created)."""
    p = Path(path)
    if p.is_symlink() and not p.exists():
        raise SpecError(f"{p}: a symbolic link to nothing; remove it or point it at a file")
    if p.exists():
        if not p.is_file():
            raise SpecError(f"{p}: not a regular file; the sweep appends its runs there")
        if not os.access(p, os.W_OK):
            raise SpecError(f"{p}: not writable; the sweep appends its runs there")
    elif p.parent.exists() and not os.access(p.parent, os.W_OK | os.X_OK):
        raise SpecError(f"{p}: cannot be created (folder {p.parent} is not writable)")


def append_run(path: str | os.PathLike[str], record: dict[str, Any]) -> None:
    """Append one JSON line and make it durable (one write, flush, fsync)."""
    line = (json.dumps(record, sort_keys=True, allow_nan=False) + "\n").encode("utf-8")
    try:
        fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
        try:
            # a torn line left by a crash must not swallow this one
            if os.fstat(fd).st_size > 0:
                with open(path, "rb") as fh:
                    fh.seek(-1, os.SEEK_END)
                    if fh.read(1) != b"\n":
                        line = b"\n" + line
            os.write(fd, line)
            os.fsync(fd)
        finally:
            os.close(fd)
    except OSError as exc:
        raise SpecError(f"{path}: cannot append the run ({_reason(exc)})") from None


def _problem(rec: Any) -> str:
    """Why a decoded line is not a run record ('' when it is one)."""
    if not isinstance(rec, dict):
        return f"a JSON {type(rec).__name__}, not an object"
    for field in ("key", "fingerprint"):
        if not isinstance(rec.get(field), str) or not rec[field]:
            return f"no string {field!r}"
    for field in ("optimizer", "parameterization"):
        if field in rec and not isinstance(rec[field], str):
            return f"{field!r} is not a string"
    for field in ("width", "depth", "log2_lr"):
        if field in rec and (isinstance(rec[field], bool) or not isinstance(rec[field], int)):
            return f"{field!r} is not an integer"
    for field in ("val_loss", "train_loss"):
        v = rec.get(field)
        if v is not None and (isinstance(v, bool) or not isinstance(v, (int, float)) or not math.isfinite(v)):
            return f"{field!r} is {json.dumps(v)[:30]}, not a number"
    if "settings" in rec and not isinstance(rec["settings"], dict):
        return "'settings' is not an object"
    if "diverged" in rec and not isinstance(rec["diverged"], bool):
        return "'diverged' is not true or false"
    return ""


def read_runs(
    path: str | os.PathLike[str], *, warn: Callable[[str], None] | None = None
) -> list[dict[str, Any]]:
    """Every good record of a ``runs.jsonl``, each key once (the first), in file order.

    A damaged or foreign line is skipped and ``warn`` is told ``FILE:LINE: why`` (one call
    per line). A missing file has no records; an unreadable one is a SpecError naming it.
    """
    p = Path(path)
    if not p.exists():
        return []
    try:
        raw = p.read_bytes()
    except OSError as exc:
        raise SpecError(f"{p}: cannot read the sweep's records ({_reason(exc)})") from None
    out = []
    seen: set[str] = set()
    lines = raw.split(b"\n")
    for number, data in enumerate(lines, start=1):
        data = data.strip()
        if not data.strip(b"\0 \t\r"):
            continue
        why = ""
        try:
            rec = load_json(data.decode("utf-8"), non_finite=True)  # _problem names the field
        except UnicodeDecodeError:
            why = "not UTF-8 text"
        except ValueError as exc:  # bad syntax, too deep, a 5,000-digit number
            why = "not a JSON line " + ("(cut short, as by a crash)" if number == len(lines) else f"({exc})")
        if not why:
            why = _problem(rec)
        if why:
            if warn is not None:
                warn(f"{p}:{number}: skipped: {why}")
            continue
        if rec["key"] in seen:
            continue
        seen.add(rec["key"])
        out.append(rec)
    return out


@contextmanager
def sweep_lock(
    path: str | os.PathLike[str], *, wait: Callable[[str], None] | None = None
) -> Iterator[None]:
    """Hold the exclusive lock of ``path`` (a ``runs.jsonl``) for the block; if another
    process holds it, tell ``wait`` and block until it is free (see the module docstring)."""
    import fcntl

    lock = Path(f"{os.fspath(path)}{LOCK_SUFFIX}")
    try:
        fd = os.open(lock, os.O_RDWR | os.O_CREAT | getattr(os, "O_CLOEXEC", 0), 0o644)
    except OSError as exc:
        raise SpecError(f"{lock}: cannot open the sweep's lock file ({_reason(exc)})") from None
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            if wait is not None:
                wait(f"another sweep is recording into {path}; waiting for it to finish")
            fcntl.flock(fd, fcntl.LOCK_EX)
        yield
    finally:
        os.close(fd)  # closing the descriptor releases the lock


def digest(obj: Any) -> str:
    """16 hex digits of the SHA-256 of ``obj`` as sorted JSON."""
    return hashlib.sha256(json.dumps(obj, sort_keys=True).encode()).hexdigest()[:16]


def round_floats(x: Any) -> Any:
    """Floats (also inside dicts and lists) to 10 significant digits: a fingerprint must not
    see float noise."""
    if isinstance(x, float):
        return float(f"{x:.10g}")
    if isinstance(x, dict):
        return {k: round_floats(v) for k, v in x.items()}
    if isinstance(x, (list, tuple)):
        return [round_floats(v) for v in x]
    return x
