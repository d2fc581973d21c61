"""The errors every API call raises and the exit codes they carry, re-exported so callers (the CLI among them)
need not reach below the door.

``ArgumentError`` is a ``UsageError`` about one argument of an API call (defined in ``spillway.errors``, so the
layers below the door raise it too): its message names the Python argument (``buffer_size=32: at least 64
bytes``), and ``argument``/``key``/``value``/``detail`` let a front end say the same in its own words (the CLI
names its option: ``--buffer-size 32: at least 64 bytes``). A ``Message`` (a ``str``) keeps apart each argument
a message names (``Named``): ``message_of(exc)`` gives it back from an error, so a front end says it its way.
"""

from __future__ import annotations

from spillway.errors import (
    CATEGORIES,
    GIVE,
    ArgumentError,
    ExitStatus,
    Message,
    Named,
    SpillwayError,
    StorageError,
    UsageError,
    message_of,
)

__all__ = [
    "CATEGORIES",
    "GIVE",
    "ArgumentError",
    "ExitStatus",
    "Message",
    "Named",
    "SpillwayError",
    "StorageError",
    "UsageError",
    "message_of",
]
