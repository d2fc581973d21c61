"""Stand-ins for a remote checkpoint's files (spillway/storage/remote_copies.py): existence and size come from
the store's listing without a read; the bytes are fetched on first read, once, whatever the number of threads
asking; until then nothing is on disk, so code that reads without asking finds no file, never wrong bytes."""

from __future__ import annotations

import threading
from pathlib import Path

from spillway.storage import remote_copies


class Store:
    """A fake store: what each fetch call asked for, and the bytes it writes."""

    def __init__(self, content: dict[Path, bytes]):
        self.content = content
        self.calls: list[list[Path]] = []
        self.lock = threading.Lock()

    def fetch(self, sources: list[Path]) -> None:
        with self.lock:
            self.calls.append(sorted(sources))
        for target in sources:
            target.write_bytes(self.content[target])


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
