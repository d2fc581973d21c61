"""The errors every API call raises, re-exported so callers need not reach below the door."""

from __future__ import annotations

from spillway.errors import SpillwayError, StorageError, UsageError

__all__ = ["SpillwayError", "StorageError", "UsageError"]
