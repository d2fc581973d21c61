"""spillway: open up Apache Flink checkpoints — above all the channel state of unaligned checkpoints.

The API (docs/api.md) is loaded on first use, so ``import spillway`` stays cheap:
``spillway.open_checkpoint``, ``validate``, ``analyze``, ``restore_verdict``, ``rescale``,
``load_plan``, ``validate_json``, ``analyze_json``, ``files``, ``diff``, ``spillway.repair.*`` and the errors
``SpillwayError`` / ``UsageError``.
"""

from __future__ import annotations

from typing import Any

from spillway.errors import SpillwayError, UsageError

__version__ = "0.1.0"

_API = {
    "open_checkpoint",
    "validate",
    "analyze",
    "restore_verdict",
    "rescale",
    "load_plan",
    "validate_json",
    "analyze_json",
    "files",
    "diff",
    "preflight",
}


def __getattr__(name: str) -> Any:
    if name in _API:
        from spillway import api

        return getattr(api, name)
    if name == "repair":
        import importlib

        return importlib.import_module("spillway.repair")
    raise AttributeError(f"module 'spillway' has no attribute {name!r}")


__all__ = ["SpillwayError", "UsageError", "__version__", *sorted(_API), "repair"]
