"""spillway's Python API — the one door: the CLI calls nothing else (an import-linter contract), so what
the command does, a program can do with the same calls (docs/api.md).

    import spillway
    cp = spillway.open("/checkpoints/7f3c…", plan="plan.json", uids={"slow-count": "slow"})
    result = cp.validate()                      # ValidateResult; result.to_json() is spillway.validate/1
    print(cp.binding)                           # how the plan's operators were bound (deduced once, shared)

Names are loaded on first use, so ``import spillway.api`` costs nothing until a call needs its module.
Every failure is a ``SpillwayError`` whose ``exit_code`` is what the CLI exits with.
"""

from __future__ import annotations

import importlib
from typing import Any

# name -> submodule of spillway.api that defines it (or re-exports it from the layers below).
_EXPORTS: dict[str, str] = {
    # the checkpoint object
    "open": "session",
    "Checkpoint": "session",
    # free functions kept from the first API (each is a one-liner over Checkpoint or the layers below)
    "open_checkpoint": "functions",
    "validate": "functions",
    "analyze": "functions",
    "restore_verdict": "functions",
    "preflight": "functions",
    "files": "functions",
    "diff": "functions",
    "rescale": "functions",
    "load_plan": "functions",
    "validate_json": "functions",
    "analyze_json": "functions",
    "Analysis": "functions",
    "CheckpointDiff": "functions",
    "FilesReport": "functions",
    "LoadedCheckpoint": "functions",
    "Rebase": "functions",
    "Report": "functions",
    "RescaleReport": "functions",
    "Topology": "functions",
    "Verdict": "functions",
    # dump
    "dump_checkpoint": "dump",
    "DumpView": "dump",
    "DumpResult": "dump",
    "OperatorTree": "dump",
    # errors and progress, for callers (and the CLI) that must not reach below the door
    "SpillwayError": "errors",
    "UsageError": "errors",
    "StorageError": "errors",
}


def __getattr__(name: str) -> Any:
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module 'spillway.api' has no attribute {name!r}")
    value = getattr(importlib.import_module(f"spillway.api.{module}"), name)
    globals()[name] = value  # next time without this hook
    return value


def __dir__() -> list[str]:
    return sorted(_EXPORTS)


__all__ = sorted(_EXPORTS)
