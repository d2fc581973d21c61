"""Avro schemas for value specs: read from a ``.avsc`` file or a Confluent-style schema registry URL and parsed
into a tree of ``AvroNode`` (docs/format/avro-values.md).

Named types (records, enums, fixed) may be referenced by name after their definition, also recursively; the
namespace rules are Avro's (a dotted name is a full name, otherwise the enclosing namespace applies).
"""

from __future__ import annotations

import functools
import json
import urllib.error
import urllib.request
from dataclasses import dataclass, field
from pathlib import Path

from spillway.errors import StorageError
from spillway.formats.values import ValueSpecError

PRIMITIVES = ("null", "boolean", "int", "long", "float", "double", "bytes", "string")
MAX_SCHEMA_BYTES = 4 * 1024 * 1024  # a schema larger than this is not a schema a job uses
REGISTRY_TIMEOUT_SECONDS = 10.0


@dataclass(eq=False)
class AvroNode:
    """One schema node. ``kind`` is a primitive name or record, enum, fixed, array, map, union."""

    kind: str
    name: str | None = None  # full name of a named type
    fields: list[tuple[str, AvroNode]] = field(default_factory=list)  # record
    symbols: list[str] = field(default_factory=list)  # enum
    size: int = 0  # fixed
    items: AvroNode | None = None  # array items, map values
    branches: list[AvroNode] = field(default_factory=list)  # union
    logical: str | None = None  # logicalType, shown only: the bytes are those of the underlying type

    def describe(self) -> str:
        if self.name:
            return self.name
        if self.kind == "union":
            return "[" + ", ".join(b.describe() for b in self.branches) + "]"
        if self.kind in ("array", "map"):
            assert self.items is not None  # set for every array and map
            return f"{self.kind}<{self.items.describe()}>"
        return self.kind


class _SchemaParser:
    def __init__(self, source: str) -> None:
        self.source = source
        self.named: dict[str, AvroNode] = {}

    def fail(self, detail: str) -> ValueSpecError:
        return ValueSpecError(f"Avro schema {self.source}: {detail}")

    def full_name(self, name: object, namespace: str | None) -> str:
        if not isinstance(name, str) or not name:
            raise self.fail(f"a named type needs a name, found {name!r}")
        if "." in name or not namespace:
            return name
        return f"{namespace}.{name}"

    def parse(self, js: object, namespace: str | None) -> AvroNode:
        if isinstance(js, str):
            if js in PRIMITIVES:
                return AvroNode(js)
            for candidate in (self.full_name(js, namespace), js):
                if candidate in self.named:
                    return self.named[candidate]
            raise self.fail(f"unknown type {js!r} (define a named type before using it)")
        if isinstance(js, list):
            if not js:
                raise self.fail("an empty union")
            return AvroNode("union", branches=[self.parse(b, namespace) for b in js])
        if not isinstance(js, dict):
            raise self.fail(f"{js!r} is not a type")
        kind = js.get("type")
        logical = js.get("logicalType")
        if isinstance(kind, str) and kind in PRIMITIVES:
            return AvroNode(kind, logical=logical if isinstance(logical, str) else None)
        if kind in ("record", "error", "enum", "fixed"):
            return self.named_type(js, str(kind), namespace)
        if kind == "array":
            return AvroNode("array", items=self.parse(js.get("items"), namespace))
        if kind == "map":
            return AvroNode("map", items=self.parse(js.get("values"), namespace))
        if isinstance(kind, dict | list) or (isinstance(kind, str) and kind):
            return self.parse(kind, namespace)  # {"type": {...}} or {"type": "SomeNamedType"}
        raise self.fail(f"a type without 'type': {json.dumps(js)[:80]}")

    def named_type(self, js: dict[str, object], kind: str, namespace: str | None) -> AvroNode:
        own_ns = js.get("namespace")
        name = self.full_name(js.get("name"), own_ns if isinstance(own_ns, str) else namespace)
        if name in self.named:
            raise self.fail(f"type {name} is defined twice")
        inner_ns = name.rpartition(".")[0] or None
        logical = js.get("logicalType")
        node = AvroNode("record" if kind == "error" else kind, name=name)
        node.logical = logical if isinstance(logical, str) else None
        self.named[name] = node
        if kind in ("record", "error"):
            fields = js.get("fields")
            if not isinstance(fields, list):
                raise self.fail(f"record {name} has no field list")
            for f in fields:
                if not isinstance(f, dict) or not isinstance(f.get("name"), str):
                    raise self.fail(f"record {name}: a field without a name")
                node.fields.append((str(f["name"]), self.parse(f.get("type"), inner_ns)))
        elif kind == "enum":
            symbols = js.get("symbols")
            if not isinstance(symbols, list) or not all(isinstance(s, str) for s in symbols):
                raise self.fail(f"enum {name} has no symbol list")
            node.symbols = [str(s) for s in symbols]
        else:
            size = js.get("size")
            if not isinstance(size, int) or size < 0:
                raise self.fail(f"fixed {name} has no size")
            node.size = size
        return node


