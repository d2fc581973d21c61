"""``route_source`` (spillway/rescale/router.py) on small hand-built channels: where each element goes under
every fixed rule, which markers are kept or dropped, how runs are cut and numbered, and what a refusal says.

Expected values come from the stream the test builds (element positions, bytes, zlib.crc32 of each record)
and from the routing rules of docs/format/rescaling.md as Flink's partitioners define them: GLOBAL sends every
record to subtask 0, BROADCAST to every subtask, FORWARD keeps the subtask. Every case runs element by
element and through the numpy path (``min_run``), with blocks small enough to cut elements.
"""

from __future__ import annotations

import zlib

import pytest

from spillway.formats.channel_file import build_channel_file
from spillway.rescale.plan import BALANCED, BROADCAST, GLOBAL, KEEP, EdgePlan, PartRef, SourceChannel
from spillway.rescale.route_error import RouteError
from spillway.rescale.router import RUN_LIMIT, RouteStats, Run, route_source

NEVER = 10**9  # a minimum run length that keeps the numpy path off
PATHS = [pytest.param(NEVER, id="per-element"), pytest.param(2, id="numpy")]


def _long(v: int) -> bytes:
    return v.to_bytes(8, "big", signed=True)


def _framed(element: bytes) -> bytes:
    return len(element).to_bytes(4, "big") + element


RECORDS = [b"\x01" + _long(i) for i in range(6)]  # tag 1: a record without timestamp, a Long value
WATERMARK = b"\x02" + _long(1000)
STATUS = b"\x04" + (0).to_bytes(4, "big")  # watermark status IDLE/ACTIVE: tag 4 + i32
LATENCY = b"\x03" + bytes(28)
ATTRIBUTES = b"\x05\x00"  # record attributes (1.19+): tag 5 + a boolean
INTERNAL_WM = b"\x06" + bytes(12)  # internal watermark (1.19+): tag 6 + i32 + i64
# records in two uniform runs, with every kind of non-record element in between
ELEMENTS = [*RECORDS[:3], WATERMARK, LATENCY, STATUS, ATTRIBUTES, INTERNAL_WM, *RECORDS[3:]]
MARKS = [WATERMARK, STATUS]


def _source(elements: list[bytes], *, chunk: int = 7, segments: tuple = (), watermark_targets=frozenset()):
    return _source_of(b"".join(_framed(e) for e in elements), chunk, segments, watermark_targets)


def _source_of(stream: bytes, chunk: int = 7, segments: tuple = (), watermark_targets=frozenset()):
    """The stream in chunks of ``chunk`` bytes; sid 3, old upstream subtask 1, old downstream subtask 1."""
    data, offsets = build_channel_file([stream[i : i + chunk] for i in range(0, len(stream), chunk)])
    part = PartRef(None, 0, len(data), tuple(offsets), data)
    return SourceChannel(3, 0, 1, 1, (part,), len(stream), "a -> b #1>1", segments, watermark_targets)


def _edge(rule: str, new_down: int = 3) -> EdgePlan:
    # new upstream parallelism 2: old upstream subtask 1 stays new upstream subtask 1
    return EdgePlan(0, "a -> b", "X", rule, 0, 0, 2, 2, 2, new_down, 128, "b" * 32, "a" * 32)


def _route(src: SourceChannel, ep: EdgePlan, min_run: int, block: int = 16) -> tuple[list[Run], RouteStats]:
    stats = RouteStats()
    return list(route_source(src, ep, stats, block=block, min_run=min_run)), stats


def _by_target(runs: list[Run]) -> dict[int, bytes]:
    out: dict[int, list[Run]] = {}
    for r in runs:
        assert (r.up, r.sid) == (1, 3)  # new upstream subtask of old subtask 1 with new_up_p 2; the source's sid
        out.setdefault(r.down, []).append(r)
    return {t: b"".join(bytes(r.data) for r in sorted(rs, key=lambda r: r.seq)) for t, rs in out.items()}


def _crc(records: list[bytes]) -> int:
    return sum(zlib.crc32(r) for r in records)


@pytest.mark.parametrize("min_run", PATHS)
@pytest.mark.parametrize(
    ("rule", "record_targets"),
    [(GLOBAL, [0]), (BROADCAST, [0, 1, 2]), (KEEP, [1])],
)
def test_fixed_rules_route_records_and_keep_marks_only_where_this_source_alone_feeds(
    rule: str, record_targets: list[int], min_run: int
) -> None:
    # (1, 0) and (1, 2) are fed by this source alone; (0, 1) is another new upstream subtask's channel
    src = _source(ELEMENTS, watermark_targets=frozenset({(1, 2), (1, 0), (0, 1)}))
    runs, stats = _route(src, _edge(rule), min_run)
    kept = [0, 2]
    expected = {}
    for t in sorted(set(record_targets) | set(kept)):
        expected[t] = b"".join(
            _framed(e) for e in ELEMENTS if (e in RECORDS and t in record_targets) or (e in MARKS and t in kept)
        )
    assert _by_target(runs) == expected
    assert (stats.records, stats.record_bytes) == (6, 6 * 9)
    assert stats.crc == _crc(RECORDS) * len(record_targets)  # a record sent n times counts n times
    assert stats.kept_markers == 2
    assert stats.dropped == {"latency marker": 1, "record attributes": 1, "internal watermark": 1}
    assert stats.leftover == 0
    per_target_records = {t: sum(r.records for r in runs if r.down == t) for t in expected}
    assert per_target_records == {t: (6 if t in record_targets else 0) for t in expected}
    per_target_crc = {t: sum(r.crc for r in runs if r.down == t) for t in expected}
    assert per_target_crc == {t: (_crc(RECORDS) if t in record_targets else 0) for t in expected}


