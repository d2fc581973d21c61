"""``avro(SCHEMA)`` value specs: records as Flink's AvroSerializer writes them (docs/format/avro-values.md).

Flink's AvroSerializer (specific and generic records alike) hands the record to Avro's datum writer with Flink's
own ``DataOutputEncoder`` over the record's DataOutputView: no header, no schema id, no length — the datum
alone, and not in Avro's binary encoding but in DataOutput's: ``int``/``enum``/union index 4 bytes big-endian,
``long`` 8, ``float`` 4, ``double`` 8, ``boolean`` 1; ``string``/``bytes`` an int32 length then the (UTF-8)
bytes; ``fixed`` its bytes; ``null`` nothing; arrays and maps in blocks, each an unsigned 7-bit varint item
count, the last block of count 0; record fields in schema order.

``avro(...)`` is a spec of the one grammar (``register_spec``): it nests (``tuple(long,avro(order.avsc))``) and
its keys go through ``key_paths``: ``avro(SCHEMA):path.to.field`` — the field a KeySelector returns, hashed as
the Java value it returns: a string as ``String`` (a KeySelector returning ``getId().toString()``), or with
``@utf8`` after the path as Avro's ``Utf8`` (a KeySelector returning the field itself; its hash differs), ``int``
as Integer, ``long`` as Long, ``boolean``, ``float``, ``double`` as their boxes; key functions apply to String
keys (``avro(…):user.id|before(':')``). A union with ``null`` is allowed on the way; a null key is refused as
Flink refuses it. In Parquet a record is a struct, an enum its symbol, a union with ``null`` its other branch,
a union of several types (and a recursive record's nested levels) JSON text.
"""

from __future__ import annotations

import json
import struct
from typing import Any

from spillway.formats.avro_schema import AvroNode, load_schema
from spillway.formats.values import (
    SCALARS,
    Float32,
    Scalar,
    ScalarType,
    SpecParser,
    Type,
    ValueSpecError,
    json_data,
    read_string,
    register_spec,
)

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
    """``avro(SCHEMA)``: one datum of the schema (a record as a dict of its fields). ``node`` is the part of the
    schema this type stands for: the whole schema, or a field reached by a key path."""

    def __init__(self, ref: str, schema: AvroNode, node: AvroNode | None = None) -> None:
        self.ref = ref
        self.schema = schema
        self.node = schema if node is None else node

    @property
    def spec(self) -> str:
        return f"avro({self.ref})" if self.node is self.schema else self.node.describe()

    def read(self, data: bytes, pos: int) -> tuple[object, int]:
        return _Reader(data).read(self.node, pos, "")

    def path_field(self, spec: str, walked: list[str], name: str) -> tuple[tuple[str, str], Type]:
        """The record field ``name`` (key_paths): through records and unions of null and a record only."""
        node = _not_null(self.node)
        if node.kind != "record":
            at = ".".join(walked) or "the value"
            raise ValueSpecError(f"key spec {spec!r}: {at} is a {node.describe()}, not a record with field {name!r}")
        found = dict(node.fields).get(name)
        if found is None:
            names = ", ".join(n for n, _ in node.fields)
            raise ValueSpecError(f"key spec {spec!r}: record {node.name} has no field {name!r} (fields: {names})")
        return ("item", name), AvroType(self.ref, self.schema, found)

    def as_key(self, spec: str, as_utf8: bool) -> Type:
        """The key field as the Java value the KeySelector returns; refuses types whose Java hashCode is not
        their content (records, enums, arrays, maps, bytes, fixed, unions of several types)."""
        leaf = _not_null(self.node)
        if as_utf8 and leaf.kind != "string":
            raise ValueSpecError(f"key spec {spec!r}: @utf8 is for string fields; this one is a {leaf.describe()}")
        if as_utf8:
            return ScalarType(UTF8)
        if leaf.kind not in _KEY_SCALARS:
            raise ValueSpecError(
                f"key spec {spec!r}: a {leaf.describe()} key has no content-based Java hashCode Flink could route "
                f"by; key by a string, int, long, boolean, float or double field"
            )
        return ScalarType(SCALARS[leaf.kind])

    def arrow_type(self) -> Any:
        return _arrow_type(self.node, set())

    def arrow_value(self, value: object) -> object:
        return _arrow_value(self.node, value, set())


