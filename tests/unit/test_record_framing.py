"""The record-framing walk, native (C) and pure Python, on streams cut at every possible place."""

from __future__ import annotations

import json
import random
import struct

import pytest
from support.fixtures import fixture_named

from spillway.formats.native import FrameBatch, frame_batch, framer_rules, library
from spillway.formats.record_framing import ALL_TAGS, TAGS_BEFORE_1_19, Framer, NativeFramer, make_framer


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


def _both(total: int, tags=ALL_TAGS, limit: int | None = None):
    lib = library()
    assert lib is not None
    return [Framer(total, tags, limit=limit), NativeFramer(total, tags, lib, limit)]


def test_faults_say_what_how_much_and_where() -> None:
    """Words, numbers and places of each fault. Sizes are those of Flink's StreamElementSerializer: a watermark
    is its tag byte and an 8-byte timestamp (9 bytes); tags 0-6 exist since 1.19."""
    good = _record(0, struct.pack(">q", 7) + b"abc")  # 16 bytes
    short_watermark = _record(2, b"\x00" * 4)  # 9 bytes, 5 of them payload
    unknown = _record(99, b"")  # 5 bytes
    half = struct.pack(">i", 20) + b"\x00xyz"  # announces 20 payload bytes, 4 are here
    stream = good + short_watermark + unknown + half
    cut = len(good) + 2  # the second piece starts inside the watermark's length prefix
    for framer in _both(len(stream) + 16):  # the last record's other 16 bytes are beyond this stream
        _run(framer, stream, [cut])
        assert [(f.kind, f.message, f.piece, f.position) for f in framer.faults] == [
            ("size", "watermark of 5 bytes, expected 9", 0, len(good)),
            ("tag", "unknown StreamElement tag 99 (valid: [0, 1, 2, 3, 4, 5, 6])", 1, len(good) + 9 - cut),
            ("truncated", "stream ends inside a record: 16 of 20 payload bytes missing", 1, len(good) + 14 - cut),
        ]
        assert framer.records == 3 and framer.in_record
        assert framer.elements == {0: 2, 2: 1, 99: 1}


def test_length_faults_name_the_bound_they_break() -> None:
    record = _record(0, struct.pack(">q", 7) + b"0123")  # length field 13
    cases = [
        ({"total": 10}, "record length 13 is more than the 6 bytes left in the channel"),
        ({"total": 100, "limit": 12}, "record length 13 is more than the 12 bytes an element may have here"),
    ]
    for args, message in cases:
        for framer in _both(**args):
            _run(framer, record + record, [3, 20])  # the third piece starts inside the second record
            assert [(f.kind, f.message, f.piece, f.position) for f in framer.faults] == [("length", message, 0, 0)]
            assert framer.records == 0  # nothing is counted after the boundaries are lost
            if isinstance(framer, Framer):
                assert framer.consumed == 2 * len(record)  # every byte fed counts, also after the fault
    for framer in _both(100):
        _run(framer, b"\x00\x00\x00\x00" + record, [])
        assert [(f.kind, f.message) for f in framer.faults] == [("length", "record length 0 is not positive")]


def test_a_stream_cut_inside_a_length_prefix_is_truncated_there() -> None:
    good = _record(0, struct.pack(">q", 7))
    for framer in _both(len(good) + 4):
        _run(framer, good + b"\x00\x00", [len(good) + 1])
        assert [(f.kind, f.message, f.piece, f.position) for f in framer.faults] == [
            ("truncated", "stream ends inside a length prefix (2 of 4 bytes)", 0, len(good))
        ]
        assert framer.records == 1 and framer.in_record


def test_a_reused_buffer_is_read_only_up_to_n() -> None:
    """validate feeds one read buffer over and over: only its first n bytes are the piece."""
    stream = _stream(random.Random(3), 40)
    for framer in _both(len(stream)):
        buffer = bytearray(b"\xff" * 64)  # stale bytes after n would read as a huge length or unknown tag
        for pos in range(0, len(stream), 64):
            piece = stream[pos : pos + 64]
            buffer[: len(piece)] = piece
            framer.feed(buffer, len(piece))
        framer.finish()
        assert framer.faults == [] and framer.records == 40


