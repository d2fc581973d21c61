"""The rich consoles the CLI writes through, made when a command first prints something for people (a ``--json``
run never needs one, and rich's console machinery is a good part of a small command's start-up)."""

from __future__ import annotations

import re
from collections.abc import Iterable
from typing import TextIO

from rich.console import Console
from rich.segment import Segment

from spillway.cli.output import ReaderGone, silence_stdout

_TRAILING_BLANKS = re.compile(r"[ \t]+(?=\n)")


class _Console(Console):
    """A console that never leaves trailing blanks in a file or pipe (rich pads table cells and titles)."""

    def _render_buffer(self, buffer: Iterable[Segment]) -> str:
        text = super()._render_buffer(buffer)
        return text if self.is_terminal else _TRAILING_BLANKS.sub("", text)

    def on_broken_pipe(self) -> None:
        # rich's own reaction is SystemExit(1); a closed pipe is not our failure.
        self.quiet = True
        silence_stdout()
        raise ReaderGone


def stdout_console(file: TextIO, width: int | None) -> Console:
    return _Console(file=file, highlight=False, soft_wrap=False, width=width)


def stderr_console(file: TextIO) -> Console:
    return _Console(file=file, stderr=True, highlight=False, soft_wrap=True)


def twin(console: Console, width: int) -> Console:
    """A console like ``console`` (same stream, colours, terminal-ness) but ``width`` columns wide."""
    return _Console(
        file=console.file,
        width=width,
        # rich types Console.color_system as str but takes a Literal of its names: forced by rich's stubs.
        color_system=console.color_system,  # type: ignore[arg-type]
        force_terminal=console.is_terminal,
        no_color=console.no_color,
        highlight=False,
        soft_wrap=False,
    )
