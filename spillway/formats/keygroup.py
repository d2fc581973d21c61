"""Flink's key → key group → subtask math for one key (``spillway keygroup``): pure, nothing is read."""

from __future__ import annotations

import struct
from dataclasses import dataclass
from typing import Any

from spillway.errors import ArgumentError

KEY_TYPES = ("string", "long", "int", "short", "byte", "boolean", "double", "float")
_INT_BITS = {"long": 64, "int": 32, "short": 16, "byte": 8}


@dataclass(frozen=True)
class KeyGroup:
    """Where a key goes, as ``KeyGroupRangeAssignment`` computes it; ``to_json()`` is ``spillway.keygroup/1``."""

    key: str
    key_type: str
    hash_code: int
    murmur_hash: int
    key_group: int
    subtask: int
    subtask_key_groups: tuple[int, int]  # the first and last key group the subtask owns
    max_parallelism: int
    parallelism: int

    def to_json(self) -> dict[str, Any]:
        return {
            "schema": "spillway.keygroup/1",
            "key": self.key,
            "type": self.key_type,
            "hash_code": self.hash_code,
            "murmur_hash": self.murmur_hash,
            "key_group": self.key_group,
            "subtask": self.subtask,
            "subtask_key_groups": list(self.subtask_key_groups),
            "max_parallelism": self.max_parallelism,
            "parallelism": self.parallelism,
        }


def parse_key(key: str, key_type: str) -> object:
    """``key`` (text) as the Java value of ``key_type``: decimal or 0x…/0b… integers that fit the type,
    true/false, floating point (a float rounded to 32 bits)."""
    if key_type not in KEY_TYPES:
        raise ArgumentError("key_type", key_type, f"unknown type; one of {', '.join(KEY_TYPES)}")
    if key_type == "string":
        return key
    if key_type == "boolean":
        if key.lower() not in ("true", "false"):
            raise ArgumentError("key", key, "a boolean key is true or false")
        return key.lower() == "true"
    if key_type in ("double", "float"):
        try:
            value = float(key)
            if key_type == "float":
                value = struct.unpack(">f", struct.pack(">f", value))[0]
        except (ValueError, OverflowError):
            raise ArgumentError("key", key, f"is not a {key_type}") from None
        return value
    try:
        number = int(key, 10) if key.lstrip("+-").isdigit() else int(key, 0)  # decimal, or 0x… / 0b…
    except ValueError:
        raise ArgumentError("key", key, "is not an integer") from None
    bits = _INT_BITS[key_type]
    if not -(1 << (bits - 1)) <= number < 1 << (bits - 1):
        raise ArgumentError("key", key, f"does not fit a Java {key_type} ({bits} bits)")
    return number


def keygroup(key: str, key_type: str = "string", max_parallelism: int = 128, parallelism: int = 1) -> KeyGroup:
    """The key group and target subtask of ``key`` (its text, read as ``key_type``: the Java class the
    KeySelector returns — 17 as a long and as an int agree, "17" as a string does not)."""
    from spillway.flink.keygroups import (
        MAX_PARALLELISM_UPPER_BOUND,
        key_group_for_hash,
        key_group_range,
        murmur_hash,
        operator_index,
    )
    from spillway.formats.values import SCALARS

    if not 0 < parallelism <= max_parallelism <= MAX_PARALLELISM_UPPER_BOUND:
        raise ArgumentError(
            "parallelism", parallelism, f"need 0 < parallelism <= max_parallelism <= {MAX_PARALLELISM_UPPER_BOUND}"
        )
    value = parse_key(key, key_type)
    java_hash = SCALARS[key_type].hash
    assert java_hash is not None  # every KEY_TYPES scalar has a hashCode (only bytes has none)
    h = java_hash(value)
    group = key_group_for_hash(h, max_parallelism)
    index = operator_index(max_parallelism, parallelism, group)
    first, last = key_group_range(max_parallelism, parallelism, index)
    return KeyGroup(key, key_type, h, murmur_hash(h), group, index, (first, last), max_parallelism, parallelism)


__all__ = ["KEY_TYPES", "KeyGroup", "keygroup", "parse_key"]
