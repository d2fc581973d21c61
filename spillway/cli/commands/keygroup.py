"""Key group and subtask of a key, as Flink computes them."""

from __future__ import annotations

import click
from click import argument
from rich.markup import escape

from spillway import api
from spillway.cli.common import ExitStatus, emit_json
from spillway.cli.help import command as spillway_command
from spillway.cli.options import flag, option
from spillway.cli.render import out

HELP = """Print the key group and target subtask of KEY, exactly as Flink's KeyGroupRangeAssignment computes
them (hashCode → murmurHash → key group → operator index). --type says which Java class the KeySelector
returns: string, long, int, short, byte, boolean, double or float (the hashCode differs: 17 as a long and
17 as an int agree, "17" as a string does not).

Examples:

  spillway keygroup k17 --type string --max-parallelism 128 --parallelism 3

  spillway keygroup 17 --type long --max-parallelism 32768 --parallelism 100 --json

  spillway keygroup --type double --parallelism 4 -- -0.0      (-- before a negative KEY)
"""

KEY_TYPES = ("string", "long", "int", "short", "byte", "boolean", "double", "float")  # api.KEY_TYPES, for --help
_HINTS = {"key": "KEY", "key_type": "--type", "parallelism": "--parallelism"}


@spillway_command("keygroup", HELP)
@argument("key", help="The key, as text.")
@option("--type", "kind", metavar="TYPE", default="string", help="Java type of the key: " + ", ".join(KEY_TYPES) + ".")
@option("--max-parallelism", type=int, metavar="N", default=128, help="The keyed operator's max parallelism.")
@option("--parallelism", type=int, metavar="N", default=1, help="The keyed operator's parallelism.")
@flag("--json", "json_out", help="Emit JSON (schema spillway.keygroup/1).")
def command(key: str, kind: str, max_parallelism: int, parallelism: int, json_out: bool) -> int:
    if kind not in KEY_TYPES:
        raise click.BadParameter(f"unknown type {kind!r}", param_hint="--type")
    try:
        found = api.keygroup(key, kind, max_parallelism, parallelism)
    except api.ArgumentError as exc:  # usage errors in click's words, naming the option or argument
        said = exc.detail if exc.argument != "key" or exc.detail.startswith("a ") else f"{exc.value!r} {exc.detail}"
        raise click.BadParameter(
            said.replace("max_parallelism", "max parallelism"), param_hint=_HINTS.get(exc.argument)
        ) from None

    if json_out:
        emit_json(found.to_json())
    else:
        out.print(
            f"key {escape(repr(key))} ({kind}): hashCode {found.hash_code} → murmur {found.murmur_hash} → "
            f"key group {found.key_group} → subtask {found.subtask} of {parallelism} (it owns key groups "
            f"{found.subtask_key_groups[0]}..{found.subtask_key_groups[1]})"
        )
    return ExitStatus.OK
