"""The one place files are written, and where a user's input file is read.

:func:`write_atomic` writes ``data`` to a path a user named, so it must never clobber
what it was not asked to, never leave debris, and never block. How:

* The data go to a temporary file with a short random name (``.spectral-XXXXXXXX.tmp``)
  in the target's folder, so every legal target name works (names of up to 255 bytes: a
  temporary name built from the target's name would not fit) and the final step is a
  same-file-system link or rename: a reader sees the old file or the new one, never half.
* Without ``force`` the temporary file is *linked* into place: ``link(2)`` fails if the
  target exists (a file, a folder, a dangling symbolic link — anything), so the check and
  the write are one step and of two concurrent writers one wins and the other is refused.
  Where the file system has no hard links, the target is created exclusively (``O_EXCL``)
  and the temporary file renamed over that empty placeholder.
* With ``force`` only a regular file is replaced (``rename(2)``), keeping its permission
  bits (a 0600 file stays 0600) and, where allowed, its owner. A folder, a FIFO, a device (``/dev/null``), a socket is
  refused. A symbolic link is never replaced: ``force`` writes the regular file it points
  to, as the shell's ``>`` would, and a link to nothing is refused (writing through it
  would create a file wherever it points).
* A new file gets the mode ``open(2)`` gives (``0666`` less the umask), like any file the
  user's shell creates.
* SIGINT, SIGTERM and SIGHUP arriving during the write are held until the temporary file
  is gone (linked into place, or removed), then delivered as they would have been; no
  temporary file is left behind. (Only in the main thread, where Python lets handlers be
  set; elsewhere a ``finally`` clause still removes it on any exception.)
* A path that names a folder (``out/``, ``out/.``, an existing folder), an empty path, or
  a path whose folder does not exist is refused with one line saying which.

Every refusal is a :class:`~spectral.errors.SpecError` (the CLI's exit code 2); an
``OSError`` on the way (no space, permission denied, name too long) becomes
:class:`OutputError` with the system's reason.

:func:`read_user_file` reads a file a user named (``--spec FILE``): only a regular file,
checked before it is opened (a FIFO would block ``open`` forever, a device might never
end), and at most ``max_bytes``.
"""

from __future__ import annotations

import errno
import os
import secrets
import signal
import stat
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from .errors import FileExistsRefusal, OutputError, SpecError

__all__ = [
    "FileExistsRefusal",
    "OutputError",
    "TEMP_PREFIX",
    "check_distinct",
    "check_output",
    "check_output_folder",
    "file_problem",
    "read_user_file",
    "write_atomic",
]

TEMP_PREFIX = ".spectral-"
"""Temporary files are ``TEMP_PREFIX + 8 hex digits + ".tmp"`` in the target's folder."""

_DEFERRED_SIGNALS = tuple(
    getattr(signal, name) for name in ("SIGINT", "SIGTERM", "SIGHUP") if hasattr(signal, name)
)
_NO_HARD_LINKS = {errno.EPERM, errno.EOPNOTSUPP, errno.ENOTSUP, errno.EMLINK, errno.ENOSYS}


def _kind(mode: int) -> str:
    """What a non-regular file is, in words."""
    for test, name in (
        (stat.S_ISDIR, "a directory"),
        (stat.S_ISFIFO, "a FIFO (named pipe)"),
        (stat.S_ISCHR, "a character device"),
        (stat.S_ISBLK, "a block device"),
        (stat.S_ISSOCK, "a socket"),
        (stat.S_ISLNK, "a symbolic link"),
    ):
        if test(mode):
            return name
    return "not a regular file"


def _refuse_folder_name(raw: str) -> None:
    """``out/``, ``out/.``, ``..``: the path names a folder, whatever is on disk."""
    head, tail = os.path.split(raw)
    if tail not in ("", ".", ".."):
        return
    folder = raw.rstrip("/") or raw
    if os.path.isdir(raw):
        raise OutputError(f"{raw} is a directory; name a file to write")
    raise OutputError(f"cannot write {raw}: folder {folder} does not exist")