def _not_null(node: AvroNode) -> AvroNode:
    if node.kind != "union":
        return node
    rest = [b for b in node.branches if b.kind != "null"]
    return rest[0] if len(rest) == 1 else node


def _utf8_hash(v: str) -> int:
    """Avro's ``Utf8.hashCode`` (Avro 1.12): ``Arrays.hashCode`` of the UTF-8 bytes, each a signed byte."""
    h = 1
    for b in v.encode("utf-8", "surrogatepass"):
        h = (31 * h + (b - 256 if b > 127 else b)) & 0xFFFFFFFF
    return h - (1 << 32) if h & 0x80000000 else h


_KEY_SCALARS = ("string", "int", "long", "boolean", "float", "double")  # Avro kinds read as these Java boxes
# only hashes: Avro values are read by _Reader, not read_string
UTF8: Scalar[Any] = Scalar("utf8", read_string, _utf8_hash)


# ---------------------------------------------------------------- Arrow (value_arrow: the Parquet of salvage)


def _arrow_type(node: AvroNode, open_records: set[int]) -> Any:
    import pyarrow as pa  # only when writing Parquet: the command line starts without it

    kind = node.kind
    simple = {
        "null": pa.null(),
        "boolean": pa.bool_(),
        "int": pa.int32(),
        "long": pa.int64(),
        "float": pa.float32(),
        "double": pa.float64(),
        "string": pa.string(),
        "bytes": pa.binary(),
        "enum": pa.string(),
    }
    if kind in simple:
        return simple[kind]
    if kind == "fixed":
        return pa.binary(node.size)
    if kind == "union":
        other = _not_null(node)
        return pa.string() if other is node else _arrow_type(other, open_records)
    if kind in ("array", "map"):
        assert node.items is not None  # every array and map has its item type
        items = _arrow_type(node.items, open_records)
        return pa.list_(items) if kind == "array" else pa.map_(pa.string(), items)
    if id(node) in open_records:  # a recursive record: its nested levels as JSON text
        return pa.string()
    inner = open_records | {id(node)}
    return pa.struct([(name, _arrow_type(f, inner)) for name, f in node.fields])


def _arrow_value(node: AvroNode, value: object, open_records: set[int]) -> object:
    if value is None:
        return None
    kind = node.kind
    if kind == "union":
        other = _not_null(node)
        if other is node:
            return json.dumps(json_data(value), ensure_ascii=False)
        return _arrow_value(other, value, open_records)
    if kind == "string":
        assert isinstance(value, str)
        return value.encode("utf-8", "replace").decode("utf-8")
    if kind == "float":
        assert isinstance(value, float)
        return float(value)
    if kind == "array":
        assert node.items is not None and isinstance(value, list)
        return [_arrow_value(node.items, v, open_records) for v in value]
    if kind == "map":
        assert node.items is not None and isinstance(value, dict)
        return [(k, _arrow_value(node.items, v, open_records)) for k, v in value.items()]
    if kind == "record":
        assert isinstance(value, dict)
        if id(node) in open_records:
            return json.dumps(json_data(value), ensure_ascii=False)
        inner = open_records | {id(node)}
        return {name: _arrow_value(f, value[name], inner) for name, f in node.fields}
    return value


def _avro(p: SpecParser) -> Type:
    ref = p.raw_argument()
    if not ref:
        raise p.fail("name the schema: avro(FILE.avsc) or avro(http://registry/…)")
    return AvroType(ref, load_schema(ref))


register_spec("avro", _avro, raw_argument=True)
