"""Writing files safely: atomically, and never over an existing file without ``force``."""

from __future__ import annotations

import os
import tempfile
from pathlib import Path

from .errors import SpecError

__all__ = ["write_atomic", "FileExistsRefusal"]


class FileExistsRefusal(SpecError):
    """The output file exists and ``--force`` was not given (exit code 2)."""


def write_atomic(path: str | os.PathLike[str], data: str | bytes, *, force: bool = False) -> Path:
    """Write ``data`` to ``path`` via a temporary file in the same folder and a rename.

    A reader never sees a half-written file, and an interrupted write leaves the old file
    (or none). Without ``force`` an existing ``path`` is left untouched and
    :class:`FileExistsRefusal` is raised.
    """
    target = Path(path)
    if target.exists() and not force:
        raise FileExistsRefusal(f"{target} exists; pass --force to overwrite it")
    if target.is_dir():
        raise SpecError(f"{target} is a directory")
    parent = target.parent if str(target.parent) else Path(".")
    if not parent.is_dir():
        raise SpecError(f"folder {parent} does not exist")
    payload = data.encode("utf-8") if isinstance(data, str) else data
    fd, tmp = tempfile.mkstemp(prefix=f".{target.name}.", suffix=".tmp", dir=parent)
    try:
        with os.fdopen(fd, "wb") as fh:
            fh.write(payload)
            fh.flush()
            os.fsync(fh.fileno())
        os.chmod(tmp, 0o644)
        if not force and target.exists():  # created meanwhile: still refuse
            raise FileExistsRefusal(f"{target} exists; pass --force to overwrite it")
        os.replace(tmp, target)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
    return target
