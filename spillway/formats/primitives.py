"""Building blocks shared by every Flink binary layout: Java strings, bounded arrays and blobs.

Flink writes with ``java.io.DataOutputStream``: big-endian integers and "modified UTF-8" strings.
Counts and lengths read from a file are checked against the bytes actually left before anything is
allocated, so a corrupt count of 2**31 fails at once with a clear message instead of exhausting memory.

Each custom construct here works both interpreted (with full error paths, used for diagnostics) and
inside ``Construct.compile()`` output (fast path, see ``_emitparse``).
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
    Subconstruct,
    stream_read,
    stream_write,
)

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


def read_exact(stream: Any, n: int) -> bytes:
    """Checked read for compiled parsers (construct's compiled ``Bytes`` does not check short reads)."""
    data = stream.read(n)
    if len(data) != n:
        raise StreamError(f"stream read less than specified amount, expected {n}, found {len(data)}")
    return data


def emit_helper(code: Any, name: str, source: str) -> str:
    """Add a module-level helper to compiled parser source once; returns its name."""
    done = code.__dict__.setdefault("_spillway_helpers", set())
    if name not in done:
        done.add(name)
        code.append(source)
    return name


def _remaining(stream: Any) -> int:
    pos = stream.tell()
    end = stream.seek(0, io.SEEK_END)
    stream.seek(pos)
    return end - pos


# --------------------------------------------------------------------------------------------------
# Modified UTF-8 (java.io.DataInput.readUTF)


def decode_modified_utf8(raw: bytes) -> str:
    """Decode Java's modified UTF-8 (``C0 80`` for NUL, surrogate pairs as two 3-byte sequences)."""
    if raw.isascii():
        return raw.decode("ascii")
    # Java's CESU-8 surrogates and C0 80 are exactly what "surrogatepass" utf-8 decoding of the
    # corrected bytes gives; do it by hand to match DataInputStream's acceptance rules.
    out: list[str] = []
    i, n = 0, len(raw)
    while i < n:
        c = raw[i]
        if c < 0x80:
            out.append(chr(c))
            i += 1
        elif c >> 5 == 0b110:
            if i + 1 >= n or raw[i + 1] >> 6 != 0b10:
                raise ValueError(f"malformed modified UTF-8 around byte {i}")
            out.append(chr(((c & 0x1F) << 6) | (raw[i + 1] & 0x3F)))
            i += 2
        elif c >> 4 == 0b1110:
            if i + 2 >= n or raw[i + 1] >> 6 != 0b10 or raw[i + 2] >> 6 != 0b10:
                raise ValueError(f"malformed modified UTF-8 around byte {i}")
            out.append(chr(((c & 0x0F) << 12) | ((raw[i + 1] & 0x3F) << 6) | (raw[i + 2] & 0x3F)))
            i += 3
        else:
            raise ValueError(f"malformed modified UTF-8 around byte {i}")
    # Re-join UTF-16 surrogate pairs into real code points.
    return "".join(out).encode("utf-16", "surrogatepass").decode("utf-16")


def encode_modified_utf8(text: str) -> bytes:
    if text.isascii() and "\x00" not in text:
        return text.encode("ascii")
    out = bytearray()
    for unit in _utf16_units(text):
        if 0 < unit < 0x80:
            out.append(unit)
        elif unit < 0x800:
            out += bytes((0xC0 | (unit >> 6), 0x80 | (unit & 0x3F)))
        else:
            out += bytes((0xE0 | (unit >> 12), 0x80 | ((unit >> 6) & 0x3F), 0x80 | (unit & 0x3F)))
    return bytes(out)


def _utf16_units(text: str) -> list[int]:
    raw = text.encode("utf-16-be", "surrogatepass")
    return [int.from_bytes(raw[i : i + 2], "big") for i in range(0, len(raw), 2)]


class JavaUtf(Construct):
    """``writeUTF``: u16 byte length, then modified UTF-8. Parses to ``str``."""

    def _parse(self, stream, context, path):
        (n,) = _I16.unpack(stream_read(stream, 2, path))
        raw = stream_read(stream, n, path)
        try:
            return decode_modified_utf8(raw)
        except ValueError as exc:
            raise StreamError(str(exc), path=path) from None

    def _build(self, obj, stream, context, path):
        raw = encode_modified_utf8(obj)
        if len(raw) > 0xFFFF:
            raise StreamError(f"string of {len(raw)} bytes is longer than Java's writeUTF allows", path=path)
        stream_write(stream, _I16.pack(len(raw)), 2, path)
        stream_write(stream, raw, len(raw), path)
        return obj

    def _sizeof(self, context, path):
        raise ConstructError("variable size", path=path)


JavaString = JavaUtf()


# --------------------------------------------------------------------------------------------------
# Bounded collections


class BoundedArray(Subconstruct):
    """``i32 count`` followed by ``count`` elements, each at least ``min_size`` bytes long.

    The count is rejected when negative or when ``count * min_size`` exceeds the bytes left, so no
    list larger than the file justifies is ever built. Element indices appear in error paths.
    """

    def __init__(self, subcon: Construct, min_size: int, count_struct: struct.Struct = _I32):
        super().__init__(subcon)
        self.min_size = min_size
        self.count_struct = count_struct

    def _read_count(self, stream, path) -> int:
        (count,) = self.count_struct.unpack(stream_read(stream, self.count_struct.size, path))
        at = stream.tell() - self.count_struct.size
        if count < 0:
            raise BoundsError(f"negative count {count}", path=path, offset=at)
        left = _remaining(stream)
        if count * self.min_size > left:
            raise BoundsError(
                f"count {count} needs at least {count * self.min_size} bytes, only {left} left",
                path=path,
                offset=at,
            )
        return count

    def _parse(self, stream, context, path):
        count = self._read_count(stream, path)
        sub = self.subcon
        return ListContainer(sub._parsereport(stream, context, f"{path} -> [{i}]") for i in range(count))

    def _build(self, obj, stream, context, path):
        stream_write(stream, self.count_struct.pack(len(obj)), self.count_struct.size, path)
        for i, item in enumerate(obj):
            self.subcon._build(item, stream, context, f"{path} -> [{i}]")
        return obj

    def _emitparse(self, code):
        fname = f"read_count_{id(self)}"
        code.append(f"""
            def {fname}(io):
                return linkedinstances[{id(self)}]._read_count(io, '(???)')
        """)
        self._compileinstance(code)
        return f"ListContainer(({self.subcon._compileparse(code)}) for i in range({fname}(io)))"

    def _emitbuild(self, code):
        self._compileinstance(code)
        return f"linkedbuilders[{id(self)}](obj, io, this, '(???)')"


class BoundedBytes(Construct):
    """``i32 length`` + that many bytes; the length must be non-negative and fit in what is left."""

    def _parse(self, stream, context, path):
        (n,) = _I32.unpack(stream_read(stream, 4, path))
        at = stream.tell() - 4
        if n < 0:
            raise BoundsError(f"negative length {n}", path=path, offset=at)
        left = _remaining(stream)
        if n > left:
            raise BoundsError(
                f"length {n} is beyond the end of the data ({left} bytes left)", path=path, offset=at
            )
        return stream_read(stream, n, path)

    def _build(self, obj, stream, context, path):
        stream_write(stream, _I32.pack(len(obj)), 4, path)
        stream_write(stream, obj, len(obj), path)
        return obj

    def _sizeof(self, context, path):
        raise ConstructError("variable size", path=path)


class HexId(Adapter):
    """16 raw bytes shown as 32 lowercase hex chars (Flink's OperatorID/JobVertexID text form)."""

    def __init__(self) -> None:
        super().__init__(Bytes(16))

    def _decode(self, obj, context, path):
        return obj.hex()

    def _encode(self, obj, context, path):
        return bytes.fromhex(obj)

    def _emitparse(self, code):
        emit_helper(code, "read_exact", "from spillway.formats.primitives import read_exact")
        return "read_exact(io, 16).hex()"

    def _emitbuild(self, code):
        self._compileinstance(code)
        return f"linkedbuilders[{id(self)}](obj, io, this, '(???)')"


OperatorIdHex = HexId()


class UnknownCode(Construct):
    """Switch default: a type code this family does not define."""

    def __init__(self, family: str, codefunc):
        super().__init__()
        self.family = family
        self.codefunc = codefunc

    def _parse(self, stream, context, path):
        code = self.codefunc(context)
        raise FormatError(f"unknown {self.family} type code {code}", path=path, offset=stream.tell() - 1)

    def _build(self, obj, stream, context, path):
        raise FormatError(f"cannot build unknown {self.family} type code", path=path)


class LengthPrefixed(Subconstruct):
    """``i32 length`` + a blob that ``subcon`` must consume exactly (Flink re-reads such blobs on their own)."""

    def _parse(self, stream, context, path):
        raw = BoundedBytes()._parse(stream, context, path)
        base = stream.tell() - len(raw)
        inner = io.BytesIO(raw)
        try:
            obj = self.subcon._parsereport(inner, context, path)
        except FormatError as exc:
            exc.offset = base + (exc.offset if exc.offset is not None else inner.tell())
            raise
        except ConstructError as exc:
            raise FormatError(str(exc).split("\n")[-1], path=path, offset=base + inner.tell()) from None
        if inner.tell() != len(raw):
            raise FormatError(
                f"blob of {len(raw)} bytes has {len(raw) - inner.tell()} trailing bytes",
                path=path,
                offset=stream.tell() - len(raw) + inner.tell(),
            )
        return obj

    def _build(self, obj, stream, context, path):
        inner = io.BytesIO()
        self.subcon._build(obj, inner, context, path)
        raw = inner.getvalue()
        stream_write(stream, _I32.pack(len(raw)), 4, path)
        stream_write(stream, raw, len(raw), path)
        return obj

    def _sizeof(self, context, path):
        raise ConstructError("variable size", path=path)


class CountedArray(Subconstruct):
    """An array whose count was read earlier (``countfunc(context)``), bounded like ``BoundedArray``."""

    def __init__(self, countfunc: Any, subcon: Construct, min_size: int):
        super().__init__(subcon)
        self.countfunc = countfunc
        self.min_size = min_size

    def _check(self, count: int, stream: Any, path: str) -> int:
        if count < 0:
            raise BoundsError(f"negative count {count}", path=path)
        left = _remaining(stream)
        if count * self.min_size > left:
            raise BoundsError(
                f"count {count} needs at least {count * self.min_size} bytes, only {left} left", path=path
            )
        return count

    def _parse(self, stream, context, path):
        count = self._check(self.countfunc(context), stream, path)
        sub = self.subcon
        return ListContainer(sub._parsereport(stream, context, f"{path} -> [{i}]") for i in range(count))

    def _build(self, obj, stream, context, path):
        for i, item in enumerate(obj):
            self.subcon._build(item, stream, context, f"{path} -> [{i}]")
        return obj

    def _emitparse(self, code):
        self._compileinstance(code)
        check = f"linkedinstances[{id(self)}]._check({self.countfunc!r}, io, '(???)')"
        return f"ListContainer(({self.subcon._compileparse(code)}) for i in range({check}))"

    def _emitbuild(self, code):
        self._compileinstance(code)
        return f"linkedbuilders[{id(self)}](obj, io, this, '(???)')"


class Require(Construct):
    """Reject a value Flink's reader rejects, pointing at the field just read (``size`` bytes back)."""

    def __init__(self, predicate: Any, message: Any, size: int):
        super().__init__()
        self.predicate = predicate
        self.message = message
        self.size = size
        self.flagbuildnone = True

    def _parse(self, stream, context, path):
        if not self.predicate(context):
            message = self.message(context) if callable(self.message) else self.message
            raise FormatError(message, path=path, offset=stream.tell() - self.size)
        return None

    def _build(self, obj, stream, context, path):
        return None

    def _sizeof(self, context, path):
        return 0
