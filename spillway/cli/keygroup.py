"""``spillway keygroup``: Flink's exact key → key group → subtask math for one key."""

from __future__ import annotations

from typing import Annotated

import typer

from spillway.cli.common import emit_json, guarded, out
from spillway.inspect.keygroups import (
    MAX_PARALLELISM_UPPER_BOUND,
    java_boolean_hash,
    java_int_hash,
    java_long_hash,
    java_string_hash,
    key_group_for_hash,
    key_group_range,
    murmur_hash,
    operator_index,
)

HELP = """Print the key group and target subtask of KEY, exactly as Flink's KeyGroupRangeAssignment computes
them (hashCode → murmurHash → key group → operator index).

Examples:

  spillway keygroup k17 --type string --max-parallelism 128 --parallelism 3

  spillway keygroup 17 --type long --max-parallelism 32768 --parallelism 100 --json
"""


def _hash(key: str, kind: str) -> int:
    if kind == "string":
        return java_string_hash(key)
    if kind == "boolean":
        if key.lower() not in ("true", "false"):
            raise typer.BadParameter("a boolean key is true or false", param_hint="KEY")
        return java_boolean_hash(key.lower() == "true")
    try:
        value = int(key, 0)
    except ValueError:
        raise typer.BadParameter(f"{key!r} is not an integer", param_hint="KEY") from None
    return java_long_hash(value) if kind == "long" else java_int_hash(value)


def command(
    key: Annotated[str, typer.Argument(help="The key, as text.")],
    kind: Annotated[str, typer.Option("--type", help="string, long, int or boolean.")] = "string",
    max_parallelism: Annotated[
        int, typer.Option("--max-parallelism", help="The keyed operator's max parallelism.")
    ] = 128,
    parallelism: Annotated[int, typer.Option("--parallelism", help="The keyed operator's parallelism.")] = 1,
    json_out: Annotated[bool, typer.Option("--json", help="Emit JSON.")] = False,
) -> None:
    if kind not in ("string", "long", "int", "boolean"):
        raise typer.BadParameter(f"unknown type {kind!r}", param_hint="--type")
    if not 0 < parallelism <= max_parallelism <= MAX_PARALLELISM_UPPER_BOUND:
        raise typer.BadParameter(
            f"need 0 < parallelism <= max parallelism <= {MAX_PARALLELISM_UPPER_BOUND}", param_hint="--parallelism"
        )

    def run() -> None:
        h = _hash(key, kind)
        kg = key_group_for_hash(h, max_parallelism)
        index = operator_index(max_parallelism, parallelism, kg)
        first, last = key_group_range(max_parallelism, parallelism, index)
        doc = {
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
                f"key {key!r} ({kind}): hashCode {h} → murmur {doc['murmur_hash']} → key group {kg} "
                f"→ subtask {index} of {parallelism} (it owns key groups {first}..{last})"
            )

    guarded(run)
