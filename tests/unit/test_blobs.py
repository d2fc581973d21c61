"""Channel-state delegates opened as blobs (spillway/storage/blobs.py): inline bytes, whole files, segments of the
files Flink's file merging shares between handles, once per distinct delegate.

Expected bytes are read straight from the files Flink wrote, at the offsets its handles give."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest
from support.fixtures import fixture_named

from spillway.model.checkpoint import (
    ByteStreamHandle,
    EmptySegmentFileHandle,
    FileHandle,
    RelativeFileHandle,
    SegmentFileHandle,
)
from spillway.model.walk import leaf_stream_handles
from spillway.storage.blobs import DelegateBlobs, delegate_display, delegate_key, open_delegate
from spillway.storage.load import load_checkpoint
from spillway.storage.locate import CheckpointLocation, FileResolver


def _segments(name: str = "1.20.3-file-merging") -> tuple[FileResolver, list[SegmentFileHandle]]:
    loaded = load_checkpoint(fixture_named(name).checkpoint_dir)
    handles = [h for h in leaf_stream_handles(loaded.checkpoint) if isinstance(h, SegmentFileHandle)]
    return loaded.resolver, handles


def _resolver(chk: Path) -> FileResolver:
    chk.mkdir(parents=True, exist_ok=True)
    (chk / "_metadata").write_bytes(b"")
    return FileResolver(CheckpointLocation(chk / "_metadata"))


def test_a_segment_is_the_bytes_its_handle_names_in_the_shared_file() -> None:
    resolver, handles = _segments()
    assert len(handles) >= 3
    for h in handles:
        blob = open_delegate(resolver, h)
        assert blob is not None
        local = resolver.resolve(h).local  # type: ignore[union-attr]
        assert local is not None and blob.name == str(local)
        expected = local.read_bytes()[h.start_pos : h.start_pos + h.state_size]
        assert blob.size == h.state_size
        assert blob.read_at(0, blob.size) == expected
        assert blob.physical(0) == h.start_pos
        blob.close()


def test_a_segment_of_a_cut_file_ends_where_the_file_ends(tmp_path: Path) -> None:
    fx = fixture_named("1.20.3-file-merging")
    root = tmp_path / fx.name
    shutil.copytree(fx.root, root)
    loaded = load_checkpoint(root / fx.info["checkpoint"])
    handles = [h for h in leaf_stream_handles(loaded.checkpoint) if isinstance(h, SegmentFileHandle)]
    h = max(handles, key=lambda h: h.start_pos)
    local = loaded.resolver.resolve(h).local  # type: ignore[union-attr]
    assert local is not None
    data = local.read_bytes()
    keep = h.start_pos + h.state_size // 2
    local.write_bytes(data[:keep])
    blob = open_delegate(loaded.resolver, h)
    assert blob is not None and blob.size == keep - h.start_pos
    assert blob.read_at(0, blob.size) == data[h.start_pos : keep]
    local.write_bytes(data[: h.start_pos - 1])  # ends before the segment starts: nothing of it is there
    blob = open_delegate(loaded.resolver, h)
    assert blob is not None and blob.size == 0


def test_a_whole_file_and_inline_bytes(tmp_path: Path) -> None:
    resolver = _resolver(tmp_path / "job" / "chk-1")
    (tmp_path / "job" / "chk-1" / "state").write_bytes(b"0123456789")
    whole = open_delegate(resolver, RelativeFileHandle("state", 10))
    assert whole is not None and (whole.size, whole.read_at(2, 3)) == (10, b"234")
    assert whole.name == str(tmp_path / "job" / "chk-1" / "state")
    inline = open_delegate(resolver, ByteStreamHandle("buf", b"abc"))
    assert inline is not None and (inline.name, inline.size, inline.read_at(0, 3)) == ("inline:buf", 3, b"abc")


def test_what_cannot_be_reached_opens_as_nothing(tmp_path: Path) -> None:
    resolver = _resolver(tmp_path / "job" / "chk-1")
    (tmp_path / "job" / "chk-1" / "adir").mkdir()
    assert open_delegate(resolver, RelativeFileHandle("missing", 1)) is None
    assert open_delegate(resolver, RelativeFileHandle("adir", 1)) is None  # a directory is no state file
    assert open_delegate(resolver, FileHandle("s3://bucket/x", 1)) is None  # not on this machine
    assert open_delegate(resolver, None) is None  # type: ignore[arg-type]


def test_handles_reading_the_same_bytes_share_a_key_and_an_open_blob() -> None:
    resolver, handles = _segments()
    by_file: dict[str, list[SegmentFileHandle]] = {}
    for h in handles:
        by_file.setdefault(h.path, []).append(h)
    shared = next(hs for hs in by_file.values() if len({h.start_pos for h in hs}) >= 2)
    a, b = sorted(shared, key=lambda h: h.start_pos)[:2]
    local = str(resolver.resolve(a).local)  # type: ignore[union-attr]
    assert delegate_key(resolver, a) == ("file", local, a.start_pos)
    assert delegate_key(resolver, a) != delegate_key(resolver, b)  # same file, another segment
    twin = SegmentFileHandle(a.path, a.start_pos, a.state_size, a.scope, "another-logical-id")
    assert delegate_key(resolver, twin) == delegate_key(resolver, a)
    cache = DelegateBlobs(resolver)
    first = cache.get(a)
    assert first is not None and cache.get(twin) is first and cache.get(b) is not first
    assert first.read_at(0, 1)
    cache.close()
    with pytest.raises(ValueError, match="closed file"):  # every file the cache opened is released
        first.read_at(0, 1)


def test_inline_bytes_are_each_their_own_and_unreachable_files_keyed_by_their_name(tmp_path: Path) -> None:
    resolver = _resolver(tmp_path / "job" / "chk-1")
    one, two = ByteStreamHandle("x", b"1"), ByteStreamHandle("x", b"1")
    assert delegate_key(resolver, one) == ("inline", id(one)) != delegate_key(resolver, two)
    remote = FileHandle("s3://bucket/x", 1)
    assert delegate_key(resolver, remote) == ("file", repr(remote), 0)
    empty = EmptySegmentFileHandle()  # file merging's empty segment: no file, no start
    assert delegate_key(resolver, empty) == ("file", repr(empty), 0)


def test_a_delegate_is_shown_where_the_user_finds_it(tmp_path: Path) -> None:
    resolver = _resolver(tmp_path / "job" / "chk-1")
    (tmp_path / "job" / "chk-1" / "state").write_bytes(b"x")
    assert delegate_display(resolver, ByteStreamHandle("buf", b"")) == "inline:buf"
    assert delegate_display(resolver, RelativeFileHandle("state", 1)) == str(tmp_path / "job" / "chk-1" / "state")
    assert delegate_display(resolver, FileHandle("s3://bucket/x", 1)) == "s3://bucket/x"  # not local: as written
    assert delegate_display(resolver, RelativeFileHandle("../../x", 1)) == "?"  # unsafe: never resolved
