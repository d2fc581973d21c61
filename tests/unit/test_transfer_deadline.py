"""One deadline for a whole remote file (storage/fs.py ``_chunks``: read_bytes, download, sha256_of), not one
per read: a store that hands out a chunk now and then, each well within the per-call watchdog, still fails once
the file's allowance (the call's deadline plus a second per started MiB) has passed; a file that keeps arriving
at a healthy rate is read whole.

The store is a stand-in file system (not pyarrow's local one, so every call is bounded as a remote one is) whose
reads each take a set time; the timings are the test's own, the allowance is what docs/cli.md states.
"""

from __future__ import annotations

import os
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from spillway.cli.common import in_options
from spillway.errors import StorageError, message_of
from spillway.storage import fs, timeouts

MIB = 1 << 20
CHUNK = 64 << 10  # reads of 64 KiB: a 1 MiB file is 16 reads


class SlowFile:
    """A remote file of ``size`` bytes whose every read takes ``seconds``."""

    def __init__(self, size: int, seconds: float) -> None:
        self.left, self.total, self.seconds = size, size, seconds

    def size(self) -> int:
        return self.total

    def read(self, n: int) -> bytes:
        time.sleep(self.seconds)
        n = min(n, self.left)
        self.left -= n
        return b"x" * n

    def close(self) -> None:
        pass


class SlowStore:
    """A file system whose files are all one :class:`SlowFile`."""

    def __init__(self, size: int, seconds: float) -> None:
        self.size, self.seconds = size, seconds

    def open_input_file(self, path: str) -> SlowFile:
        return SlowFile(self.size, self.seconds)

    open_input_stream = open_input_file


@pytest.fixture
def one_second_timeout(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    monkeypatch.setattr(fs, "_CHUNK", CHUNK)
    timeouts.set_timeout(1)  # one call may take 1 s + 2 s: each 1 s read below passes the per-call watchdog
    try:
        yield
    finally:
        timeouts.set_timeout(None)


def download(loc: fs.Location, tmp_path: Path) -> object:
    target = tmp_path / "copy"
    fs.download(loc, target)
    return target.read_bytes()


READERS: dict[str, Callable[[fs.Location, Path], object]] = {
    "read_bytes": lambda loc, _: fs.read_bytes(loc),
    "sha256_of": lambda loc, _: fs.sha256_of(loc),
    "download": download,
}


@pytest.mark.timeout(60)
@pytest.mark.parametrize("reader", list(READERS))
def test_a_dripping_file_fails_at_its_allowance_not_per_read(
    reader: str, tmp_path: Path, one_second_timeout: None
) -> None:
    # 1 MiB in 16 reads of 1 s each: 16 s in all, 3 s + 1 s allowed
    loc = fs.Location("gs://bkt/job/chk-1/_metadata", SlowStore(MIB, 1.0), "bkt/job/chk-1/_metadata")
    start = time.monotonic()
    with pytest.raises(StorageError) as failure:
        READERS[reader](loc, tmp_path)
    took = time.monotonic() - start
    assert str(failure.value).startswith("gs://bkt/job/chk-1/_metadata: ")
    assert f"not all {MIB} bytes within 4 s" in str(failure.value)
    assert "(--storage-timeout or SPILLWAY_STORAGE_TIMEOUT, " in in_options(message_of(failure.value))  # the setting
    assert 4 <= took < 5.5, took
    assert not (tmp_path / "copy").exists()  # no partial copy passes for the file


@pytest.mark.timeout(60)
def test_a_file_that_keeps_arriving_is_read_whole(one_second_timeout: None) -> None:
    # 3 MiB in 48 reads of 0.1 s: 4.8 s, more than one call may take (3 s), within the file's 3 s + 3 s
    loc = fs.Location("gs://bkt/big", SlowStore(3 * MIB, 0.1), "bkt/big")
    assert fs.read_bytes(loc) == b"x" * (3 * MIB)


def test_the_allowance_grows_a_second_per_started_mib() -> None:
    store = SlowStore(0, 0)
    timeouts.set_timeout(10)
    try:
        assert fs.transfer_allowance(store, 0) == 12  # the call's 10 s, and the watchdog's 2 s past it
        assert fs.transfer_allowance(store, 1) == 13
        assert fs.transfer_allowance(store, 100 * MIB) == 112
    finally:
        timeouts.set_timeout(None)


STUCK = """
import sys, threading
from spillway.errors import StorageError
from spillway.storage import fs, timeouts

class Stuck:
    # a read that never returns, and a close that waits for the read (as a client's lock would)
    reading = threading.Event()
    def size(self): return 10
    def read(self, n):
        self.reading.set()
        threading.Event().wait()
    def close(self):
        if self.reading.is_set():
            threading.Event().wait()

class Store:
    def open_input_file(self, path): return Stuck()
    open_input_stream = open_input_file

timeouts.set_timeout(1)
try:
    fs.read_bytes(fs.Location("gs://bkt/stuck", Store(), "bkt/stuck"))
except StorageError as exc:
    print(exc)
    sys.exit(3)
"""


@pytest.mark.timeout(60)
def test_a_read_that_never_returns_does_not_keep_the_process_alive() -> None:
    """The stuck read is left in its daemon thread and its stream is not closed under it: the process ends with
    the error at the file's deadline (1 s + 2 s + 1 s for its first MiB)."""
    start = time.monotonic()
    done = subprocess.run(
        [sys.executable, "-c", STUCK],
        env={**os.environ, "PYTHONPATH": str(Path(__file__).parents[2])},
        capture_output=True,
        text=True,
        timeout=30,
    )
    took = time.monotonic() - start
    assert done.returncode == 3, done.stdout + done.stderr
    assert done.stdout.startswith("gs://bkt/stuck: cannot read it: not all 10 bytes within 4 s"), done.stdout
    assert took < 4 + 5, took
