"""spillway's Python API — the one door: the CLI calls nothing else (an import-linter contract), so what
the command does, a program can do with the same calls (docs/api.md).

    import spillway
    cp = spillway.open("/checkpoints/7f3c…", plan="plan.json", uids={"slow-count": "slow"})
    result = cp.validate()                      # ValidateResult; result.to_json() is spillway.validate/1
    print(cp.binding)                           # how the plan's operators were bound (deduced once, shared)

Each name below is defined once, in the module that owns it, and loaded on first use: ``import spillway.api``
costs nothing until a call needs its module. Every failure is a ``SpillwayError`` whose ``exit_code`` is what
the CLI exits with. The types a result hands out are the objects it was computed from: for reading.
"""

from __future__ import annotations

import importlib
from typing import Any

# module -> the names spillway.api takes from it
_MODULES: dict[str, str] = {
    # the checkpoint object, what its calls take and return, and the calls over paths
    "spillway.api.session": "open Checkpoint",
    "spillway.api.options": "AnalyzeOptions ForecastOptions PreflightOptions buffer_settings check_value_type",
    "spillway.api.results": "ValidateResult AnalyzeResult PreflightResult ReportResult",
    "spillway.api.reading": "files diff check_restore report",
    "spillway.api.about": "version VersionInfo",
    "spillway.api.process": "freeze_after_pauses set_storage_timeout",
    "spillway.rescale.rescale_options": "RescaleOptions RESCALE_SCHEMA DEFAULT_BUFFER_SIZE BUFFERS_PER_CHANNEL "
    "FLOATING_BUFFERS_PER_GATE check_key_specs",
    "spillway.rescale.forecast": "BufferSettings",
    "spillway.repair.repair_options": "RelocateOptions StripOptions ClearFinishedOptions DropOperatorOptions",
    "spillway.inspect.salvage_options": "SalvageOptions value_type_args",
    # what the writing calls return
    "spillway.rescale.rescale": "RescaleResult EdgeRoute Moved VertexChange",
    "spillway.rescale.plan": "LostChannel",
    "spillway.repair.workflow": "RepairResult EdgeLoss Loss",
    "spillway.repair.common": "Change",
    "spillway.repair.transforms": "ChannelLoss",
    "spillway.inspect.salvage": "SalvageReport SalvageError",
    # plans, jobs' jars, path rules, dump, Flink's key -> key group -> subtask math, new files
    "spillway.inspect.job_plans": "read_plan job_plan",
    "spillway.storage.job_jar": "ids ids_each ids_json JobJar",
    "spillway.flink.job_ids": "JobIds",
    "spillway.storage.locate": "rebase_rules",
    "spillway.storage.new_files": "write_new_file",
    "spillway.inspect.dump": "dump_checkpoint DumpView DumpResult OperatorTree",
    "spillway.formats.keygroup": "keygroup KeyGroup KEY_TYPES",
    # the parts of the results a renderer needs
    "spillway.inspect.analyze": "Analysis ChannelAnalysis EdgeSummary OperatorAnalysis edges",
    "spillway.inspect.diff": "CheckpointDiff",
    "spillway.inspect.files": "FilesReport GROUPS",
    "spillway.inspect.findings": "Finding",
    "spillway.inspect.finished": "Verdict",
    "spillway.inspect.preflight": "PreflightAnswer PreflightVerdict",
    "spillway.inspect.restore_checks": "PreflightLoss",
    "spillway.inspect.topology": "Topology",
    "spillway.inspect.validate_report": "Report",
    "spillway.inspect.reports": "binding_json uid_map_template",
    "spillway.flink.operator_ids": "Binding",
    "spillway.formats.values": "render_value",
    # errors, exit codes and what long work reports while it runs
    "spillway.errors": "SpillwayError UsageError StorageError ArgumentError Message Named message_of ExitStatus "
    "CATEGORIES GIVE",
    "spillway.progress": "Stage Sink listening",
    "spillway.notices": "collecting warn",
}
# name -> the module that defines it
_EXPORTS: dict[str, str] = {name: module for module, names in _MODULES.items() for name in names.split()}


def __getattr__(name: str) -> Any:
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module 'spillway.api' has no attribute {name!r}")
    value = getattr(importlib.import_module(module), name)
    globals()[name] = value  # next time without this hook
    return value


def __dir__() -> list[str]:
    return sorted(_EXPORTS)


__all__ = sorted(_EXPORTS)
