"""``avro(SCHEMA)`` value specs: records as Flink's AvroSerializer writes them (docs/format/avro-values.md).

Flink's AvroSerializer (specific and generic records alike) hands the record to Avro's datum writer with Flink's
own ``DataOutputEncoder`` over the record's DataOutputView: no header, no schema id, no length — the datum
alone, and not in Avro's binary encoding but in DataOutput's: ``int``/``enum``/union index 4 bytes big-endian,
``long`` 8, ``float`` 4, ``double`` 8, ``boolean`` 1; ``string``/``bytes`` an int32 length then the (UTF-8)
bytes; ``fixed`` its bytes; ``null`` nothing; arrays and maps in blocks, each an unsigned 7-bit varint item
count, the last block of count 0; record fields in schema order.

Key specs: ``avro(SCHEMA):path.to.field`` — the field a KeySelector returns, hashed as the Java value it
returns: a string as ``String`` (a KeySelector returning ``getId().toString()``), or with ``@utf8`` after the
path as Avro's ``Utf8`` (a KeySelector returning the field itself; its hash differs), ``int`` as Integer,
``long`` as Long, ``boolean``, ``float``, ``double`` as their boxes.
A union with ``null`` is allowed on the way; a null key is refused as Flink refuses it.
"""

from __future__ import annotations

import math
import struct
from typing import Any

from spillway.flink.keygroups import java_boolean_hash, java_int_hash, java_long_hash, java_string_hash
from spillway.formats.avro_schema import AvroNode, load_schema
from spillway.formats.values import Float32, KeyExtractor, Type, ValueSpecError

MAX_DEPTH = 64  # nesting of a recursive schema's data; deeper is refused rather than recursing on
_I32 = struct.Struct(">i")
_I64 = struct.Struct(">q")
_F32 = struct.Struct(">f")
_F64 = struct.Struct(">d")


class _Reader:
    """One value's bytes; positions in messages are offsets into the value (after tag and timestamp)."""

    def __init__(self, data: bytes) -> None:
        self.data = data

    def need(self, pos: int, n: int, what: str) -> None:
        if n < 0 or pos + n > len(self.data):
            left = max(0, len(self.data) - pos)
            raise ValueSpecError(f"{what} at offset {pos} needs {n} bytes, {left} left")

    def int32(self, pos: int, what: str) -> tuple[int, int]:
        self.need(pos, 4, what)
        return _I32.unpack_from(self.data, pos)[0], pos + 4

    def count(self, pos: int, what: str) -> tuple[int, int]:
        """DataOutputEncoder's block count: unsigned varint, 7 bits a byte, least significant first."""
        value = shift = 0
        start = pos
        while True:
            if pos >= len(self.data):
                raise ValueSpecError(f"{what} block count at offset {start} runs past the end of the value")
            b = self.data[pos]
            pos += 1
            value |= (b & 0x7F) << shift
            if b < 0x80:
                return value, pos
            shift += 7
            if shift > 63:
                raise ValueSpecError(f"{what} block count at offset {start} is longer than 9 bytes")

    def read(self, node: AvroNode, pos: int, where: str, depth: int = 0) -> tuple[object, int]:
        if depth > MAX_DEPTH:
            raise ValueSpecError(f"{where}: nested deeper than {MAX_DEPTH} levels at offset {pos}")
        kind = node.kind
        data = self.data
        if kind == "null":
            return None, pos
        if kind == "boolean":
            self.need(pos, 1, f"{where} (boolean)")
            if data[pos] > 1:
                raise ValueSpecError(f"{where}: boolean byte {data[pos]:#04x} at offset {pos} is not 0 or 1")
            return data[pos] == 1, pos + 1
        if kind == "int":
            return self.int32(pos, f"{where} (int)")
        if kind == "long":
            self.need(pos, 8, f"{where} (long)")
            return _I64.unpack_from(data, pos)[0], pos + 8
        if kind == "float":
            self.need(pos, 4, f"{where} (float)")
            return Float32(_F32.unpack_from(data, pos)[0]), pos + 4
        if kind == "double":
            self.need(pos, 8, f"{where} (double)")
            return _F64.unpack_from(data, pos)[0], pos + 8
        if kind in ("string", "bytes"):
            n, start = self.int32(pos, f"{where} ({kind} length)")
            if n < 0:
                raise ValueSpecError(f"{where}: {kind} length {n} at offset {pos} is negative")
            self.need(start, n, f"{where} ({kind} of {n} bytes)")
            raw = data[start : start + n]
            if kind == "bytes":
                return raw, start + n
            try:
                return raw.decode("utf-8"), start + n
            except UnicodeDecodeError as exc:
                raise ValueSpecError(f"{where}: string at offset {start} is not UTF-8 (byte {exc.start})") from None
        if kind == "fixed":
            self.need(pos, node.size, f"{where} (fixed {node.name})")
            return data[pos : pos + node.size], pos + node.size
        if kind == "enum":
            i, end = self.int32(pos, f"{where} (enum {node.name})")
            if not 0 <= i < len(node.symbols):
                raise ValueSpecError(
                    f"{where}: enum {node.name} index {i} at offset {pos} is not 0..{len(node.symbols) - 1}"
                )
            return node.symbols[i], end
        if kind == "union":
            i, end = self.int32(pos, f"{where} (union index)")
            if not 0 <= i < len(node.branches):
                raise ValueSpecError(
                    f"{where}: union index {i} at offset {pos} is not one of the {len(node.branches)} branches "
                    f"{node.describe()}"
                )
            return self.read(node.branches[i], end, where, depth)
        if kind == "record":
            out: dict[str, object] = {}
            for name, f in node.fields:
                out[name], pos = self.read(f, pos, f"{where}.{name}" if where else name, depth + 1)
            return out, pos
        if kind in ("array", "map"):
            return self.blocks(node, pos, where, depth)
        raise ValueSpecError(f"{where}: unsupported Avro type {kind}")  # the schema parser makes no others

    def blocks(self, node: AvroNode, pos: int, where: str, depth: int) -> tuple[object, int]:
        assert node.items is not None  # every array and map has its item type
        items: list[object] = []
        entries: dict[str, object] = {}
        while True:
            at = pos
            n, pos = self.count(pos, f"{where} ({node.kind})")
            if n == 0:
                return (items if node.kind == "array" else entries), pos
            # Every item but a null takes at least one byte: a count beyond the bytes left is damage.
            if n > len(self.data) - pos + (1 << 20 if node.items.kind == "null" else 0):
                raise ValueSpecError(f"{where}: {node.kind} block of {n} items at offset {at} exceeds the value")
            for i in range(n):
                if node.kind == "array":
                    v, pos = self.read(node.items, pos, f"{where}[{len(items)}]", depth + 1)
                    items.append(v)
                else:
                    k, pos = self.read(AvroNode("string"), pos, f"{where} (map key {i})", depth + 1)
                    assert isinstance(k, str)
                    entries[k], pos = self.read(node.items, pos, f"{where}[{k!r}]", depth + 1)


