"""Building blocks shared by every Flink binary layout: Java strings, bounded arrays and blobs.

Flink writes with ``java.io.DataOutputStream``: big-endian integers and "modified UTF-8" strings.
Counts and lengths read from a file are checked against the bytes actually left before anything is
allocated, so a corrupt count of 2**31 fails at once with a clear message instead of exhausting memory.

Every construct here parses interpreted (full error paths and offsets: used to diagnose and to build)
and is compiled, with the same checks, by ``spillway.formats.fastparse`` (the fast path).
"""

from __future__ import annotations

import io
import struct
from typing import Any

from construct import (
    Adapter,
    Bytes,
    Construct,
    ConstructError,
    ListContainer,
    StreamError,
    Struct,
    Subconstruct,
    stream_read,
    stream_write,
)

from spillway.formats.modutf8 import decode_modified_utf8, encode_modified_utf8

_I16 = struct.Struct(">H")
_I32 = struct.Struct(">i")


class FormatError(ConstructError):
    """The bytes do not follow the layout: an unknown type code, a bad magic, trailing bytes.

    ``offset`` is where the offending field starts, when known (relative to the parsed stream).
    """

    def __init__(self, message: str = "", path: str | None = None, offset: int | None = None):
        super().__init__(message, path=path)
        self.offset = offset


class BoundsError(FormatError):
    """A count or length read from the file cannot be right: negative or beyond the end of the data."""


def remaining(stream: Any) -> int:
    pos = stream.tell()
    end = stream.seek(0, 2)
    stream.seek(pos)
    return end - pos


def _check_count(count: int, min_size: int, stream: Any, path: str, at: int | None) -> int:
    if count < 0:
        raise BoundsError(f"negative count {count}", path=path, offset=at)
    left = remaining(stream)
    if count * min_size > left:
        raise BoundsError(
            f"count {count} needs at least {count * min_size} bytes, only {left} left", path=path, offset=at
        )
    return count


class JavaUtf(Construct):
    """``writeUTF``: u16 byte length, then modified UTF-8. Parses to ``str``."""

    def _parse(self, stream: Any, context: Any, path: str) -> Any:
        (n,) = _I16.unpack(stream_read(stream, 2, path))
        raw = stream_read(stream, n, path)
        try:
            return decode_modified_utf8(raw)
        except ValueError as exc:
            raise FormatError(str(exc), path=path, offset=stream.tell() - n) from None

    def _build(self, obj: Any, stream: Any, context: Any, path: str) -> Any:
        raw = encode_modified_utf8(obj)
        if len(raw) > 0xFFFF:
            raise FormatError(f"string of {len(raw)} bytes is longer than Java's writeUTF allows", path=path)
        stream_write(stream, _I16.pack(len(raw)), 2, path)
        stream_write(stream, raw, len(raw), path)
        return obj


JavaString = JavaUtf()


class BoundedArray(Subconstruct):
    """``i32 count`` followed by ``count`` elements, each at least ``min_size`` bytes long.

    The count is rejected when negative or when ``count * min_size`` exceeds the bytes left, so no
    list larger than the file justifies is ever built. Element indices appear in error paths.
    """

    def __init__(self, subcon: Construct, min_size: int):
        super().__init__(subcon)
        self.min_size = min_size

    def _parse(self, stream: Any, context: Any, path: str) -> Any:
        (count,) = _I32.unpack(stream_read(stream, 4, path))
        _check_count(count, self.min_size, stream, path, stream.tell() - 4)
        sub = self.subcon
        return ListContainer(sub._parsereport(stream, context, f"{path} -> [{i}]") for i in range(count))

    def _build(self, obj: Any, stream: Any, context: Any, path: str) -> Any:
        stream_write(stream, _I32.pack(len(obj)), 4, path)
        for i, item in enumerate(obj):
            self.subcon._build(item, stream, context, f"{path} -> [{i}]")
        return obj


class CountedArray(Subconstruct):
    """An array whose count was read earlier (``countfunc(context)``), bounded like ``BoundedArray``."""

    def __init__(self, countfunc: Any, subcon: Construct, min_size: int):
        super().__init__(subcon)
        self.countfunc = countfunc
        self.min_size = min_size

    def _parse(self, stream: Any, context: Any, path: str) -> Any:
        count = _check_count(self.countfunc(context), self.min_size, stream, path, None)
        sub = self.subcon
        return ListContainer(sub._parsereport(stream, context, f"{path} -> [{i}]") for i in range(count))

    def _build(self, obj: Any, stream: Any, context: Any, path: str) -> Any:
        for i, item in enumerate(obj):
            self.subcon._build(item, stream, context, f"{path} -> [{i}]")
        return obj


