"""Edges of validate's rules (spillway/inspect/rules/) that damage to a real checkpoint reaches: a shared file cut
between two handles' ends, a handle that lists one chunk twice, an element of the wrong size.

Expected values come from the fixtures as Flink wrote them (a file's size, a handle's chunk offsets) and from the
rules as docs/validate.md states them."""

from __future__ import annotations

from copy import deepcopy
from pathlib import Path
from typing import Any

import pytest
from support.damaged import Copy, copy_fixture, rewrite

from spillway.inspect.validate import validate
from spillway.model.checkpoint import FileHandle, RelativeFileHandle, channel_handles, is_file_backed
from spillway.model.walk import transform_stream_handles
from spillway.repair.common import RepairError
from spillway.repair.workflow import source_damage
from spillway.storage.load import load_checkpoint

MERGED = "1.20.3-file-merging"  # three handles' segments share each of its task-owned operator-state files
UNALIGNED = "2.3.0-unaligned"
TAG_WATERMARK = 2  # StreamElementSerializer's tag of a watermark (docs/format/stream-elements.md)
WATERMARK_SIZE = 9  # its tag and a long


def _shared_segment_file(chk: Path) -> Path:
    """The smallest task-owned file: Flink merged three operators' state segments into it."""
    owned = [p for p in (chk.parent / "taskowned").rglob("*") if p.is_file()]
    return min(owned, key=lambda p: p.stat().st_size)


def test_a_shared_file_cut_between_two_handles_ends_is_short(tmp_path: Path) -> None:
    """A file is as long as the furthest end any handle needs: cut between the last two ends, it is too short for
    the last segment, even though the other handles' segments are all still there."""
    copy = copy_fixture(MERGED, tmp_path)
    shared = _shared_segment_file(copy.chk)
    full = shared.stat().st_size  # Flink wrote the last segment up to the file's end
    cut = full - 100  # the other segments of this fixture's files end by 1644 of 1909 and 1524 of 1789 bytes
    shared.write_bytes(shared.read_bytes()[:cut])
    report = validate(load_checkpoint(copy.chk), None)
    short = [f for f in report.errors if f.rule == "file-size" and f.file == str(shared)]
    assert len(short) == 1, [f.to_json() for f in report.errors]
    assert short[0].offset == cut
    assert short[0].message.startswith(f"file has {cut} bytes, handles need {full} (")


def _input_handles(cp):  # type: ignore[no-untyped-def]
    """Channel-state handles whose chunks sit in a file, in checkpoint order."""
    return [
        h
        for op in cp.operators
        for sub in op.subtasks
        for h in channel_handles(sub.input_channel_state) + channel_handles(sub.result_subpartition_state)
        if isinstance(h.delegate, RelativeFileHandle)
    ]


def test_a_handle_listing_one_chunk_twice_claims_it_twice(tmp_path: Path) -> None:
    copy = copy_fixture(UNALIGNED, tmp_path)
    picked: dict[str, object] = {}

    def twice(cp) -> None:  # type: ignore[no-untyped-def]
        # 2.x stores a subtask's channels as one merged handle: its entries are what is encoded back
        holder, entry = next(
            (h, c)
            for op in cp.operators
            for sub in op.subtasks
            for h in sub.input_channel_state + sub.result_subpartition_state
            for c in h.channels
            if isinstance(h.delegate, RelativeFileHandle) and len(c.offsets) == 1
        )
        entry.offsets = [entry.offsets[0], entry.offsets[0]]
        picked["offset"], picked["file"] = entry.offsets[0], holder.delegate.relative_path

    rewrite(copy, twice)
    report = copy.run(plan=False)
    path = str(copy.chk / str(picked["file"]))
    overlaps = [f for f in report.errors if f.rule == "chunk-overlap" and f.file == path]
    # The chunk's length field sits at the offset the handle names; the second mention of it is the overlap.
    assert [f.offset for f in overlaps] == [picked["offset"]], [f.to_json() for f in report.errors]
    assert f"chunk at {picked['offset']} also claimed by " in overlaps[0].message


