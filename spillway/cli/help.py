"""Help text without Python types: options say what they take (``VERTEX=N``, ``FILE``, ``N``), flags say
nothing, arguments are described by their help alone — never ``<list[str]>``, ``<bool>`` or ``<str>``."""

from __future__ import annotations

import re
from typing import Any

from typer.core import TyperArgument, TyperGroup, TyperOption

# The value an option takes, where its help does not open with one (``VERTEX=N …``).
_METAVARS = {
    "--plan": "FILE",
    "--out": "DIR",
    "--operator": "OPERATOR",
    "--subtask": "N",
    "--master": "MASTER",
    "--buffer-size": "BYTES",
    "--segment-size": "BYTES",
    "--from": "PREFIX",
    "--to": "PREFIX",
    "--type": "TYPE",
}
_SHAPE = re.compile(r"\b([A-Z][A-Z_]*=[A-Za-z_:.]+[A-Za-z])")
_BY_TYPE = {"int": "N", "list[int]": "N", "float": "NUMBER", "list[float]": "NUMBER"}


def _no_type(self: Any, ctx: Any) -> str | None:
    return None


def metavar(option: TyperOption) -> str:
    if option.is_flag:
        return ""
    for name in option.opts:
        if name in _METAVARS:
            return _METAVARS[name]
    shape = _SHAPE.search(option.help or "")
    if shape:
        return shape.group(1)
    return _BY_TYPE.get(option.bare_type(), "TEXT")


def plain_metavars(command: Any) -> None:
    """Give every option of ``command`` (and of its subcommands) a metavar unless it has one."""
    for sub in getattr(command, "commands", {}).values():
        plain_metavars(sub)
    make_help_option = command.get_help_option

    def get_help_option(ctx: Any) -> Any:
        option = make_help_option(ctx)
        if option is not None and option.metavar is None:
            option.metavar = ""
        return option

    command.get_help_option = get_help_option
    for param in command.params:
        if isinstance(param, TyperOption) and param.metavar is None:
            param.metavar = metavar(param)
        elif isinstance(param, TyperArgument):
            param.display_type_rich = _no_type.__get__(param)  # type: ignore[method-assign]


class Group(TyperGroup):
    """The ``spillway`` group: built once per invocation with every command in it."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        plain_metavars(self)
