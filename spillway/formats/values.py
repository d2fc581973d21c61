"""User values of common Flink TypeSerializers and the key a KeySelector takes from them (docs/format/keyed-routing.md).

Value specs (case-insensitive, blanks ignored)::

    spec    := scalar | tuple(field, ...) | row(field, ...) | row(name:field, ...) | rowdata(rdtype, ...)
             | NAME(...)                     (registered: pojo, caseclass, array, objarray, list, map, nullable
                                              in value_composites, avro in avro_values, kryo2/kryo5 in
                                              kryo_values; others through ``register_spec``)
    field   := spec | ?                      (? = a field of unknown type; decoding stops there)
    scalar  := string | long | int | short | byte | boolean | double | float | bytes
               (aliases: varchar, bigint, integer, smallint, tinyint, bool)
    rdtype  := bigint | int | smallint | tinyint | boolean | double | float | string | bytes | ?

Encodings, all checked against bytes written by Flink 2.3.0's own serializers (tests/integration/test_values.py):

* scalars: big-endian ``DataOutput`` (``writeLong`` …); strings ``StringValue.writeString`` (varint length+1, 0 =
  null, then each UTF-16 unit as a varint); ``bytes`` = ``BytePrimitiveArraySerializer`` (int32 length + bytes).
* ``tuple`` = TupleSerializer: the fields back to back, no null mask, no arity.
* ``row`` = RowSerializer (non-legacy, Flink >= 1.11): a mask of ceil((2 + arity) / 8) bytes, most significant bit
  first: 2 RowKind bits (kind & 1, kind & 2), then one "is null" bit per field; then the non-null fields.
* ``rowdata`` = the table runtime's RowDataSerializer / BinaryRowDataSerializer: int32 big-endian size, then a
  BinaryRowData: a header of ((arity + 71) // 64) * 8 bytes (byte 0 = RowKind, null bit of field i = bit i + 8,
  LSB first), one 8-byte little-endian slot per field, then the variable-length part. A string/bytes slot holds
  up to 7 bytes inline (last slot byte = 0x80 | length) or (offset << 32 | length) into the row.

Key extractor specs (``parse_key_extractor``): a scalar (the whole value is the key), ``tuple(...):N`` /
``row(...):N`` (field N is the key), the shorthand ``tuple:0:SCALAR``, or ``rowdata(...):N[,M...]`` (SQL: the
key fields projected into a BinaryRowData, hashed with ``murmur_words``). Without ``?`` the whole value must
decode exactly; a ``?`` after the key field leaves the rest unchecked. Fields by name or path and keys derived
from a field (``pojo(...):user|before(':')``): ``key_paths``. Field names keep their case.
"""

from __future__ import annotations

import importlib
import math
import re
import struct
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Generic, TypeVar

from spillway.errors import SpillwayError
from spillway.flink.keygroups import java_boolean_hash, java_int_hash, java_long_hash, java_string_hash


class ValueSpecError(SpillwayError, ValueError):
    """A value spec that cannot be parsed, or bytes that do not fit it. The message says what is wrong."""


Reader = Callable[[bytes, int], tuple[object, int]]

# ---------------------------------------------------------------- scalars (DataStream serializers)


def _varint(data: bytes, pos: int) -> tuple[int, int]:
    shift = value = 0
    while True:
        if pos >= len(data):
            raise ValueSpecError("varint runs past the end of the value")
        b = data[pos]
        pos += 1
        value |= (b & 0x7F) << shift
        if b < 0x80:
            return value, pos
        shift += 7
        if shift > 35:
            raise ValueSpecError("varint too long")


def read_string(data: bytes, pos: int = 0) -> tuple[str | None, int]:
    """``StringValue.writeString``: varint (length + 1, 0 = null), then each UTF-16 unit as a varint."""
    n, pos = _varint(data, pos)
    if n == 0:
        return None, pos
    count = n - 1
    end = pos + count
    chunk = data[pos:end]
    if len(chunk) == count and chunk.isascii():  # every unit < 0x80 is one varint byte: the common case
        return chunk.decode("ascii"), end
    units = bytearray()
    for _ in range(count):
        u, pos = _varint(data, pos)
        if u > 0xFFFF:
            raise ValueSpecError(f"string unit {u:#x} is not a UTF-16 code unit")
        units += u.to_bytes(2, "big")
    return units.decode("utf-16-be", "surrogatepass"), pos


def _need(data: bytes, pos: int, n: int, what: str) -> None:
    if pos + n > len(data):
        raise ValueSpecError(f"{what} needs {n} bytes at offset {pos}, only {max(0, len(data) - pos)} left")


_V = TypeVar("_V")


def _fixed(fmt: str, what: str, kind: type[_V]) -> tuple[Callable[[bytes, int], tuple[_V, int]], int]:
    """A reader of one big-endian ``fmt`` value (``kind``: what it unpacks to) and its size."""
    s = struct.Struct(fmt)

    def read(data: bytes, pos: int) -> tuple[_V, int]:
        _need(data, pos, s.size, what)
        return s.unpack_from(data, pos)[0], pos + s.size

    return read, s.size


