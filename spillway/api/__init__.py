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
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:  # the same names, for type checkers (tests/unit/test_api_session.py keeps the two in step)
    from spillway.api.about import VersionInfo as VersionInfo
    from spillway.api.about import version as version
    from spillway.api.binding_rows import binding_json as binding_json
    from spillway.api.binding_rows import uid_map_template as uid_map_template
    from spillway.api.dump import DumpResult as DumpResult
    from spillway.api.dump import DumpView as DumpView
    from spillway.api.dump import OperatorTree as OperatorTree
    from spillway.api.dump import dump_checkpoint as dump_checkpoint
    from spillway.api.errors import CATEGORIES as CATEGORIES
    from spillway.api.errors import ArgumentError as ArgumentError
    from spillway.api.errors import ExitStatus as ExitStatus
    from spillway.api.errors import SpillwayError as SpillwayError
    from spillway.api.errors import StorageError as StorageError
    from spillway.api.errors import UsageError as UsageError
    from spillway.api.functions import LoadedCheckpoint as LoadedCheckpoint
    from spillway.api.functions import Rebase as Rebase
    from spillway.api.functions import RescaleReport as RescaleReport
    from spillway.api.functions import analyze as analyze
    from spillway.api.functions import analyze_json as analyze_json
    from spillway.api.functions import load_plan as load_plan
    from spillway.api.functions import open_checkpoint as open_checkpoint
    from spillway.api.functions import preflight as preflight
    from spillway.api.functions import rescale as rescale
    from spillway.api.functions import restore_verdict as restore_verdict
    from spillway.api.functions import validate as validate
    from spillway.api.functions import validate_json as validate_json
    from spillway.api.jobs import JobIds as JobIds
    from spillway.api.jobs import JobJar as JobJar
    from spillway.api.jobs import ids as ids
    from spillway.api.jobs import ids_each as ids_each
    from spillway.api.jobs import ids_json as ids_json
    from spillway.api.jobs import job_plan as job_plan
    from spillway.api.keys import KEY_TYPES as KEY_TYPES
    from spillway.api.keys import KeyGroup as KeyGroup
    from spillway.api.keys import keygroup as keygroup
    from spillway.api.keys import parse_key as parse_key
    from spillway.api.options import BUFFERS_PER_CHANNEL as BUFFERS_PER_CHANNEL
    from spillway.api.options import FLOATING_BUFFERS_PER_GATE as FLOATING_BUFFERS_PER_GATE
    from spillway.api.options import AnalyzeOptions as AnalyzeOptions
    from spillway.api.options import BufferSettings as BufferSettings
    from spillway.api.options import ForecastOptions as ForecastOptions
    from spillway.api.options import PreflightOptions as PreflightOptions
    from spillway.api.options import buffer_settings as buffer_settings
    from spillway.api.options import check_value_type as check_value_type
    from spillway.api.plans import bind_plan as bind_plan
    from spillway.api.plans import job_checkpoint as job_checkpoint
    from spillway.api.plans import read_plan as read_plan
    from spillway.api.plans import rebase_rules as rebase_rules
    from spillway.api.process import freeze_after_pauses as freeze_after_pauses
    from spillway.api.process import set_storage_timeout as set_storage_timeout
    from spillway.api.progress import Sink as Sink
    from spillway.api.progress import Stage as Stage
    from spillway.api.progress import collecting as collecting
    from spillway.api.progress import listening as listening
    from spillway.api.progress import warn as warn
    from spillway.api.reading import check_restore as check_restore
    from spillway.api.reading import diff as diff
    from spillway.api.reading import files as files
    from spillway.api.reading import report as report
    from spillway.api.reading import write_new_file as write_new_file
    from spillway.api.results import AnalyzeResult as AnalyzeResult
    from spillway.api.results import PreflightResult as PreflightResult
    from spillway.api.results import ReportResult as ReportResult
    from spillway.api.results import ValidateResult as ValidateResult
    from spillway.api.session import Checkpoint as Checkpoint
    from spillway.api.session import open as open
    from spillway.api.views import GROUPS as GROUPS
    from spillway.api.views import Analysis as Analysis
    from spillway.api.views import Binding as Binding
    from spillway.api.views import ChannelAnalysis as ChannelAnalysis
    from spillway.api.views import CheckpointDiff as CheckpointDiff
    from spillway.api.views import CheckpointModel as CheckpointModel
    from spillway.api.views import EdgeSummary as EdgeSummary
    from spillway.api.views import FilesReport as FilesReport
    from spillway.api.views import Finding as Finding
    from spillway.api.views import OperatorAnalysis as OperatorAnalysis
    from spillway.api.views import PreflightAnswer as PreflightAnswer
    from spillway.api.views import PreflightLoss as PreflightLoss
    from spillway.api.views import PreflightVerdict as PreflightVerdict
    from spillway.api.views import Report as Report
    from spillway.api.views import Topology as Topology
    from spillway.api.views import Verdict as Verdict
    from spillway.api.views import edges as edges
    from spillway.api.views import render_value as render_value
    from spillway.api.write_options import DEFAULT_BUFFER_SIZE as DEFAULT_BUFFER_SIZE
    from spillway.api.write_options import IN_PROCESS as IN_PROCESS
    from spillway.api.write_options import RESCALE_SCHEMA as RESCALE_SCHEMA
    from spillway.api.write_options import ClearFinishedOptions as ClearFinishedOptions
    from spillway.api.write_options import DropOperatorOptions as DropOperatorOptions
    from spillway.api.write_options import RelocateOptions as RelocateOptions
    from spillway.api.write_options import RescaleOptions as RescaleOptions
    from spillway.api.write_options import StripOptions as StripOptions
    from spillway.api.write_options import check_key_specs as check_key_specs
    from spillway.api.writing import Change as Change
    from spillway.api.writing import ChannelLoss as ChannelLoss
    from spillway.api.writing import EdgeLoss as EdgeLoss
    from spillway.api.writing import EdgeRoute as EdgeRoute
    from spillway.api.writing import Loss as Loss
    from spillway.api.writing import LostChannel as LostChannel
    from spillway.api.writing import Moved as Moved
    from spillway.api.writing import RepairResult as RepairResult
    from spillway.api.writing import RescaleResult as RescaleResult
    from spillway.api.writing import VertexChange as VertexChange