class AvroType(Type):
    """``avro(SCHEMA)``: one datum of the schema (a record as a dict of its fields)."""

    def __init__(self, ref: str, schema: AvroNode) -> None:
        self.ref = ref
        self.schema = schema

    @property
    def spec(self) -> str:
        return f"avro({self.ref})"

    def read(self, data: bytes, pos: int) -> tuple[object, int]:
        return _Reader(data).read(self.schema, pos, "")


def key_node(schema: AvroNode, path: list[str], spec: str) -> AvroNode:
    """The schema of the key field at ``path``; refuses a path through anything but records (and unions of
    null and a record) and a key type whose Java hashCode is not its content."""
    node = schema
    walked: list[str] = []
    for name in path:
        node = _not_null(node)
        if node.kind != "record":
            at = ".".join(walked) or "the value"
            raise ValueSpecError(f"key spec {spec!r}: {at} is a {node.describe()}, not a record with field {name!r}")
        found = dict(node.fields).get(name)
        if found is None:
            names = ", ".join(n for n, _ in node.fields)
            raise ValueSpecError(f"key spec {spec!r}: record {node.name} has no field {name!r} (fields: {names})")
        node = found
        walked.append(name)
    leaf = _not_null(node)
    if leaf.kind not in _HASHES:
        raise ValueSpecError(
            f"key spec {spec!r}: a {leaf.describe()} key has no content-based Java hashCode Flink could route "
            f"by; key by a string, int, long, boolean, float or double field"
        )
    return leaf


def _not_null(node: AvroNode) -> AvroNode:
    if node.kind != "union":
        return node
    rest = [b for b in node.branches if b.kind != "null"]
    return rest[0] if len(rest) == 1 else node


def _float_hash(v: float) -> int:
    return 0x7FC00000 if math.isnan(v) else _I32.unpack(_F32.pack(v))[0]


def _double_hash(v: float) -> int:
    bits = 0x7FF8000000000000 if math.isnan(v) else _I64.unpack(_F64.pack(v))[0]
    return java_long_hash(bits)