def test_a_watermark_of_the_wrong_size_is_a_record_tag_error(tmp_path: Path) -> None:
    """docs/validate.md: ``record-tag`` holds each record to a tag the release knows, *of the right size*."""
    copy = copy_fixture(UNALIGNED, tmp_path)
    cp = copy.checkpoint()
    h = next(h for h in _input_handles(cp) if h.side == "input" and h.state_size > 100)
    path = copy.chk / h.delegate.relative_path
    data = bytearray(path.read_bytes())
    first = h.offsets[0]  # the handle's first chunk: [i32 chunk length][i32 record length][tag]...
    assert int.from_bytes(data[first : first + 4], "big") >= 9  # the first record's length field and tag are in it
    length = int.from_bytes(data[first + 4 : first + 8], "big")
    assert length != WATERMARK_SIZE
    data[first + 8] = TAG_WATERMARK
    path.write_bytes(bytes(data))
    report = copy.run()
    hits = [f for f in report.errors if f.file == str(path) and f.offset == first + 4]
    assert [f.rule for f in hits] == ["record-tag"], [f.to_json() for f in report.errors]
    assert f"watermark of {length} bytes, expected {WATERMARK_SIZE}" in hits[0].message


def test_a_referenced_path_that_is_a_directory_is_named_as_unreadable(tmp_path: Path) -> None:
    """``file-exists`` covers a file that cannot be read as one: a directory where Flink wrote a state file."""
    copy = copy_fixture(MERGED, tmp_path)
    shared = _shared_segment_file(copy.chk)
    shared.unlink()
    shared.mkdir()
    report = validate(load_checkpoint(copy.chk), None)
    hits = [f for f in report.errors if f.file == str(shared)]
    assert [f.rule for f in hits] == ["file-exists"], [f.to_json() for f in report.errors]
    assert "a directory" in hits[0].message and hits[0].offset is None


CLIMB = "../" * 40  # more than any temporary directory is deep


def _unsafe(copy: Copy, how: list[str]) -> list[str]:
    """Give the first ``len(how)`` file-backed handles unsafe names: ``dotdot`` climbs out of the checkpoint,
    ``nul`` appends a NUL byte. Returns the names written."""
    written: list[str] = []

    def change(h: Any) -> Any:
        if len(written) == len(how) or not is_file_backed(h):
            return h
        kind = how[len(written)]
        name = (
            (CLIMB + "tmp/victim" if h.relative else f"file:{copy.chk}/{CLIMB}tmp/victim")
            if kind == "dotdot"
            else h.file_name + "\0.bak"
        )
        written.append(name)
        return h.with_file_name(name)

    rewrite(copy, lambda cp: transform_stream_handles(cp, change))
    return written


def test_no_repair_writes_from_a_source_naming_an_unsafe_path_even_forced(tmp_path: Path) -> None:
    """An unsafe path (``path-escape``, ``bad-path``) refuses every write, ``force`` or not, naming the first one,
    its operator, and how many there are (docs/validate.md)."""
    one = copy_fixture(UNALIGNED, tmp_path / "one")
    (escaping,) = _unsafe(one, ["dotdot"])
    with pytest.raises(RepairError) as refused:
        source_damage(load_checkpoint(one.chk), None, force=True)
    message = str(refused.value)
    assert message.startswith(f"the source names an unsafe path: path-escape: {escaping}: ")
    assert " (operator " in message and message.endswith("not even with force=True (spillway validate lists every one)")

    two = copy_fixture(UNALIGNED, tmp_path / "two")
    first, _ = _unsafe(two, ["nul", "dotdot"])
    with pytest.raises(RepairError) as refused:
        source_damage(load_checkpoint(two.chk), None, force=False)
    shown = first.replace("\0", "\\x00")  # findings show a NUL escaped
    assert str(refused.value).startswith(f"the source names 2 unsafe paths, first: bad-path: {shown}: ")


def test_other_damage_is_written_through_when_forced(tmp_path: Path) -> None:
    copy = copy_fixture(MERGED, tmp_path)
    _shared_segment_file(copy.chk).unlink()
    warnings = source_damage(load_checkpoint(copy.chk), None, force=True)
    assert warnings and all(
        w.startswith("source damage kept (force=True): file-exists: missing file") for w in warnings
    )


