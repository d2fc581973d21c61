"""``kryo2(...)`` / ``kryo5(...)`` value specs: a class Flink serializes with Kryo (its ``GenericTypeInfo`` fallback),
read when its fields are of known layout (docs/format/kryo-values.md).

What Flink's KryoSerializer writes (checked against Flink 1.20.3's Kryo 2.24 and Flink 2.3.0's Kryo 5 in
tests/integration/test_kryo_values.py): ``writeClassAndObject`` — the class's registration id + 2 as a varint
(Flink always registers the serializer's own class; the id depends on every registration before it), then a
reference marker (varint 1: a new object), then Kryo's FieldSerializer: the class's fields (inherited ones too)
sorted by name, each as

* ``int``/``long`` (and their boxes' values): zigzag varint; ``boolean``/``byte``: 1 byte; ``short``/``char``
  2 bytes, ``float`` 4, ``double`` 8 — big-endian in Kryo 2 (Flink 1.x), little-endian in Kryo 5 (Flink 2.x);
* a boxed value or a ``String``: first a marker (varint 0 = null, 1 = a new object; for strings ≥ 2 = the
  object numbered marker - 2 of this record, i.e. the same String instance again), then the value;
* a string: ASCII text whose last byte has the high bit set, or a length (charCount + 1; 6 bits in the first
  byte under the 0x80 flag, 0x40 = more bytes follow as a 7-bit varint) and the UTF-16 units as modified UTF-8.

Any other field type (collections, nested classes, enums, ``Object``) is written with the class and serializer
Kryo resolves at run time, which the bytes alone do not tell: refused, with what to pass instead.

``kryo2(...)``/``kryo5(...)`` are specs of the one grammar (``register_spec``; the field list is read verbatim):
they nest (``tuple(long,kryo5(…))``), take keys through ``key_paths`` (``kryo5(…):user|lower``) and are Arrow
structs in Parquet (a ``char`` as a one-character string).
"""

from __future__ import annotations

import re
import struct
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from spillway.formats.values import (
    SCALARS,
    Float32,
    Scalar,
    ScalarType,
    SpecParser,
    Type,
    ValueSpecError,
    register_spec,
)

KRYO_VERSIONS = {"kryo2": ">", "kryo5": "<"}  # fixed-width byte order: Flink 1.x ships Kryo 2, 2.x Kryo 5
PRIMITIVES = ("long", "int", "short", "byte", "boolean", "double", "float", "char")
BOXES = {"Long": "long", "Integer": "int", "Short": "short", "Byte": "byte", "Boolean": "boolean",
         "Double": "double", "Float": "float", "Character": "char", "String": "string", "string": "string"}  # fmt: skip
_FIELD = re.compile(r"^\s*([A-Za-z_$][A-Za-z0-9_$]*)\s*:\s*([A-Za-z]+)\s*$")

REFUSAL = (
    "Kryo writes a field of type {type} with the class and serializer it resolves at run time (registration "
    "ids depend on the job's registrations), which the bytes alone do not tell; spillway reads Kryo fields of "
    "types string, long, int, short, byte, boolean, double, float, char and their boxes (Long, Integer, …). "
    "For other classes pass --key-fn MODULE:FUNCTION (a Python function of the serialized bytes), or give the "
    "class a Flink type: a POJO (public no-arg constructor, public fields or getters/setters) or Avro (avro(…))"
)


@dataclass(frozen=True)
class KryoField:
    name: str
    kind: str  # a primitive name or "string"
    boxed: bool  # written after a null/reference marker (boxes and strings)

    @property
    def spec(self) -> str:
        box = next(b for b, k in BOXES.items() if k == self.kind and b[0].isupper()) if self.boxed else self.kind
        return f"{self.name}:{box}"


