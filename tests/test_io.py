"""Writing and reading user-named files (:mod:`spectral.io`).

Every case asserts the answer (the exception and its message, or the CLI's exit code and
its one ``error:`` line) and the state of every file involved afterwards: content, mode,
a symbolic link still a link to the same place, a FIFO still a FIFO, and no temporary
file left in the folder.
"""

from __future__ import annotations

import errno
import os
import signal
import stat
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from spectral import io as sio
from spectral.cli import main
from spectral.errors import SpecError
from spectral.io import TEMP_PREFIX, FileExistsRefusal, OutputError, read_user_file, write_atomic

pytestmark = pytest.mark.skipif(os.name != "posix", reason="POSIX file semantics")

DATA = "new content\n"


def listing(folder: Path) -> list[str]:
    return sorted(os.listdir(folder))


def no_temp(folder: Path) -> None:
    assert [n for n in os.listdir(folder) if n.startswith(TEMP_PREFIX)] == []


def mode(path: Path) -> int:
    return stat.S_IMODE(os.stat(path).st_mode)


@pytest.fixture
def umask022():
    old = os.umask(0o022)
    yield
    os.umask(old)


def regular(path: Path, text: str, perms: int) -> Path:
    path.write_text(text)
    os.chmod(path, perms)
    return path


# --------------------------------------------------------------------------------------
# write_atomic: new files, existing files, --force
# --------------------------------------------------------------------------------------


@pytest.mark.parametrize("umask,expected", [(0o022, 0o644), (0o077, 0o600), (0o002, 0o664)])
def test_new_file_gets_the_mode_open_gives(tmp_path, umask, expected):
    old = os.umask(umask)
    try:
        out = write_atomic(tmp_path / "out.md", DATA)
    finally:
        os.umask(old)
    assert out == tmp_path / "out.md"
    assert out.read_text() == DATA and mode(out) == expected
    assert listing(tmp_path) == ["out.md"]


def test_bytes_are_written_as_they_are(tmp_path):
    write_atomic(tmp_path / "b.bin", b"\x00\xff")
    assert (tmp_path / "b.bin").read_bytes() == b"\x00\xff"
    no_temp(tmp_path)


@pytest.mark.parametrize("perms", [0o600, 0o644, 0o755, 0o400])
def test_existing_file_is_kept_without_force(tmp_path, perms):
    target = regular(tmp_path / "cfg.py", "keep me", perms)
    with pytest.raises(FileExistsRefusal, match=r"cfg\.py exists; pass --force to overwrite it"):
        write_atomic(target, DATA)
    assert target.read_text() == "keep me" and mode(target) == perms
    assert listing(tmp_path) == ["cfg.py"]


@pytest.mark.parametrize("perms", [0o600, 0o640, 0o755, 0o444])
def test_force_replaces_a_regular_file_and_keeps_its_mode(tmp_path, perms, umask022):
    target = regular(tmp_path / "cfg.py", "old", perms)
    write_atomic(target, DATA, force=True)
    assert target.read_text() == DATA and mode(target) == perms
    assert not target.is_symlink()
    assert listing(tmp_path) == ["cfg.py"]


def test_the_replacement_is_a_new_file_readers_of_the_old_one_keep_it(tmp_path):
    """rename(2): a reader holding the old file open still reads the old bytes."""
    target = regular(tmp_path / "cfg.py", "old", 0o644)
    with open(target) as held:
        write_atomic(target, DATA, force=True)
        assert held.read() == "old"
    assert target.read_text() == DATA


# --------------------------------------------------------------------------------------
# write_atomic: paths that are not a file to write
# --------------------------------------------------------------------------------------


@pytest.mark.parametrize("force", [False, True])
def test_empty_path_is_an_error(force):
    with pytest.raises(OutputError, match="^the output path is empty$"):
        write_atomic("", DATA, force=force)


@pytest.mark.parametrize("suffix", ["/", "//", "/.", "/.."])
@pytest.mark.parametrize("force", [False, True])
def test_a_path_ending_in_a_missing_folder_name_writes_nothing(tmp_path, suffix, force):
    raw = str(tmp_path / "newdir") + suffix
    with pytest.raises(OutputError, match=r"^cannot write .*newdir/+\.{0,2}: folder .*newdir/?\.{0,2} does not exist$"):
        write_atomic(raw, DATA, force=force)
    assert listing(tmp_path) == []


