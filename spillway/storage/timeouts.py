"""How long any remote call may take: ``set_timeout(seconds)`` (the CLI's ``--storage-timeout``), else
``SPILLWAY_STORAGE_TIMEOUT``, else 30 s. It bounds each call as a whole, never a single read: a JobManager's
REST request from connecting to the last byte (``rest``), each call on a store, and the reading of one file
(``fs.transfer_allowance``: a call's time plus a second per started MiB).

Kept apart from ``fs`` (which loads pyarrow) so the command line can set it at no cost."""

from __future__ import annotations

import os

from spillway.errors import ArgumentError, Named, UsageError

TIMEOUT_ENV = "SPILLWAY_STORAGE_TIMEOUT"
# The setting, as a message names it (a front end says how its users set it).
TIMEOUT_SETTING = Named("storage_timeout", python=f"storage timeout: {TIMEOUT_ENV}")
DEFAULT_TIMEOUT = 30.0
_timeout: float | None = None  # set_timeout; None: the environment or the default


def parse_timeout(text: str, source: str) -> float:
    try:
        seconds = float(text)
    except ValueError:
        seconds = -1.0
    if not seconds > 0 or seconds == float("inf"):
        raise UsageError(f"{source} {text!r}: expected a number of seconds greater than 0")
    return seconds


def set_timeout(seconds: float | None) -> None:
    """The timeout of every remote call from now on (None: ``SPILLWAY_STORAGE_TIMEOUT`` or 30 s)."""
    global _timeout
    if seconds is not None and (not seconds > 0 or seconds == float("inf")):
        raise ArgumentError("seconds", seconds, "expected a number of seconds greater than 0")
    _timeout = None if seconds is None else float(seconds)


def timeout() -> float:
    if _timeout is not None:
        return _timeout
    env = os.environ.get(TIMEOUT_ENV)
    return parse_timeout(env, TIMEOUT_ENV) if env else DEFAULT_TIMEOUT