class _Reader:
    def __init__(self, data: bytes, order: str) -> None:
        self.data = data
        self.order = order
        self.objects: list[object] = []  # Kryo's reference ids of this record: the record itself, then strings

    def need(self, pos: int, n: int, what: str) -> None:
        if pos + n > len(self.data):
            raise ValueSpecError(f"{what} at offset {pos} needs {n} bytes, {max(0, len(self.data) - pos)} left")

    def varint(self, pos: int, what: str, max_bytes: int = 5) -> tuple[int, int]:
        """Kryo's varint: 7 bits a byte, least significant first; a long's 9th byte holds 8 bits."""
        value = shift = 0
        start = pos
        while True:
            self.need(pos, 1, what)
            b = self.data[pos]
            pos += 1
            if shift == 56:
                return value | (b << 56), pos
            value |= (b & 0x7F) << shift
            if b < 0x80:
                return value, pos
            shift += 7
            if pos - start == max_bytes:
                raise ValueSpecError(f"{what}: varint at offset {start} is longer than {max_bytes} bytes")

    def zigzag(self, pos: int, what: str, bits: int) -> tuple[int, int]:
        v, end = self.varint(pos, what, 5 if bits == 32 else 9)
        v = (v >> 1) ^ -(v & 1)
        if not -(1 << (bits - 1)) <= v < (1 << (bits - 1)):
            raise ValueSpecError(f"{what}: varint at offset {pos} is out of range for a {bits}-bit value")
        return v, end

    def fixed(self, fmt: str, pos: int, what: str) -> tuple[Any, int]:
        s = struct.Struct(self.order + fmt)
        self.need(pos, s.size, what)
        return s.unpack_from(self.data, pos)[0], pos + s.size

    def string(self, pos: int, what: str) -> tuple[str | None, int]:
        self.need(pos, 1, what)
        b = self.data[pos]
        if not b & 0x80:  # ASCII, the last byte marked
            end = pos
            while True:
                self.need(end, 1, f"{what} (ASCII text)")
                if self.data[end] & 0x80:
                    break
                end += 1
            raw = bytearray(self.data[pos : end + 1])
            raw[-1] &= 0x7F
            return raw.decode("ascii"), end + 1
        length = b & 0x3F
        end = pos + 1
        if b & 0x40:
            more, end = self.varint(end, f"{what} (length)")
            length |= more << 6
        if length == 0:
            return None, end
        units = bytearray()
        for _ in range(length - 1):
            self.need(end, 1, f"{what} (text)")
            c = self.data[end]
            top = c >> 4
            if top < 8:
                unit, end = c, end + 1
            elif top in (12, 13):
                self.need(end, 2, f"{what} (text)")
                unit, end = ((c & 0x1F) << 6) | (self.data[end + 1] & 0x3F), end + 2
            elif top == 14:
                self.need(end, 3, f"{what} (text)")
                unit = ((c & 0x0F) << 12) | ((self.data[end + 1] & 0x3F) << 6) | (self.data[end + 2] & 0x3F)
                end += 3
            else:
                raise ValueSpecError(f"{what}: byte {c:#04x} at offset {end} does not start a character")
            units += unit.to_bytes(2, "big")
        return units.decode("utf-16-be", "surrogatepass"), end

    def value(self, f: KryoField, pos: int) -> tuple[object, int]:
        what = f"field {f.name} ({f.spec})"
        if f.boxed:
            marker, pos = self.varint(pos, f"{what} null marker")
            if marker == 0:
                return None, pos
            if marker >= 2:
                if f.kind != "string" or marker - 2 >= len(self.objects) or marker == 2:
                    raise ValueSpecError(f"{what}: reference marker {marker} before offset {pos} names no string")
                return self.objects[marker - 2], pos
        kind = f.kind
        if kind == "string":
            s, end = self.string(pos, what)
            self.objects.append(s)
            return s, end
        if kind in ("int", "long"):
            return self.zigzag(pos, what, 32 if kind == "int" else 64)
        if kind == "boolean":
            self.need(pos, 1, what)
            if self.data[pos] > 1:
                raise ValueSpecError(f"{what}: boolean byte {self.data[pos]:#04x} at offset {pos} is not 0 or 1")
            return self.data[pos] == 1, pos + 1
        if kind == "byte":
            return self.fixed("b", pos, what)
        if kind == "short":
            return self.fixed("h", pos, what)
        if kind == "char":
            unit, end = self.fixed("H", pos, what)
            return chr(unit), end
        if kind == "float":
            v, end = self.fixed("f", pos, what)
            return Float32(v), end
        return self.fixed("d", pos, what)  # double: the last kind BOXES and PRIMITIVES allow


def _read_char(data: bytes, pos: int) -> tuple[str, int]:
    raise ValueSpecError("a Kryo char is read by KryoType")  # CHAR only hashes: the key is found in the record


CHAR = Scalar("char", _read_char, lambda c: ord(c))  # Character.hashCode: the UTF-16 unit


