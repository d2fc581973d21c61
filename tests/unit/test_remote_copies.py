"""Stand-ins for a remote checkpoint's files (spillway/storage/remote_copies.py): existence and size come from
the store's listing without a read; the bytes are fetched on first read, once, whatever the number of threads
asking; until then nothing is on disk, so code that reads without asking finds no file, never wrong bytes."""

from __future__ import annotations

import threading
from collections.abc import Callable
from pathlib import Path

import pytest

from spillway.errors import StorageError
from spillway.storage import remote_copies


class Store:
    """A fake store: what each fetch call asked for, and the bytes it writes."""

    def __init__(self, content: dict[Path, bytes]):
        self.content = content
        self.calls: list[list[Path]] = []
        self.lock = threading.Lock()
        self.gate = threading.Event()  # the bytes arrive once it is set
        self.gate.set()
        self.failure: StorageError | None = None
        self.stops: list[threading.Event] = []

    def fetch(
        self,
        sources: list[Path],
        created: Callable[[], None],
        arrived: Callable[[Path], None],
        stop: threading.Event,
    ) -> None:
        with self.lock:
            self.calls.append(list(sources))
            self.stops.append(stop)
        for target in sources:  # as fs.fetch_files: every file at its listed size first, its bytes after
            target.write_bytes(bytes(len(self.content[target])))
        created()
        self.gate.wait(10)
        if self.failure is not None:
            for target in sources:
                target.unlink()
            raise self.failure
        for target in sources:
            target.write_bytes(self.content[target])
            arrived(target)


def test_a_listed_file_has_its_size_and_name_before_any_read(tmp_path: Path) -> None:
    local = tmp_path / "chk-3" / "channel-state"
    local.parent.mkdir()
    store = Store({local: b"x" * 1234})
    remote_copies.register(str(local), "s3://b/chk-3/channel-state", 1234, local, store.fetch)
    assert remote_copies.size_of(local) == 1234
    assert "channel-state" in remote_copies.names_in(str(local.parent))
    assert remote_copies.shown(str(local)) == "s3://b/chk-3/channel-state"
    assert not local.exists() and store.calls == []  # nothing read, nothing stands in on disk


def test_many_threads_reading_one_file_fetch_it_once(tmp_path: Path) -> None:
    local = tmp_path / "file"
    store = Store({local: b"abc"})
    remote_copies.register(str(local), "s3://b/file", 3, local, store.fetch)
    threads = [threading.Thread(target=remote_copies.ensure_local, args=(local,)) for _ in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert store.calls == [[local]]
    assert local.read_bytes() == b"abc"
    assert remote_copies.pending(local) is None and remote_copies.size_of(local) == 3
    assert "file" not in remote_copies.names_in(str(tmp_path))


def test_prefetch_fetches_every_pending_file_in_one_call(tmp_path: Path) -> None:
    files = {tmp_path / f"f{i}": bytes([i]) * (i + 1) for i in range(5)}
    store = Store(files)
    for path, data in files.items():
        remote_copies.register(str(path), f"s3://b/{path.name}", len(data), path, store.fetch)
    remote_copies.ensure_local(tmp_path / "f0")  # one read first: not fetched again
    remote_copies.prefetch([str(p) for p in files] + [None, str(tmp_path / "not-remote")])
    assert store.calls == [[tmp_path / "f0"], sorted(p for p in files if p.name != "f0")]
    assert {p: p.read_bytes() for p in files} == files


def test_a_started_file_is_not_read_before_it_has_arrived(tmp_path: Path) -> None:
    """start() returns with the files at their listed sizes (so a reader may open them), but they stay pending
    and ensure_local waits for their bytes: nobody reads the zeros standing in for them."""
    files = {tmp_path / f"s{i}": bytes([65 + i]) * (10 + i) for i in range(3)}
    store = Store(files)
    store.gate.clear()
    for path, data in files.items():
        remote_copies.register(str(path), f"s3://b/{path.name}", len(data), path, store.fetch)
    waits = remote_copies.start([str(p) for p in reversed(files)])
    assert store.calls == [list(reversed(files))]  # one fetch, in the order the caller will read them
    assert {p: p.stat().st_size for p in files} == {p: len(d) for p, d in files.items()}
    assert all(remote_copies.pending(p) is not None for p in files) and not any(w.done() for w in waits)
    seen: list[bytes] = []
    reader = threading.Thread(
        target=lambda: (remote_copies.ensure_local(tmp_path / "s1"), seen.append((tmp_path / "s1").read_bytes()))
    )
    reader.start()
    reader.join(0.3)
    assert reader.is_alive() and seen == []  # still waiting: the bytes have not arrived
    store.gate.set()
    reader.join(10)
    assert seen == [files[tmp_path / "s1"]]
    remote_copies.prefetch([str(p) for p in files])  # already fetched: no second call
    assert store.calls == [list(reversed(files))]
    assert all(remote_copies.pending(p) is None for p in files)


def test_a_failed_fetch_fails_every_reader_with_its_error(tmp_path: Path) -> None:
    local = tmp_path / "broken"
    store = Store({local: b"0123456789"})
    store.failure = StorageError("s3://b/broken: cannot read bytes 0-9: SlowDown")
    remote_copies.register(str(local), "s3://b/broken", 10, local, store.fetch)
    for _ in range(2):  # the first reader and any later one: the store's error, never "missing"
        with pytest.raises(StorageError, match=r"^s3://b/broken: cannot read bytes 0-9: SlowDown$"):
            remote_copies.ensure_local(local)
    assert not local.exists() and len(store.calls) == 1


def test_abandon_tells_every_fetch_under_way_to_stop(tmp_path: Path) -> None:
    """After a failure or Ctrl-C elsewhere, the reads still queued are not worth finishing: the fetch is told."""
    local = tmp_path / "slow"
    store = Store({local: b"abc"})
    store.gate.clear()
    remote_copies.register(str(local), "s3://b/slow", 3, local, store.fetch)
    [arrival] = remote_copies.start([str(local)])
    assert not store.stops[0].is_set()
    remote_copies.abandon()
    assert store.stops[0].is_set()
    store.gate.set()
    arrival.result(10)  # this fake finishes anyway; fs.fetch_files starts no further read (test_fetch_opens)