class BoundedBytes(Construct):
    """``i32 length`` + that many bytes; the length must be non-negative and fit in what is left."""

    def _parse(self, stream: Any, context: Any, path: str) -> Any:
        (n,) = _I32.unpack(stream_read(stream, 4, path))
        at = stream.tell() - 4
        if n < 0:
            raise BoundsError(f"negative length {n}", path=path, offset=at)
        left = remaining(stream)
        if n > left:
            raise BoundsError(f"length {n} is beyond the end of the data ({left} bytes left)", path=path, offset=at)
        return stream_read(stream, n, path)

    def _build(self, obj: Any, stream: Any, context: Any, path: str) -> Any:
        stream_write(stream, _I32.pack(len(obj)), 4, path)
        stream_write(stream, obj, len(obj), path)
        return obj


class LengthPrefixed(Subconstruct):
    """``i32 length`` + a blob that ``subcon`` must consume exactly (Flink re-reads such blobs on their own)."""

    def _parse(self, stream: Any, context: Any, path: str) -> Any:
        raw = BoundedBytes()._parse(stream, context, path)
        base = stream.tell() - len(raw)
        inner = io.BytesIO(raw)
        try:
            obj = self.subcon._parsereport(inner, context, path)
        except FormatError as exc:
            exc.offset = base + (exc.offset if exc.offset is not None else inner.tell())
            raise
        except ConstructError as exc:
            raise FormatError(str(exc).splitlines()[-1], path=path, offset=base + inner.tell()) from None
        if inner.tell() != len(raw):
            raise FormatError(
                f"blob of {len(raw)} bytes has {len(raw) - inner.tell()} trailing bytes",
                path=path,
                offset=base + inner.tell(),
            )
        return obj

    def _build(self, obj: Any, stream: Any, context: Any, path: str) -> Any:
        inner = io.BytesIO()
        self.subcon._build(obj, inner, context, path)
        raw = inner.getvalue()
        stream_write(stream, _I32.pack(len(raw)), 4, path)
        stream_write(stream, raw, len(raw), path)
        return obj


class HexId(Adapter):
    """16 raw bytes shown as 32 lowercase hex chars (Flink's OperatorID/JobVertexID text form)."""

    def __init__(self) -> None:
        super().__init__(Bytes(16))

    def _decode(self, obj: Any, context: Any, path: str) -> Any:
        return obj.hex()

    def _encode(self, obj: Any, context: Any, path: str) -> Any:
        return bytes.fromhex(obj)


OperatorIdHex = HexId()


class _Check(Construct):
    """A zero-width field that only checks (so builds need no value for it)."""

    def __init__(self) -> None:
        super().__init__()
        self.flagbuildnone = True

    def _build(self, obj: Any, stream: Any, context: Any, path: str) -> Any:
        return None

    def _sizeof(self, context: Any, path: str) -> int:
        return 0


class UnknownCode(_Check):
    """Switch default: a type code this family does not define."""

    def __init__(self, family: str, code_field: str = "type"):
        super().__init__()
        self.family = family
        self.code_field = code_field

    def _parse(self, stream: Any, context: Any, path: str) -> Any:
        code = context[self.code_field]
        raise FormatError(f"unknown {self.family} type code {code}", path=path, offset=stream.tell() - 1)


class Require(_Check):
    """Reject a value Flink's reader rejects, pointing at the field just read (``size`` bytes back).

    ``predicate`` and ``message`` get the sibling fields as a mapping (``ctx["name"]``).
    """

    def __init__(self, predicate: Any, message: Any, size: int):
        super().__init__()
        self.predicate = predicate
        self.message = message
        self.size = size

    def _parse(self, stream: Any, context: Any, path: str) -> Any:
        if not self.predicate(context):
            message = self.message(context) if callable(self.message) else self.message
            raise FormatError(message, path=path, offset=stream.tell() - self.size)
        return None


class EndOfData(_Check):
    """Nothing may follow: Flink ignores trailing bytes, but they mean the file is not what it seems."""

    def __init__(self, what: str):
        super().__init__()
        self.what = what

    def _parse(self, stream: Any, context: Any, path: str) -> Any:
        left = remaining(stream)
        if left:
            raise FormatError(f"{left} trailing bytes after {self.what}", path=path, offset=stream.tell())
        return None


class FastStruct(Struct):
    """``Struct`` that ``spillway.formats.fastparse`` compiles to a function returning one plain dict.

    Its fields may refer only to earlier sibling fields (a type byte, a count, a marker), never to
    an enclosing struct: the compiled form keeps no context beyond the struct itself. Interpreted
    parsing and building are construct's own.
    """


__all__ = [
    "BoundedArray",
    "BoundedBytes",
    "BoundsError",
    "CountedArray",
    "EndOfData",
    "FastStruct",
    "FormatError",
    "JavaString",
    "LengthPrefixed",
    "OperatorIdHex",
    "Require",
    "StreamError",
    "UnknownCode",
]