# name -> submodule of spillway.api that defines it (or re-exports it from the layers below).
_EXPORTS: dict[str, str] = {
    # the checkpoint object and what its calls take and return
    "open": "session",
    "Checkpoint": "session",
    "AnalyzeOptions": "options",
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
    "bind_plan": "plans",
    "job_checkpoint": "plans",
    "rebase_rules": "plans",
    # this installation: spillway's version and what it runs on
    "version": "about",
    "VersionInfo": "about",
    # Flink's key -> key group -> subtask math
    "keygroup": "keys",
    "KeyGroup": "keys",
    "KEY_TYPES": "keys",
    "parse_key": "keys",
    # free functions kept from the first API (each a one-liner over Checkpoint where one fits)
    "open_checkpoint": "functions",
    "validate": "functions",
    "analyze": "functions",
    "restore_verdict": "functions",
    "preflight": "functions",
    "rescale": "functions",
    "load_plan": "functions",
    "validate_json": "functions",
    "analyze_json": "functions",
    "LoadedCheckpoint": "functions",
    "Rebase": "functions",
    "RescaleReport": "functions",
    # dump
    "dump_checkpoint": "dump",
    "DumpView": "dump",
    "DumpResult": "dump",
    "OperatorTree": "dump",
    # a process that is one command (the CLI): its settings, made before the command runs
    "freeze_after_pauses": "process",
    "set_storage_timeout": "process",
    # writing: rescale and the repairs on an opened checkpoint (options in, typed result out)
    "RescaleOptions": "write_options",
    "RelocateOptions": "write_options",
    "StripOptions": "write_options",
    "ClearFinishedOptions": "write_options",
    "DropOperatorOptions": "write_options",
    "DEFAULT_BUFFER_SIZE": "write_options",
    "IN_PROCESS": "write_options",
    "RESCALE_SCHEMA": "write_options",
    "check_key_specs": "write_options",
    "RescaleResult": "writing",
    "RepairResult": "writing",
    "VertexChange": "writing",
    "EdgeRoute": "writing",
    "Moved": "writing",
    "LostChannel": "writing",
    "Loss": "writing",
    "EdgeLoss": "writing",
    "ChannelLoss": "writing",
    "Change": "writing",
    # what renderers of the results need
    "Analysis": "views",
    "Binding": "views",
    "ChannelAnalysis": "views",
    "CheckpointDiff": "views",
    "CheckpointModel": "views",
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