def test_a_channel_file_that_is_a_symlink_leading_out_escapes(tmp_path: Path) -> None:
    """A relative file that resolves outside the checkpoint through a symlink is ``path-escape`` (docs/validate.md),
    not merely a file that is not local; nothing outside is read."""
    copy = copy_fixture(UNALIGNED, tmp_path / "src")
    outside = tmp_path / "outside"
    outside.write_bytes(b"not the checkpoint's")
    path, _ = copy.channel_files()[0]
    path.unlink()
    path.symlink_to(outside)
    report = validate(load_checkpoint(copy.chk), None)
    escapes = [f for f in report.errors if f.rule == "path-escape"]
    assert escapes and all(path.name in (f.file or "") for f in escapes), [f.to_json() for f in report.errors]
    assert not [f for f in report.findings if f.rule == "file-not-local"]


def test_paths_on_a_store_not_rebased_are_each_not_local(tmp_path: Path) -> None:
    """``file-not-local`` (a warning, docs/validate.md): a non-local path that was not rebased is not checked; every
    such handle is named, not just the first."""
    copy = copy_fixture(UNALIGNED, tmp_path)
    remote = ["s3://bucket/elsewhere/one", "s3://bucket/elsewhere/two"]
    left = list(remote)

    def to_store(h: Any) -> Any:
        return FileHandle(left.pop(0), h.state_size) if left and is_file_backed(h) else h

    rewrite(copy, lambda cp: transform_stream_handles(cp, to_store))
    report = validate(load_checkpoint(copy.chk), None)
    not_local = [f for f in report.findings if f.rule == "file-not-local"]
    assert [(f.file, f.severity) for f in not_local] == [(r, "warning") for r in remote]


def _single_chunk_entry(cp: Any) -> tuple[Any, Any]:
    """(merged handle, channel entry) of the first channel whose state is one chunk in a file."""
    return next(
        (h, c)
        for op in cp.operators
        for sub in op.subtasks
        for h in sub.input_channel_state + sub.result_subpartition_state
        for c in h.channels
        if isinstance(h.delegate, RelativeFileHandle) and len(c.offsets) == 1
    )


def test_an_offset_that_starts_no_chunk_is_named_where_it_points(tmp_path: Path) -> None:
    """``chunk-offset`` (docs/validate.md): every offset of a handle starts a chunk of its file. One byte into a
    chunk is not a start; two bytes before the file's end not even a length field fits."""
    copy = copy_fixture(UNALIGNED, tmp_path)
    picked: dict[str, Any] = {}

    def shift(cp: Any) -> None:
        holder, entry = _single_chunk_entry(cp)
        size = (copy.chk / holder.delegate.relative_path).stat().st_size
        entry.offsets = [entry.offsets[0] + 1, size - 2]
        picked["offsets"], picked["file"] = entry.offsets, str(copy.chk / holder.delegate.relative_path)

    rewrite(copy, shift)
    report = validate(load_checkpoint(copy.chk), None)
    into, tail = picked["offsets"]
    found = [(f.offset, f.message) for f in report.errors if f.rule == "chunk-offset" and f.file == picked["file"]]
    assert (into, f"offset {into} is not the start of a chunk") in found, found
    assert (tail, f"offset {tail} is not the start of a chunk") in found, found
    assert any(o == tail and m.startswith(f"offset {tail}: ") for o, m in found), found


def test_a_chunk_at_the_very_end_of_a_cut_file_is_left_to_file_size(tmp_path: Path) -> None:
    """A file cut exactly where a handle's chunk starts: that chunk is missing because the file is short, which
    ``file-size`` says once; no ``chunk-offset`` for it."""
    copy = copy_fixture(UNALIGNED, tmp_path)
    path, handles = copy.channel_files()[0]
    last = max(o for _, h in handles for o in h.offsets)  # the chunk Flink wrote last, ending the file
    path.write_bytes(path.read_bytes()[:last])
    report = validate(load_checkpoint(copy.chk), None)
    assert [f.offset for f in report.errors if f.rule == "file-size" and f.file == str(path)] == [last]
    assert not [f for f in report.errors if f.rule == "chunk-offset"], [f.to_json() for f in report.errors]


def test_a_channel_file_too_short_for_its_header_says_so(tmp_path: Path) -> None:
    """``channel-header``: a channel-state file starts with Flink's 4-byte serialization version; 2 bytes are not
    a header."""
    copy = copy_fixture(UNALIGNED, tmp_path)
    path, _ = copy.channel_files()[0]
    path.write_bytes(path.read_bytes()[:2])
    report = validate(load_checkpoint(copy.chk), None)
    headers = [f for f in report.errors if f.rule == "channel-header"]
    assert [(f.file, f.offset) for f in headers] == [(str(path), 0)], [f.to_json() for f in report.errors]
    assert headers[0].message.startswith("too short for a header: ")


