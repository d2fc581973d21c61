"""Rescale frames exactly as the reference walk of ``stream_elements`` does, and refuses what it refuses.

Compared with the reference (``tests/support/element_streams.py``) on real fixture channel state and on
generated streams: ``uniform_records`` (numpy runs), the self-check's ``scan_elements`` and the router's
``route_source``, each with the numpy path on and off. The router used to drop an element with an unknown
tag and to route elements of the wrong size; it now refuses both, like every other reader.
"""

from __future__ import annotations

import random
import zlib
from collections import Counter
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st
from support.element_streams import (
    SETTINGS,
    Walk,
    framed,
    real_channels,
    real_fixtures,
    record_positions,
    reference,
    streams,
)

from spillway.formats.channel_file import FileBlob, build_channel_file
from spillway.formats.stream_elements import MAX_ELEMENT, RECORD_TAGS, element_fault, element_name
from spillway.formats.uniform_runs import uniform_records
from spillway.rescale.element_scan import scan_elements
from spillway.rescale.plan import KEEP, EdgePlan, PartRef, SourceChannel
from spillway.rescale.route_error import RouteError
from spillway.rescale.router import RouteStats, route_source
from spillway.rescale.verify import _scan_channel

NEVER = 10**9  # a minimum run length that keeps the numpy paths off
KEEP_EDGE = EdgePlan(0, "a -> b", "FORWARD", KEEP, 0, 0, 1, 1, 1, 1, 128, "b" * 32, "a" * 32)


def scan_expected(stream: bytes, w: Walk) -> tuple:
    """(end, records, crc, fault message) the self-check's scan must report: it stops at the first fault."""
    records = crc = 0
    for pos, length, tag in w.elements:
        fault = element_fault(tag, length)
        if fault is not None:
            return pos, records, crc, fault.message
        if tag in RECORD_TAGS:
            records += 1
            crc += zlib.crc32(stream[pos + 4 : pos + 4 + length])
    return w.end, records, crc, ""


def uniform_expected(w: Walk, index: int, min_rows: int) -> int:
    """Rows ``uniform_records`` must return at the ``index``-th element (0: None)."""
    pos, length, tag = w.elements[index]
    if tag not in RECORD_TAGS or element_fault(tag, length) is not None or length > MAX_ELEMENT:
        return 0
    k = 0
    for p2, l2, t2 in w.elements[index:]:
        if l2 != length or t2 != tag:
            break
        assert p2 == pos + k * (4 + length)
        k += 1
    return k if k >= min_rows else 0


def _source(stream: bytes, chunk: int) -> SourceChannel:
    data, offsets = build_channel_file([stream[i : i + chunk] for i in range(0, len(stream), chunk)])
    return SourceChannel(0, 0, 0, 0, (PartRef(None, 0, len(data), tuple(offsets), data),), len(stream), "t")


@SETTINGS
@given(streams(), st.integers(1, 40))
def test_uniform_records_equal_the_reference(case: tuple[bytes, list[int], str], min_rows: int) -> None:
    stream, _, _ = case
    w = reference(stream, end_known=False)
    view = memoryview(stream)
    for i, (pos, length, _) in enumerate(w.elements):
        rows = uniform_records(view, pos, len(stream), min_rows)
        want = uniform_expected(w, i, min_rows)
        assert (0 if rows is None else rows.shape[0]) == want
        if rows is not None:
            assert rows.tobytes() == stream[pos : pos + want * (4 + length)]
        del rows


@SETTINGS
@given(streams())
def test_scan_elements_equals_the_reference(case: tuple[bytes, list[int], str]) -> None:
    stream, _, _ = case
    want = scan_expected(stream, reference(stream, end_known=False))
    for min_run in (2, NEVER):
        s = scan_elements(memoryview(stream), min_run=min_run)
        assert (s.end, s.records, s.crc, s.fault) == want


@SETTINGS
@given(streams(), st.sampled_from([7, 64, 4096]), st.sampled_from([2, NEVER]), st.sampled_from([None, 100]))
def test_the_router_routes_what_the_reference_accepts_and_refuses_the_rest(
    case: tuple[bytes, list[int], str], chunk: int, min_run: int, block: int | None
) -> None:
    stream, _, _ = case
    w = reference(stream, end_known=False, limit=MAX_ELEMENT)
    stats = RouteStats()
    runs = route_source(_source(stream, chunk), KEEP_EDGE, stats, block=block, min_run=min_run)
    if w.faults:
        with pytest.raises(RouteError, match="corrupt framing"):
            list(runs)
        return
    data = b"".join(r.data for r in runs)
    records = record_positions(w)
    assert data == b"".join(stream[p : p + 4 + n] for p, n in records)
    assert stats.records == len(records)
    assert stats.crc == sum(zlib.crc32(stream[p + 4 : p + 4 + n]) for p, n in records)
    assert stats.dropped == dict(Counter(element_name(t) for _, _, t in w.elements if t not in RECORD_TAGS))
    assert stats.leftover == len(stream) - w.end


def test_the_router_refuses_an_unknown_tag_it_used_to_drop() -> None:
    stream = framed(b"\x01" + bytes(8)) * 40 + framed(b"\x63abc") + framed(b"\x01" + bytes(8))
    with pytest.raises(RouteError, match=r"unknown StreamElement tag 99 .* at payload byte 520 \(corrupt framing"):
        list(route_source(_source(stream, 100), KEEP_EDGE, RouteStats()))


def test_the_router_refuses_an_element_of_the_wrong_size() -> None:
    stream = framed(b"\x01" + bytes(8)) * 3 + framed(b"\x02" + bytes(4))  # a watermark of 5 bytes, not 9
    with pytest.raises(RouteError, match=r"watermark of 5 bytes, expected 9 at payload byte 39"):
        list(route_source(_source(stream, 100), KEEP_EDGE, RouteStats()))


def test_the_self_check_reports_an_unknown_tag(tmp_path: Path) -> None:
    stream = framed(b"\x01" + bytes(8)) * 40 + framed(b"\x63abc")
    data, offsets = build_channel_file([stream[i : i + 100] for i in range(0, len(stream), 100)])
    (tmp_path / "f").write_bytes(data)
    blob = FileBlob(tmp_path / "f")
    try:
        scan, _, problem = _scan_channel(blob, offsets, None, 0)
    finally:
        blob.close()
    assert scan.records == 40 and problem.startswith("unknown StreamElement tag 99") and problem.endswith("offset 520")


@pytest.mark.parametrize("name", real_fixtures())
def test_real_channel_state_is_scanned_and_routed_whole(name: str) -> None:
    channels = real_channels(name)
    assert not isinstance(channels, str), channels  # every release's _metadata must decode
    rng = random.Random(name)
    for ch in channels:
        stream = ch.stream
        w = reference(stream, end_known=True, tags=ch.tags)
        for min_run in (2, NEVER):
            s = scan_elements(memoryview(stream), min_run=min_run)
            assert (s.end, s.records, s.crc, s.fault) == scan_expected(stream, w)
            stats = RouteStats()
            src = _source(stream, rng.choice([97, 4096]))
            routed = b"".join(r.data for r in route_source(src, KEEP_EDGE, stats, min_run=min_run))
            records = record_positions(w)
            assert routed == b"".join(stream[p : p + 4 + n] for p, n in records)
            assert stats.records == len(records) and stats.leftover == 0