class Float32(float):
    """A float read from 4 bytes; shown with the fewest digits that give the same float32 (like Java)."""

    def __repr__(self) -> str:
        if not math.isfinite(self):
            return float.__repr__(self)
        for digits in range(1, 10):
            text = f"{self:.{digits}g}"
            if struct.unpack(">f", struct.pack(">f", float(text)))[0] == self:
                return repr(float(text))
        return float.__repr__(self)


def read_long(data: bytes, pos: int = 0) -> tuple[int, int]:
    return _LONG(data, pos)


def read_boolean(data: bytes, pos: int = 0) -> tuple[bool, int]:
    _need(data, pos, 1, "boolean")
    b = data[pos]
    if b > 1:
        raise ValueSpecError(f"boolean byte is {b:#04x}, not 0 or 1")
    return b == 1, pos + 1


def _read_float(data: bytes, pos: int) -> tuple[Float32, int]:
    v, pos = _FLOAT(data, pos)
    return Float32(v), pos


def _read_bytes(data: bytes, pos: int) -> tuple[bytes, int]:
    n, pos = _INT(data, pos)
    if n < 0:
        raise ValueSpecError(f"byte array length {n} is negative")
    _need(data, pos, n, "byte array")
    return bytes(data[pos : pos + n]), pos + n


_LONG, _ = _fixed(">q", "long", int)
_INT, _ = _fixed(">i", "int", int)
_SHORT, _ = _fixed(">h", "short", int)
_BYTE, _ = _fixed(">b", "byte", int)
_DOUBLE, _ = _fixed(">d", "double", float)
_FLOAT, _ = _fixed(">f", "float", float)


def _double_hash(v: float) -> int:
    bits = 0x7FF8000000000000 if math.isnan(v) else struct.unpack(">q", struct.pack(">d", v))[0]
    return java_long_hash(bits)


def _string_hash(v: str | None) -> int:
    if v is None:  # StringValue's null: no key (KeyExtractor refuses null keys before hashing)
        raise ValueSpecError("a null string has no hashCode; Flink refuses null keys")
    return java_string_hash(v)


def _float_hash(v: float) -> int:
    return 0x7FC00000 if math.isnan(v) else struct.unpack(">i", struct.pack(">f", v))[0]


@dataclass(frozen=True)
class Scalar(Generic[_V]):
    name: str
    read: Callable[[bytes, int], tuple[_V, int]]
    hash: Callable[[_V], int] | None  # Java hashCode of the boxed value; None: not usable as a key


# Scalars of every Java type in one table: the value type differs per entry (each entry is checked above).
SCALARS: dict[str, Scalar[Any]] = {
    s.name: s
    for s in (
        Scalar("string", read_string, _string_hash),
        Scalar("long", _LONG, java_long_hash),
        Scalar("int", _INT, java_int_hash),
        Scalar("short", _SHORT, java_int_hash),
        Scalar("byte", _BYTE, java_int_hash),
        Scalar("boolean", read_boolean, java_boolean_hash),
        Scalar("double", _DOUBLE, _double_hash),
        Scalar("float", _read_float, _float_hash),
        # byte[] keys hash by identity in Java: useless for routing (docs/format/keyed-routing.md, hashCode table)
        Scalar("bytes", _read_bytes, None),
    )
}
ALIASES = {
    "varchar": "string",
    "bigint": "long",
    "integer": "int",
    "smallint": "short",
    "tinyint": "byte",
    "bool": "boolean",
}

# ---------------------------------------------------------------- decoded composite values


@dataclass(frozen=True)
class Undecoded:
    """Bytes of a field of unknown type (``?``), shown as hex."""

    raw: bytes

    def __repr__(self) -> str:
        return f"<? {self.raw.hex()}>" if self.raw else "<?>"


ROW_KINDS = ("+I", "-U", "+U", "-D")  # RowKind byte values 0..3


@dataclass(frozen=True)
class RowValue:
    """A decoded Row or RowData, shown like Flink's ``Row.toString`` (``+I[1, 'a']``)."""

    kind: str
    fields: tuple[Any, ...]
    names: tuple[str, ...] | None = None  # row(name:type, ...): shown and given as JSON by name

    def __repr__(self) -> str:
        if self.names is not None:
            return f"{self.kind}{{{', '.join(f'{n}={v!r}' for n, v in zip(self.names, self.fields, strict=True))}}}"
        return f"{self.kind}[{', '.join(repr(f) for f in self.fields)}]"


# ---------------------------------------------------------------- spec types


class Type:
    @property
    def spec(self) -> str:
        raise NotImplementedError

    @property
    def known(self) -> bool:
        """False for ``?`` and for composites ending in unknown fields."""
        return True

    def read(self, data: bytes, pos: int) -> tuple[object, int]:
        raise NotImplementedError

    def hash(self, value: object) -> int:
        raise ValueSpecError(f"a {self.spec} value cannot be a key here")


