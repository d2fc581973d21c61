"""The self-check's incremental framer (spillway.rescale.verify.ChannelScanner), fed the way the Spark
writer's pieces feed it: in parts, from a base offset, with bytes lost. Every stream is built here from the
element layout (length field, tag 1 = a record without timestamp, an 8-byte value), so counts and offsets
follow from how the test built it."""

from __future__ import annotations

import struct

from support.element_streams import framed

from spillway.formats.stream_elements import MAX_ELEMENT
from spillway.rescale.verify import ChannelScanner

RECORD = framed(b"\x01" + bytes(8))  # 13 bytes
assert len(RECORD) == 13


def _scan(*parts: bytes, where: str = "", base: int = 0) -> tuple[tuple[int, int, int, str], ChannelScanner]:
    scanner = ChannelScanner(None, 0, where, base)
    for p in parts:
        scanner.feed(p)
    return scanner.finish(), scanner


def test_parts_cut_inside_elements_frame_as_one_stream() -> None:
    stream = RECORD * 10
    (records, crc, misplaced, fault), scanner = _scan(stream[:20], stream[20:57], stream[57:])
    assert (records, misplaced, fault) == (10, 0, "")
    assert scanner.length == len(stream) == 130
    (records2, crc2, _, _), _ = _scan(stream)
    assert (records2, crc2) == (records, crc)  # the same stream in one part: the same records and fingerprint


def test_a_truncated_last_element_is_a_fault_with_its_size_and_place() -> None:
    (records, _, _, fault), _ = _scan(RECORD * 3 + RECORD[:-3], where="f.bin (gate 0, input channel 1)")
    assert records == 3
    assert fault == "f.bin (gate 0, input channel 1): 10 bytes after the last whole element"
    (_, _, _, bare), _ = _scan(RECORD + RECORD[:5])
    assert bare == "5 bytes after the last whole element"  # no where: no prefix


def test_a_fault_names_its_offset_in_the_whole_channel() -> None:
    bad = framed(b"\x63abc")  # unknown tag 99
    (records, _, _, fault), _ = _scan(RECORD * 4 + bad + RECORD, base=1000)
    assert records == 4
    assert fault.startswith("unknown StreamElement tag 99") and fault.endswith("at payload offset 1052")


def test_an_impossible_length_field_at_a_part_end_stops_at_once() -> None:
    """A length field beyond any element the router writes: reported where it is, not as trailing bytes."""
    field = struct.pack(">i", MAX_ELEMENT + 1)
    (records, _, _, fault), scanner = _scan(RECORD * 2 + field, base=7)
    assert records == 2 and fault == f"length field {MAX_ELEMENT + 1} at payload offset 33"
    assert scanner.fault  # set by the scan itself, before finish
    ok = struct.pack(">i", MAX_ELEMENT)  # the largest allowed: just an element still to come
    (_, _, _, pending), _ = _scan(RECORD + ok, base=7)
    assert pending == "4 bytes after the last whole element"
    (_, _, _, negative), _ = _scan(RECORD + struct.pack(">i", -2))
    assert negative == "length field -2 at payload offset 13"


def test_lost_bytes_stop_the_framing_and_are_the_fault() -> None:
    scanner = ChannelScanner(None, 0, "f.bin")
    scanner.feed(RECORD * 2)
    scanner.lost("piece 2 could not be read")
    scanner.feed(b"garbage")  # ignored after the loss
    records, _, _, fault = scanner.finish()
    assert fault == "f.bin: piece 2 could not be read" and records == 0


def test_two_parts_and_several_blocks_keep_counts_and_offsets() -> None:
    from spillway.rescale.channel_reader import BLOCK

    stream = RECORD * 8
    (records, _, _, fault), _ = _scan(stream[:50], stream[50:])
    assert (records, fault) == (8, "")
    n = BLOCK // len(RECORD) * 3  # about three blocks of records, each block scanned as it fills
    bad = framed(b"\x63abc")
    body = RECORD * n
    (records, _, _, fault), scanner = _scan(*[body[i : i + 4096] for i in range(0, len(body), 4096)], bad)
    assert records == n and scanner.length == len(body) + len(bad)
    assert fault.endswith(f"at payload offset {len(body)}")
