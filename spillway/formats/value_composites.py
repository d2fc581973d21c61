"""Value specs for Flink's object serializers (docs/format/object-values.md): ``pojo(...)`` (PojoSerializer, also Java
records from Flink 1.19), ``caseclass(...)`` (Scala's CaseClassSerializer), ``array(T)`` / ``objarray(T)``,
``list(T)``, ``map(K,V)`` and ``nullable(T)`` (NullableSerializer). Registered with ``values.register_spec``.

Byte layouts (all big-endian ``DataOutput``):

* PojoSerializer: one flags byte (1 = null, 2 = exactly the POJO class, 4 = a subclass written by name: a
  ``writeUTF`` class name and that class's own serializer follow, 8 = a registered subclass: one tag byte and
  that subclass's serializer follow); for flag 2 every field in Flink's order — the field names sorted as Java
  ``String.compareTo`` sorts them (superclass fields included) — as a null-marker boolean (1 = null) followed,
  when not null, by the field's own serializer.
* CaseClassSerializer (TupleSerializerBase): the fields in declaration order back to back, no null markers.
* ``array``: a primitive array (``int[]`` …: int32 length + the values), ``String[]`` (StringArraySerializer:
  int32 length + nullable strings) or, for any other element type, GenericArraySerializer: int32 length, then
  per element a boolean "present" (1 = present, 0 = null) and the element. ``objarray(T)`` forces the latter for
  arrays of boxed values (``Long[]``, ``Integer[]`` …).
* ListSerializer: int32 size, then the elements (no null markers). MapSerializer: int32 size, then per entry the
  key, a boolean "value is null" and, when not null, the value. NullableSerializer (no padding): a boolean
  "is null", then the value when not null. Flink 2.x gives a POJO's ``List<T>`` field
  ``nullable(list(nullable(T)))`` and its ``Map<K,V>`` field ``nullable(map(nullable(K),V))``; 1.x gives such
  fields to Kryo.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, ClassVar

from spillway.formats.modutf8 import decode_modified_utf8
from spillway.formats.values import (
    SCALARS,
    ScalarType,
    SpecParser,
    Type,
    Undecoded,
    ValueSpecError,
    _need,
    read_boolean,
    read_string,
    register_spec,
)

_INT = SCALARS["int"].read

# PojoSerializer's flags byte
IS_NULL, NO_SUBCLASS, IS_SUBCLASS, IS_TAGGED_SUBCLASS = 1, 2, 4, 8


def java_field_order(names: list[str]) -> list[str]:
    """Field names as PojoTypeInfo sorts them: ``String.compareTo``, i.e. by UTF-16 code units."""
    return sorted(names, key=lambda n: n.encode("utf-16-be", "surrogatepass"))


@dataclass(frozen=True)
class FieldsValue:
    """A decoded POJO or case class: its fields by name, in the serializer's order."""

    fields: tuple[tuple[str, Any], ...]
    kind: str = "pojo"

    def get(self, name: str) -> Any:
        for n, v in self.fields:
            if n == name:
                return v
        raise KeyError(name)

    def __repr__(self) -> str:
        inner = ", ".join(f"{n}={v!r}" for n, v in self.fields)
        return f"{{{inner}}}" if self.kind == "pojo" else f"({inner})"

    def json_data(self, convert: Callable[[object], object]) -> object:
        return {n: convert(v) for n, v in self.fields}


@dataclass(frozen=True)
class MapValue:
    """A decoded map, entries in the order they were written."""

    entries: tuple[tuple[Any, Any], ...]

    def __repr__(self) -> str:
        return "{" + ", ".join(f"{k!r}: {v!r}" for k, v in self.entries) + "}"

    def json_data(self, convert: Callable[[object], object]) -> object:
        if all(isinstance(k, str) for k, _ in self.entries):
            return {k: convert(v) for k, v in self.entries}
        return [[convert(k), convert(v)] for k, v in self.entries]


def _read_null_marker(data: bytes, pos: int, what: str) -> tuple[bool, int]:
    try:
        return read_boolean(data, pos)
    except ValueSpecError:
        raise ValueSpecError(
            f"the null marker of {what} at offset {pos} is {data[pos]:#04x}, not 0 or 1"
            if pos < len(data)
            else f"the null marker of {what} at offset {pos} is past the end of the value"
        ) from None