def parse_schema(text: str, source: str) -> AvroNode:
    try:
        js = json.loads(text)
    except json.JSONDecodeError as exc:
        raise ValueSpecError(f"Avro schema {source}: not JSON ({exc.msg} at offset {exc.pos})") from None
    return _SchemaParser(source).parse(js, None)


def _registry_document(url: str) -> str:
    """The schema text behind a registry URL: ``…/subjects/S/versions/N`` and ``…/schemas/ids/N`` answer
    ``{"schema": "<schema as a string>", …}``; ``…/versions/N/schema`` answers the schema itself."""
    request = urllib.request.Request(url, headers={"Accept": "application/vnd.schemaregistry.v1+json, */*"})
    try:
        with urllib.request.urlopen(request, timeout=REGISTRY_TIMEOUT_SECONDS) as response:
            body = response.read(MAX_SCHEMA_BYTES + 1)
    except urllib.error.HTTPError as exc:
        raise StorageError(f"schema registry {url}: HTTP {exc.code} {exc.reason}") from None
    except (urllib.error.URLError, OSError) as exc:
        reason = getattr(exc, "reason", exc)
        raise StorageError(f"schema registry {url}: cannot be reached ({reason})") from None
    if len(body) > MAX_SCHEMA_BYTES:
        raise ValueSpecError(f"schema registry {url}: answer larger than {MAX_SCHEMA_BYTES} bytes")
    try:
        doc = json.loads(body.decode("utf-8"))
    except (UnicodeDecodeError, json.JSONDecodeError):
        raise ValueSpecError(f"schema registry {url}: the answer is not JSON") from None
    if isinstance(doc, dict) and isinstance(doc.get("schema"), str):
        schema_type = doc.get("schemaType", "AVRO")
        if schema_type != "AVRO":
            raise ValueSpecError(f"schema registry {url}: schema type {schema_type}, not AVRO")
        if doc.get("references"):
            raise ValueSpecError(
                f"schema registry {url}: the schema references other subjects; save the resolved schema as a "
                ".avsc file and pass avro(FILE.avsc)"
            )
        return str(doc["schema"])
    return body.decode("utf-8")


@functools.lru_cache(maxsize=64)
def load_schema(ref: str) -> AvroNode:
    """The schema named by ``ref``: an ``http(s)://`` registry URL or a file path (read once per process)."""
    if ref.lower().startswith(("http://", "https://")):
        return parse_schema(_registry_document(ref), ref)
    path = Path(ref).expanduser()
    try:
        with path.open("rb") as f:
            raw = f.read(MAX_SCHEMA_BYTES + 1)
    except FileNotFoundError:
        raise ValueSpecError(f"Avro schema file {ref} does not exist") from None
    except OSError as exc:
        raise StorageError(f"Avro schema file {ref}: {exc.strerror or exc}") from None
    if len(raw) > MAX_SCHEMA_BYTES:
        raise ValueSpecError(f"Avro schema file {ref} is larger than {MAX_SCHEMA_BYTES} bytes")
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise ValueSpecError(f"Avro schema file {ref}: not UTF-8 at offset {exc.start}") from None
    return parse_schema(text, ref)
