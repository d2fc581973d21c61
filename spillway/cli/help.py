"""Help text without Python types: options say what they take (``VERTEX=N``, ``FILE``, ``N``), flags say
nothing, arguments are described by their help alone — never ``<list[str]>``, ``<bool>`` or ``<str>``.

Help is click's plain layout, wrapped to the terminal's width (``COLUMNS``) at spaces only: an option name
(``--buffers-per-channel``), a path or a key extractor is never broken at a hyphen nor ellipsized; a
name too long for the option column goes on a line of its own. The group's ``-h`` shows one line per
command (``SUMMARIES``); indented paragraphs (examples) are kept as lines, long ones continued with `` \\``.
"""

from __future__ import annotations

import inspect
import re
import textwrap
from collections.abc import Callable, Iterable, Iterator, Mapping, MutableMapping, Sequence
from gettext import gettext as _
from typing import Any, ClassVar

# typer (0.29) carries its own copy of click: its usage errors, contexts and help formatter.
from typer._click.core import Command, Context
from typer._click.exceptions import MissingParameter, UsageError
from typer._click.formatting import HelpFormatter as ClickHelpFormatter
from typer.core import TyperArgument, TyperGroup, TyperOption

# One line per command in ``spillway -h`` (at 80 columns): what it does, not how.
SUMMARIES = {
    "dump": "Decode _metadata: every operator, subtask and handle.",
    "validate": "Check a checkpoint and every file it references.",
    "analyze": "Show the data in flight, channel by channel.",
    "keygroup": "Key group and subtask of a key, as Flink computes them.",
    "rescale": "Write a copy at a new parallelism, in-flight data moved.",
    "files": "List every file a checkpoint depends on.",
    "diff": "Compare two checkpoints.",
    "report": "Write a self-contained HTML page about a checkpoint.",
    "preflight": "Will Flink restore a checkpoint into a job?",
    "ids": "Flink's own operator ids of a job, from its jar.",
    "salvage": "Export in-flight records to Parquet for a job to replay.",
    "repair": "Rewrite checkpoints safely (the source is never modified).",
    "relocate": "Rewrite every path prefix so a checkpoint can move.",
    "strip-channel-state": "Drop the in-flight data of chosen operators.",
    "clear-finished": "Turn finished markers into empty running state.",
    "drop-operator": "Remove operators' state entirely.",
}
# Help text never grows wider than this, however wide the terminal (lines stay readable).
MAX_HELP_WIDTH = 120

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
_SHAPE = re.compile(r"\b([A-Z][A-Z_]*=[A-Za-z_:.]*[A-Za-z])")
_BY_TYPE = {"int": "N", "list[int]": "N", "float": "NUMBER", "list[float]": "NUMBER"}


def _no_type(self: Any, ctx: Any) -> str | None:
    return None


def _usage_pieces(self: Any, ctx: Any) -> list[str]:
    # An argument in the usage line as click and git show it: PATH, [PATH], PATHS... (typer 0.29 writes {path}).
    name = (self.metavar or self.name or "arg").upper()
    if not self.required:
        name = f"[{name}]"
    return [name + ("..." if self.nargs != 1 else "")]


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
    """Give every option of ``command`` (and of its subcommands) a metavar unless it has one. A ``Group``'s
    commands are left alone: it prepares each one when it loads it."""
    if issubclass(command.context_class, _HelpContexts):
        return  # prepared already
    if not isinstance(command, Group):
        for sub in getattr(command, "commands", {}).values():
            plain_metavars(sub)
    make_help_option = command.get_help_option

    def get_help_option(ctx: Any) -> Any:
        option = make_help_option(ctx)
        if option is not None and option.metavar is None:
            option.metavar = ""
            option.process_value = _unset_unconverted(option)
        return option

    command.get_help_option = get_help_option
    command.context_class = _help_context(command.context_class)
    if not command.short_help:
        # Without a summary, the help's first sentence, whole (click would cut it off with "...").
        first = re.split(r"(?<=[.?!:])\s", " ".join((command.help or "").split()), maxsplit=1)[0]
        command.short_help = SUMMARIES.get(getattr(command, "name", None) or "", first.rstrip(":"))
    for param in command.params:
        if isinstance(param, TyperOption) and param.metavar is None:
            param.metavar = metavar(param)
        elif isinstance(param, TyperArgument):
            param.get_usage_pieces = _usage_pieces.__get__(param)  # type: ignore[method-assign]
            # typer has no hook for how an argument's type is shown: its method is replaced on the instance.
            param.display_type_rich = _no_type.__get__(param)  # type: ignore[method-assign]
        if isinstance(param, (TyperOption, TyperArgument)):
            param.process_value = _unset_unconverted(param)  # type: ignore[method-assign,assignment]


