"""spillway: open up Apache Flink checkpoints — above all the channel state of unaligned checkpoints.

The API (docs/api.md) is loaded on first use, so ``import spillway`` stays cheap:
``spillway.open_checkpoint``, ``validate``, ``analyze``, ``restore_verdict``, ``rescale``,
``load_plan``, ``validate_json``, ``analyze_json``, ``files``, ``diff``, ``spillway.repair.*`` and the errors
``SpillwayError`` / ``UsageError``.
"""

from __future__ import annotations

import types
from typing import Any

import spillway.rescale as _rescale_package  # an empty __init__: costs nothing
from spillway.errors import SpillwayError, StorageError, UsageError

__version__ = "0.1.0"


class _CallablePackage(types.ModuleType):
    """``spillway.rescale`` is the package *and* the API call ``spillway.rescale(...)``.

    Python binds a subpackage to its parent's attribute when it is first imported, so a function named
    ``rescale`` here would be replaced by the package as soon as anything imports ``spillway.rescale.*``
    (every API call does). Making the package itself callable leaves nothing to replace: whichever order
    things are imported in, ``spillway.rescale`` is this one object, and calling it is ``api.rescale``."""

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        from spillway.api import rescale

        return rescale(*args, **kwargs)


_rescale_package.__class__ = _CallablePackage

_API = {
    "open",
    "Checkpoint",
    "open_checkpoint",
    "validate",
    "analyze",
    "restore_verdict",
    "load_plan",
    "validate_json",
    "analyze_json",
    "files",
    "diff",
    "preflight",
    "ids",
    "JobJar",
}


def __getattr__(name: str) -> Any:
    if name in _API:
        from spillway import api

        return getattr(api, name)
    if name in ("repair", "api"):
        import importlib

        return importlib.import_module(f"spillway.{name}")
    raise AttributeError(f"module 'spillway' has no attribute {name!r}")


__all__ = ["SpillwayError", "StorageError", "UsageError", "__version__", *sorted(_API), "api", "repair", "rescale"]