def test_a_subtask_stored_twice_and_a_handle_of_another_subtask_are_named(tmp_path: Path) -> None:
    """``subtask-index`` (docs/validate.md): each subtask once per operator, and each channel handle of a subtask
    says that subtask."""
    copy = copy_fixture("1.17.2-unaligned", tmp_path)  # plain channel handles, each with its subtask index
    picked: dict[str, Any] = {}

    def damage(cp: Any) -> None:
        op = next(
            o for o in cp.operators if len(o.subtasks) >= 2 and channel_handles(o.subtasks[1].input_channel_state)
        )
        first, second = op.subtasks[0], op.subtasks[1]
        handle = channel_handles(second.input_channel_state)[0]
        handle.subtask_index = first.index
        op.subtasks.append(deepcopy(first))
        picked.update(op=op.operator_id, twice=first.index, holder=second.index)

    rewrite(copy, damage)
    report = validate(load_checkpoint(copy.chk), None)
    found = [(f.subtask, f.message) for f in report.errors if f.rule == "subtask-index" and picked["op"] in f.operator]
    assert (picked["twice"], f"subtask {picked['twice']} appears twice") in found, found
    assert (picked["holder"], f"input channel handle says subtask {picked['twice']}") in found, found


def test_a_damaged_length_in_an_input_part_framed_alone_says_what_the_bytes_left_were(tmp_path: Path) -> None:
    """Without a plan an input handle is framed alone: a ``record-length`` fault there is measured against that
    part's bytes only, and says so; the finding names the part's channel."""
    copy = copy_fixture(UNALIGNED, tmp_path)
    cp = copy.checkpoint()
    h = next(h for h in _input_handles(cp) if h.side == "input" and h.state_size > 100)
    path = copy.chk / h.delegate.relative_path
    data = bytearray(path.read_bytes())
    first = h.offsets[0]
    data[first + 4 : first + 8] = (0x7FFF0000).to_bytes(4, "big")  # far more than the part holds
    path.write_bytes(bytes(data))
    report = validate(load_checkpoint(copy.chk), None)
    hits = [f for f in report.errors if f.rule == "record-length" and f.file == str(path) and f.offset == first + 4]
    assert len(hits) == 1, [f.to_json() for f in report.errors]
    assert hits[0].message.endswith(
        "; framed without its output side, the bytes left are this part's and all output-side state's"
    )
    assert hits[0].channel and hits[0].subtask == h.subtask_index


def _flink_range(max_parallelism: int, parallelism: int, index: int) -> tuple[int, int]:
    """KeyGroupRangeAssignment.computeKeyGroupRangeForOperatorIndex."""
    start = (index * max_parallelism + parallelism - 1) // parallelism
    end = ((index + 1) * max_parallelism + parallelism - 1) // parallelism - 1
    return start, end


def test_a_subtask_without_its_keyed_state_leaves_flinks_range_uncovered(tmp_path: Path) -> None:
    """``key-group-gap``: the subtasks' key-group ranges tile [0, max parallelism); without one subtask's keyed
    state, exactly the range Flink assigns that subtask is held by nobody."""
    for index in (0, 1):
        copy = copy_fixture("1.20.3-prod", tmp_path / str(index))
        picked: dict[str, Any] = {}

        def drop(cp: Any, index: int = index, picked: dict[str, Any] = picked) -> None:
            op = next(
                o
                for o in cp.operators
                if o.parallelism == len(o.subtasks) == 2 and all(s.managed_keyed_state for s in o.subtasks)
            )
            op.subtasks[index].managed_keyed_state = None
            picked.update(op=op.operator_id, range=_flink_range(op.max_parallelism, op.parallelism, index))

        rewrite(copy, drop)
        report = validate(load_checkpoint(copy.chk), None)
        gaps = [(f.operator, f.message) for f in report.findings if f.rule == "key-group-gap"]
        first, last = picked["range"]
        assert gaps == [(picked["op"], f"managed_keyed_state: no subtask holds key groups [{first}, {last}]")]
