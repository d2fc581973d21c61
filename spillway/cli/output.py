"""Where the CLI writes: an output environment made per invocation, never at import time.

``current()`` is built from the streams the command really has (a terminal or a pipe, its width,
``COLUMNS``); tests and embedding programs install their own with ``use()``. ``out`` and ``err`` are
thin proxies to the current environment's consoles, so command modules can keep writing
``out.print(...)`` while the environment changes underneath.
"""

from __future__ import annotations

import os
import re
import sys
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any, TextIO, cast

from rich.console import Console
from rich.segment import Segment

# A pipe has no terminal width; without one rich would fall back to 80 columns and crush the tables.
PIPE_WIDTH = 160


class ReaderGone(Exception):
    """Whoever read our output closed the pipe (``| head``): stop quietly, exit 0."""


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


def silence_stdout() -> None:
    """Point stdout at /dev/null so the interpreter's final flush cannot fail again."""
    try:
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
    except (OSError, ValueError):
        pass


@dataclass
class Output:
    out: Console
    err: Console
    stdout_is_tty: bool
    stderr_is_tty: bool

    @classmethod
    def for_streams(cls, stdout: TextIO | None = None, stderr: TextIO | None = None) -> Output:
        stdout = stdout or sys.stdout
        stderr = stderr or sys.stderr
        out_tty = _isatty(stdout)
        width = columns() or (None if out_tty else PIPE_WIDTH)
        return cls(
            out=_Console(file=stdout, highlight=False, soft_wrap=False, width=width),
            err=_Console(file=stderr, stderr=True, highlight=False, soft_wrap=True),
            stdout_is_tty=out_tty,
            stderr_is_tty=_isatty(stderr),
        )


def _isatty(stream: TextIO) -> bool:
    try:
        return stream.isatty()
    except (AttributeError, ValueError):
        return False


def columns() -> int | None:
    """The width the user gave in ``COLUMNS``, if any."""
    try:
        n = int(os.environ.get("COLUMNS", ""))
    except ValueError:
        return None
    return n if n > 0 else None


_current: Output | None = None


def current() -> Output:
    global _current
    if _current is None:
        _current = Output.for_streams()
    return _current


def use(output: Output | None) -> None:
    """Install ``output`` for what follows; ``None`` means: build one from the real streams on next use."""
    global _current
    _current = output


class _ConsoleProxy:
    def __init__(self, which: str) -> None:
        self._which = which

    def __getattr__(self, name: str) -> Any:
        return getattr(getattr(current(), self._which), name)


# Stand-ins that forward every attribute to the current environment's console: typed as what they forward to.
out = cast(Console, _ConsoleProxy("out"))
err = cast(Console, _ConsoleProxy("err"))
