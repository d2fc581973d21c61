"""The errors every API call raises and the exit codes they carry, re-exported so callers (the CLI among them)
need not reach below the door.

``ArgumentError`` is a ``UsageError`` about one argument of an API call: its message names the Python argument
(``buffer_size=32: at least 64 bytes``), and ``argument``/``key``/``value``/``detail`` let a front end say the
same in its own words (the CLI names its option: ``--buffer-size 32: at least 64 bytes``).
"""

from __future__ import annotations

from spillway.errors import (
    CATEGORIES,
    EXIT_FINDINGS,
    EXIT_INTERRUPTED,
    EXIT_OK,
    EXIT_STORAGE,
    EXIT_USAGE,
    SpillwayError,
    StorageError,
    UsageError,
)


class ArgumentError(UsageError):
    """A bad argument of an API call. ``key``: the entry of a mapping argument (``keys["count"]``), if any."""

    def __init__(self, argument: str, value: object, detail: str, key: str | None = None) -> None:
        self.argument, self.value, self.detail, self.key = argument, value, detail, key
        where = argument if key is None else f"{argument}[{key!r}]"
        super().__init__(f"{where}: {detail}" if value is None else f"{where}={value!r}: {detail}")


__all__ = [
    "CATEGORIES",
    "EXIT_FINDINGS",
    "EXIT_INTERRUPTED",
    "EXIT_OK",
    "EXIT_STORAGE",
    "EXIT_USAGE",
    "ArgumentError",
    "SpillwayError",
    "StorageError",
    "UsageError",
]
