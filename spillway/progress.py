"""Progress of long work, reported to whoever is listening (the CLI's progress bars) and to nobody else.

Library code announces a stage with ``stage(description, total, unit)`` and advances it; without a
listener installed (``listening(sink)``, a context manager) every call is a no-op, so the library stays
silent for programs that embed it. The listener is held in a ``ContextVar``: a thread started inside a
stage gets the stage object itself, not the variable.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from typing import Protocol


class Stage(Protocol):
    def advance(self, n: int = 1) -> None: ...

    def update(self, completed: int, total: int | None = None) -> None: ...

    def done(self) -> None: ...


class Sink(Protocol):
    def stage(self, description: str, total: int | None, unit: str) -> Stage: ...


class _Silent:
    def advance(self, n: int = 1) -> None:
        pass

    def update(self, completed: int, total: int | None = None) -> None:
        pass

    def done(self) -> None:
        pass


SILENT: Stage = _Silent()
_sink: ContextVar[Sink | None] = ContextVar("spillway_progress", default=None)


def stage(description: str, total: int | None, unit: str = "bytes") -> Stage:
    """A new stage of ``total`` units (``bytes``, ``files``, ``channels`` …; None: not known)."""
    sink = _sink.get()
    return SILENT if sink is None else sink.stage(description, total, unit)


@contextmanager
def listening(sink: Sink | None) -> Iterator[None]:
    token = _sink.set(sink)
    try:
        yield
    finally:
        _sink.reset(token)


def stages() -> Callable[[str, int], None]:
    """A ``progress(what, n)`` callback as stages: ``n < 0`` starts stage ``what`` of ``-n`` units (its unit is
    the description's last word), ``n >= 0`` is its position. Silent without a listener."""
    started: dict[str, Stage] = {}

    def advance(what: str, n: int) -> None:
        if n < 0:
            started[what] = stage(what, -n, what.rsplit(" ", 1)[-1])
        elif what in started:
            started[what].update(n)

    return advance
