"""Where the CLI writes: an output environment made per invocation, never at import time.

``current()`` is built from the streams the command really has (a terminal or a pipe, its width,
``COLUMNS``); tests and embedding programs install their own with ``use()``. ``out`` and ``err`` are
thin proxies to the current environment's consoles, so command modules can keep writing
``out.print(...)`` while the environment changes underneath.
"""

from __future__ import annotations

import os
import sys
from typing import TYPE_CHECKING, Any, TextIO, cast

if TYPE_CHECKING:
    from rich.console import Console

# A pipe has no terminal width; without one rich would fall back to 80 columns and crush the tables.
PIPE_WIDTH = 160


class ReaderGone(Exception):
    """Whoever read our output closed the pipe (``| head``): stop quietly, exit 0."""


def silence_stdout() -> None:
    """Point stdout at /dev/null so the interpreter's final flush cannot fail again."""
    try:
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
    except (OSError, ValueError):
        pass


class Output:
    """One invocation's streams and whether each is a terminal; its rich consoles (``out``, ``err``) are made on
    first use (cli/consoles.py), so a command that writes only JSON never loads rich's console."""

    def __init__(self, stdout: TextIO, stderr: TextIO) -> None:
        self.stdout, self.stderr = stdout, stderr
        self.stdout_is_tty = _isatty(stdout)
        self.stderr_is_tty = _isatty(stderr)
        self._out: Console | None = None
        self._err: Console | None = None

    @classmethod
    def for_streams(cls, stdout: TextIO | None = None, stderr: TextIO | None = None) -> Output:
        return cls(stdout or sys.stdout, stderr or sys.stderr)

    @property
    def out(self) -> Console:
        if self._out is None:
            from spillway.cli.consoles import stdout_console

            self._out = stdout_console(self.stdout, columns() or (None if self.stdout_is_tty else PIPE_WIDTH))
        return self._out

    @property
    def err(self) -> Console:
        if self._err is None:
            from spillway.cli.consoles import stderr_console

            self._err = stderr_console(self.stderr)
        return self._err


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
out = cast("Console", _ConsoleProxy("out"))
err = cast("Console", _ConsoleProxy("err"))