def _count(data: bytes, pos: int, what: str) -> tuple[int, int]:
    n, pos = _INT(data, pos)
    if n < 0:
        raise ValueSpecError(f"{what} length {n} at offset {pos - 4} is negative")
    if n > len(data) - pos:  # every element takes at least one byte
        raise ValueSpecError(f"{what} length {n} at offset {pos - 4} exceeds the {len(data) - pos} bytes left")
    return n, pos


def _read_fields(
    fields: list[tuple[str, Type]], data: bytes, pos: int, markers: bool, what: str
) -> tuple[list[tuple[str, Any]], int]:
    out: list[tuple[str, Any]] = []
    lost = False  # after a field of unknown type the positions of later fields are unknown
    for name, t in fields:
        if lost:
            out.append((name, Undecoded(b"")))
            continue
        if markers:
            null, pos = _read_null_marker(data, pos, f"{what} field {name!r}")
            if null:
                out.append((name, None))
                continue
        v, pos = t.read(data, pos)
        out.append((name, v))
        lost = not t.known
    return out, pos


@dataclass
class _NamedFieldsType(Type):
    """A type of named fields, shown as ``KIND(name:T,…)`` (``KIND``: the spec's name)."""

    fields: list[tuple[str, Type]]
    KIND: ClassVar[str]

    @property
    def spec(self) -> str:
        return f"{self.KIND}({','.join(f'{n}:{t.spec}' for n, t in self.fields)})"

    @property
    def known(self) -> bool:
        return all(t.known for _, t in self.fields)

    def field(self, name: str) -> tuple[int, Type]:
        for i, (n, t) in enumerate(self.fields):
            if n == name:
                return i, t
        raise ValueSpecError(f"{self.spec} has no field {name!r} (fields: {', '.join(n for n, _ in self.fields)})")


@dataclass
class PojoType(_NamedFieldsType):
    """PojoSerializer; ``fields`` in Flink's order (``java_field_order``)."""

    KIND: ClassVar[str] = "pojo"

    def read(self, data: bytes, pos: int) -> tuple[object, int]:
        _need(data, pos, 1, "a POJO's flags byte")
        flags = data[pos]
        pos += 1
        if flags & IS_NULL:
            return None, pos
        if flags & IS_SUBCLASS:
            _need(data, pos, 2, "a POJO subclass name")
            n = int.from_bytes(data[pos : pos + 2], "big")
            _need(data, pos + 2, n, "a POJO subclass name")
            name = decode_modified_utf8(bytes(data[pos + 2 : pos + 2 + n]))
            raise ValueSpecError(
                f"offset {pos - 1}: a subclass {name} of the POJO, written by its own serializer; its fields are not "
                "those of the spec: give that class's fields as pojo(...) or use --key-fn"
            )
        if flags & IS_TAGGED_SUBCLASS:
            _need(data, pos, 1, "a POJO subclass tag")
            raise ValueSpecError(
                f"offset {pos - 1}: a registered subclass (tag {data[pos]}) of the POJO, written by that subclass's "
                "serializer; spillway cannot tell which class the tag names: use --key-fn"
            )
        if flags != NO_SUBCLASS:
            raise ValueSpecError(f"offset {pos - 1}: POJO flags byte {flags:#04x} is not 0x01, 0x02, 0x04 or 0x08")
        try:
            out, pos = _read_fields(self.fields, data, pos, markers=True, what="the POJO")
        except ValueSpecError as exc:
            names = ", ".join(n for n, _ in self.fields)
            raise ValueSpecError(f"{exc} (does the POJO have exactly the fields {names}, with these types?)") from None
        return FieldsValue(tuple(out)), pos


@dataclass
class CaseClassType(_NamedFieldsType):
    """Scala's CaseClassSerializer: like a tuple, named fields in declaration order."""

    KIND: ClassVar[str] = "caseclass"

    def read(self, data: bytes, pos: int) -> tuple[object, int]:
        out, pos = _read_fields(self.fields, data, pos, markers=False, what="the case class")
        return FieldsValue(tuple(out), kind="caseclass"), pos


_PRIMITIVE_ARRAYS = ("long", "int", "short", "boolean", "double", "float")


@dataclass
class ArrayType(Type):
    """``kind``: "primitive" (int[] …), "string" (String[]) or "generic" (GenericArraySerializer)."""

    element: Type
    kind: str

    @property
    def spec(self) -> str:
        return f"{'objarray' if self.kind == 'generic' and isinstance(self.element, ScalarType) else 'array'}" + (
            f"({self.element.spec})"
        )

    def read(self, data: bytes, pos: int) -> tuple[object, int]:
        n, pos = _count(data, pos, "array")
        out: list[object] = []
        v: object
        for _ in range(n):
            if self.kind == "string":
                v, pos = read_string(data, pos)
            elif self.kind == "generic":
                present, pos = _read_null_marker(data, pos, "an array element")
                if not present:
                    out.append(None)
                    continue
                v, pos = self.element.read(data, pos)
            else:
                v, pos = self.element.read(data, pos)
            out.append(v)
        return out, pos


