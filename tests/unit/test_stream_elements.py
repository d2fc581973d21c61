"""The readers of validate and analyze frame exactly as the reference walk of ``stream_elements`` does.

Compared with the reference (``tests/support/element_streams.py``) on real fixture channel state and on
generated streams cut into pieces anywhere: ``Framer`` (pure Python) and ``NativeFramer`` (C, its tables
from Python) — validate; ``RecordReader`` — analyze. Also: the declaration itself (construct layouts, sizes,
which releases write which tags) and analyze naming an element fault.
"""

from __future__ import annotations

import ctypes
import shutil
from collections import Counter
from pathlib import Path

import pytest
from hypothesis import given
from support.element_streams import (
    LIMITS,
    SETTINGS,
    TAG_SETS,
    Walk,
    cut,
    real_channels,
    real_fixtures,
    reference,
    starts,
    streams,
    tag_counts,
)
from support.fixtures import fixture_named

from spillway.formats.native import SOURCE, framer_rules, library
from spillway.formats.record_framing import Framer, NativeFramer
from spillway.formats.record_reader import RecordReader
from spillway.formats.stream_elements import (
    ALL_TAGS,
    ELEMENTS,
    INT32_MAX,
    KINDS,
    RECORD_TAGS,
    TAGS_BEFORE_1_19,
    StreamElement,
    element_fault,
    element_name,
    size_bounds,
    tags_for_format_version,
)
from spillway.inspect.analyze import Analysis, analyze
from spillway.inspect.topology import load_plan
from spillway.storage.load import load_checkpoint


def framed_by(framer: Framer | NativeFramer, pieces: list[bytes], finish: bool) -> tuple:
    for piece in pieces:
        framer.feed(bytearray(piece), len(piece))
    if finish:
        framer.finish()
    at = starts(pieces)
    return framer.records, [(f.kind, at[f.piece] + f.position) for f in framer.faults], dict(framer.elements)


def framer_expected(stream: bytes, w: Walk, finish: bool, tags: frozenset[int] = ALL_TAGS) -> tuple:
    """A framer sees an element's tag as soon as its byte arrives: an unfinished last element is counted
    and checked too."""
    faults = list(w.faults)
    elements = tag_counts(w)
    if w.partial is not None:
        length, tag = w.partial
        elements[tag] += 1
        fault = element_fault(tag, length, tags)
        if fault is not None:
            faults.append((fault.kind, w.end))
    if finish and not w.lost and w.end < len(stream):
        faults.append(("truncated", w.end))
    return len(w.elements), faults, dict(elements)


def read_by_reader(pieces: list[bytes]) -> tuple:
    reader = RecordReader()
    at = starts(pieces)
    out = []
    for i, piece in enumerate(pieces):
        for rec in reader.feed(piece, i):
            out.append((at[rec.start] + rec.start_pos, rec.length, rec.payload))
    if reader.bad_length is not None:  # the reader stops taking pieces: its leftover means nothing
        token, pos, _ = reader.bad_length
        return out, at[token] + pos, None
    return out, None, reader.leftover


def reader_expected(stream: bytes, w: Walk) -> tuple:
    records = [(pos, length, stream[pos + 4 : pos + 4 + length]) for pos, length, _ in w.elements]
    return records, (w.end if w.lost else None), (None if w.lost else len(stream) - w.end)


@pytest.fixture(scope="module")
def lib() -> ctypes.CDLL:
    found = library()
    assert found is not None, "the native framer must build on the test machines (gcc is there)"
    return found


# ---------------------------------------------------------------------------------------------------
# the declaration


@SETTINGS
@given(streams())
def test_the_reference_walk_finds_the_elements_the_construct_built(case: tuple[bytes, list[int], str]) -> None:
    stream, _, corruption = case
    w = reference(stream, end_known=True)
    for pos, length, tag in w.elements:
        element = stream[pos + 4 : pos + 4 + length]
        if element_fault(tag, length) is None:
            parsed = StreamElement.parse(element)
            assert StreamElement.build(parsed) == element
            assert (parsed.value is not None) == (tag in RECORD_TAGS)
    if corruption == "none" and w.end == len(stream):
        assert w.faults == []


