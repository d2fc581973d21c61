"""Only regular files are opened (spillway.safe_io): FIFOs, sockets, devices and directories are refused by
kind without opening them; a file swapped for a FIFO between the check and the open is still refused, and its
descriptor closed; what is opened is blocking, close-on-exec and reads the file's bytes."""

from __future__ import annotations

import errno
import fcntl
import os
import socket
import stat
from pathlib import Path

import pytest

from spillway import safe_io
from spillway.safe_io import NotARegularFile, check_regular, open_regular, read_regular, real_path


def _refused(path: Path) -> str:
    with pytest.raises(NotARegularFile) as err:
        open_regular(path)
    with pytest.raises(NotARegularFile):
        check_regular(path)
    assert err.value.exit_code == 1
    return str(err.value)


def test_each_special_kind_is_named(tmp_path: Path) -> None:
    fifo = tmp_path / "fifo"
    os.mkfifo(fifo)
    assert _refused(fifo) == f"{fifo}: is a named pipe (FIFO), not a regular file; spillway does not open it"
    assert _refused(tmp_path) == f"{tmp_path}: is a directory, not a regular file; spillway does not open it"
    assert _refused(Path("/dev/null")).startswith("/dev/null: is a character device, not a regular file")
    sock_path = tmp_path / "s"
    with socket.socket(socket.AF_UNIX) as sock:
        sock.bind(str(sock_path))
        assert _refused(sock_path).startswith(f"{sock_path}: is a socket, not a regular file")


def test_kinds_without_a_file_to_make_here() -> None:
    # block devices need mknod privileges; the words come from the mode alone
    assert str(safe_io._refuse("/dev/x", stat.S_IFBLK | 0o600)) == (
        "/dev/x: is a block device, not a regular file; spillway does not open it"
    )
    assert "is not a regular file, not a regular file" in str(safe_io._refuse("/x", 0o170000))


def test_a_regular_file_opens_blocking_close_on_exec_and_reads(tmp_path: Path) -> None:
    f = tmp_path / "f"
    f.write_bytes(b"\x00\x01payload")
    assert check_regular(f).st_size == 9
    with open_regular(f) as fh:
        fd = fh.fileno()
        assert fcntl.fcntl(fd, fcntl.F_GETFL) & os.O_NONBLOCK == 0
        assert fcntl.fcntl(fd, fcntl.F_GETFD) & fcntl.FD_CLOEXEC
        assert fh.read() == b"\x00\x01payload"
        assert "b" in fh.mode
    assert read_regular(f) == b"\x00\x01payload"
    assert read_regular(str(f)) == b"\x00\x01payload"


def test_a_fifo_swapped_in_after_the_check_is_refused_and_closed(tmp_path: Path, monkeypatch) -> None:  # type: ignore[no-untyped-def]
    fifo = tmp_path / "fifo"
    os.mkfifo(fifo)
    monkeypatch.setattr(safe_io, "check_regular", lambda path: None)  # the check saw a regular file
    before = set(os.listdir("/proc/self/fd"))
    with pytest.raises(NotARegularFile, match="is a named pipe"):
        open_regular(fifo)  # would block forever without O_NONBLOCK
    assert set(os.listdir("/proc/self/fd")) <= before  # the descriptor was closed


def test_a_symlink_loop_is_an_os_error_at_the_check_not_at_real_path(tmp_path: Path) -> None:
    a, b = tmp_path / "a", tmp_path / "b"
    os.symlink(b.name, a)
    os.symlink(a.name, b)
    with pytest.raises(OSError) as err:
        check_regular(a)
    assert err.value.errno == errno.ELOOP
    assert real_path(a).parent == real_path(tmp_path)