@dataclass
class ListType(Type):
    element: Type

    @property
    def spec(self) -> str:
        return f"list({self.element.spec})"

    def read(self, data: bytes, pos: int) -> tuple[object, int]:
        n, pos = _count(data, pos, "list")
        out: list[object] = []
        for _ in range(n):
            v, pos = self.element.read(data, pos)
            out.append(v)
        return out, pos


@dataclass
class MapType(Type):
    key: Type
    value: Type

    @property
    def spec(self) -> str:
        return f"map({self.key.spec},{self.value.spec})"

    def read(self, data: bytes, pos: int) -> tuple[object, int]:
        n, pos = _count(data, pos, "map")
        out: list[tuple[object, object]] = []
        for _ in range(n):
            k, pos = self.key.read(data, pos)
            null, pos = _read_null_marker(data, pos, "a map value")
            v: object = None
            if not null:
                v, pos = self.value.read(data, pos)
            out.append((k, v))
        return MapValue(tuple(out)), pos


@dataclass
class NullableType(Type):
    inner: Type

    @property
    def spec(self) -> str:
        return f"nullable({self.inner.spec})"

    @property
    def known(self) -> bool:
        return self.inner.known

    def read(self, data: bytes, pos: int) -> tuple[object, int]:
        null, pos = _read_null_marker(data, pos, "a nullable value")
        if null:
            return None, pos
        return self.inner.read(data, pos)

    def hash(self, value: object) -> int:
        return self.inner.hash(value)


def _known_element(p: SpecParser, what: str) -> Type:
    t = p.type()
    if not t.known:
        raise p.fail(f"the elements of {what} need a known type")
    return t


def _named_fields(p: SpecParser, what: str) -> list[tuple[str, Type]]:
    fields = p.fields(p.named_field)
    names = [n for n, _ in fields]
    if len(set(names)) != len(names):
        raise p.fail(f"{what} names a field twice")
    return fields


def _pojo(p: SpecParser) -> Type:
    fields = dict(_named_fields(p, "pojo(...)"))
    return PojoType([(n, fields[n]) for n in java_field_order(list(fields))])


def _caseclass(p: SpecParser) -> Type:
    if p.named_after_paren():
        return CaseClassType(_named_fields(p, "caseclass(...)"))
    fields = p.fields(p.field_type)
    return CaseClassType([(f"_{i + 1}", t) for i, t in enumerate(fields)])  # Scala's product element names


def _array(p: SpecParser) -> Type:
    p.take("(")
    element = _known_element(p, "array(...)")
    p.take(")")
    if isinstance(element, ScalarType):
        if element.scalar.name == "byte":
            return ScalarType(SCALARS["bytes"])  # byte[]: BytePrimitiveArraySerializer
        if element.scalar.name == "string":
            return ArrayType(element, "string")
        if element.scalar.name in _PRIMITIVE_ARRAYS:
            return ArrayType(element, "primitive")
    return ArrayType(element, "generic")


def _objarray(p: SpecParser) -> Type:
    p.take("(")
    element = _known_element(p, "objarray(...)")
    p.take(")")
    return ArrayType(element, "generic")


def _list(p: SpecParser) -> Type:
    p.take("(")
    element = _known_element(p, "list(...)")
    p.take(")")
    return ListType(element)


def _map(p: SpecParser) -> Type:
    p.take("(")
    key = _known_element(p, "map(...)")
    p.take(",")
    value = _known_element(p, "map(...)")
    p.take(")")
    return MapType(key, value)


def _nullable(p: SpecParser) -> Type:
    p.take("(")
    inner = p.type()
    p.take(")")
    return NullableType(inner)


for _name, _constructor in (
    ("pojo", _pojo),
    ("caseclass", _caseclass),
    ("array", _array),
    ("objarray", _objarray),
    ("list", _list),
    ("map", _map),
    ("nullable", _nullable),
):
    register_spec(_name, _constructor)

__all__ = [
    "ArrayType",
    "CaseClassType",
    "FieldsValue",
    "ListType",
    "MapType",
    "MapValue",
    "NullableType",
    "PojoType",
    "java_field_order",
]