def test_sizes_and_value_offsets_come_from_the_layouts() -> None:
    assert {k.tag: k.head_size for k in KINDS} == {0: 9, 1: 1, 2: 9, 3: 29, 4: 5, 5: 2, 6: 13}
    assert {k.tag: k.value_offset for k in KINDS if k.carries_value} == {0: 9, 1: 1}
    assert {k.tag: k.event_time_offset for k in KINDS if k.event_time_offset is not None} == {0: 1, 2: 1}
    assert element_name(0) == element_name(1) == "record" and element_name(99) == "tag 99"
    assert element_fault(2, 8) is not None and element_fault(2, 9) is None
    assert element_fault(0, 8) is not None and element_fault(0, 9) is None and element_fault(1, 1) is None
    fault = element_fault(5, 2, TAGS_BEFORE_1_19)
    assert fault is not None and fault.kind == "tag"
    assert ELEMENTS[3].max_length == ELEMENTS[3].min_length == 29 and ELEMENTS[1].max_length == INT32_MAX


def test_which_releases_write_which_tags() -> None:
    """V2/V3 (Flink <= 1.15) never hold tags 5 and 6; V4 is written by 1.16-1.18 and 1.19-1.20 alike, so it
    allows them (never a false error); V5 (2.0) and V6 (2.1-2.3) allow them."""
    assert tags_for_format_version(2) == tags_for_format_version(3) == TAGS_BEFORE_1_19 == frozenset(range(5))
    for version in (4, 5, 6, 7):
        assert tags_for_format_version(version) == ALL_TAGS == frozenset(range(7))


def test_the_c_framer_reads_its_tables_from_python(lib: ctypes.CDLL) -> None:
    for tags in (ALL_TAGS, TAGS_BEFORE_1_19, frozenset({1})):
        rules = framer_rules(tags, None)
        assert list(zip(rules.min_len, rules.max_len, strict=True)) == size_bounds(tags)
        assert rules.limit == INT32_MAX
    assert framer_rules(ALL_TAGS, 77).limit == 77
    source = SOURCE.read_text()
    assert "FIXED" not in source and "MINSZ" not in source  # no second copy of the sizes


# ---------------------------------------------------------------------------------------------------
# each reader equal to the reference


@SETTINGS
@given(streams(), TAG_SETS, LIMITS)
def test_framers_equal_the_reference(
    case: tuple[bytes, list[int], str], tags: frozenset[int], limit: int | None
) -> None:
    stream, cuts, _ = case
    lib = library()
    assert lib is not None
    pieces = cut(stream, cuts)
    expected = framer_expected(stream, reference(stream, end_known=True, tags=tags, limit=limit), True, tags)
    assert framed_by(Framer(len(stream), tags, limit=limit), pieces, True) == expected
    assert framed_by(NativeFramer(len(stream), tags, lib, limit), pieces, True) == expected
    # A handle framed alone: the end is unknown (validate passes a huge total and does not finish).
    alone = framer_expected(stream, reference(stream, end_known=False, tags=tags, limit=limit), False, tags)
    assert framed_by(Framer(1 << 62, tags, limit=limit), pieces, False) == alone
    assert framed_by(NativeFramer(1 << 62, tags, lib, limit), pieces, False) == alone


@SETTINGS
@given(streams())
def test_record_reader_equals_the_reference(case: tuple[bytes, list[int], str]) -> None:
    stream, cuts, _ = case
    assert read_by_reader(cut(stream, cuts)) == reader_expected(stream, reference(stream, end_known=False))


@pytest.mark.parametrize("name", real_fixtures())
def test_real_channel_state_frames_the_same_in_every_reader(name: str, lib: ctypes.CDLL) -> None:
    channels = real_channels(name)
    assert not isinstance(channels, str), channels  # every release's _metadata must decode
    for ch in channels:
        stream, pieces = ch.stream, list(ch.pieces)
        w = reference(stream, end_known=True, tags=ch.tags)
        assert w.faults == [] and w.end == len(stream) and w.elements, ch.label  # Flink's own bytes are sound
        expected = framer_expected(stream, w, True, ch.tags)
        assert framed_by(Framer(len(stream), ch.tags), pieces, True) == expected
        assert framed_by(NativeFramer(len(stream), ch.tags, lib), pieces, True) == expected
        assert read_by_reader(pieces) == reader_expected(stream, reference(stream, end_known=False))


# ---------------------------------------------------------------------------------------------------
# analyze names an element fault