def _target(path: str | os.PathLike[str]) -> tuple[str, str]:
    """``(path, folder)`` as strings, after the checks that need no file system."""
    raw = os.fspath(path)
    if isinstance(raw, bytes):
        raw = os.fsdecode(raw)
    if raw == "":
        raise OutputError("the output path is empty")
    if "\0" in raw:
        raise OutputError("the output path contains a NUL character")
    _refuse_folder_name(raw)
    folder = os.path.dirname(raw) or "."
    return raw, folder


def _check_folder(raw: str, folder: str) -> None:
    try:
        st = os.stat(folder)
    except FileNotFoundError:
        raise OutputError(f"cannot write {raw}: folder {folder} does not exist") from None
    except OSError as exc:
        raise OutputError(f"cannot write {raw}: folder {folder}: {exc.strerror or exc}") from None
    if not stat.S_ISDIR(st.st_mode):
        raise OutputError(f"cannot write {raw}: {folder} is not a folder")


def _resolve_existing(raw: str, force: bool) -> tuple[str, os.stat_result | None]:
    """The path to write and the status of the file it replaces (``None``: a new file).

    Anything at ``raw`` but a regular file (directly or through symbolic links) is refused
    whatever ``force`` says, a dangling link included; a regular file only with ``force``.
    Without ``force`` the final ``link`` refuses again if something appears meanwhile.
    """
    try:
        lst = os.lstat(raw)
    except FileNotFoundError:
        return raw, None
    if stat.S_ISDIR(lst.st_mode):
        raise OutputError(f"{raw} is a directory; name a file to write")
    real, st, via = raw, lst, ""
    if stat.S_ISLNK(lst.st_mode):
        real = os.path.realpath(raw)
        via = f" (a symbolic link to {real})"
        try:
            st = os.stat(real)
        except FileNotFoundError:
            raise OutputError(
                f"{raw} is a symbolic link to {real}, which does not exist; "
                "refusing to create a file through it"
            ) from None
        except OSError as exc:  # a loop of links, a folder we may not search
            raise OutputError(f"cannot write {raw}: {exc.strerror or exc}") from None
        if stat.S_ISDIR(st.st_mode):
            raise OutputError(f"{raw} is a symbolic link to a directory; name a file to write")
    if not stat.S_ISREG(st.st_mode):
        raise OutputError(f"{raw}{via} is {_kind(st.st_mode)}, not a regular file; refusing to replace it")
    if not force:
        raise FileExistsRefusal(f"{raw} exists{via}; pass --force to overwrite it")
    return real, st


@contextmanager
def _signals_held() -> Iterator[None]:
    """Hold SIGINT/SIGTERM/SIGHUP until the block ends, then deliver them as before.

    Python runs signal handlers in the main thread only, so elsewhere this does nothing.
    """
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    pending: list[int] = []
    previous = {}
    for sig in _DEFERRED_SIGNALS:
        try:
            previous[sig] = signal.signal(sig, lambda signum, _frame: pending.append(signum))
        except (OSError, ValueError):  # pragma: no cover - a signal this platform refuses
            continue
    try:
        yield
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)
        for sig in dict.fromkeys(pending):
            signal.raise_signal(sig)


def _create_temp(folder: str) -> tuple[int, str]:
    """A new file with a short random name in ``folder``, opened for writing."""
    for _ in range(100):
        tmp = os.path.join(folder, f"{TEMP_PREFIX}{secrets.token_hex(4)}.tmp")
        try:
            flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_NOFOLLOW", 0)
            return os.open(tmp, flags | getattr(os, "O_CLOEXEC", 0), 0o666), tmp
        except FileExistsError:
            continue
    raise OutputError(f"cannot create a temporary file in {folder}")  # pragma: no cover