@pytest.mark.parametrize("min_run", PATHS)
def test_marks_are_dropped_where_no_new_channel_has_this_source_alone(min_run: int) -> None:
    src = _source(ELEMENTS, watermark_targets=frozenset({(0, 1)}))  # only another upstream's channel
    runs, stats = _route(src, _edge(KEEP), min_run)
    assert _by_target(runs) == {1: b"".join(_framed(r) for r in RECORDS)}
    assert stats.kept_markers == 0
    assert stats.dropped == {
        "watermark": 1,
        "latency marker": 1,
        "watermark status": 1,
        "record attributes": 1,
        "internal watermark": 1,
    }


@pytest.mark.parametrize("block", [16, 4096])  # 4096: whole uniform runs reach the numpy path
@pytest.mark.parametrize("min_run", PATHS)
def test_balanced_segments_take_the_records_whose_first_byte_they_hold(min_run: int, block: int) -> None:
    records = [b"\x01" + _long(i) for i in range(10)]  # 13 framed bytes each: record i starts at 13 * i
    # payload bytes [0, 39) -> subtask 2, [39, 78) -> 0, the rest -> 1; records 3 and 6 start exactly at a
    # limit, which is exclusive
    src = _source(records, segments=((39, 2), (78, 0), (1 << 40, 1)))
    runs, stats = _route(src, _edge(BALANCED), min_run, block)
    starts = [13 * i for i in range(10)]
    want = {2: [i for i, s in enumerate(starts) if s < 39], 0: [i for i, s in enumerate(starts) if 39 <= s < 78]}
    want[1] = [i for i in range(10) if i not in want[2] + want[0]]
    assert want == {2: [0, 1, 2], 0: [3, 4, 5], 1: [6, 7, 8, 9]}
    assert _by_target(runs) == {t: b"".join(_framed(records[i]) for i in idx) for t, idx in want.items()}
    assert stats.crc == _crc(records)


@pytest.mark.parametrize("min_run", PATHS)
def test_runs_are_cut_at_the_run_limit_and_numbered_in_order(min_run: int) -> None:
    # 1024 framed bytes each: 256 of them are exactly RUN_LIMIT, and a run leaves as soon as it holds that much
    records = [b"\x01" + i.to_bytes(4, "big") + bytes(1015) for i in range(600)]
    stream = b"".join(_framed(r) for r in records)
    assert RUN_LIMIT == 256 * 1024
    runs, _ = _route(_source(records, chunk=4096), _edge(KEEP), min_run, block=64 * 1024)
    assert [r.seq for r in runs] == list(range(len(runs)))
    assert b"".join(bytes(r.data) for r in runs) == stream
    assert [r.records for r in runs] == [256, 256, 88]
    assert sum(r.crc for r in runs) == _crc(records)


@pytest.mark.parametrize("min_run", PATHS)
def test_an_unfinished_element_at_the_end_is_left_over(min_run: int) -> None:
    whole = b"".join(_framed(r) for r in RECORDS[:4])
    runs, stats = _route(_source_of(whole + _framed(RECORDS[4])[:6]), _edge(KEEP), min_run)  # 6 of 13 bytes
    assert _by_target(runs) == {1: whole}
    assert (stats.records, stats.leftover) == (4, 6)


@pytest.mark.parametrize("min_run", PATHS)
def test_a_bad_length_field_is_refused_at_its_payload_byte(min_run: int) -> None:
    # three records, then a length field of -5: at payload byte 3 * 13 = 39 (in a later block than the first)
    stream = b"".join(_framed(r) for r in RECORDS[:3]) + (-5).to_bytes(4, "big", signed=True) + b"\x01"
    with pytest.raises(RouteError) as caught:
        _route(_source_of(stream), _edge(KEEP), min_run)
    assert str(caught.value) == (
        "a -> b #1>1: element length -5 at payload byte 39 (corrupt framing; run spillway validate)"
    )


@pytest.mark.parametrize("min_run", PATHS)
def test_an_unknown_tag_is_refused_at_its_payload_byte(min_run: int) -> None:
    elements = [*RECORDS[:4], b"\x63" + bytes(3)]  # tag 99 at payload byte 4 * 13 = 52
    src = _source(elements)
    with pytest.raises(RouteError) as caught:
        _route(src, _edge(KEEP), min_run)
    assert str(caught.value).startswith("a -> b #1>1: unknown StreamElement tag 99 ")
    assert str(caught.value).endswith(" at payload byte 52 (corrupt framing; run spillway validate)")


@pytest.mark.parametrize("min_run", PATHS)
def test_a_length_field_above_the_element_limit_is_refused_where_it_is_read(min_run: int) -> None:
    """0x7fffffff is a valid int but more than the router holds in memory (MAX_ELEMENT): refused at the field,
    not after buffering the rest of the channel."""
    stream = b"".join(_framed(r) for r in RECORDS[:2]) + (0x7FFFFFFF).to_bytes(4, "big") + b"\x01" * 40
    with pytest.raises(RouteError) as caught:
        _route(_source_of(stream), _edge(KEEP), min_run)
    assert str(caught.value) == (
        "a -> b #1>1: element length 2147483647 at payload byte 26 (corrupt framing; run spillway validate)"
    )