@pytest.mark.parametrize("suffix", ["", "/", "/."])
@pytest.mark.parametrize("force", [False, True])
def test_a_directory_is_said_to_be_one(tmp_path, suffix, force):
    folder = tmp_path / "d"
    folder.mkdir()
    (folder / "inside").write_text("x")
    with pytest.raises(OutputError, match=r"d/?\.? is a directory; name a file to write"):
        write_atomic(str(folder) + suffix, DATA, force=force)
    assert listing(folder) == ["inside"] and (folder / "inside").read_text() == "x"
    assert listing(tmp_path) == ["d"]


def test_missing_folder_and_a_file_as_folder(tmp_path):
    with pytest.raises(OutputError, match=r"cannot write .*nofolder/x\.md: folder .*nofolder does not exist$"):
        write_atomic(tmp_path / "nofolder" / "x.md", DATA)
    plain = regular(tmp_path / "plain", "p", 0o644)
    with pytest.raises(OutputError, match=r"plain is not a folder"):
        write_atomic(plain / "x.md", DATA, force=True)
    assert listing(tmp_path) == ["plain"] and plain.read_text() == "p"


@pytest.mark.parametrize("force", [False, True])
def test_a_dangling_symlink_is_never_replaced_nor_written_through(tmp_path, force):
    link = tmp_path / "out.md"
    link.symlink_to(tmp_path / "elsewhere.md")
    with pytest.raises(OutputError, match=r"out\.md is a symbolic link to .*elsewhere\.md, which does not exist; refusing to create a file through it$"):
        write_atomic(link, DATA, force=force)
    assert link.is_symlink() and os.readlink(link) == str(tmp_path / "elsewhere.md")
    assert listing(tmp_path) == ["out.md"]


def test_a_symlink_to_a_file_is_kept_and_force_writes_the_file(tmp_path):
    real = regular(tmp_path / "real.md", "old", 0o600)
    link = tmp_path / "link.md"
    link.symlink_to("real.md")
    with pytest.raises(FileExistsRefusal, match=r"link\.md exists \(a symbolic link to .*real\.md\); pass --force"):
        write_atomic(link, DATA)
    assert real.read_text() == "old"
    write_atomic(link, DATA, force=True)
    assert link.is_symlink() and os.readlink(link) == "real.md"
    assert real.read_text() == DATA and mode(real) == 0o600
    assert listing(tmp_path) == ["link.md", "real.md"]


def test_a_symlink_to_a_directory_is_refused(tmp_path):
    (tmp_path / "d").mkdir()
    (tmp_path / "ld").symlink_to("d")
    with pytest.raises(OutputError, match="ld is a symbolic link to a directory"):
        write_atomic(tmp_path / "ld", DATA, force=True)
    assert (tmp_path / "ld").is_symlink() and listing(tmp_path / "d") == []


@pytest.mark.parametrize("force", [False, True])
def test_a_fifo_is_refused_and_stays_a_fifo(tmp_path, force):
    fifo = tmp_path / "pipe"
    os.mkfifo(fifo)
    with pytest.raises(OutputError, match=r"pipe is a FIFO \(named pipe\), not a regular file; refusing to replace it"):
        write_atomic(fifo, DATA, force=force)
    assert stat.S_ISFIFO(os.lstat(fifo).st_mode)
    assert listing(tmp_path) == ["pipe"]


@pytest.fixture
def no_file_system_writes(monkeypatch):
    """Any attempt to create, link or rename fails the test: the refusal must come first
    (so that a bug can never replace /dev/null on the machine running the tests)."""

    def forbidden(*args, **kwargs):
        raise AssertionError(f"file system write attempted: {args}")

    for name in ("open", "link", "replace", "rename", "unlink"):
        monkeypatch.setattr(sio.os, name, forbidden)