def _place_new(tmp: str, target: str, raw: str) -> None:
    """Link ``tmp`` to ``target`` only if nothing is there: one step, no race."""
    try:
        os.link(tmp, target)
        return
    except FileExistsError:
        raise FileExistsRefusal(f"{raw} exists; pass --force to overwrite it") from None
    except OSError as exc:
        if exc.errno not in _NO_HARD_LINKS:
            raise
    # no hard links here (FAT, some network file systems): claim the name, then rename
    try:
        fd = os.open(target, os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_NOFOLLOW", 0), 0o600)
    except FileExistsError:
        raise FileExistsRefusal(f"{raw} exists; pass --force to overwrite it") from None
    os.close(fd)
    try:
        os.replace(tmp, target)
    except BaseException:
        os.unlink(target)
        raise


def _keep_owner_and_mode(fd: int, old: os.stat_result) -> None:
    """Give the replacement the replaced file's permission bits (and owner, where allowed)."""
    if hasattr(os, "fchown") and (old.st_uid, old.st_gid) != (os.geteuid(), os.getegid()):
        try:
            os.fchown(fd, old.st_uid, old.st_gid)
        except PermissionError:  # only root may give a file away; the mode still holds
            pass
    os.fchmod(fd, stat.S_IMODE(old.st_mode))


def write_atomic(path: str | os.PathLike[str], data: str | bytes, *, force: bool = False) -> Path:
    """Write ``data`` (text is UTF-8) to ``path``; see the module docstring for the rules.

    Without ``force`` an existing ``path`` is left untouched and :class:`FileExistsRefusal`
    is raised; with it, only a regular file is replaced, and keeps its mode. Returns the
    path as given.
    """
    raw, folder = _target(path)
    payload = data.encode("utf-8") if isinstance(data, str) else bytes(data)
    _check_folder(raw, folder)
    try:
        real, old = _resolve_existing(raw, force)
        folder = os.path.dirname(real) or "."
        with _signals_held():
            fd, tmp = _create_temp(folder)
            try:
                with os.fdopen(fd, "wb") as fh:
                    fh.write(payload)
                    fh.flush()
                    if old is not None:
                        _keep_owner_and_mode(fh.fileno(), old)
                    os.fsync(fh.fileno())
                if old is None:
                    _place_new(tmp, real, raw)
                else:
                    os.replace(tmp, real)
            finally:
                try:
                    os.unlink(tmp)
                except FileNotFoundError:  # renamed into place
                    pass
    except OSError as exc:
        raise OutputError(f"cannot write {raw}: {exc.strerror or exc}") from None
    return Path(raw)


def check_output(path: str | os.PathLike[str], *, force: bool = False, option: str = "") -> None:
    """Refuse now what :func:`write_atomic` would refuse later, without writing anything.

    For the CLI, before any work: an empty path, a folder, a missing or unwritable folder, a
    FIFO or device (``/dev/null``), a dangling symbolic link, an existing file without
    ``force``. ``option`` (``--json``) starts the message. :func:`write_atomic` checks again
    when it writes (and refuses, without ``force``, a file that appeared meanwhile).
    """
    try:
        raw, folder = _target(path)
        _check_folder(raw, folder)
        _resolve_existing(raw, force)
        if not os.access(folder, os.W_OK | os.X_OK):
            raise OutputError(f"cannot write {raw}: folder {folder} is not writable")
    except OutputError as exc:
        if not option:
            raise
        raise type(exc)(f"{option}: {exc}") from None


def check_output_folder(path: str | os.PathLike[str], *, option: str = "") -> bool:
    """Refuse now an output folder that could not be created or written later, creating
    nothing: an empty path, something there that is not a folder, a nearest existing
    ancestor that is no folder or not writable. True when the folder exists already.

    The caller creates it (``mkdir(parents=True)``) only when it has something to write, so
    that a refusal or a failure before then leaves nothing behind.
    """
    raw = os.fsdecode(os.fspath(path))
    lead = f"{option} {raw}" if option else raw
    if raw == "":
        raise OutputError(f"{option or 'the output folder'}: empty path")
    if "\0" in raw:
        raise OutputError(f"{option or 'the output folder'}: the path contains a NUL character")
    if os.path.lexists(raw):
        if not os.path.isdir(raw):
            what = "a dangling symbolic link" if not os.path.exists(raw) else "not a folder"
            raise OutputError(f"{lead}: exists and is {what}")
        if not os.access(raw, os.W_OK | os.X_OK):
            raise OutputError(f"{lead}: the folder is not writable")
        return True
    ancestor = os.path.dirname(os.path.abspath(raw))
    while not os.path.lexists(ancestor):
        ancestor = os.path.dirname(ancestor)
    if not os.path.isdir(ancestor):
        raise OutputError(f"{lead}: cannot create it ({ancestor} is not a folder)")
    if not os.access(ancestor, os.W_OK | os.X_OK):
        raise OutputError(f"{lead}: cannot create it ({ancestor} is not writable)")
    return False


def _identity(path: str) -> tuple[object, ...]:
    """What makes two paths the same file: its device and inode when it exists (hard and
    symbolic links), else the resolved path (``a/../b`` and ``b``)."""
    try:
        st = os.stat(path)
        return ("inode", st.st_dev, st.st_ino)
    except OSError:
        return ("path", os.path.normcase(os.path.realpath(path)))


def check_distinct(outputs: dict[str, str | os.PathLike[str] | None]) -> None:
    """Refuse two outputs (option → path; ``None``: not given) that name one file.

    Otherwise the second write would refuse (or, with ``--force``, silently replace) the
    first one's file after all the work was done.
    """
    seen: dict[tuple[object, ...], str] = {}
    for option, path in outputs.items():
        if path is None or os.fspath(path) == "":
            continue
        key = _identity(os.fspath(path))
        if key in seen:
            raise OutputError(f"{seen[key]} and {option} name the same file {os.fspath(path)}; give each its own")
        seen[key] = option


def _size(n: int) -> str:
    return f"{n // 1024} KiB" if n % 1024 == 0 else f"{n} bytes"


def _mode_problem(mode: int) -> str | None:
    if stat.S_ISDIR(mode):
        return "is a directory, not a file"
    if not stat.S_ISREG(mode):
        return f"is {_kind(mode)}, not a regular file"
    return None


def file_problem(path: str | os.PathLike[str]) -> str | None:
    """Why ``path`` is not a regular file to read, in words that follow the path (``no such
    file``, ``is a directory, not a file``, ``is a FIFO (named pipe), not a regular file``,
    ``cannot read the file (Permission denied)``); ``None`` when it is one. Nothing is
    opened: a FIFO would block ``open`` until a writer appears."""
    where = os.fspath(path)
    if isinstance(where, bytes):
        where = os.fsdecode(where)
    if where == "":
        return "is an empty file name"
    if "\0" in where:
        return "is not a valid file name (it contains a NUL character)"
    try:
        mode = os.stat(where).st_mode
    except FileNotFoundError:
        return "no such file"
    except OSError as exc:
        return f"cannot read the file ({exc.strerror or exc})"
    return _mode_problem(mode)


def read_user_file(path: str | os.PathLike[str], max_bytes: int) -> bytes:
    """The bytes of the regular file ``path``, refusing anything else before opening it.

    A FIFO would block ``open`` until a writer appears, a device may never end or act on
    being opened, so the path is ``stat``-ed first (:func:`file_problem`); it is then opened
    non-blocking and checked again (it may have been swapped in between). Every refusal is
    one :class:`~spectral.errors.SpecError` line starting with the path: no such file, a
    directory, not a regular file, unreadable, larger than ``max_bytes``.
    """
    where = os.fspath(path)
    if isinstance(where, bytes):
        where = os.fsdecode(where)
    if where == "":
        raise SpecError("the file name is empty")
    if "\0" in where:
        raise SpecError(f"{where!r}: not a valid file name (it contains a NUL character)")
    problem = file_problem(where)
    if problem is not None:
        raise SpecError(f"{where}: {problem}")
    try:
        fd = os.open(where, os.O_RDONLY | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_CLOEXEC", 0))
    except FileNotFoundError:  # removed since the stat
        raise SpecError(f"{where}: no such file") from None
    except OSError as exc:
        raise SpecError(f"{where}: cannot read the file ({exc.strerror or exc})") from None
    with os.fdopen(fd, "rb") as fh:
        problem = _mode_problem(os.fstat(fh.fileno()).st_mode)
        if problem is not None:
            raise SpecError(f"{where}: {problem}")
        try:
            raw = fh.read(max_bytes + 1)
        except OSError as exc:
            raise SpecError(f"{where}: cannot read the file ({exc.strerror or exc})") from None
    if len(raw) > max_bytes:
        raise SpecError(f"{where}: the file is larger than {_size(max_bytes)}")
    return raw
