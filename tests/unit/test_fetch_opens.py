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