@pytest.mark.parametrize("force", [False, True])
def test_dev_null_is_never_replaced(no_file_system_writes, force):
    before = os.lstat("/dev/null")
    with pytest.raises(OutputError, match=r"/dev/null is a character device, not a regular file; refusing to replace it"):
        write_atomic("/dev/null", DATA, force=force)
    after = os.lstat("/dev/null")
    assert stat.S_ISCHR(after.st_mode) and after.st_rdev == before.st_rdev


def test_a_link_to_dev_null_is_refused_too(tmp_path, no_file_system_writes):
    (tmp_path / "null").symlink_to("/dev/null")
    with pytest.raises(OutputError, match=r"null \(a symbolic link to /dev/null\) is a character device"):
        write_atomic(tmp_path / "null", DATA, force=True)
    assert (tmp_path / "null").is_symlink() and stat.S_ISCHR(os.lstat("/dev/null").st_mode)


# --------------------------------------------------------------------------------------
# write_atomic: long names, races, file systems without hard links, failures, signals
# --------------------------------------------------------------------------------------


@pytest.mark.parametrize("name", ["a" * 242, "a" * 255, "é" * 127 + "a", "x" * 251 + ".tex"])
def test_names_up_to_255_bytes_work(tmp_path, name):
    assert len(name.encode()) <= 255
    write_atomic(tmp_path / name, DATA)
    assert (tmp_path / name).read_text() == DATA
    write_atomic(tmp_path / name, "again", force=True)
    assert (tmp_path / name).read_text() == "again"
    assert listing(tmp_path) == [name]


def test_a_name_over_255_bytes_is_one_error(tmp_path):
    with pytest.raises(OutputError, match="File name too long"):
        write_atomic(tmp_path / ("a" * 256), DATA)
    assert listing(tmp_path) == []


def test_two_writers_without_force_one_is_refused(tmp_path, monkeypatch):
    """The other writer's file appears between our checks and our link: link(2) refuses,
    their file is untouched, our temporary file is gone."""
    target = tmp_path / "out.md"
    real_link = os.link

    def other_writer_first(src, dst, **kw):
        Path(dst).write_text("theirs")
        return real_link(src, dst, **kw)

    monkeypatch.setattr(sio.os, "link", other_writer_first)
    with pytest.raises(FileExistsRefusal, match="out.md exists; pass --force"):
        write_atomic(target, DATA)
    assert target.read_text() == "theirs"
    assert listing(tmp_path) == ["out.md"]


@pytest.mark.parametrize("code", [errno.EPERM, errno.EOPNOTSUPP])
def test_without_hard_links_the_name_is_claimed_then_renamed(tmp_path, monkeypatch, code, umask022):
    def no_links(src, dst, **kw):
        raise OSError(code, os.strerror(code))

    monkeypatch.setattr(sio.os, "link", no_links)
    target = tmp_path / "out.md"
    write_atomic(target, DATA)
    assert target.read_text() == DATA and mode(target) == 0o644
    assert listing(tmp_path) == ["out.md"]
    with pytest.raises(FileExistsRefusal):
        write_atomic(target, "other")
    assert target.read_text() == DATA and listing(tmp_path) == ["out.md"]


def test_without_hard_links_a_racing_writer_is_not_replaced(tmp_path, monkeypatch):
    def no_links_and_a_race(src, dst, **kw):
        Path(dst).write_text("theirs")
        raise OSError(errno.EPERM, "Operation not permitted")

    monkeypatch.setattr(sio.os, "link", no_links_and_a_race)
    with pytest.raises(FileExistsRefusal):
        write_atomic(tmp_path / "out.md", DATA)
    assert (tmp_path / "out.md").read_text() == "theirs" and listing(tmp_path) == ["out.md"]


@pytest.mark.parametrize("existing", [None, "old"])
def test_a_failed_write_leaves_the_old_state_and_no_temporary_file(tmp_path, monkeypatch, existing):
    target = tmp_path / "out.md"
    if existing:
        regular(target, existing, 0o600)

    def full(fd):
        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))

    monkeypatch.setattr(sio.os, "fsync", full)
    with pytest.raises(OutputError, match=r"cannot write .*out\.md: No space left on device"):
        write_atomic(target, DATA, force=True)
    if existing:
        assert target.read_text() == existing and mode(target) == 0o600
        assert listing(tmp_path) == ["out.md"]
    else:
        assert listing(tmp_path) == []


