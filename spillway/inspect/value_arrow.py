"""Decoded values as Arrow data, for Parquet: ``arrow_type(spec type)`` gives the column type (structs for tuples,
rows, RowData, POJOs and case classes; lists for arrays and lists; maps for maps), ``arrow_value`` turns a value
``decode`` gave into what ``pa.array(…, type=arrow_type(t))`` takes. A field of unknown type (``?``) is its raw
bytes; fields after it, whose bytes were not found, are null. A spec type from another module (``register_spec``)
may define ``arrow_type()`` and ``arrow_value(value)`` itself; otherwise it has no Arrow type (``arrow_type`` gives
None, for it or any type holding it) and a caller keeps such values as JSON text. A Java String may hold a lone
UTF-16 surrogate, which UTF-8 (and so Arrow) cannot: it becomes U+FFFD here; the raw bytes stay exact elsewhere."""

from __future__ import annotations

from typing import Any

import pyarrow as pa

from spillway.formats.value_composites import (
    ArrayType,
    CaseClassType,
    FieldsValue,
    ListType,
    MapType,
    MapValue,
    NullableType,
    PojoType,
)
from spillway.formats.values import (
    Float32,
    RowDataType,
    RowType,
    RowValue,
    ScalarType,
    TupleType,
    Type,
    Undecoded,
    UnknownType,
)

_SCALARS = {
    "string": pa.string(),
    "long": pa.int64(),
    "int": pa.int32(),
    "short": pa.int16(),
    "byte": pa.int8(),
    "boolean": pa.bool_(),
    "double": pa.float64(),
    "float": pa.float32(),
    "bytes": pa.binary(),
}
_ROWDATA = {
    "bigint": pa.int64(),
    "int": pa.int32(),
    "smallint": pa.int16(),
    "tinyint": pa.int8(),
    "boolean": pa.bool_(),
    "double": pa.float64(),
    "float": pa.float32(),
    "string": pa.string(),
    "bytes": pa.binary(),
    "?": pa.binary(),
}


def _row_names(t: RowType | TupleType) -> list[str]:
    names = t.names if isinstance(t, RowType) else None
    return names if names is not None else [f"f{i}" for i in range(len(t.fields))]


def arrow_type(t: Type) -> pa.DataType | None:
    """The Arrow type of values of spec type ``t``; None when ``t`` or a type inside it has none."""
    try:
        return _mapped(t)
    except _NoArrowType:
        return None


class _NoArrowType(Exception):
    pass


def _mapped(t: Type) -> pa.DataType:
    own = getattr(t, "arrow_type", None)
    if callable(own):
        result = own()
        if isinstance(result, pa.DataType):
            return result
        raise _NoArrowType
    if isinstance(t, ScalarType):
        return _SCALARS[t.scalar.name]
    if isinstance(t, UnknownType):
        return pa.binary()
    if isinstance(t, NullableType):
        return _mapped(t.inner)
    if isinstance(t, TupleType):
        return pa.struct([(n, _mapped(f)) for n, f in zip(_row_names(t), t.fields, strict=True)])
    if isinstance(t, RowType):
        fields = [(n, _mapped(f)) for n, f in zip(_row_names(t), t.fields, strict=True)]
        return pa.struct([("kind", pa.string()), *fields])
    if isinstance(t, RowDataType):
        return pa.struct([("kind", pa.string()), *((f"f{i}", _ROWDATA[x]) for i, x in enumerate(t.types))])
    if isinstance(t, PojoType | CaseClassType):
        return pa.struct([(n, _mapped(f)) for n, f in t.fields])
    if isinstance(t, ArrayType | ListType):
        return pa.list_(_mapped(t.element))
    if isinstance(t, MapType):
        return pa.map_(_mapped(t.key), _mapped(t.value))
    raise _NoArrowType


def arrow_value(t: Type, value: Any) -> Any:
    """``value`` (as ``decode`` gives it for ``t``) as Arrow data of ``arrow_type(t)``."""
    if value is None:
        return None
    if isinstance(t, UnknownType):
        return value.raw if isinstance(value, Undecoded) else None
    if isinstance(value, Undecoded):
        return None  # a field after one of unknown type: its bytes were not found
    if isinstance(value, str):
        return utf8_safe(value)
    if isinstance(value, Float32):
        return float(value)
    if isinstance(t, ScalarType):
        return value
    if isinstance(t, NullableType):
        return arrow_value(t.inner, value)
    if isinstance(t, TupleType):
        return {n: arrow_value(f, v) for n, f, v in zip(_row_names(t), t.fields, value, strict=True)}
    if isinstance(t, RowType):
        assert isinstance(value, RowValue)
        out = {n: arrow_value(f, v) for n, f, v in zip(_row_names(t), t.fields, value.fields, strict=True)}
        return {"kind": value.kind, **out}
    if isinstance(t, RowDataType):
        assert isinstance(value, RowValue)
        fields = {
            f"f{i}": (v.raw if isinstance(v, Undecoded) else v) for i, v in enumerate(value.fields)
        }  # "?" slots hold their raw 8 bytes
        return {"kind": value.kind, **fields}
    if isinstance(t, PojoType | CaseClassType):
        assert isinstance(value, FieldsValue)
        return {n: arrow_value(f, value.get(n)) for n, f in t.fields}
    if isinstance(t, ArrayType | ListType):
        return [arrow_value(t.element, v) for v in value]
    if isinstance(t, MapType):
        assert isinstance(value, MapValue)
        return [(arrow_value(t.key, k), arrow_value(t.value, v)) for k, v in value.entries]
    own = getattr(t, "arrow_value", None)
    return own(value) if callable(own) else value


def arrow_column(t: Type, values: list[Any]) -> pa.Array:
    """One Arrow array of decoded values of type ``t`` (which must have an Arrow type)."""
    mapped = arrow_type(t)
    if mapped is None:
        raise ValueError(f"values of {t.spec} have no Arrow type")
    return pa.array([arrow_value(t, v) for v in values], type=mapped)


def utf8_safe(text: str) -> str:
    """``text`` with each lone UTF-16 surrogate as U+FFFD."""
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return text.encode("utf-16-be", "surrogatepass").decode("utf-16-be", "replace")
    return text