def _chunks(blob: bytes, offsets: list[int]) -> list[tuple[int, int]]:
    """(offset, payload length) of each chunk: a 4-byte big-endian length, then the payload."""
    return [(o, struct.unpack_from(">i", blob, o)[0]) for o in offsets]


def _frame_batch(
    channels: list[tuple[list[tuple[int, int, list[int], list[int]]], int, bool]],
) -> list[tuple[int, int] | None]:
    """validate's fast path: several channels, each (parts, payload length, must end on a boundary), in one
    native call; (elements, of them records) per channel or None where it did not frame cleanly."""
    batch = FrameBatch()
    for parts, total, complete in channels:
        batch.add(parts, total, complete)
    return frame_batch(batch, framer_rules(ALL_TAGS, None), bytearray(1 << 16))


def test_whole_file_chunks_frame_like_the_pieces() -> None:
    """The batched native framing (validate's fast path) on Flink's own channel-state file: the input handles
    of 1.20.3-unaligned as Flink's loader reports them (oracle.json); each starts on an element boundary."""
    fx = fixture_named("1.20.3-unaligned")
    oracle = json.loads(fx.oracle.read_text())
    inputs = [h for op in oracle["operators"] for s in op["subtasks"] for h in s["input_channel_state"]]
    assert len(inputs) == 2
    files, channels, expected = [], [], []
    for h in inputs:
        path = fx.checkpoint_dir / h["delegate"]["relative_path"]
        blob = path.read_bytes()
        chunks = _chunks(blob, h["offsets"])
        payload = b"".join(blob[o + 4 : o + 4 + n] for o, n in chunks)
        elements, records, pos = 0, 0, 0
        while pos + 4 <= len(payload) and pos + 4 + struct.unpack_from(">i", payload, pos)[0] <= len(payload):
            records += payload[pos + 4] in (0, 1)  # tags of stream records (stream-elements.md)
            pos += 4 + struct.unpack_from(">i", payload, pos)[0]
            elements += 1
        files.append(path.open("rb"))
        parts = [(files[-1].fileno(), 0, [o for o, _ in chunks], [n for _, n in chunks])]
        channels.append((parts, 1 << 62, False))  # alone, input state may end mid-record
        expected.append((elements, records))
    try:
        assert _frame_batch(channels) == expected
        assert min(r for _, r in expected) > 0
    finally:
        for f in files:
            f.close()


def test_whole_file_chunks_count_as_pieces(tmp_path) -> None:
    """A file of two chunks ([length][payload], after a 4-byte version), each holding whole elements; each
    channel of a batch is framed on its own, whatever its neighbours hold."""
    one, two = _record(0, struct.pack(">q", 1)), _record(2, struct.pack(">q", 2)) + _record(1, b"")
    data = struct.pack(">i", 0) + struct.pack(">i", len(one)) + one + struct.pack(">i", len(two)) + two
    path = tmp_path / "channel-state"
    path.write_bytes(data)
    second = 8 + len(one)
    with path.open("rb") as f:
        fd = f.fileno()
        whole = [(fd, 0, [4, second], [len(one), len(two)])]
        assert _frame_batch(
            [
                (whole, len(one) + len(two), True),  # 3 elements (2 records, a watermark), ends on a boundary
                # An offset one byte off reads a length field of 0x00000900 (2304): more than the channel holds.
                ([(fd, 0, [5], [len(one)])], len(one), False),
                ([], 0, True),  # nothing to read
                ([(fd, 0, [4], [len(one) - 1])], len(one) - 1, True),  # ends inside its only element
                ([(fd, 0, [4], [len(one) - 1])], 1 << 62, False),  # the same, alone: the rest may follow
                ([(fd, 0, [second], [len(two) + 1])], 1 << 62, False),  # runs past the end of the file
                ([(fd, 0, [4], [len(one)]), (fd, 0, [second], [len(two)])], len(one) + len(two), True),  # 2 parts
            ]
        ) == [(3, 2), None, (0, 0), None, (0, 0), None, (3, 2)]


def test_make_framer_keeps_the_rules_it_is_given() -> None:
    framer = make_framer(10, TAGS_BEFORE_1_19, 6)
    assert isinstance(framer, NativeFramer)
    assert (framer.total, framer.tags, framer.limit) == (10, TAGS_BEFORE_1_19, 6)
    framer.feed(bytearray(_record(5, b"\x01")))  # RecordAttributes: a 1.19+ tag, unknown before
    assert [f.kind for f in framer.faults] == ["tag"]


