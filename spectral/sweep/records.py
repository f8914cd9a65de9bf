"""A sweep's results on disk: ``runs.jsonl`` (one JSON line per run) and ``sweep.json``.

Each finished run is appended at once (:func:`append_run`: one write, flush, fsync), so a
crash loses at most the run in progress; :func:`read_runs` skips a torn last line. A run's
key and fingerprint are short digests of JSON (:func:`digest`).
"""

from __future__ import annotations

import hashlib
import json
import os
from pathlib import Path
from typing import Any

__all__ = ["META_FILE", "RUNS_FILE", "append_run", "digest", "read_runs", "round_floats"]

RUNS_FILE = "runs.jsonl"
META_FILE = "sweep.json"


def append_run(path: str | os.PathLike[str], record: dict[str, Any]) -> None:
    """Append one JSON line and make it durable (one write, flush, fsync)."""
    line = (json.dumps(record, sort_keys=True, allow_nan=False) + "\n").encode("utf-8")
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


def read_runs(path: str | os.PathLike[str]) -> list[dict[str, Any]]:
    """Every complete record of a ``runs.jsonl``; unparsable (torn) lines are skipped."""
    p = Path(path)
    if not p.is_file():
        return []
    out = []
    for line in p.read_text(encoding="utf-8").splitlines():
        line = line.strip()
        if not line:
            continue
        try:
            rec = json.loads(line)
        except json.JSONDecodeError:
            continue
        if isinstance(rec, dict) and "key" in rec:
            out.append(rec)
    return out


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