SIGNAL_SCRIPT = textwrap.dedent(
    """
    import os, signal, sys
    from spectral import io as sio

    target, sig, race = sys.argv[1], getattr(signal, sys.argv[2]), sys.argv[3] == "race"
    if sig != signal.SIGINT:  # under nohup SIGHUP is ignored (and rightly stays so): start from the default
        signal.signal(sig, signal.SIG_DFL)
    else:  # a shell's background job (pytest ... &) ignores SIGINT, and Python then installs no handler
        signal.signal(sig, signal.default_int_handler)
    real_fsync = os.fsync

    def interrupted_fsync(fd):
        os.kill(os.getpid(), sig)  # arrives in the middle of the write
        if race:
            open(target, "w").write("theirs")
        real_fsync(fd)

    sio.os.fsync = interrupted_fsync
    try:
        sio.write_atomic(target, "x" * 100000)
    except KeyboardInterrupt:
        print("KeyboardInterrupt")
        sys.exit(130)
    except sio.FileExistsRefusal:
        print("refused")
        sys.exit(2)
    print("not interrupted")
    """
)


@pytest.mark.parametrize("race", [False, True], ids=["write", "refused-write"])
@pytest.mark.parametrize("sig", ["SIGTERM", "SIGINT", "SIGHUP"])
def test_a_signal_during_the_write_leaves_no_temporary_file(tmp_path, sig, race):
    """The signal is held until the temporary file is gone, then delivered as it would
    have been: SIGTERM/SIGHUP kill the process, SIGINT raises KeyboardInterrupt."""
    target = tmp_path / "out.md"
    done = subprocess.run(
        [sys.executable, "-c", SIGNAL_SCRIPT, str(target), sig, "race" if race else "no"],
        capture_output=True,
        text=True,
        timeout=120,
    )
    if sig == "SIGINT":
        assert done.returncode == 130 and done.stdout.strip() == "KeyboardInterrupt", done.stderr
    else:
        assert done.returncode == -getattr(signal, sig), (done.stdout, done.stderr)
        assert done.stdout == ""
    assert target.read_text() == ("theirs" if race else "x" * 100000)
    assert listing(tmp_path) == ["out.md"]


def test_a_signal_handler_of_the_program_is_restored(tmp_path, monkeypatch):
    seen: list[int] = []

    def handler(signum, frame):
        seen.append(signum)

    old_term = signal.signal(signal.SIGTERM, handler)
    try:
        real_fsync = os.fsync

        def interrupted(fd):
            os.kill(os.getpid(), signal.SIGTERM)
            assert seen == []  # held while the temporary file exists
            real_fsync(fd)

        monkeypatch.setattr(sio.os, "fsync", interrupted)
        write_atomic(tmp_path / "out.md", DATA)
        assert seen == [signal.SIGTERM]  # then delivered to the program's own handler
        assert signal.getsignal(signal.SIGTERM) is handler
    finally:
        signal.signal(signal.SIGTERM, old_term)
    assert (tmp_path / "out.md").read_text() == DATA and listing(tmp_path) == ["out.md"]


# --------------------------------------------------------------------------------------
# read_user_file
# --------------------------------------------------------------------------------------


def test_read_a_regular_file_and_through_a_link(tmp_path):
    f = tmp_path / "s.toml"
    f.write_bytes(b"name = 1\n")
    (tmp_path / "l.toml").symlink_to("s.toml")
    assert read_user_file(f, 100) == b"name = 1\n"
    assert read_user_file(tmp_path / "l.toml", 9) == b"name = 1\n"
    with pytest.raises(SpecError, match=r"s\.toml: the file is larger than 8 bytes$"):
        read_user_file(f, 8)
    f.write_bytes(b"#" * 2049)
    with pytest.raises(SpecError, match="larger than 2 KiB$"):
        read_user_file(f, 2048)