@dataclass
class ScalarType(Type):
    scalar: Scalar[Any]

    @property
    def spec(self) -> str:
        return self.scalar.name

    def read(self, data: bytes, pos: int) -> tuple[object, int]:
        return self.scalar.read(data, pos)

    def hash(self, value: object) -> int:
        if self.scalar.hash is None:
            raise ValueSpecError(f"{self.spec} keys hash by object identity in Java; Flink cannot route them")
        return self.scalar.hash(value)


class UnknownType(Type):
    @property
    def spec(self) -> str:
        return "?"

    @property
    def known(self) -> bool:
        return False

    def read(self, data: bytes, pos: int) -> tuple[object, int]:
        return Undecoded(bytes(data[pos:])), len(data)


@dataclass
class TupleType(Type):
    fields: list[Type]

    @property
    def spec(self) -> str:
        return f"tuple({','.join(f.spec for f in self.fields)})"

    @property
    def known(self) -> bool:
        return all(f.known for f in self.fields)

    def read(self, data: bytes, pos: int) -> tuple[object, int]:
        out: list[object] = []
        lost = False  # after a field of unknown type the positions of later fields are unknown
        for f in self.fields:
            if lost:
                out.append(Undecoded(b""))
                continue
            v, pos = f.read(data, pos)
            out.append(v)
            lost = not f.known
        return tuple(out), pos

    def read_until(self, data: bytes, pos: int, index: int) -> tuple[object, int]:
        """Field ``index``; the fields before it are skipped."""
        for f in self.fields[:index]:
            _, pos = f.read(data, pos)
        return self.fields[index].read(data, pos)

    def hash(self, value: object) -> int:
        # Tuple.hashCode: r = h(f0); r = 31 * r + h(fi); h(null) = 0 (int32 arithmetic)
        assert isinstance(value, tuple)
        r = 0
        for i, (f, v) in enumerate(zip(self.fields, value, strict=True)):
            h = 0 if v is None else f.hash(v)
            r = h if i == 0 else 31 * r + h
        return java_int_hash(r)


@dataclass
class RowType(Type):
    fields: list[Type]
    names: list[str] | None = None  # row(name:type, ...): the same bytes, fields also picked by name

    @property
    def spec(self) -> str:
        if self.names is not None:
            return f"row({','.join(f'{n}:{f.spec}' for n, f in zip(self.names, self.fields, strict=True))})"
        return f"row({','.join(f.spec for f in self.fields)})"

    @property
    def known(self) -> bool:
        return all(f.known for f in self.fields)

    def _mask(self, data: bytes, pos: int) -> tuple[str, list[bool], int]:
        n = len(self.fields)
        size = (n + 2 + 7) // 8
        _need(data, pos, size, f"the null mask of a {n}-field row")
        bits = int.from_bytes(data[pos : pos + size], "big")
        total = size * 8
        kind = ((bits >> (total - 1)) & 1) | (((bits >> (total - 2)) & 1) << 1)
        nulls = [bool((bits >> (total - 3 - i)) & 1) for i in range(n)]
        return ROW_KINDS[kind], nulls, pos + size

    def read(self, data: bytes, pos: int) -> tuple[object, int]:
        kind, nulls, pos = self._mask(data, pos)
        out: list[object] = []
        lost = False
        for f, null in zip(self.fields, nulls, strict=True):
            if null:
                out.append(None)
            elif lost:
                out.append(Undecoded(b""))
            else:
                v, pos = f.read(data, pos)
                out.append(v)
                lost = not f.known
        return RowValue(kind, tuple(out), None if self.names is None else tuple(self.names)), pos

    def read_until(self, data: bytes, pos: int, index: int) -> tuple[object, int]:
        _, nulls, pos = self._mask(data, pos)
        for f, null in zip(self.fields[:index], nulls, strict=False):
            if not null:
                _, pos = f.read(data, pos)
        if nulls[index]:
            return None, pos
        return self.fields[index].read(data, pos)


# RowData: (name, slot reader) — the slot is 8 bytes little-endian; variable-length types point into the row.
_LE = {
    "bigint": struct.Struct("<q"),
    "int": struct.Struct("<i"),
    "smallint": struct.Struct("<h"),
    "tinyint": struct.Struct("<b"),
    "double": struct.Struct("<d"),
    "float": struct.Struct("<f"),
}
ROWDATA_TYPES = ("bigint", "int", "smallint", "tinyint", "boolean", "double", "float", "string", "bytes", "?")
_ROWDATA_ALIASES = {"long": "bigint", "integer": "int", "short": "smallint", "byte": "tinyint", "bool": "boolean",
                    "varchar": "string", "char": "string", "varbinary": "bytes", "binary": "bytes"}  # fmt: skip