def _unset_unconverted(param: TyperOption | TyperArgument) -> Callable[[Context, Any], Any]:
    """``param.process_value``, minus the pydantic adapter typer builds for an option left unset only to
    turn None into None (or ``()``): importing pydantic and building it is ~0.1 s of CPU, paid by every
    command (the group's ``--storage-timeout`` is one) and every subcommand's help. Given a value, typer's."""
    convert = param.process_value

    def process_value(ctx: Context, value: Any) -> Any:
        if value is not None:
            return convert(ctx, value)
        # typer (0.29) _TyperParameter.process_value with RuntimeParam.coerce's answer for None
        value = () if param.multiple or param.nargs == -1 else None
        if param.required and param.value_is_missing(value):
            raise MissingParameter(ctx=ctx, param=param)
        if param.callback is not None:
            value = param.callback(ctx, param, value)
        return value

    return process_value


def _wrap(text: str, width: int, indent: str = "", subsequent: str | None = None) -> list[str]:
    """Lines of ``text`` at most ``width`` wide where the words allow; a word is never broken (not at a
    hyphen either): one longer than the width stands on a line of its own."""
    return textwrap.wrap(
        text,
        max(width, 10),
        initial_indent=indent,
        subsequent_indent=indent if subsequent is None else subsequent,
        break_long_words=False,
        break_on_hyphens=False,
    ) or [indent.rstrip()]


_SHELL_WORD = re.compile(r"""(?:'[^']*'|"[^"]*"|[^\s'"])+""")


def _command_lines(line: str, width: int) -> list[str]:
    """An example command line, continued with `` \\`` where it is wider than ``width``."""
    indent = line[: len(line) - len(line.lstrip())]
    words = _SHELL_WORD.findall(line)  # a quoted argument is one word: never continued inside quotes
    lines: list[str] = []
    current = indent
    for word in words:
        if current.strip() and len(current) + 1 + len(word) + 2 > width:
            lines.append(current + " \\")
            current = indent + "    " + word
        else:
            current = current + (" " if current.strip() else "") + word
    lines.append(current)
    return lines


def paragraphs(text: str, width: int, indent: str) -> list[str]:
    """Help prose rewrapped to ``width``; an indented paragraph (examples) keeps its lines."""
    lines: list[str] = []
    for para in inspect.cleandoc(text).partition("\f")[0].split("\n\n"):
        if lines:
            lines.append("")
        raw = para.strip("\n").replace("\b\n", "")
        if raw.startswith(" "):
            for line in re.sub(r"\\\n\s*", " ", raw).splitlines():
                if line.lstrip().startswith("spillway "):
                    lines.extend(_command_lines(indent + line, width))
                else:  # an item of a list: a hanging indent
                    inner = indent + line[: len(line) - len(line.lstrip())]
                    lines.extend(_wrap(line.strip(), width, inner, inner + "    "))
        else:
            lines.extend(_wrap(" ".join(raw.split()), width, indent))
    return lines


class HelpFormatter(ClickHelpFormatter):
    """click's layout, wrapping only at spaces (see the module's docstring)."""

    def __init__(self, indent_increment: int = 2, width: int | None = None, max_width: int | None = None) -> None:
        super().__init__(indent_increment, width, max_width or MAX_HELP_WIDTH)

    def write_text(self, text: str) -> None:
        indent = " " * self.current_indent
        self.write("\n".join(paragraphs(text, self.width, indent)) + "\n")

    def write_dl(self, rows: Sequence[tuple[str, str]] | Iterable[tuple[str, str]], col_max: int = 30,
                 col_spacing: int = 2) -> None:  # fmt: skip
        rows = list(rows)
        first_col = min(max((len(first) for first, _ in rows), default=0), col_max) + col_spacing
        pad = " " * (first_col + self.current_indent)
        for first, second in rows:
            self.write(" " * self.current_indent + first)
            if not second:
                self.write("\n")
                continue
            if len(first) <= first_col - col_spacing:
                self.write(" " * (first_col - len(first)))
            else:
                self.write("\n" + pad)
            lines = paragraphs(second, self.width - first_col - self.current_indent, "")
            self.write(lines[0] + "\n")
            for line in lines[1:]:
                # A word wider than the column (a Flink option's name) moves left, to end at the margin.
                room = max(self.width - len(line), self.current_indent)
                self.write(" " * min(len(pad), room) + line + "\n" if line else "\n")