@pytest.mark.parametrize(
    "make,message",
    [
        (lambda p: None, "no such file"),
        (lambda p: p.mkdir(), "is a directory, not a file"),
        (lambda p: os.mkfifo(p), r"is a FIFO \(named pipe\), not a regular file"),
        (lambda p: p.symlink_to("/dev/null"), "is a character device, not a regular file"),
        (lambda p: p.symlink_to(p.parent / "gone"), "no such file"),
    ],
    ids=["missing", "directory", "fifo", "device", "dangling"],
)
def test_read_refuses_what_is_not_a_regular_file(tmp_path, make, message):
    path = tmp_path / "s.toml"
    make(path)
    before = listing(tmp_path)
    with pytest.raises(SpecError, match=rf"^{path}: {message}$"):
        read_user_file(path, 1024)
    assert listing(tmp_path) == before


def test_read_refuses_empty_and_nul_names():
    with pytest.raises(SpecError, match="the file name is empty"):
        read_user_file("", 10)
    with pytest.raises(SpecError, match="NUL"):
        read_user_file("a\0b", 10)


@pytest.mark.slow  # seconds on the 2-core CPU: out of pytest -m "not slow"
def test_a_fifo_spec_does_not_hang_the_cli(tmp_path):
    """``--spec FIFO`` used to block in open() forever; now it is one line, at once."""
    fifo = tmp_path / "s.toml"
    os.mkfifo(fifo)
    done = subprocess.run(
        [sys.executable, "-m", "spectral", "derive", "--spec", str(fifo)],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 2 and done.stdout == ""
    assert done.stderr == f"error: {fifo}: is a FIFO (named pipe), not a regular file\n"
    assert stat.S_ISFIFO(os.lstat(fifo).st_mode)


# --------------------------------------------------------------------------------------
# the command line: exit code 2, one error line, files as they were
# --------------------------------------------------------------------------------------


def cli(args: list[str], capsys) -> tuple[int, str, str]:
    code = main(args)
    out, err = capsys.readouterr()
    return code, out, err


def one_error(code: int, out: str, err: str, message: str) -> None:
    assert code == 2 and out == ""
    assert err.count("\n") == 1 and err.startswith("error: ") and "Traceback" not in err
    assert message in err, err


DERIVE = ["derive", "adamw", "--format", "markdown"]
CODEGEN = ["codegen", "adamw", "--base-width", "64", "--base-depth", "2"]


@pytest.mark.parametrize("command", [DERIVE, CODEGEN], ids=["derive", "codegen"])
def test_cli_output_paths(tmp_path, capsys, monkeypatch, command, umask022):
    monkeypatch.chdir(tmp_path)
    one_error(*cli([*command, "-o", ""], capsys), "the output path is empty")
    one_error(*cli([*command, "-o", "newdir/"], capsys), "cannot write newdir/: folder newdir does not exist")
    one_error(*cli([*command, "-o", str(tmp_path)], capsys), f"{tmp_path} is a directory; name a file to write")
    assert listing(tmp_path) == []

    Path("dangling").symlink_to("nowhere")
    for force in ([], ["--force"]):
        one_error(*cli([*command, "-o", "dangling", *force], capsys), "which does not exist")
    assert os.readlink("dangling") == "nowhere" and listing(tmp_path) == ["dangling"]

    os.mkfifo("pipe")
    one_error(*cli([*command, "-o", "pipe", "--force"], capsys), "pipe is a FIFO (named pipe)")
    assert stat.S_ISFIFO(os.lstat("pipe").st_mode)

    code, expected, _ = cli(command, capsys)
    assert code == 0
    secret = regular(tmp_path / "secret.md", "old", 0o600)
    one_error(*cli([*command, "-o", "secret.md"], capsys), "secret.md exists; pass --force to overwrite it")
    assert secret.read_text() == "old"
    code, out, _ = cli([*command, "-o", "secret.md", "--force"], capsys)
    assert code == 0 and out == ""
    assert secret.read_text() == expected and mode(secret) == 0o600

    long = "a" * 252 + ".md"
    code, out, _ = cli([*command, "-o", long], capsys)
    assert code == 0 and Path(long).read_text() == expected and mode(Path(long)) == 0o644
    assert listing(tmp_path) == sorted(["dangling", "pipe", "secret.md", long])
