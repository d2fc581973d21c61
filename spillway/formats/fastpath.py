"""Runtime helpers called by compiled parsers (``Construct.compile()`` output).

construct's compiled code reads with unchecked ``io.read(n)``; these helpers keep the same bounds
checks as the interpreted constructs so that the fast path never accepts what the slow one rejects.
Errors raised here carry no field path: on any failure the caller re-parses interpreted to locate it.
"""

from __future__ import annotations

import io as _io
import struct
from typing import Any

from construct import StreamError

from spillway.formats.modutf8 import decode_modified_utf8


def read_exact(stream: Any, n: int) -> bytes:
    data = stream.read(n)
    if len(data) != n:
        raise StreamError(f"stream read less than specified amount, expected {n}, found {len(data)}")
    return data


def remaining(stream: Any) -> int:
    pos = stream.tell()
    end = stream.seek(0, 2)
    stream.seek(pos)
    return end - pos


def read_utf(stream: Any) -> str:
    head = stream.read(2)
    if len(head) == 2:
        n = (head[0] << 8) | head[1]
        raw = stream.read(n)
        if len(raw) == n:
            return raw.decode("ascii") if raw.isascii() else decode_modified_utf8(raw)
    raise StreamError("stream read less than specified amount (string)")


def check_count(n: int, stream: Any, min_size: int) -> int:
    if n < 0 or n * min_size > remaining(stream):
        raise StreamError(f"count {n} out of bounds")
    return n


def read_count(stream: Any, min_size: int) -> int:
    return check_count(int.from_bytes(read_exact(stream, 4), "big", signed=True), stream, min_size)


def read_array(stream: Any, item_format: str, item_size: int) -> list:
    """``i32 count`` + count fixed-size big-endian items, read and unpacked in one go."""
    n = read_count(stream, item_size)
    if n == 0:
        return []
    return list(struct.unpack(f">{n}{item_format}", read_exact(stream, n * item_size)))


def read_blob(stream: Any) -> bytes:
    return read_exact(stream, read_count(stream, 1))


def parse_prefixed(stream: Any, parse: Any) -> Any:
    inner = _io.BytesIO(read_blob(stream))
    obj = parse(inner)
    if inner.read(1):
        raise StreamError("trailing bytes in length-prefixed blob")
    return obj


IMPORT = (
    "from spillway.formats.fastpath import "
    "read_exact, read_utf, read_count, check_count, read_blob, parse_prefixed, read_array\n"
)


def use(code: Any) -> None:
    """Make the helpers visible to the compiled module (once per compilation)."""
    if not getattr(code, "_spillway_fastpath", False):
        code._spillway_fastpath = True
        code.append(IMPORT)