@pytest.mark.parametrize("seed", range(20))
def test_both_implementations_agree_on_damaged_streams(seed: int) -> None:
    """Random streams with random damage (tags, lengths, a cut-off end), cut into random pieces: the C
    framer's fast loop and its general steps must leave the same counts, faults and state as ``Framer``."""
    rng = random.Random(1000 + seed)
    data = bytearray(_stream(rng, 200))
    starts, pos = [], 0
    while pos < len(data):
        starts.append(pos)
        pos += 4 + struct.unpack_from(">i", data, pos)[0]
    for start in rng.sample(starts, 3):
        where = rng.choice(["tag", "tag", "length"])
        if where == "tag":
            data[start + 4] = rng.choice([0x63, 2, 4, 5])  # unknown, or known with the wrong size (mostly)
        else:
            data[start : start + 4] = struct.pack(">i", rng.choice([0, -5, 1 << 30, len(data)]))
    total = len(data) + rng.choice([0, 0, 3, 100])  # sometimes the stream claims more than is fed
    cuts = sorted(set(rng.sample(range(1, len(data)), rng.randrange(1, 60))))
    finish = rng.random() < 0.8
    results = []
    for framer in _framers(total):
        _run(framer, bytes(data), cuts, finish=finish)
        faults = [(f.kind, f.message, f.piece, f.position) for f in framer.faults]
        results.append((framer.records, framer.stream_records, framer.elements, faults, framer.in_record))
    assert results[0] == results[1]
    assert results[0][3], "the damage must show"


def test_make_framer_falls_back_to_python_without_the_native_library(monkeypatch) -> None:
    from spillway.formats import native

    monkeypatch.setattr(native, "library", lambda: None)  # as on a machine without a C compiler
    framer = make_framer(10, TAGS_BEFORE_1_19, 6)
    assert type(framer) is Framer
    assert (framer.total, framer.tags, framer.limit) == (10, TAGS_BEFORE_1_19, 6)


def test_a_length_field_is_a_signed_java_int() -> None:
    """Flink reads the length with DataInput.readInt: 0xFFFFFFFF is -1, not 4294967295. Read whole and split."""
    stream = b"\xff\xff\xff\xff" + b"\x00" * 8
    for cuts in ([], [2]):
        for framer in _both(len(stream)):
            _run(framer, stream, cuts)
            assert [(f.kind, f.message) for f in framer.faults] == [("length", "record length -1 is not positive")]


def test_bytes_before_a_tag_count_towards_the_position() -> None:
    """A piece that ends between a length field and its tag byte still counts: the next record's room to the
    channel's end is measured from the right place."""
    a = _record(0, struct.pack(">q", 1))  # 13 bytes
    b = _record(0, struct.pack(">q", 2) + b"xyz")  # 16 bytes, 12 after its length field
    stream = a + b
    for framer in _both(len(stream) - 1):  # one byte of b is missing
        _run(framer, stream, [4, 8])  # the first piece is a's length field alone; b's is in the third
        assert [(f.kind, f.message, f.piece, f.position) for f in framer.faults] == [
            ("length", "record length 12 is more than the 11 bytes left in the channel", 2, len(a) - 8)
        ]


