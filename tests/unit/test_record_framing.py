"""The record-framing walk, native (C) and pure Python, on streams cut at every possible place."""

from __future__ import annotations

import random
import struct

import pytest

from spillway.formats.native import library
from spillway.formats.record_framing import ALL_TAGS, TAGS_BEFORE_1_19, Framer, NativeFramer


def _record(tag: int, body: bytes) -> bytes:
    payload = bytes([tag]) + body
    return struct.pack(">i", len(payload)) + payload


def _stream(rng: random.Random, n: int) -> bytes:
    out = bytearray()
    for i in range(n):
        kind = rng.random()
        if kind < 0.8:
            out += _record(0, struct.pack(">q", i) + b"v" * rng.randrange(0, 200))
        elif kind < 0.9:
            out += _record(2, struct.pack(">q", i))
        else:
            out += _record(4, struct.pack(">i", 0))
    return bytes(out)


def _framers(total: int, tags=ALL_TAGS):
    yield Framer(total, tags)
    lib = library()
    assert lib is not None, "the native framer must build on the test machines (gcc is there)"
    yield NativeFramer(total, tags, lib)


def _run(framer, data: bytes, cuts: list[int], finish: bool = True):
    prev = 0
    for c in [*cuts, len(data)]:
        framer.feed(bytearray(data[prev:c]), c - prev)
        prev = c
    if finish:
        framer.finish()
    return framer


@pytest.mark.parametrize("seed", range(5))
def test_clean_streams_frame_exactly_wherever_they_are_cut(seed: int) -> None:
    rng = random.Random(seed)
    data = _stream(rng, 300)
    cuts = [*rng.sample(range(1, len(data)), 40), 1, 2, 3]  # incl. cuts inside length prefixes
    for framer in _framers(len(data)):
        _run(framer, data, sorted(set(cuts)))
        assert framer.faults == [] and framer.records == 300 and not framer.in_record


def test_faults_are_the_same_in_both_implementations() -> None:
    rng = random.Random(9)
    data = bytearray(_stream(rng, 50))
    # record 10: unknown tag; record 20: watermark of the wrong size; record 30: absurd length.
    pos, starts = 0, []
    while pos < len(data):
        starts.append(pos)
        pos += 4 + struct.unpack_from(">i", data, pos)[0]
    data[starts[10] + 4] = 0x63
    data[starts[30] : starts[30] + 4] = struct.pack(">i", 1 << 30)
    results = []
    for framer in _framers(len(data)):
        _run(framer, bytes(data), [starts[5] + 2, starts[25] + 7])
        results.append([(f.kind, f.piece, f.position) for f in framer.faults])
    assert results[0] == results[1]
    kinds = [k for k, _, _ in results[0]]
    assert kinds == ["tag", "length"]
    assert results[0][1][1:] == (2, starts[30] - (starts[25] + 7))


def test_truncated_stream_and_old_release_tags() -> None:
    data = _record(0, b"\x00" * 8 + b"abc") + _record(5, b"\x01")  # RecordAttributes: 1.19+ only
    tail = b"\x00\x00"  # half a length prefix
    for framer in _framers(len(data) + len(tail), TAGS_BEFORE_1_19):
        _run(framer, data + tail, [len(data) + 1])
        assert [f.kind for f in framer.faults] == ["tag", "truncated"]
    # A record that claims more than the channel holds is caught where its length is read.
    for framer in _framers(len(data) + 10):
        _run(framer, data + b"\x00\x00\x00\x14abcdef", [])
        assert [f.kind for f in framer.faults] == ["length"]
