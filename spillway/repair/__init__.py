"""Safe rewrites of checkpoints: relocate, strip channel state, clear finished markers, drop an operator.

``spillway.repair.relocate(...)``, ``strip_channel_state(...)``, ``clear_finished(...)`` and
``drop_operator(...)`` (in ``spillway.repair.operations``) each return a ``RepairReport``.
"""

from __future__ import annotations

from typing import Any

_OPERATIONS = {"relocate", "strip_channel_state", "clear_finished", "drop_operator", "RepairReport"}


def __getattr__(name: str) -> Any:
    if name in _OPERATIONS:
        from spillway.repair import operations

        return getattr(operations, name)
    raise AttributeError(f"module 'spillway.repair' has no attribute {name!r}")