def test_bytes_and_bytearrays_frame_alike() -> None:
    stream = _stream(random.Random(5), 30)
    cuts = [7, 100, 101, len(stream) // 2]
    results = []
    for as_bytes in (False, True):
        for framer in _both(len(stream)):
            prev = 0
            for c in [*cuts, len(stream)]:
                piece = stream[prev:c]
                framer.feed(piece if as_bytes else bytearray(piece))
                prev = c
            framer.finish()
            results.append((framer.records, framer.faults, framer.elements))
    assert results[0][0] == 30 and all(r == results[0] for r in results)


def test_stream_records_leave_out_watermarks_other_events_and_a_record_in_progress() -> None:
    """Records are tags 0 and 1 (docs/format/stream-elements.md): a watermark (2), a watermark status (4) and a
    latency marker (3) are elements, not records; a record whose bytes have not all arrived is not counted yet
    (input state alone may end inside one)."""
    stream = (
        _record(0, struct.pack(">q", 1) + b"a")
        + _record(2, struct.pack(">q", 5))
        + _record(1, b"b")
        + _record(4, struct.pack(">i", 0))
        + _record(3, bytes(28))
        + _record(1, b"c")
    )
    cut = _record(0, struct.pack(">q", 2) + b"xyz")[:9]  # a record with timestamp, its value not yet here
    for framer in _both(1 << 40):
        _run(framer, stream + cut, [3, 20, 31], finish=False)
        assert (framer.records, framer.stream_records, framer.in_record) == (6, 3, True)


def _counted_stream(rng: random.Random, n: int) -> tuple[bytes, int, int]:
    """n elements (records, watermarks, latency markers) and how many of them are records (tags 0 and 1)."""
    out, records = bytearray(), 0
    for i in range(n):
        kind = rng.random()
        if kind < 0.7:
            out += _record(0, struct.pack(">q", i) + b"v" * rng.randrange(0, 300))
            records += 1
        elif kind < 0.8:
            out += _record(1, b"w" * rng.randrange(0, 40))
            records += 1
        elif kind < 0.9:
            out += _record(2, struct.pack(">q", i))
        else:
            out += _record(4, struct.pack(">i", 0))
    return bytes(out), n, records


def _cut(rng: random.Random, data: bytes) -> list[bytes]:
    """Chunk payloads of random sizes, now and then one longer than the test's 256-byte read buffer."""
    out, pos = [], 0
    while pos < len(data):
        size = rng.choice((rng.randrange(1, 64), rng.randrange(64, 200), rng.randrange(300, 900)))
        out.append(data[pos : pos + size])
        pos += size
    return out


@pytest.mark.parametrize("seed", range(12))
def test_file_by_file_framing_counts_what_was_written(tmp_path, seed: int) -> None:
    """validate's file-order path: the chunks of many channels interleaved in two files (first parts in one, second
    parts in the other, cut mid-element), each file read front to back through a small buffer. Clean channels count
    the elements and records they were written with; a channel with a corrupted length field, or one cut short, does
    not frame cleanly (None) — whatever its neighbours in the same reads hold."""
    from spillway.formats.native import FileFraming

    rng = random.Random(seed)
    channels = []
    for c in range(8):
        data, elements, records = _counted_stream(rng, rng.randrange(0, 60))
        expected: tuple[int, int] | None = (elements, records)
        if c % 4 == 1 and data:
            at = 0  # the first element's length field: claims more than the channel holds
            data = data[:at] + b"\x7f" + data[at + 1 :]
            expected = None
        if c % 4 == 2 and len(data) > 10:
            data = data[:-3]  # ends inside its last element
            expected = None
        cut = rng.randrange(0, len(data) + 1)
        channels.append((_cut(rng, data[:cut]), _cut(rng, data[cut:]), len(data), expected))
    files, parts = [], []
    for side in (0, 1):
        queue = [(c, k) for c, ch in enumerate(channels) for k in range(len(ch[side]))]
        order, nexts = [], [0] * len(channels)
        while queue:  # interleave the channels, each channel's chunks kept in stream order
            c = rng.choice([c for c, _ in queue])
            queue.remove((c, nexts[c]))
            order.append((c, nexts[c]))
            nexts[c] += 1
        blob, where = bytearray(struct.pack(">i", 0)), [([], []) for _ in channels]
        for c, k in order:
            payload = channels[c][side][k]
            where[c][0].append(len(blob))
            where[c][1].append(len(payload))
            blob += struct.pack(">i", len(payload)) + payload
        path = tmp_path / f"side-{side}"
        path.write_bytes(bytes(blob))
        files.append(path.open("rb"))
        parts.append(where)
    try:
        for gap in (0, 1 << 16):
            framing = FileFraming(framer_rules(ALL_TAGS, None))
            framing.MAX_GAP = gap
            for c, (_, _, total, _) in enumerate(channels):
                framing.add([(files[s].fileno(), 0, *parts[s][c]) for s in (0, 1)], total, True)
            framing.start()
            for phase, listed in enumerate(framing.files):
                for file in listed:
                    framing.frame_file(phase, file, bytearray(256))
            assert framing.results() == [expected for *_, expected in channels]
    finally:
        for f in files:
            f.close()
