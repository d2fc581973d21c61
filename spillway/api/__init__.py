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
    # the checkpoint object and what its calls take and return
    "open": "session",
    "Checkpoint": "session",
    "AnalyzeOptions": "options",
    "RescaleOptions": "options",
    "RelocateOptions": "options",
    "StripOptions": "options",
    "ClearFinishedOptions": "options",
    "DropOperatorOptions": "options",
    "DEFAULT_BUFFER_SIZE": "options",
    "RESCALE_SCHEMA": "options",
    "check_key_specs": "options",
    "ForecastOptions": "options",
    "PreflightOptions": "options",
    "BufferSettings": "options",
    "buffer_settings": "options",
    "check_value_type": "options",
    "BUFFERS_PER_CHANNEL": "options",
    "FLOATING_BUFFERS_PER_GATE": "options",
    "ValidateResult": "results",
    "AnalyzeResult": "results",
    "PreflightResult": "results",
    "ReportResult": "results",
    # calls over paths: several checkpoints, a running job's, a page about one; plans
    "files": "reading",
    "diff": "reading",
    "check_restore": "reading",
    "report": "reading",
    "write_new_file": "reading",  # a page or a file for the user: never over an existing one unless asked
    "read_plan": "plans",
    "ids": "jobs",  # Flink's own graph of a job's jar
    "ids_each": "jobs",  # of several jars, one JVM per Flink release
    "job_plan": "jobs",
    "JobJar": "jobs",
    "JobIds": "jobs",
    "ids_json": "jobs",
    "rebase_rules": "plans",
    # this installation: spillway's version and what it runs on
    "version": "about",
    "VersionInfo": "about",
    # Flink's key -> key group -> subtask math
    "keygroup": "keys",
    "KeyGroup": "keys",
    "KEY_TYPES": "keys",
    # dump
    "dump_checkpoint": "dump",
    "DumpView": "dump",
    "DumpResult": "dump",
    "OperatorTree": "dump",
    # a process that is one command (the CLI): its settings, made before the command runs
    "freeze_after_pauses": "process",
    "set_storage_timeout": "process",
    # what the writing calls return (a repair's result is defined beside the repairs)
    "RescaleResult": "results",
    "RepairResult": "repairs",
    "Change": "repairs",
    "ChannelLoss": "repairs",
    "EdgeLoss": "repairs",
    "Loss": "repairs",
    "EdgeRoute": "repairs",
    "LostChannel": "repairs",
    "Moved": "repairs",
    "VertexChange": "repairs",
    # salvage: in-flight records exported for a job to replay (alone, or before strip-channel-state drops them)
    "SalvageOptions": "salvage",
    "SalvageReport": "salvage",
    "SalvageError": "salvage",
    "value_type_args": "salvage",
    # what renderers of the results need
    "Analysis": "views",
    "Binding": "views",
    "ChannelAnalysis": "views",
    "CheckpointDiff": "views",
    "EdgeSummary": "views",
    "FilesReport": "views",
    "Finding": "views",
    "GROUPS": "views",
    "OperatorAnalysis": "views",
    "PreflightAnswer": "views",
    "PreflightLoss": "views",
    "PreflightVerdict": "views",
    "Report": "views",
    "Topology": "views",
    "Verdict": "views",
    "binding_json": "binding_rows",
    "edges": "views",
    "render_value": "views",
    "uid_map_template": "binding_rows",
    # errors, exit codes and what long work reports, for callers (and the CLI) that must not reach below the door
    "SpillwayError": "errors",
    "UsageError": "errors",
    "StorageError": "errors",
    "ArgumentError": "errors",
    "Message": "errors",
    "Named": "errors",
    "message_of": "errors",
    "ExitStatus": "errors",
    "CATEGORIES": "errors",
    "Stage": "progress",
    "Sink": "progress",
    "listening": "progress",
    "collecting": "progress",
    "warn": "progress",
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
