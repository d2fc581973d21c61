"""Where a record goes on a keyed or custom edge: the new subtask of each record value.

``target_function`` decides one value at a time (a ``keys`` extractor or a ``key_fns`` function); the router uses
it for every record outside uniform runs. ``vector_target_function`` decides a whole uniform run with
numpy when the PARSED extractor has its key at a fixed position of a fixed-width layout — whatever the
spelling of the spec (``tuple:0:long`` and ``tuple(long,?):0`` are the same extractor). Both give the
same subtask for every value (tests compare them).
"""

from __future__ import annotations

import importlib
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from spillway.errors import Message, Named
from spillway.flink.keygroups import java_string_hash, key_group_for_hash, operator_index
from spillway.flink.keygroups_vectorized import int_hash_codes, long_hash_codes, operator_indices_for_hashes
from spillway.formats.values import (
    KeyExtractor,
    ScalarType,
    TupleType,
    ValueSpecError,
    parse_key_extractor,
)
from spillway.rescale.plan import CUSTOM, HASH, EdgePlan
from spillway.rescale.route_error import RouteError

# (rows of record elements, offset of the value in each row) -> new subtask per row, or None if the rows do
# not have the layout the extractor needs (the caller then goes record by record, which reports why).
VectorTargets = Callable[[np.ndarray, int], "np.ndarray | None"]


def load_key_fn(spec: str) -> Callable[..., object]:
    module, _, name = spec.partition(":")
    if not module or not name:
        raise RouteError(Message(Named("key_fns", spec, entry=True), ": expected module:function"))
    try:
        fn = getattr(importlib.import_module(module), name)
    except (ImportError, AttributeError) as exc:
        raise RouteError(Message(Named("key_fns", spec, entry=True), f": {exc}")) from None
    if not callable(fn):
        raise RouteError(Message(Named("key_fns", spec, entry=True), " is not callable"))
    return fn


def java_hash_of(key: object) -> int:
    """Java hashCode of a key a ``key_fns`` function returned: int -> taken as the hash code itself, str -> String."""
    if isinstance(key, bool):
        return 1231 if key else 1237
    if isinstance(key, int):
        return key
    if isinstance(key, str):
        return java_string_hash(key)
    raise RouteError(
        Message(
            Named("key_fns", entry=True),
            f" returned {type(key).__name__}; return the key's Java hashCode (int) or a str",
        )
    )


def target_function(ep: EdgePlan) -> Callable[[memoryview], int] | None:
    """payload (the serialized value, after tag and timestamp) -> new downstream subtask; None if per-source."""
    if ep.rule == HASH:
        if ep.key_fn:
            fn = load_key_fn(ep.key_fn)

            def by_fn(payload: memoryview) -> int:
                kg = key_group_for_hash(java_hash_of(fn(bytes(payload))), ep.max_parallelism)
                return operator_index(ep.max_parallelism, ep.new_down_p, kg)

            return by_fn
        extract = parse_key_extractor(ep.key or "")

        def by_key(payload: memoryview) -> int:
            kg = key_group_for_hash(extract(payload)[1], ep.max_parallelism)
            return operator_index(ep.max_parallelism, ep.new_down_p, kg)

        return by_key
    if ep.rule == CUSTOM:
        fn = load_key_fn(ep.key_fn or "")

        def custom(payload: memoryview) -> int:
            t = fn(bytes(payload), ep.new_down_p)
            if not isinstance(t, int) or not 0 <= t < ep.new_down_p:
                raise RouteError(
                    Message(
                        Named("key_fns", ep.key_fn, entry=True),
                        f" returned {t!r}, not a subtask in [0, {ep.new_down_p})",
                    )
                )
            return t

        return custom
    return None


# Scalars whose serialized form is a fixed number of bytes, every bit pattern a valid value (a boolean is
# not: its byte must be 0 or 1, which the per-record reader checks).
_FIXED_WIDTH = {"long": 8, "int": 4, "short": 2, "byte": 1, "double": 8, "float": 4}
_VECTOR_KEYS = {"long": long_hash_codes, "int": int_hash_codes}  # key type -> its Java hashCode, vectorized
_NUMPY_TYPE = {"long": ">u8", "int": ">i4"}


@dataclass(frozen=True)
class FixedKey:
    """A key at a fixed place of every value: what the vector path needs from an extractor."""

    scalar: str  # "long" or "int"
    offset: int  # of the key inside the value
    width: int  # bytes of the value: exactly (``exact``) or at least
    exact: bool


def fixed_key(extractor: KeyExtractor) -> FixedKey | None:
    """The key's fixed position in the extractor's value layout, or None if it has none. The extractor
    reads the whole value when it is ``strict`` (so every field must be fixed-width), else only the
    fields up to the key."""
    if type(extractor) is not KeyExtractor:  # SQL RowData keys hash a projected row: no fixed form
        return None
    value, index = extractor.value_type, extractor.field
    if index is None:
        if not isinstance(value, ScalarType) or value.scalar.name not in _VECTOR_KEYS:
            return None
        return FixedKey(value.scalar.name, 0, _FIXED_WIDTH[value.scalar.name], exact=True)
    if not isinstance(value, TupleType):
        return None
    key = value.fields[index]
    if not isinstance(key, ScalarType) or key.scalar.name not in _VECTOR_KEYS:
        return None
    widths = [_FIXED_WIDTH.get(f.scalar.name) if isinstance(f, ScalarType) else None for f in value.fields]
    if any(w is None for w in widths[:index]):
        return None
    offset = sum(w for w in widths[:index] if w is not None)
    if extractor.strict:
        if any(w is None for w in widths):
            return None
        return FixedKey(key.scalar.name, offset, sum(w for w in widths if w is not None), exact=True)
    return FixedKey(key.scalar.name, offset, offset + _FIXED_WIDTH[key.scalar.name], exact=False)


def vector_target_function(ep: EdgePlan) -> VectorTargets | None:
    """The numpy form of ``target_function(ep)`` for extractors with a ``fixed_key``; None for all others
    (``key_fns``, strings, rows, non-HASH edges)."""
    if ep.rule != HASH or ep.key_fn or not ep.key:
        return None
    try:
        found = fixed_key(parse_key_extractor(ep.key))
    except ValueSpecError:
        return None  # target_function reports it
    if found is None:
        return None
    key = found
    size = _FIXED_WIDTH[key.scalar]
    hash_codes = _VECTOR_KEYS[key.scalar]
    numpy_type = _NUMPY_TYPE[key.scalar]

    def targets(rows: np.ndarray, at: int) -> np.ndarray | None:
        width = rows.shape[1] - at
        if width < key.width or (key.exact and width != key.width):
            return None
        start = at + key.offset
        raw = np.ascontiguousarray(rows[:, start : start + size]).view(numpy_type).ravel()
        return operator_indices_for_hashes(hash_codes(raw), ep.max_parallelism, ep.new_down_p)

    return targets
