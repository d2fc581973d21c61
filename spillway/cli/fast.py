"""``spillway validate`` and ``spillway dump`` without typer, for the invocations whose meaning is plain.

typer converts every option value through a pydantic ``TypeAdapter``: importing pydantic and building the
adapters costs more CPU than validating or dumping a small checkpoint. ``parse`` accepts only one of
``COMMANDS`` with one path and the command's own options, each spelt out (``--plan P``, not
``--plan=P``), the single-valued ones at most once, no value that starts with ``-``, integers as plain
digits; it returns the keyword arguments typer would pass (tests/cli/test_fast_path.py compares them with
typer's parse of the same argv, and each table with the command's declared parameters). Anything else
returns None and goes through typer, which owns help, usage errors and their messages.
"""

from __future__ import annotations

import importlib
import re
from dataclasses import dataclass
from typing import Any

# option -> (keyword of validate.command, takes a value, repeatable)
OPTIONS: dict[str, tuple[str, bool, bool]] = {
    "--plan": ("plan", True, False),
    "--json": ("json_out", False, False),
    "--rebase": ("rebase", True, True),
    "--uid": ("uid", True, True),
    "--uid-map": ("uid_map", True, False),
    "--strict": ("strict", False, False),
    "--job": ("job", True, False),
    "--job-class": ("job_class", True, False),
    "--job-arg": ("job_arg", True, True),
    "--job-flink-version": ("job_flink_version", True, False),
    "--buffer-size": ("buffer_size", True, False),
}
DUMP_OPTIONS: dict[str, tuple[str, bool, bool]] = {
    "--json": ("json_out", False, False),
    "--operator": ("operator", True, False),
    "--subtask": ("subtask", True, False),
    "--tree": ("tree", False, False),
    "--rebase": ("rebase", True, True),
    "--plan": ("plan", True, False),
    "--uid": ("uid", True, True),
    "--uid-map": ("uid_map", True, False),
    "--job": ("job", True, False),
    "--job-class": ("job_class", True, False),
    "--job-arg": ("job_arg", True, True),
    "--job-flink-version": ("job_flink_version", True, False),
}
# command -> its options (each command takes one argument, ``path``)
COMMANDS: dict[str, dict[str, tuple[str, bool, bool]]] = {"validate": OPTIONS, "dump": DUMP_OPTIONS}
# options whose value is an int: taken as typer takes it only when it is plain digits
INTEGERS = {("dump", "--subtask"), ("validate", "--buffer-size")}
_DIGITS = re.compile(r"[0-9]{1,18}", re.ASCII)


@dataclass(frozen=True)
class Plain:
    """A command to run and the keyword arguments typer would have called it with."""

    command: str
    kwargs: dict[str, Any]


def parse(argv: list[str]) -> Plain | None:
    if not argv or argv[0] not in COMMANDS:
        return None
    name = argv[0]
    options = COMMANDS[name]
    kwargs: dict[str, Any] = {"path": None}
    for keyword, takes_value, _ in options.values():
        kwargs[keyword] = None if takes_value else False
    seen: set[str] = set()
    args = argv[1:]
    i = 0
    while i < len(args):
        token = args[i]
        if not _plain(token):
            return None
        if not token.startswith("-"):
            if kwargs["path"] is not None:
                return None  # typer reports the extra argument
            kwargs["path"] = token
            i += 1
            continue
        spec = options.get(token)
        if spec is None or (token in seen and not spec[2]):
            return None
        seen.add(token)
        keyword, takes_value, repeatable = spec
        if not takes_value:
            kwargs[keyword] = True
            i += 1
            continue
        if i + 1 >= len(args) or args[i + 1].startswith("-") or not _plain(args[i + 1]):
            return None
        value: Any = args[i + 1]
        if (name, token) in INTEGERS:
            if not _DIGITS.fullmatch(value):
                return None  # typer's conversion decides (and words its error)
            value = int(value)
        if repeatable:
            kwargs[keyword] = [*(kwargs[keyword] or []), value]
        else:
            kwargs[keyword] = value
        i += 2
    return Plain(name, kwargs) if kwargs["path"] is not None else None


def parse_validate(argv: list[str]) -> dict[str, Any] | None:
    """``parse`` for ``validate`` only: its keyword arguments, or None."""
    plain = parse(argv) if argv[:1] == ["validate"] else None
    return plain.kwargs if plain is not None else None


def _plain(token: str) -> bool:
    """Text typer would take as it is: no option syntax it might read differently, valid Unicode."""
    if token == "-" or token == "--" or (token.startswith("--") and "=" in token):
        return False
    try:
        token.encode()
    except UnicodeEncodeError:  # undecodable bytes (surrogate escapes): typer's own conversion decides
        return False
    return True


def run(plain: Plain) -> int:
    """Run the command's body (``spillway.cli.<command>_body.run``, which its typer command calls too) as typer
    would, after the app's callback: its exit code."""
    from spillway.api import ExitStatus, set_storage_timeout
    from spillway.cli import output

    body = importlib.import_module(f"spillway.cli.{plain.command}_body")
    output.use(None)  # what the app's callback does before every command
    set_storage_timeout(None)
    try:
        code: int = body.run(**plain.kwargs)
    except SystemExit as exc:  # a failure reported by the body (cli/common.fail): its exit code
        return exc.code if isinstance(exc.code, int) else 0 if exc.code is None else 1  # as Python exits on it
    except KeyboardInterrupt:  # outside the command's own guard, as typer reports it
        return ExitStatus.INTERRUPTED
    return code


def run_validate(argv: list[str]) -> int | None:
    """Run ``validate`` if ``parse`` accepts ``argv``: its exit code; None: use typer."""
    plain = parse(argv) if argv[:1] == ["validate"] else None
    return run(plain) if plain is not None else None
