"""Open checkpoint files without surprises: only regular files are opened.

A FIFO in place of a channel-state file would block ``open()`` forever, a device could be read
without end; a symlink loop raises. Every path spillway reads from a checkpoint goes through
``open_regular`` (or ``check_regular`` first), which refuses anything but a regular file without
opening it, and opens non-blocking so that a file swapped for a FIFO between the check and the
open still cannot hang. This module sits below every layer so that ``formats`` can use it too.
"""

from __future__ import annotations

import fcntl
import io
import os
import stat
from pathlib import Path

from spillway.errors import SpillwayError


class NotARegularFile(SpillwayError):
    """A path that should be a checkpoint file is a FIFO, device, socket or directory (exit 1)."""


_KINDS = {
    stat.S_IFIFO: "a named pipe (FIFO)",
    stat.S_IFCHR: "a character device",
    stat.S_IFBLK: "a block device",
    stat.S_IFSOCK: "a socket",
    stat.S_IFDIR: "a directory",
}


def _refuse(path: str | os.PathLike[str], mode: int) -> NotARegularFile:
    kind = _KINDS.get(stat.S_IFMT(mode), "not a regular file")
    return NotARegularFile(f"{os.fspath(path)}: is {kind}, not a regular file; spillway does not open it")


def check_regular(path: str | os.PathLike[str]) -> os.stat_result:
    """``os.stat`` of a regular file; ``NotARegularFile`` otherwise (``OSError`` if it cannot be reached,
    e.g. a symlink loop: ELOOP)."""
    st = os.stat(path)
    if not stat.S_ISREG(st.st_mode):
        raise _refuse(path, st.st_mode)
    return st


def open_regular(path: str | os.PathLike[str]) -> io.BufferedReader:
    """Open a regular file for reading (buffered, binary); refuse anything else without blocking."""
    check_regular(path)
    fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | getattr(os, "O_CLOEXEC", 0))
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):  # swapped between the check and the open
            raise _refuse(path, st.st_mode)
        flags = fcntl.fcntl(fd, fcntl.F_GETFL)
        fcntl.fcntl(fd, fcntl.F_SETFL, flags & ~os.O_NONBLOCK)
    except BaseException:
        os.close(fd)
        raise
    # Outside the handler: once the file object owns the descriptor, a Ctrl-C must not close it a second time.
    return os.fdopen(fd, "rb")


def read_regular(path: str | os.PathLike[str]) -> bytes:
    with open_regular(path) as fh:
        return fh.read()


def real_path(path: str | os.PathLike[str]) -> Path:
    """Like ``Path.resolve()``, but a symlink loop is left for the open to report (ELOOP) instead of
    raising ``RuntimeError`` (Python before 3.13)."""
    return Path(os.path.realpath(path))
