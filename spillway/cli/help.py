"""Help as click lays it out, wrapped to the terminal's width (``COLUMNS``) at spaces only: an option name
(``--buffers-per-channel``), a path or a key extractor is never broken at a hyphen nor ellipsized; a name too
long for the option column goes on a line of its own; indented paragraphs (examples) keep their lines, long
ones continued with `` \\``. A command's arguments are described in their own section, before its options.
"""

from __future__ import annotations

import inspect
import re
import textwrap
from collections.abc import Iterable, Sequence
from typing import Any

import click

# Set by the console script (app.main), for the process that ends with its command: decoded checkpoints then
# skip the cycle collector (api.freeze_after_pauses). Never in a process that goes on (a test runner).
freeze_gc = False
# Help text never grows wider than this, however wide the terminal (lines stay readable).
MAX_HELP_WIDTH = 120


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


class HelpFormatter(click.HelpFormatter):
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


class HelpContext(click.Context):
    formatter_class = HelpFormatter


class Command(click.Command):
    """A ``spillway`` command: its help laid out by ``HelpFormatter``, its arguments described as its options
    are; its callback runs guarded (``common.guarded``) and returns the exit code."""

    context_class = HelpContext

    def format_arguments(self, ctx: click.Context, formatter: click.HelpFormatter) -> None:
        rows = []
        for param in self.get_params(ctx):
            if isinstance(param, click.Argument):
                name = (param.name or "") + ("..." if param.nargs != 1 else "")
                rows.append((name, (param.help or "") + (" [required]" if param.required else "")))
        if rows:
            with formatter.section("Arguments"):
                formatter.write_dl(rows)

    def invoke(self, ctx: click.Context) -> Any:
        from spillway.cli import output
        from spillway.cli.common import guarded

        if freeze_gc:
            from spillway.api import freeze_after_pauses

            freeze_after_pauses()
        output.use(None)  # each invocation sees its own streams (a terminal, a pipe, a test runner's buffers)
        # Every failure the command meets in one line and its exit code (``--json``: also as JSON on stdout); the
        # command's output (``--out DIR``) named when the system names no file.
        code = guarded(
            lambda: super(Command, self).invoke(ctx), ctx.params.get("json_out", False), ctx.params.get("out_dir")
        )
        ctx.exit(code or 0)


def command(name: str, help: str) -> Any:
    """``@command(name, HELP)``: a ``spillway`` command (see ``Command``)."""
    return click.command(name, cls=Command, help=help)