@dataclass
class RowDataType(Type):
    types: list[str]

    @property
    def spec(self) -> str:
        return f"rowdata({','.join(self.types)})"

    @property
    def known(self) -> bool:
        return "?" not in self.types

    def read(self, data: bytes, pos: int) -> tuple[object, int]:
        size, pos = _INT(data, pos)
        if size < 0:
            raise ValueSpecError(f"row size {size} is negative")
        _need(data, pos, size, "the binary row")
        row = data[pos : pos + size]
        n = len(self.types)
        header = ((n + 63 + 8) // 64) * 8
        if header + 8 * n > size:
            raise ValueSpecError(f"a {n}-field binary row needs {header + 8 * n} bytes, this one has {size}")
        if row[0] > 3:
            raise ValueSpecError(f"row kind byte {row[0]} is not 0..3")
        out: list[object] = []
        for i, t in enumerate(self.types):
            bit = i + 8
            if row[bit >> 3] & (1 << (bit & 7)):
                out.append(None)
                continue
            slot = header + 8 * i
            out.append(self._slot(row, slot, t))
        return RowValue(ROW_KINDS[row[0]], tuple(out)), pos + size

    @staticmethod
    def _slot(row: bytes, slot: int, t: str) -> object:
        if t in _LE:
            v = _LE[t].unpack_from(row, slot)[0]
            return Float32(v) if t == "float" else v
        if t == "boolean":
            return row[slot] != 0
        if t == "?":
            return Undecoded(bytes(row[slot : slot + 8]))
        mark = row[slot + 7]
        if mark & 0x80:  # up to 7 bytes inline
            raw = bytes(row[slot : slot + (mark & 0x7F)])
        else:
            length, offset = struct.unpack_from("<II", row, slot)
            if offset + length > len(row):
                raise ValueSpecError(f"variable-length field at {offset}+{length} runs past the {len(row)}-byte row")
            raw = bytes(row[offset : offset + length])
        return raw.decode("utf-8", "replace") if t == "string" else raw


_M32 = 0xFFFFFFFF


def _rotl(v: int, r: int) -> int:
    return ((v << r) | (v >> (32 - r))) & _M32


def murmur_words(data: bytes, seed: int = 42) -> int:
    """``MurmurHashUtil.hashUnsafeBytesByWords`` (BinaryRowData.hashCode): MurmurHash3 x86_32 over
    little-endian 4-byte words, seed 42, as a Java int."""
    h = seed
    for (k,) in struct.iter_unpack("<I", data):
        k = (k * 0xCC9E2D51) & _M32
        k = (_rotl(k, 15) * 0x1B873593) & _M32
        h ^= k
        h = (_rotl(h, 13) * 5 + 0xE6546B64) & _M32
    h ^= len(data)
    h ^= h >> 16
    h = (h * 0x85EBCA6B) & _M32
    h ^= h >> 13
    h = (h * 0xC2B2AE35) & _M32
    h ^= h >> 16
    return java_int_hash(h)


def binary_row(types: list[str], values: tuple[Any, ...], kind: int = 0) -> bytes:
    """The BinaryRowData Flink's BinaryRowWriter builds for ``values`` (the inverse of RowDataType.read)."""
    n = len(types)
    header = ((n + 63 + 8) // 64) * 8
    fixed = bytearray(header + 8 * n)
    fixed[0] = kind
    var = bytearray()
    for i, (t, v) in enumerate(zip(types, values, strict=True)):
        slot = header + 8 * i
        if v is None:
            bit = i + 8
            fixed[bit >> 3] |= 1 << (bit & 7)
        elif t in _LE:
            _LE[t].pack_into(fixed, slot, v)
        elif t == "boolean":
            fixed[slot] = 1 if v else 0
        elif t in ("string", "bytes"):
            raw = v.encode("utf-8") if isinstance(v, str) else bytes(v)
            if len(raw) <= 7:
                fixed[slot : slot + len(raw)] = raw
                fixed[slot + 7] = 0x80 | len(raw)
            else:
                struct.pack_into("<II", fixed, slot, len(raw), len(fixed) + len(var))
                var += raw + bytes(-len(raw) % 8)  # word-aligned, zero padding
        else:
            raise ValueSpecError(f"cannot build a binary row field of type {t}")
    return bytes(fixed + var)


# ---------------------------------------------------------------- parsing specs

_T = TypeVar("_T")
# identifiers keep their case for field names; keywords compare in lower case. Quoted text: 'x' or "x".
_TOKEN = re.compile(r"""\s*('[^']*'|"[^"]*"|[A-Za-z_$][A-Za-z0-9_$]*|\?|[(),:.|@]|\d+)""")


RAW = "\x00"  # marks a token holding the verbatim argument of a raw-argument spec (``register_spec``)


def _raw_argument(spec: str, text: str, start: int) -> int:
    """The index of the ``)`` closing the ``(`` at ``start`` (nested parentheses and quotes allowed)."""
    depth, quote = 0, ""
    for i in range(start, len(text)):
        c = text[i]
        if quote:
            quote = "" if c == quote else quote
        elif c in "'\"":
            quote = c
        elif c == "(":
            depth += 1
        elif c == ")":
            depth -= 1
            if depth == 0:
                return i
    raise ValueSpecError(f"value spec {spec!r}: the ( at {start} is never closed")


def _tokens(spec: str) -> list[str]:
    pos, out = 0, []
    text = spec.strip()
    while pos < len(text):
        m = _TOKEN.match(text, pos)
        if not m:
            raise ValueSpecError(f"value spec {spec!r}: unexpected {text[pos:]!r}")
        out.append(m.group(1))
        pos = m.end()
        while pos < len(text) and text[pos].isspace():
            pos += 1
        if m.group(1).lower() in RAW_ARGUMENT_SPECS and text.startswith("(", pos):
            end = _raw_argument(spec, text, pos)  # a file path or URL: kept as written
            out += ["(", RAW + text[pos + 1 : end].strip(), ")"]
            pos = end + 1
            while pos < len(text) and text[pos].isspace():
                pos += 1
    return out


SpecConstructor = Callable[["SpecParser"], Type]
# name -> constructor of a spec ``name(...)``: called with the parser just after the name (``register_spec``).
SPEC_CONSTRUCTORS: dict[str, SpecConstructor] = {}
# specs whose argument is one verbatim text (a path, a URL), read with ``SpecParser.raw_argument``
RAW_ARGUMENT_SPECS: set[str] = set()
# Modules that extend the grammar when imported (``register_spec``, ``register_path_keys``). They build on this
# module, so it names them rather than importing them, and loads them before the first spec is read.
SPEC_MODULES = [
    "spillway.formats.value_composites",
    "spillway.formats.avro_values",
    "spillway.formats.kryo_values",
    "spillway.formats.key_paths",
]
# the parser of keys by field name or path and of derived keys (``key_paths``), once that module is loaded
PATH_KEYS: list[Callable[[str], KeyExtractor]] = []


def register_spec(name: str, constructor: SpecConstructor, raw_argument: bool = False) -> None:
    """Make ``name(...)`` a value spec everywhere specs are read (--key, --value-type, the API). The constructor
    gets the ``SpecParser`` positioned after the name and returns a ``Type``; it reads its own arguments
    (``parser.fields(parser.field_type)``, ``parser.literal()``, …). ``raw_argument``: everything between the
    parentheses is one verbatim text (``avro(schemas/order.avsc)``, a URL), read with ``parser.raw_argument()``.
    The module that registers must be in ``SPEC_MODULES`` (or be imported before specs are read)."""
    key = name.lower()
    if key in SCALARS or key in ALIASES or key in ("tuple", "row", "rowdata", "?"):
        raise ValueError(f"{name!r} is a built-in value spec")
    SPEC_CONSTRUCTORS[key] = constructor
    if raw_argument:
        RAW_ARGUMENT_SPECS.add(key)


def register_path_keys(parser: Callable[[str], KeyExtractor]) -> None:
    """Make ``parser`` read the key specs this module leaves to it: fields by name or path, derived keys."""
    PATH_KEYS[:] = [parser]


def _load_spec_modules() -> None:
    for module in SPEC_MODULES:
        importlib.import_module(module)


class SpecParser:
    """Reads one value spec (or key spec) token by token; ``register_spec`` constructors use its methods."""

    def __init__(self, spec: str) -> None:
        _load_spec_modules()
        self.spec = spec
        self.raw = _tokens(spec)
        self.toks = [t if t[0] in "'\"" + RAW else t.lower() for t in self.raw]
        self.i = 0

    def peek(self, ahead: int = 0) -> str | None:
        i = self.i + ahead
        return self.toks[i] if i < len(self.toks) else None

    def take(self, expected: str | None = None) -> str:
        tok = self.peek()
        if tok is None or (expected is not None and tok != expected):
            want = f"{expected!r}" if expected else "more"
            raise ValueSpecError(f"value spec {self.spec!r}: expected {want}, found {tok or 'the end'}")
        self.i += 1
        return tok

    def take_raw(self) -> str:
        """The next token as written (field names are case-sensitive)."""
        self.take()
        return self.raw[self.i - 1]

    def fail(self, problem: str) -> ValueSpecError:
        return ValueSpecError(f"value spec {self.spec!r}: {problem}")

    def field_name(self) -> str:
        name = self.take_raw()
        if not (name[0].isalpha() or name[0] in "_$"):
            raise self.fail(f"{name!r} is not a field name")
        return name

    def literal(self) -> str:
        tok = self.take_raw()
        if tok[0] not in "'\"":
            raise self.fail(f"expected a quoted text like ':', found {tok}")
        return tok[1:-1]

    def raw_argument(self) -> str:
        """``(TEXT)`` of a spec registered with ``raw_argument=True``: TEXT as written, stripped."""
        self.take("(")
        tok = self.take_raw()
        if not tok.startswith(RAW):
            raise self.fail(f"expected a verbatim argument, found {tok}")
        self.take(")")
        return tok[1:]

    def number(self) -> int:
        tok = self.take()
        if not tok.isdigit():
            raise self.fail(f"expected a number, found {tok}")
        return int(tok)

    def named(self) -> bool:
        """True if the next field is written ``name:type``."""
        tok = self.peek()
        return tok is not None and (tok[0].isalpha() or tok[0] in "_$") and self.peek(1) == ":"

    def field_type(self) -> Type:
        return self.type(allow_unknown=True)

    def type(self, allow_unknown: bool = False) -> Type:
        tok = self.take()
        if tok == "?":
            if not allow_unknown:
                raise ValueSpecError(f"value spec {self.spec!r}: '?' is only allowed as a field")
            return UnknownType()
        if tok in ("tuple", "row") and self.peek() == "(":
            names, fields = self.maybe_named_fields(allow_names=tok == "row")
            return TupleType(fields) if tok == "tuple" else RowType(fields, names)
        if tok == "rowdata" and self.peek() == "(":
            return RowDataType(self.fields(self.rowdata_type))
        if tok in SPEC_CONSTRUCTORS and self.peek() == "(":
            return SPEC_CONSTRUCTORS[tok](self)
        name = ALIASES.get(tok, tok)
        if name in SCALARS:
            return ScalarType(SCALARS[name])
        raise ValueSpecError(
            f"value spec {self.spec!r}: unknown type {tok!r} (known: {', '.join(SCALARS)}, tuple(...), row(...), "
            f"rowdata(...), {', '.join(f'{n}(...)' for n in SPEC_CONSTRUCTORS)})"
        )

    def maybe_named_fields(self, allow_names: bool = True) -> tuple[list[str] | None, list[Type]]:
        """``(T, ...)`` or ``(name:T, ...)`` (all fields named or none)."""
        if not (allow_names and self.named_after_paren()):
            return None, self.fields(self.field_type)
        pairs = self.fields(self.named_field)
        names = [n for n, _ in pairs]
        if len(set(names)) != len(names):
            raise self.fail("a field name is given twice")
        return names, [t for _, t in pairs]

    def named_after_paren(self) -> bool:
        """True at ``(name:...``: a field list whose fields are named."""
        return self.peek() == "(" and self._named_at(1)

    def _named_at(self, ahead: int) -> bool:
        tok = self.peek(ahead)
        return tok is not None and (tok[0].isalpha() or tok[0] in "_$") and self.peek(ahead + 1) == ":"

    def named_field(self) -> tuple[str, Type]:
        if not self.named():
            raise self.fail(f"expected name:type, found {self.peek() or 'the end'} (name every field or none)")
        name = self.field_name()
        self.take(":")
        return name, self.field_type()

    def rowdata_type(self) -> str:
        tok = self.take()
        name = _ROWDATA_ALIASES.get(tok, tok)
        if name not in ROWDATA_TYPES:
            raise ValueSpecError(
                f"value spec {self.spec!r}: {tok!r} is not a rowdata field type ({', '.join(ROWDATA_TYPES)})"
            )
        return name

    def fields(self, item: Callable[[], _T]) -> list[_T]:
        self.take("(")
        out = [item()]
        while self.peek() == ",":
            self.take(",")
            out.append(item())
        self.take(")")
        return out

    def end(self) -> None:
        if self.peek() is not None:
            raise ValueSpecError(f"value spec {self.spec!r}: unexpected {self.peek()!r} after the type")


def parse_value_spec(spec: str) -> Type:
    p = SpecParser(spec)
    t = p.type()
    if p.peek() == ":":
        raise ValueSpecError(
            f"value spec {spec!r}: a :field after the type picks a key; a value spec is {t.spec} alone"
        )
    p.end()
    return t


def decode(t: Type, data: bytes | memoryview) -> object:
    """Decode a whole value; raises ValueSpecError when the bytes do not fit exactly."""
    raw = bytes(data)
    try:
        value, end = t.read(raw, 0)
    except (struct.error, IndexError) as exc:
        raise ValueSpecError(f"not a {t.spec}: {exc}") from None
    except ValueSpecError as exc:
        raise ValueSpecError(f"not a {t.spec}: {exc}") from None
    if end != len(raw):
        raise ValueSpecError(f"not a {t.spec}: {len(raw) - end} bytes left over")
    return value


def decode_value(spec: str, data: bytes | memoryview) -> object:
    return decode(parse_value_spec(spec), data)


AUTO_ORDER = ("string", "long", "int", "boolean")


def render_value(raw: bytes | memoryview | None, spec: str) -> tuple[str, str | None]:
    """(text, problem) for display: ``spec`` is a value spec, ``auto`` (first of string, long, int, boolean that
    fits exactly) or ``hex``. Bytes that do not fit show as hex, with the reason as ``problem``."""
    if raw is None:
        return "-", None
    raw = bytes(raw)
    if spec == "hex":
        return raw.hex(), None
    if spec == "auto":
        for kind in AUTO_ORDER:
            try:
                return repr(decode(ScalarType(SCALARS[kind]), raw)), None
            except ValueSpecError:
                continue
        return raw.hex(), None
    try:
        return repr(decode(parse_value_spec(spec), raw)), None
    except ValueSpecError as exc:
        return raw.hex(), str(exc)


def json_data(value: object) -> object:
    """A decoded value as JSON data, not its Python text: strings, numbers, booleans and null as themselves,
    tuples as arrays, rows as ``{"kind": "+I", "fields": [...]}``, raw bytes and fields of unknown type as
    ``{"hex": "..."}``."""
    if value is None or isinstance(value, bool | int | str):
        return value
    if isinstance(value, Float32):
        return float(repr(value)) if math.isfinite(value) else repr(value)  # JSON has no NaN or infinity
    if isinstance(value, float):
        return value if math.isfinite(value) else repr(value)
    if isinstance(value, bytes | bytearray):
        return {"hex": bytes(value).hex()}
    if isinstance(value, Undecoded):
        return {"hex": value.raw.hex()}
    if isinstance(value, RowValue):
        if value.names is not None:
            named = {n: json_data(f) for n, f in zip(value.names, value.fields, strict=True)}
            return {"kind": value.kind, "fields": named}
        return {"kind": value.kind, "fields": [json_data(f) for f in value.fields]}
    if isinstance(value, tuple | list):
        return [json_data(f) for f in value]
    as_json = getattr(value, "json_data", None)  # composite values of other modules (POJOs, maps)
    if callable(as_json):
        return as_json(json_data)
    if isinstance(value, dict):  # an Avro record or map
        return {str(k): json_data(v) for k, v in value.items()}
    return repr(value)


def value_data(raw: bytes | memoryview | None, spec: str) -> tuple[object, str | None]:
    """(value as JSON data, problem) — ``render_value``'s decoding, for documents: the value itself, or
    ``{"hex": …}`` for ``hex``, for bytes ``auto`` cannot read, and for bytes that do not fit ``spec`` (with
    the reason as ``problem``)."""
    if raw is None:
        return None, None
    raw = bytes(raw)
    if spec == "hex":
        return {"hex": raw.hex()}, None
    if spec == "auto":
        for kind in AUTO_ORDER:
            try:
                return json_data(decode(ScalarType(SCALARS[kind]), raw)), None
            except ValueSpecError:
                continue
        return {"hex": raw.hex()}, None
    try:
        return json_data(decode(parse_value_spec(spec), raw)), None
    except ValueSpecError as exc:
        return {"hex": raw.hex()}, str(exc)


def check_display_spec(spec: str) -> None:
    """Raise ValueSpecError unless ``spec`` is auto, hex or a value spec."""
    if spec not in ("auto", "hex"):
        parse_value_spec(spec)


# ---------------------------------------------------------------- key extractors


class KeyExtractor:
    """``extractor(payload) -> (key, Java hashCode of the key)`` for one StreamRecord value (the bytes after
    the tag byte and optional timestamp)."""

    def __init__(self, spec: str, value_type: Type, field: int | None, strict: bool) -> None:
        self.spec = spec
        self.value_type = value_type
        self.field = field
        self.strict = strict  # the whole value must decode exactly (no ``?`` after the key)
        if field is None:
            self.key_type = value_type
        else:
            assert isinstance(value_type, TupleType | RowType)  # parse_key_extractor picks fields of these only
            self.key_type = value_type.fields[field]
        self._hash = self.key_type.hash

    def __call__(self, payload: bytes | memoryview) -> tuple[object, int]:
        data = payload if isinstance(payload, bytes) else bytes(payload)
        try:
            if self.field is None:
                key, end = self.value_type.read(data, 0)
            elif self.strict:
                value, end = self.value_type.read(data, 0)
                if isinstance(value, RowValue):
                    key = value.fields[self.field]
                else:
                    assert isinstance(value, tuple)  # what TupleType.read gives
                    key = value[self.field]
            else:
                assert isinstance(self.value_type, TupleType | RowType)  # a field: __init__ checked
                key, end = self.value_type.read_until(data, 0, self.field)
                end = len(data)
        except (struct.error, IndexError) as exc:
            raise ValueSpecError(f"value does not fit {self.spec!r}: {exc}") from None
        except ValueSpecError as exc:
            raise ValueSpecError(f"value does not fit {self.spec!r}: {exc}") from None
        if end != len(data):
            raise ValueSpecError(
                f"value does not fit {self.spec!r}: {len(data) - end} bytes left over (more fields than the spec "
                "names? end the field list with ? to leave them unchecked)"
            )
        if key is None:
            raise ValueSpecError(f"the key of {self.spec!r} is null in this value; Flink refuses null keys")
        return key, self._hash(key)

    def __repr__(self) -> str:
        return f"KeyExtractor({self.spec!r})"


class RowDataKeyExtractor(KeyExtractor):
    """SQL/Table keyed operators key by a projection of the key fields into a new BinaryRowData (kind INSERT);
    its hashCode is ``murmur_words`` of that row's bytes. The key is shown as a row of the key fields."""

    def __init__(self, spec: str, value_type: RowDataType, fields: list[int]) -> None:
        self.spec = spec
        self.value_type = value_type
        self.field = fields[0] if len(fields) == 1 else None
        self.fields = fields
        self.strict = True
        self.key_types = [value_type.types[i] for i in fields]

    def __call__(self, payload: bytes | memoryview) -> tuple[object, int]:
        data = payload if isinstance(payload, bytes) else bytes(payload)
        try:
            row = decode(self.value_type, data)
        except ValueSpecError as exc:
            raise ValueSpecError(f"value does not fit {self.spec!r}: {exc}") from None
        assert isinstance(row, RowValue)  # what RowDataType.read gives
        values = tuple(row.fields[i] for i in self.fields)
        return RowValue("+I", values), murmur_words(binary_row(self.key_types, values))


_SHORTHAND = re.compile(r"^\s*(tuple|row)\s*:\s*(\d+)\s*:\s*(.+?)\s*$", re.IGNORECASE)
_INDEXED = re.compile(r"^(.*\))\s*:\s*(\d+(?:\s*,\s*\d+)*)\s*$", re.DOTALL)


def _path_key(spec: str) -> KeyExtractor:
    _load_spec_modules()
    return PATH_KEYS[0](spec)


def parse_key_extractor(spec: str) -> KeyExtractor:
    """``long`` / ``string`` / ``int`` / ``boolean`` / … (whole value), ``tuple(long,string):1``,
    ``row(long,int,string):2`` or ``tuple:0:long`` (field 0 of a tuple of any arity); fields by name or path
    and derived keys (``pojo(user:string,…):user|before(':')``) in ``key_paths``; ``avro(…)`` and ``kryo2/5(…)``
    keys through ``key_paths`` like any other spec."""
    if "|" in spec:
        return _path_key(spec)
    m = _SHORTHAND.match(spec)
    if m:
        kind, index, key_spec = m.group(1).lower(), int(m.group(2)), m.group(3)
        key_type = parse_value_spec(key_spec)
        if kind == "row":
            raise ValueSpecError(
                f"key spec {spec!r}: a Row starts with a null mask whose size depends on the arity, and the fields "
                f"before field {index} have unknown widths; name all fields: row(T0,T1,...):{index}, e.g. "
                "row(long,int,string):2 (use ? for fields after the key)"
            )
        if index != 0:
            raise ValueSpecError(
                f"key spec {spec!r}: the widths of the tuple fields before field {index} are unknown; name them: "
                f"tuple(T0,...,T{index},?):{index}, e.g. tuple(long,{key_type.spec},?):1"
            )
        t: Type = TupleType([key_type, UnknownType()])
        return _extractor(spec, t, 0)
    m = _INDEXED.match(spec.strip())
    if m:
        t = parse_value_spec(m.group(1))
        if not isinstance(t, TupleType | RowType | RowDataType):
            return _path_key(spec)
        indices = [int(x) for x in m.group(2).split(",")]
        if isinstance(t, RowDataType):
            return _rowdata_extractor(spec, t, indices)
        if len(indices) > 1:
            raise ValueSpecError(f"key spec {spec!r}: a tuple or row key is one field (:N)")
        index = indices[0]
        if not isinstance(t, TupleType | RowType):
            raise ValueSpecError(f"key spec {spec!r}: only tuple(...) and row(...) have fields to pick")
        if index >= len(t.fields):
            raise ValueSpecError(f"key spec {spec!r}: field {index} does not exist ({len(t.fields)} fields)")
        return _extractor(spec, t, index)
    if ":" in spec:
        return _path_key(spec)  # a field by name
    t = parse_value_spec(spec)
    if callable(getattr(t, "path_field", None)):
        return _path_key(spec)  # a type of another module whose fields are picked by name (avro, kryo)
    if not isinstance(t, ScalarType):
        raise ValueSpecError(
            f"key spec {spec!r}: pick the key field with :N, e.g. {t.spec}:0 (the key of a KeySelector that returns "
            "a tuple field is that field)"
        )
    return _extractor(spec, t, None)


def _extractor(spec: str, t: Type, index: int | None) -> KeyExtractor:
    if index is not None:
        assert isinstance(t, TupleType | RowType)  # parse_key_extractor gives an index for these only
        fields = t.fields
        unknown = [i for i, f in enumerate(fields[: index + 1]) if not f.known]
        if unknown:
            raise ValueSpecError(
                f"key spec {spec!r}: field {unknown[0]} (at or before the key field {index}) has an unknown type"
            )
        key = fields[index]
        if isinstance(key, RowType):
            raise ValueSpecError(f"key spec {spec!r}: Row-valued keys are not supported (their hashCode is deep)")
        if isinstance(key, TupleType):
            bad = [f for f in key.fields if not isinstance(f, ScalarType | TupleType)]
            if bad:
                raise ValueSpecError(f"key spec {spec!r}: the key tuple has a field of type {bad[0].spec}")
    else:
        key = t
    # A throwaway hash call would raise for bytes keys only at run time; check now.
    if isinstance(key, ScalarType) and key.scalar.hash is None:
        raise ValueSpecError(f"key spec {spec!r}: {key.spec} keys hash by object identity; Flink cannot route them")
    return KeyExtractor(spec, t, index, strict=t.known)


def _rowdata_extractor(spec: str, t: RowDataType, indices: list[int]) -> KeyExtractor:
    for i in indices:
        if i >= len(t.types):
            raise ValueSpecError(f"key spec {spec!r}: field {i} does not exist ({len(t.types)} fields)")
        if t.types[i] == "?":
            raise ValueSpecError(f"key spec {spec!r}: key field {i} has an unknown type")
    if len(set(indices)) != len(indices):
        raise ValueSpecError(f"key spec {spec!r}: a key field is named twice")
    return RowDataKeyExtractor(spec, t, indices)
