"""spillway: open up Apache Flink checkpoints — above all the channel state of unaligned checkpoints.

    import spillway
    cp = spillway.open("/checkpoints/7f3c…", plan="plan.json")
    result = cp.validate()

``spillway.open`` and ``spillway.Checkpoint`` are the API (docs/api.md); ``spillway.api`` holds the types its
calls take and return. Both are loaded on first use, so ``import spillway`` stays cheap. Every failure is a
``SpillwayError`` (``UsageError``, ``StorageError``) whose ``exit_code`` is what the CLI exits with.
"""

from __future__ import annotations

from typing import Any

from spillway.errors import SpillwayError, StorageError, UsageError

__version__ = "0.1.0"


def __getattr__(name: str) -> Any:
    if name in ("open", "Checkpoint"):
        from spillway import api

        return getattr(api, name)
    if name == "api":
        import importlib

        return importlib.import_module("spillway.api")
    raise AttributeError(f"module 'spillway' has no attribute {name!r}")


__all__ = ["Checkpoint", "SpillwayError", "StorageError", "UsageError", "__version__", "api", "open"]