def test_analyze_reports_an_unknown_tag(tmp_path: Path) -> None:
    fx = fixture_named("2.3.0-unaligned")
    root = tmp_path / fx.name
    shutil.copytree(fx.root, root)
    chk = root / fx.info["checkpoint"]

    def run() -> Analysis:
        loaded = load_checkpoint(chk)
        loaded.resolve_files()
        return analyze(loaded, load_plan(root / "jobgraph.json"), keep_records=3)

    clean = run()
    ch = next(c for c in clean.channels if len(c.record_list) == 3 and c.problem is None)
    pos = ch.record_list[1]["position"]
    with open(pos["file"], "r+b") as f:
        f.seek(pos["offset"] + 4)  # the tag byte after the length field
        f.write(b"\x63")
    hit = next(c for c in run().channels if c.label == ch.label)
    assert hit.problem is not None and hit.problem.startswith("unknown StreamElement tag 99")
    assert hit.problem.endswith(f"{pos['file']}:{pos['offset']}")
    assert hit.elements == dict(Counter({"record": ch.elements["record"] - 1, "tag 99": 1}))


def test_length_fault_never_counts_negative_bytes() -> None:
    from spillway.formats.stream_elements import length_fault

    assert length_fault(15, -4) == "more than the 0 bytes left in the channel"
    assert length_fault(15, 20) is None


def test_a_length_fault_says_where_and_what() -> None:
    """The walk stops at a broken length field and names it: its position in the buffer, the value read and
    why it cannot be a length (router and self-check quote these in their messages)."""
    from spillway.formats.stream_elements import LengthFault, split_elements

    # a record (length 1: just its tag byte 1), a watermark (length 9: tag 2 + i64), then a length field of -5
    stream = b"\x00\x00\x00\x01\x01" + b"\x00\x00\x00\x09\x02" + (7).to_bytes(8, "big") + b"\xff\xff\xff\xfb\x01"
    walked = []
    with pytest.raises(LengthFault) as caught:
        walked.extend(split_elements(stream))
    assert walked == [(0, 1, 1), (5, 9, 2)]
    fault = caught.value
    assert (fault.position, fault.length, fault.why) == (18, -5, "not positive")
    assert str(fault) == "length field -5 at 18 is not positive"
    # the same field read as 0x7ffffffb: more than the stream holds, once the reader knows where it ends
    stream = stream[:18] + b"\x7f\xff\xff\xfb\x01"
    with pytest.raises(LengthFault) as caught:
        list(split_elements(stream, end=len(stream)))
    assert (caught.value.position, caught.value.length) == (18, 0x7FFFFFFB)
    assert caught.value.why == "more than the 1 bytes left in the channel"


def test_a_length_field_that_ends_the_buffer_is_still_checked() -> None:
    """Four bytes left are a whole length field: a broken one is a fault even with no element bytes after it."""
    from spillway.formats.stream_elements import LengthFault, split_elements

    stream = b"\x00\x00\x00\x01\x01" + b"\x00\x00\x00\x00"  # a record, then a length field of 0
    with pytest.raises(LengthFault) as caught:
        list(split_elements(stream))
    assert (caught.value.position, caught.value.length, caught.value.why) == (5, 0, "not positive")


def test_the_walk_stops_at_stop() -> None:
    from spillway.formats.stream_elements import split_elements

    record = b"\x00\x00\x00\x01\x01"
    stream = record * 4
    assert list(split_elements(stream, 5, 15)) == [(5, 1, 1), (10, 1, 1)]  # elements 1 and 2 only
    assert list(split_elements(stream, 0, 14)) == [(0, 1, 1), (5, 1, 1)]  # the third does not fit


def test_element_faults_name_kind_size_and_what_was_expected() -> None:
    """The fault class ("tag" or "size") and message of each way an element can be malformed; the sizes are
    the layouts of Flink's StreamElementSerializer (test_sizes_and_value_offsets_come_from_the_layouts)."""
    from spillway.formats.stream_elements import ElementFault

    assert element_fault(0, 8) == ElementFault("size", "record of 8 bytes, at least 9 expected")
    assert element_fault(1, 0) == ElementFault("size", "record of 0 bytes, at least 1 expected")
    assert element_fault(2, 10) == ElementFault("size", "watermark of 10 bytes, expected 9")
    assert element_fault(3, 28) == ElementFault("size", "latency marker of 28 bytes, expected 29")
    assert element_fault(99, 5) == ElementFault("tag", "unknown StreamElement tag 99 (valid: [0, 1, 2, 3, 4, 5, 6])")
    assert element_fault(6, 13, TAGS_BEFORE_1_19) == ElementFault(
        "tag", "unknown StreamElement tag 6 (valid: [0, 1, 2, 3, 4])"
    )
    assert element_fault(6, 13) is None and element_fault(0, 100) is None
