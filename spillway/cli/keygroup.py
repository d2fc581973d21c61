"""``spillway keygroup``: Flink's exact key → key group → subtask math for one key."""

from __future__ import annotations

import struct
from typing import Annotated

import typer
from rich.markup import escape

from spillway.cli.common import emit_json, guarded, out
from spillway.flink.keygroups import (
    MAX_PARALLELISM_UPPER_BOUND,
    key_group_for_hash,
    key_group_range,
    murmur_hash,
    operator_index,
)
from spillway.formats.values import SCALARS

HELP = """Print the key group and target subtask of KEY, exactly as Flink's KeyGroupRangeAssignment computes
them (hashCode → murmurHash → key group → operator index). --type says which Java class the KeySelector
returns: string, long, int, short, byte, boolean, double or float (the hashCode differs: 17 as a long and
17 as an int agree, "17" as a string does not).

Examples:

  spillway keygroup k17 --type string --max-parallelism 128 --parallelism 3

  spillway keygroup 17 --type long --max-parallelism 32768 --parallelism 100 --json

  spillway keygroup --type double --parallelism 4 -- -0.0      (-- before a negative KEY)
"""

KEY_TYPES = ("string", "long", "int", "short", "byte", "boolean", "double", "float")
_INT_BITS = {"long": 64, "int": 32, "short": 16, "byte": 8}


def parse_key(key: str, kind: str) -> object:
    """KEY as the Java value of ``kind`` (raises typer.BadParameter)."""
    if kind == "string":
        return key
    if kind == "boolean":
        if key.lower() not in ("true", "false"):
            raise typer.BadParameter("a boolean key is true or false", param_hint="KEY")
        return key.lower() == "true"
    if kind in ("double", "float"):
        try:
            value = float(key)
            if kind == "float":
                value = struct.unpack(">f", struct.pack(">f", value))[0]
        except (ValueError, OverflowError):
            raise typer.BadParameter(f"{key!r} is not a {kind}", param_hint="KEY") from None
        return value
    try:
        value = int(key, 10) if key.lstrip("+-").isdigit() else int(key, 0)  # decimal, or 0x… / 0b…
    except ValueError:
        raise typer.BadParameter(f"{key!r} is not an integer", param_hint="KEY") from None
    bits = _INT_BITS[kind]
    if not -(1 << (bits - 1)) <= value < 1 << (bits - 1):
        raise typer.BadParameter(f"{key} does not fit a Java {kind} ({bits} bits)", param_hint="KEY")
    return value


def command(
    key: Annotated[str, typer.Argument(help="The key, as text.")],
    kind: Annotated[str, typer.Option("--type", help="Java type of the key: " + ", ".join(KEY_TYPES) + ".")] = "string",
    max_parallelism: Annotated[
        int, typer.Option("--max-parallelism", help="The keyed operator's max parallelism.")
    ] = 128,
    parallelism: Annotated[int, typer.Option("--parallelism", help="The keyed operator's parallelism.")] = 1,
    json_out: Annotated[bool, typer.Option("--json", help="Emit JSON (schema spillway.keygroup/1).")] = False,
) -> None:
    if kind not in KEY_TYPES:
        raise typer.BadParameter(f"unknown type {kind!r}", param_hint="--type")
    if not 0 < parallelism <= max_parallelism <= MAX_PARALLELISM_UPPER_BOUND:
        raise typer.BadParameter(
            f"need 0 < parallelism <= max parallelism <= {MAX_PARALLELISM_UPPER_BOUND}", param_hint="--parallelism"
        )

    def run() -> None:
        value = parse_key(key, kind)
        java_hash = SCALARS[kind].hash
        assert java_hash is not None  # every KEY_TYPES scalar has a hashCode (only bytes has none)
        h = java_hash(value)
        kg = key_group_for_hash(h, max_parallelism)
        index = operator_index(max_parallelism, parallelism, kg)
        first, last = key_group_range(max_parallelism, parallelism, index)
        doc = {
            "schema": "spillway.keygroup/1",
            "key": key,
            "type": kind,
            "hash_code": h,
            "murmur_hash": murmur_hash(h),
            "key_group": kg,
            "subtask": index,
            "subtask_key_groups": [first, last],
            "max_parallelism": max_parallelism,
            "parallelism": parallelism,
        }
        if json_out:
            emit_json(doc)
        else:
            out.print(
                f"key {escape(repr(key))} ({kind}): hashCode {h} → murmur {doc['murmur_hash']} → key group {kg} "
                f"→ subtask {index} of {parallelism} (it owns key groups {first}..{last})"
            )

    guarded(run, json_out)