def _help_context(base: type[Context]) -> type[Context]:
    if issubclass(base, _HelpContexts):
        return base
    return type("HelpContext", (base, _HelpContexts), {"formatter_class": HelpFormatter})


class _HelpContexts:
    """Marks a context class whose formatter is ``HelpFormatter``."""


class Commands(MutableMapping[str, Command]):
    """A group's commands by name, each built by its loader on first use (``group.commands[name]``).

    Names (their order, ``in``, ``keys()``) cost nothing: click asks for them to resolve a command and
    typer to suggest one for a typo. Only the command that runs, or whose help is shown, is imported."""

    def __init__(self, loaders: Mapping[str, Callable[[], Command]]) -> None:
        self._loaders = dict(loaders)
        self._loaded: dict[str, Command] = {}

    def __getitem__(self, name: str) -> Command:
        command = self._loaded.get(name)
        if command is None:
            command = self._loaders[name]()  # KeyError: no such command
            plain_metavars(command)
            self._loaded[name] = command
        return command

    def __setitem__(self, name: str, command: Command) -> None:
        self._loaders[name] = lambda: command
        self._loaded.pop(name, None)

    def __delitem__(self, name: str) -> None:
        del self._loaders[name]
        self._loaded.pop(name, None)

    def __iter__(self) -> Iterator[str]:
        return iter(self._loaders)

    def __len__(self) -> int:
        return len(self._loaders)

    def loaded(self, name: str) -> bool:
        return name in self._loaded


def _given(command: Command) -> Callable[[], Command]:
    return lambda: command


class Group(TyperGroup):
    """A ``spillway`` group: its commands are loaded one at a time, as they are used (``Commands``).

    ``lazy`` (set by a subclass) names each command's loader; commands typer built already (a sub-group)
    follow them. The list in ``-h`` comes from ``SUMMARIES`` without loading anything."""

    lazy: ClassVar[Mapping[str, Callable[[], Command]]] = {}

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        built = dict(self.commands)
        self.loaders = Commands({**self.lazy, **{name: _given(command) for name, command in built.items()}})
        self.commands = self.loaders
        plain_metavars(self)

    def list_commands(self, ctx: Context) -> list[str]:
        return list(self.loaders)  # typer's walks the items, which would load every command

    def format_commands(self, ctx: Context, formatter: ClickHelpFormatter) -> None:
        # As typer's (one row per visible command, its short help), with SUMMARIES standing in for the
        # short help of a command not loaded (plain_metavars gives a loaded one the same text).
        names = self.list_commands(ctx)
        rows = []
        for name in names:
            summary = SUMMARIES.get(name)
            if summary is None or self.loaders.loaded(name):
                command = self.loaders[name]
                if command.hidden:
                    continue
                summary = command.get_short_help_str(formatter.width - 6 - max(map(len, names)))
            rows.append((name, summary))
        if rows:
            with formatter.section(_("Commands")):
                formatter.write_dl(rows)

    def parse_args(self, ctx: Context, args: list[str]) -> list[str]:
        if ctx.parent is None:  # the whole command line (``meta`` is shared with the subcommands' contexts)
            ctx.meta["spillway.argv"] = list(args)
        return super().parse_args(ctx, args)

    def invoke(self, ctx: Context) -> Any:
        try:
            return super().invoke(ctx)
        except UsageError as exc:
            # A usage error click finds (a bad option, a bad KEY) is a spillway.error/1 on stdout too, for
            # scripts reading --json; click still prints it on stderr and exits 2. (Said once: by the root.)
            if ctx.parent is None and "--json" in ctx.meta.get("spillway.argv", ()):
                from spillway.cli import output
                from spillway.cli.common import emit_json

                output.use(None)  # this invocation's streams: the root callback may not have run yet
                message = exc.format_message()
                emit_json(
                    {
                        "schema": "spillway.error/1",
                        "error": message,
                        "kind": "UsageError",
                        "category": "usage",
                        "exit_code": 2,
                    }
                )
            raise
