"""Decoders for the user values of common Flink TypeSerializers (spec 07 §7.5): String, Long, Int,
Boolean. Anything else is shown as hex by callers. Each returns (value, bytes consumed)."""

from __future__ import annotations

import struct


class ValueError_(ValueError):
    pass


def _varint(data: bytes, pos: int) -> tuple[int, int]:
    shift = value = 0
    while True:
        if pos >= len(data):
            raise ValueError_("varint runs past the end of the value")
        b = data[pos]
        pos += 1
        value |= (b & 0x7F) << shift
        if b < 0x80:
            return value, pos
        shift += 7
        if shift > 35:
            raise ValueError_("varint too long")


def read_string(data: bytes, pos: int = 0) -> tuple[str | None, int]:
    """``StringValue.writeString``: varint (length + 1, 0 = null), then each UTF-16 unit as a varint."""
    n, pos = _varint(data, pos)
    if n == 0:
        return None, pos
    units = []
    for _ in range(n - 1):
        u, pos = _varint(data, pos)
        units.append(u)
    raw = b"".join(min(u, 0xFFFF).to_bytes(2, "big") for u in units)
    return raw.decode("utf-16-be", "surrogatepass"), pos


def read_long(data: bytes, pos: int = 0) -> tuple[int, int]:
    return struct.unpack_from(">q", data, pos)[0], pos + 8


def read_int(data: bytes, pos: int = 0) -> tuple[int, int]:
    return struct.unpack_from(">i", data, pos)[0], pos + 4


def read_boolean(data: bytes, pos: int = 0) -> tuple[bool, int]:
    return data[pos] != 0, pos + 1


READERS = {"string": read_string, "long": read_long, "int": read_int, "boolean": read_boolean}


def decode_value(kind: str, data: bytes) -> object:
    """Decode a whole value of ``kind``; raises ValueError when the bytes do not fit exactly."""
    reader = READERS[kind]
    try:
        value, end = reader(data, 0)
    except (struct.error, IndexError) as exc:
        raise ValueError_(f"not a {kind}: {exc}") from None
    if end != len(data):
        raise ValueError_(f"not a {kind}: {len(data) - end} bytes left over")
    return value