def _utf8_hash(v: str) -> int:
    """Avro's ``Utf8.hashCode`` (Avro 1.12): ``Arrays.hashCode`` of the UTF-8 bytes, each a signed byte."""
    h = 1
    for b in v.encode("utf-8", "surrogatepass"):
        h = (31 * h + (b - 256 if b > 127 else b)) & 0xFFFFFFFF
    return h - (1 << 32) if h & 0x80000000 else h


_HASHES: dict[str, Any] = {
    "string": java_string_hash,
    "int": java_int_hash,
    "long": java_long_hash,
    "boolean": java_boolean_hash,
    "float": _float_hash,
    "double": _double_hash,
    "utf8": _utf8_hash,  # not an Avro type: a string key the KeySelector returns as Avro's Utf8
}


class AvroKeyExtractor(KeyExtractor):
    """The whole record is decoded (so damage shows), then the key is taken at the field path."""

    def __init__(self, spec: str, value_type: AvroType, path: list[str], as_utf8: bool = False) -> None:
        self.spec = spec
        self.value_type = value_type
        self.field = None
        self.strict = True
        self.path = path
        self.key_type = value_type
        leaf = key_node(value_type.schema, path, spec)
        if as_utf8 and leaf.kind != "string":
            raise ValueSpecError(f"key spec {spec!r}: @utf8 is for string fields; this one is a {leaf.describe()}")
        self._hash = _HASHES["utf8" if as_utf8 else leaf.kind]

    def __call__(self, payload: bytes | memoryview) -> tuple[object, int]:
        data = payload if isinstance(payload, bytes) else bytes(payload)
        try:
            value, end = self.value_type.read(data, 0)
        except ValueSpecError as exc:
            raise ValueSpecError(f"value does not fit {self.spec!r}: {exc}") from None
        if end != len(data):
            raise ValueSpecError(
                f"value does not fit {self.spec!r}: {len(data) - end} bytes left over after offset {end} (a "
                "different schema version?)"
            )
        key = value
        for name in self.path:
            if key is None:
                break
            assert isinstance(key, dict)  # key_node checked that the path runs through records
            key = key[name]
        if key is None:
            raise ValueSpecError(f"the key of {self.spec!r} is null in this value; Flink refuses null keys")
        return key, self._hash(key)


def split_avro_spec(spec: str) -> tuple[str, list[str]] | None:
    """``avro(REF)[:a.b.c]`` -> (REF, [a, b, c]); None if ``spec`` is not an avro spec. REF may hold ``:`` and
    ``/`` (a URL, a path); the field path is what follows the last ``)``."""
    text = spec.strip()
    if not text.lower().startswith("avro(") and not text.lower().startswith("avro ("):
        return None
    open_at = text.index("(")
    close_at = text.rfind(")")
    if close_at < open_at:
        raise ValueSpecError(f"value spec {spec!r}: avro( without its closing )")
    ref = text[open_at + 1 : close_at].strip()
    if not ref:
        raise ValueSpecError(f"value spec {spec!r}: name the schema: avro(FILE.avsc) or avro(http://registry/…)")
    rest = text[close_at + 1 :].strip()
    if not rest:
        return ref, []
    if not rest.startswith(":") or not rest[1:].strip():
        raise ValueSpecError(f"value spec {spec!r}: expected :field.path after avro(…), found {rest!r}")
    path = [p.strip() for p in rest[1:].split(".")]
    if any(not p for p in path):
        raise ValueSpecError(f"key spec {spec!r}: empty field name in {rest[1:]!r}")
    return ref, path


UTF8_SUFFIX = "@utf8"  # the KeySelector returns Avro's Utf8 (the field itself), not a String


def parse_avro_value_spec(spec: str) -> AvroType | None:
    found = split_avro_spec(spec)
    if found is None:
        return None
    ref, path = found
    if path:
        raise ValueSpecError(f"value spec {spec!r}: a field path picks a key; a value spec is avro({ref}) alone")
    return AvroType(ref, load_schema(ref))


def parse_avro_key_extractor(spec: str) -> AvroKeyExtractor | None:
    found = split_avro_spec(spec)
    if found is None:
        return None
    ref, path = found
    if not path:
        raise ValueSpecError(
            f"key spec {spec!r}: name the key field: avro({ref}):FIELD (a nested one as outer.inner), the field "
            "the job's KeySelector returns"
        )
    as_utf8 = path[-1].lower().endswith(UTF8_SUFFIX)
    if as_utf8:
        path[-1] = path[-1][: -len(UTF8_SUFFIX)].strip()
    return AvroKeyExtractor(spec, AvroType(ref, load_schema(ref)), path, as_utf8)
