"""Warnings library code has for whoever is listening (the CLI prints them on stderr), and for nobody else.

Like ``progress``: without a listener (``collecting()``) ``warn`` is a no-op, so programs embedding
spillway get the same facts from return values (e.g. ``LoadedCheckpoint.unmatched_rebase``) and no
output. Each distinct message is kept once.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from contextvars import ContextVar

_sink: ContextVar[list[str] | None] = ContextVar("spillway_notices", default=None)


def warn(message: str) -> None:
    sink = _sink.get()
    if sink is not None and message not in sink:
        sink.append(message)


@contextmanager
def collecting() -> Iterator[list[str]]:
    """Collect the warnings given while the block runs (in order)."""
    found: list[str] = []
    token = _sink.set(found)
    try:
        yield found
    finally:
        _sink.reset(token)
