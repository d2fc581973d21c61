"""The changelog backend's DSTL files, checked against their handles as Flink writes them: a flag byte (0:
uncompressed) and then exactly the bytes the handle counts (StateChangeFsUploader). The healthy 1.20.3 checkpoint
(state.changelog.enabled, files written by Flink) has no size finding; a byte too many or too few is still found;
a compressed file's size is not compared (the handle counts uncompressed bytes)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from support.damaged import Copy, copy_fixture, rewrite
from support.fixtures import fixture_named

from spillway.model.checkpoint import ChangelogFileIncrementHandle, ChangelogHandle, FileHandle
from spillway.model.walk import all_stream_handles

FIXTURE = "1.20.3-changelog"
SIZE_RULES = {"file-size", "file-size-extra"}


def dstl_files(c: Copy) -> dict[Path, int]:
    """Each DSTL file of the copy with the size its handle states (from Flink's _metadata)."""
    out: dict[Path, int] = {}
    for op in c.checkpoint().operators:
        for sub in op.subtasks:
            h = sub.managed_keyed_state
            if not isinstance(h, ChangelogHandle):
                continue
            for part in h.non_materialized:
                assert isinstance(part, ChangelogFileIncrementHandle)
                for _, d in part.handles:
                    assert isinstance(d, FileHandle)
                    assert d.path.startswith(f"file:{c.root}/")
                    out[Path(d.path.removeprefix("file:"))] = d.state_size
    return out


@pytest.fixture
def copy(tmp_path: Path) -> Copy:
    """A copy whose absolute paths name its own files (not the generator's, should they still exist)."""
    c = copy_fixture(FIXTURE, tmp_path)
    old = f"file:{fixture_named(FIXTURE).info['generated_at']}/"

    def rebase(cp: Any) -> None:
        for _, h in all_stream_handles(cp):
            if isinstance(h, FileHandle) and h.path.startswith(old):
                h.path = f"file:{c.root}/{h.path[len(old) :]}"

    rewrite(c, rebase)
    return c


def size_findings(c: Copy) -> list[tuple[str, str | None, str]]:
    report = c.run()
    return [(f.rule, f.file, f.message) for f in report.findings if f.rule in SIZE_RULES]


def test_flink_writes_one_flag_byte_before_what_the_handle_counts(copy: Copy) -> None:
    files = dstl_files(copy)
    assert len(files) == 3
    for path, size in files.items():
        data = path.read_bytes()
        assert data[0] == 0 and len(data) == size + 1  # Flink's own bytes: uncompressed, one byte longer
    assert size_findings(copy) == []


def test_a_byte_too_many_is_extra(copy: Copy) -> None:
    path, size = next(iter(dstl_files(copy).items()))
    path.write_bytes(path.read_bytes() + b"\0")
    assert size_findings(copy) == [
        ("file-size-extra", str(path), f"file has {size + 2} bytes, handle says {size} after the 1-byte flag")
    ]


def test_a_byte_too_few_is_a_short_file(copy: Copy) -> None:
    path, size = next(iter(dstl_files(copy).items()))
    path.write_bytes(path.read_bytes()[:-1])
    [(rule, file, message)] = size_findings(copy)
    assert (rule, file) == ("file-size", str(path))
    assert message.startswith(f"file has {size} bytes, handles need {size} after its flag byte (")
    [short] = [f for f in copy.run().findings if f.rule == "file-size"]
    assert short.offset == size  # where the file ends: the first byte its handle needs that is not there


def test_a_compressed_file_is_not_held_to_the_uncompressed_size(copy: Copy) -> None:
    path, size = next(iter(dstl_files(copy).items()))
    path.write_bytes(b"\x01" + path.read_bytes()[1 : size // 2])
    assert size_findings(copy) == []