class KryoType(Type):
    """One object of a class with the named fields, as Flink's KryoSerializer writes it."""

    def __init__(self, version: str, fields: list[KryoField]) -> None:
        self.version = version
        self.fields = fields
        self.wire_order = sorted(fields, key=lambda f: f.name.encode("utf-16-be"))  # Java String order

    @property
    def spec(self) -> str:
        return f"{self.version}({','.join(f.spec for f in self.fields)})"

    def read(self, data: bytes, pos: int) -> tuple[object, int]:
        r = _Reader(data, KRYO_VERSIONS[self.version])
        class_id, pos = r.varint(pos, "class id")
        if class_id == 0:
            raise ValueSpecError("the record is null (class id 0)")
        if class_id == 1:
            _, at = r.varint(pos, "class name id")
            name, _ = r.string(at, "class name")
            raise ValueSpecError(
                f"the record's class {name} is written by name, not by registration: not the class the "
                "serializer was made for (a subclass?); its layout is unknown"
            )
        marker, pos = r.varint(pos, "reference marker")
        if marker != 1:
            raise ValueSpecError(f"reference marker {marker} before offset {pos}: a record starts a new object (1)")
        r.objects.append(None)  # the record itself holds reference id 0
        out: dict[str, object] = {}
        for f in self.wire_order:
            out[f.name], pos = r.value(f, pos)
        return {f.name: out[f.name] for f in self.fields}, pos

    def path_field(self, spec: str, walked: list[str], name: str) -> tuple[tuple[str, str], Type]:
        """The field ``name`` as the key (key_paths); a Kryo class here has scalar fields only."""
        field = next((f for f in self.fields if f.name == name), None)
        if field is None:
            raise ValueSpecError(
                f"key spec {spec!r}: no field {name!r} (fields: {', '.join(f.name for f in self.fields)})"
            )
        return ("item", name), ScalarType(CHAR if field.kind == "char" else SCALARS[field.kind])

    def arrow_type(self) -> Any:
        import pyarrow as pa  # only when writing Parquet: the command line starts without it

        types = {"long": pa.int64(), "int": pa.int32(), "short": pa.int16(), "byte": pa.int8(),
                 "boolean": pa.bool_(), "double": pa.float64(), "float": pa.float32(), "char": pa.string(),
                 "string": pa.string()}  # fmt: skip
        return pa.struct([(f.name, types[f.kind]) for f in self.fields])

    def arrow_value(self, value: object) -> object:
        assert isinstance(value, dict)  # what read gives
        return {n: float(v) if isinstance(v, Float32) else v for n, v in value.items()}


def _parse_fields(spec: str, version: str, body: str) -> list[KryoField]:
    if not body.strip():
        raise ValueSpecError(f"value spec {spec!r}: name the class's fields: {version}(name:type, …). " + _types())
    fields: list[KryoField] = []
    for item in body.split(","):
        m = _FIELD.match(item)
        if not m:
            raise ValueSpecError(f"value spec {spec!r}: {item.strip()!r} is not NAME:TYPE")
        name, type_name = m.group(1), m.group(2)
        if type_name in PRIMITIVES:
            fields.append(KryoField(name, type_name, boxed=False))
        elif type_name in BOXES:
            fields.append(KryoField(name, BOXES[type_name], boxed=True))
        else:
            raise ValueSpecError(f"value spec {spec!r}: field {name}: " + REFUSAL.format(type=type_name))
        if [f.name for f in fields].count(name) > 1:
            raise ValueSpecError(f"value spec {spec!r}: field {name} is named twice")
    return fields


def _types() -> str:
    return "Types: " + ", ".join(PRIMITIVES) + ", String and the boxes " + ", ".join(b for b in BOXES if b[0].isupper())


def _kryo(version: str) -> Callable[[SpecParser], Type]:
    def construct(p: SpecParser) -> Type:
        return KryoType(version, _parse_fields(p.spec, version, p.raw_argument()))

    return construct


def _which_kryo(p: SpecParser) -> Type:
    raise p.fail(
        "say which Kryo wrote the bytes: kryo2(…) for Flink 1.x jobs (Kryo 2.24, big-endian), kryo5(…) for Flink 2.x "
        "(Kryo 5, little-endian)"
    )


for _version in KRYO_VERSIONS:
    register_spec(_version, _kryo(_version), raw_argument=True)
register_spec("kryo", _which_kryo, raw_argument=True)
