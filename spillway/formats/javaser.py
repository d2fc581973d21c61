"""A read-only subset of Java Object Serialization (docs/format/properties.md) — enough for ``CheckpointProperties``.

Nothing is ever instantiated or executed: the stream is walked token by token into plain Python
values (``JavaObject``, ``JavaEnum``, ``str``, ``None``). Token bodies are construct layouts; the
handle table (back references) needs a small driver, which is what this module is. Anything outside
the subset raises ``JavaSerializationError`` — callers keep the raw bytes in that case.
"""

from __future__ import annotations

import io
from dataclasses import dataclass, field
from typing import Any

from construct import ConstructError, Int8ub, Int16ub, Int32sb, Int64sb, Struct

from spillway.formats.primitives import JavaString

STREAM_MAGIC = 0xACED
STREAM_VERSION = 5
BASE_HANDLE = 0x7E0000

TC_NULL, TC_REFERENCE, TC_CLASSDESC, TC_OBJECT, TC_STRING = 0x70, 0x71, 0x72, 0x73, 0x74
TC_ENDBLOCKDATA, TC_LONGSTRING, TC_ENUM = 0x78, 0x7C, 0x7E
_VALID_TOKENS = frozenset(range(0x70, 0x7F))
SC_WRITE_METHOD, SC_SERIALIZABLE, SC_EXTERNALIZABLE, SC_ENUM = 0x01, 0x02, 0x04, 0x10

StreamHeader = Struct("magic" / Int16ub, "version" / Int16ub)
ClassDescHead = Struct("name" / JavaString, "serial_version_uid" / Int64sb)
ClassDescFlags = Struct("flags" / Int8ub, "field_count" / Int16ub)
FieldHead = Struct("typecode" / Int8ub, "name" / JavaString)

_PRIMITIVES = {
    ord("Z"): (1, lambda b: b[0] != 0),
    ord("B"): (1, lambda b: int.from_bytes(b, "big", signed=True)),
    ord("C"): (2, lambda b: chr(int.from_bytes(b, "big"))),
    ord("S"): (2, lambda b: int.from_bytes(b, "big", signed=True)),
    ord("I"): (4, lambda b: int.from_bytes(b, "big", signed=True)),
    ord("J"): (8, lambda b: int.from_bytes(b, "big", signed=True)),
}


class JavaSerializationError(ValueError):
    """``unsupported``: valid Java serialization outside our subset (keep the raw bytes), as opposed
    to bytes that are not a valid stream at all."""

    def __init__(self, message: str, offset: int, unsupported: bool = False):
        super().__init__(f"{message} (at byte {offset} of the serialized object)")
        self.offset = offset
        self.unsupported = unsupported


@dataclass
class ClassDesc:
    name: str
    serial_version_uid: int
    flags: int
    fields: list[tuple[str, str]]  # (typecode char, field name)
    superclass: ClassDesc | None


@dataclass
class JavaObject:
    class_name: str
    fields: dict[str, Any] = field(default_factory=dict)


@dataclass
class JavaEnum:
    class_name: str
    constant: str


class _Reader:
    def __init__(self, data: bytes):
        self.stream = io.BytesIO(data)
        self.handles: list[Any] = []

    def fail(self, message: str, unsupported: bool = False) -> JavaSerializationError:
        return JavaSerializationError(message, self.stream.tell(), unsupported)

    def parse(self, layout: Any) -> Any:
        try:
            return layout.parse_stream(self.stream)
        except ConstructError as exc:
            raise self.fail(f"truncated or malformed token: {exc}") from None

    def read(self, n: int) -> bytes:
        data = self.stream.read(n)
        if len(data) != n:
            raise self.fail(f"expected {n} bytes, found {len(data)}")
        return data

    def new_handle(self, obj: Any) -> int:
        self.handles.append(obj)
        return len(self.handles) - 1

    def content(self) -> Any:
        tc = self.parse(Int8ub)
        if tc == TC_NULL:
            return None
        if tc == TC_REFERENCE:
            handle = self.parse(Int32sb) - BASE_HANDLE
            if not 0 <= handle < len(self.handles):
                raise self.fail(f"reference to unknown handle {handle + BASE_HANDLE:#x}")
            return self.handles[handle]
        if tc == TC_STRING:
            text = self.parse(JavaString)
            self.new_handle(text)
            return text
        if tc == TC_LONGSTRING:
            raise self.fail("long strings are not supported", unsupported=True)
        if tc == TC_CLASSDESC:
            return self.class_desc_body()
        if tc == TC_OBJECT:
            return self.object_body()
        if tc == TC_ENUM:
            desc = self.class_desc()
            slot = self.new_handle(None)
            constant = self.content()
            if not isinstance(constant, str):
                raise self.fail("enum constant name is not a string")
            value = JavaEnum(desc.name if desc else "?", constant)
            self.handles[slot] = value
            return value
        raise self.fail(f"unsupported serialization token {tc:#04x}", unsupported=tc in _VALID_TOKENS)

    def class_desc(self) -> ClassDesc | None:
        value = self.content()
        if value is not None and not isinstance(value, ClassDesc):
            raise self.fail("expected a class descriptor")
        return value

    def class_desc_body(self) -> ClassDesc:
        head = self.parse(ClassDescHead)
        slot = self.new_handle(None)
        flags = self.parse(ClassDescFlags)
        fields: list[tuple[str, str]] = []
        for _ in range(flags.field_count):
            fh = self.parse(FieldHead)
            code = chr(fh.typecode)
            if code in "L[":
                signature = self.content()
                if not isinstance(signature, str):
                    raise self.fail("field type signature is not a string")
            elif ord(code) not in _PRIMITIVES and code not in "FD":
                raise self.fail(f"unknown field type code {code!r}")
            fields.append((code, fh.name))
        if self.parse(Int8ub) != TC_ENDBLOCKDATA:
            raise self.fail("class annotations are not supported", unsupported=True)
        desc = ClassDesc(head.name, head.serial_version_uid, flags.flags, fields, None)
        self.handles[slot] = desc
        desc.superclass = self.class_desc()
        return desc

    def object_body(self) -> JavaObject:
        desc = self.class_desc()
        if desc is None:
            raise self.fail("object without a class descriptor")
        obj = JavaObject(desc.name)
        self.new_handle(obj)
        chain: list[ClassDesc] = []
        cursor: ClassDesc | None = desc
        while cursor is not None:
            chain.append(cursor)
            cursor = cursor.superclass
        for cls in reversed(chain):
            if cls.flags & (SC_WRITE_METHOD | SC_EXTERNALIZABLE):
                raise self.fail(f"{cls.name} uses custom serialization, which is not supported", unsupported=True)
            for code, name in cls.fields:
                if code in "L[":
                    obj.fields[name] = self.content()
                elif code in "FD":
                    raise self.fail("float fields are not supported", unsupported=True)
                else:
                    size, conv = _PRIMITIVES[ord(code)]
                    obj.fields[name] = conv(self.read(size))
        return obj


def read_java_object(data: bytes) -> Any:
    """Decode one serialized object that must span ``data`` exactly."""
    reader = _Reader(data)
    header = reader.parse(StreamHeader)
    if header.magic != STREAM_MAGIC or header.version != STREAM_VERSION:
        raise JavaSerializationError(
            f"not a Java serialization stream (header {header.magic:04x} {header.version:04x})", 0
        )
    value = reader.content()
    if reader.stream.tell() != len(data):
        raise reader.fail(f"{len(data) - reader.stream.tell()} trailing bytes after the object")
    return value
