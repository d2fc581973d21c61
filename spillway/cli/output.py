"""Where the CLI writes: an output environment made per invocation, never at import time, and ``--json``.

``current()`` is built from the streams the command really has (a terminal or a pipe, ``COLUMNS``); tests and
embedding programs install their own with ``use()``. Nothing here loads rich: a ``--json`` run never needs it
(the consoles for people are made by spillway/cli/render.py, on first use).
"""

from __future__ import annotations

import json
import os
import sys
import uuid
from collections.abc import Iterable
from typing import Any, TextIO

# A pipe has no terminal width; without one rich would fall back to 80 columns and crush the tables.
PIPE_WIDTH = 160


class Output:
    """One invocation's streams, whether each is a terminal, and the consoles made for them (render.console)."""

    def __init__(self, stdout: TextIO | None = None, stderr: TextIO | None = None) -> None:
        self.stdout, self.stderr = stdout or sys.stdout, stderr or sys.stderr
        self.stdout_is_tty = _isatty(self.stdout)
        self.stderr_is_tty = _isatty(self.stderr)
        self.consoles: dict[str, Any] = {}


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
        _current = Output()
    return _current


def use(output: Output | None) -> None:
    """Install ``output`` for what follows; ``None`` means: build one from the real streams on next use."""
    global _current
    _current = output


def silence_stdout() -> None:
    """Point stdout at /dev/null so the interpreter's final flush cannot fail again (the reader went away)."""
    try:
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
    except (OSError, ValueError):
        pass


def emit_json(doc: Any, items: tuple[str, Iterable[Any]] | None = None) -> None:
    """Pretty on a terminal, compact in a pipe (the schema is the same).

    ``items`` = (key, iterable): ``doc[key]`` (whose place in ``doc`` is kept) is the list of the
    iterable's items. In a pipe they are encoded and written one at a time, so the whole list is never
    held as objects nor as text (``dump --json`` of a 100 MB ``_metadata``: a few GB otherwise);
    the bytes are the same as for the whole document at once."""
    tty = current().stdout_is_tty
    write = current().stdout.write
    if items is not None and not tty:
        key, values = items
        marker = f"spillway-items-{uuid.uuid4().hex}"  # a string no document holds
        text = json.dumps({**doc, key: marker}, separators=(",", ":"))
        head, tail = text.split(json.dumps(marker), 1)
        write(head + "[")
        # Items are trees built for this document: no cycle to look for (about a tenth of the time).
        encode = json.JSONEncoder(separators=(",", ":"), check_circular=False).encode
        for i, value in enumerate(values):
            write(("," if i else "") + encode(value))
        write("]" + tail + "\n")
        return
    if items is not None:
        doc = {**doc, items[0]: list(items[1])}
    text = json.dumps(doc, indent=2) if tty else json.dumps(doc, separators=(",", ":"))
    write(text + "\n")
