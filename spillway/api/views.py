"""The types and pure helpers a renderer of the results needs (the CLI's tables, a program's own report),
re-exported so it need not reach below the door: the results' parts and the binding's rows.

These are the library's own classes, not copies: a result hands out the objects it was computed from, so
they are for reading. Changing one is not supported (a later call on the same ``Checkpoint`` may see the
change); only the names here are the API's promise, not their modules below the door."""

from __future__ import annotations

from spillway.flink.operator_ids import Binding
from spillway.formats.values import render_value
from spillway.inspect.analyze import Analysis, ChannelAnalysis, EdgeSummary, OperatorAnalysis, edges
from spillway.inspect.diff import CheckpointDiff
from spillway.inspect.files import GROUPS, FilesReport
from spillway.inspect.findings import Finding
from spillway.inspect.finished import Verdict
from spillway.inspect.preflight import PreflightAnswer, PreflightLoss, PreflightVerdict
from spillway.inspect.topology import Topology
from spillway.inspect.validate import Report

__all__ = [
    "GROUPS",
    "Analysis",
    "Binding",
    "ChannelAnalysis",
    "CheckpointDiff",
    "EdgeSummary",
    "FilesReport",
    "Finding",
    "OperatorAnalysis",
    "PreflightAnswer",
    "PreflightLoss",
    "PreflightVerdict",
    "Report",
    "Topology",
    "Verdict",
    "edges",
    "render_value",
]
