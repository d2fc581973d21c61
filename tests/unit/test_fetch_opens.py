"""fetch_files opens its files in the read pool: with thousands of small files (channel state), opening them one
after another (one HEAD each on S3) cost as much as all their reads."""

from __future__ import annotations

import threading
from pathlib import Path
from typing import Any

import pytest

from spillway.storage import fs


def test_the_files_are_opened_together_and_arrive_whole(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    contents = {"a": b"first file", "b": b"", "c": b"x" * 1000, "d": bytes(range(256)) * 3}
    for name, data in contents.items():
        (tmp_path / name).write_bytes(data)
    sized = sum(1 for data in contents.values() if data)  # an empty file is created, never opened
    together = threading.Barrier(sized, timeout=10)  # broken (an error) unless every open waits at once
    opened = fs._open_input

    def open_together(loc: fs.Location) -> Any:
        together.wait()
        return opened(loc)

    monkeypatch.setattr(fs, "_open_input", open_together)
    out = tmp_path / "out"
    transfers = [fs.Transfer(fs.locate(str(tmp_path / n)), out / n, len(d)) for n, d in contents.items()]
    assert fs.fetch_files(transfers, workers=sized, part=64) == sum(len(d) for d in contents.values())
    assert {n: (out / n).read_bytes() for n in contents} == contents


def test_each_file_is_announced_once_whole_after_all_exist_at_their_size(tmp_path: Path) -> None:
    """created() comes once every target exists at its listed size, before any file is announced; arrived(t) comes
    once per file, when every one of its bytes is in place (a reader may then read it while others arrive)."""
    contents = {f"f{i}": bytes([i]) * (i * 100) for i in range(6)}  # f0 is empty; the others span parts of 64
    for name, data in contents.items():
        (tmp_path / name).write_bytes(data)
    out = tmp_path / "out"
    events: list[tuple[str, str, bytes]] = []
    lock = threading.Lock()

    def created() -> None:
        with lock:
            events.extend(("created", n, b"") for n in contents if (out / n).stat().st_size == len(contents[n]))

    def arrived(t: fs.Transfer) -> None:
        with lock:
            events.append(("arrived", t.target.name, t.target.read_bytes()))

    transfers = [fs.Transfer(fs.locate(str(tmp_path / n)), out / n, len(d)) for n, d in contents.items()]
    fs.fetch_files(transfers, workers=3, part=64, created=created, arrived=arrived)
    assert events[: len(contents)] == [("created", n, b"") for n in contents]
    announced = events[len(contents) :]
    assert sorted(n for _, n, _ in announced) == sorted(contents)
    assert all(data == contents[name] for _, name, data in announced)


def test_a_stopped_fetch_reads_no_further_part_and_leaves_nothing(tmp_path: Path) -> None:
    data = bytes(range(256)) * 40
    (tmp_path / "big").write_bytes(data)
    stop = threading.Event()
    stop.set()
    transfer = fs.Transfer(fs.locate(str(tmp_path / "big")), tmp_path / "out" / "big", len(data))
    with pytest.raises(fs._Abandoned, match=r"big: not read: the command stopped reading from the store$"):
        fs.fetch_files([transfer], workers=2, part=64, stop=stop)
    assert list((tmp_path / "out").iterdir()) == []


def test_files_fetched_into_memory_leave_nothing_on_disk(tmp_path: Path) -> None:
    """A target named in ``in_memory`` is an in-memory file handed to ``kept`` at its listed size before
    ``created()``, holding every byte once it has arrived; no file appears at its path. The others go to disk."""
    import os

    contents = {"a": bytes(range(256)) * 5, "b": b"on disk", "c": b"z" * 70}
    for name, data in contents.items():
        (tmp_path / name).write_bytes(data)
    out = tmp_path / "out"
    transfers = [fs.Transfer(fs.locate(str(tmp_path / n)), out / n, len(d)) for n, d in contents.items()]
    kept: dict[str, int] = {}
    sizes_at_created: dict[str, int] = {}

    def created() -> None:
        sizes_at_created.update({n: os.fstat(fd).st_size for n, fd in kept.items()})

    memory = {out / "a", out / "c"}
    fs.fetch_files(transfers, workers=2, part=64, in_memory=memory, created=created,
                   kept=lambda t, fd: kept.__setitem__(t.target.name, fd))  # fmt: skip
    try:
        assert sizes_at_created == {"a": len(contents["a"]), "c": len(contents["c"])}
        assert {n: os.pread(fd, 10_000, 0) for n, fd in kept.items()} == {n: contents[n] for n in ("a", "c")}
        assert sorted(p.name for p in out.iterdir()) == ["b"] and (out / "b").read_bytes() == contents["b"]
    finally:
        for fd in kept.values():
            os.close(fd)
