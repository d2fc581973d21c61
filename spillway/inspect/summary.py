"""Per-operator figures for the people-facing views: state bytes by kind, files, finished state."""

from __future__ import annotations

from dataclasses import dataclass, field

from spillway.flink.features import FormatFeatures
from spillway.model.checkpoint import (
    FILE_BACKED_TYPES,
    ByteStreamHandle,
    CheckpointMetadata,
    OperatorState,
    StreamLeaf,
    stream_size,
)
from spillway.model.walk import subtask_leaves


@dataclass
class OperatorSummary:
    operator: OperatorState
    keyed_bytes: int = 0
    operator_bytes: int = 0
    channel_bytes: int = 0
    coordinator_bytes: int = 0
    inline_bytes: int = 0
    channels: int = 0
    files: set[str] = field(default_factory=set)
    finished_subtasks: int = 0

    def finished_label(self, features: FormatFeatures) -> str:
        op = self.operator
        if op.fully_finished:
            return "fully finished"
        if self.finished_subtasks:
            return f"{self.finished_subtasks}/{op.parallelism} finished"
        return "running" if features.finished_markers else "not recorded"


def summarize_operator(op: OperatorState) -> OperatorSummary:
    # Runs over every handle of a checkpoint (hundreds of thousands): sizes read off the top-level
    # handles, leaves collected once per subtask (channel handles read straight through to their
    # delegate), channels counted without unmerging them.
    s = OperatorSummary(op, coordinator_bytes=stream_size(op.coordinator_state))
    files = s.files
    keyed = operator = channel = inline = channels = 0
    leaves: list[StreamLeaf] = []
    for sub in op.subtasks:
        if sub.finished:
            s.finished_subtasks += 1
        for handle in (sub.managed_keyed_state, sub.raw_keyed_state):
            if handle is not None:
                keyed += handle.state_size
        for op_handle in (sub.managed_operator_state, sub.raw_operator_state):
            if op_handle is not None:
                operator += op_handle.state_size
        for handles in (sub.input_channel_state, sub.result_subpartition_state):
            for h in handles:
                channel += h.state_size
                channels += h.channel_count
        leaves.clear()
        subtask_leaves(sub, leaves)
        for leaf in leaves:
            if isinstance(leaf, FILE_BACKED_TYPES):
                files.add(leaf.file_name)
            elif type(leaf) is ByteStreamHandle:
                inline += leaf.state_size
    s.keyed_bytes, s.operator_bytes, s.channel_bytes, s.inline_bytes, s.channels = (
        keyed,
        operator,
        channel,
        inline,
        channels,
    )
    return s


@dataclass
class CheckpointSummary:
    operators: list[OperatorSummary]

    @property
    def files(self) -> set[str]:
        out: set[str] = set()
        for o in self.operators:
            out |= o.files
        return out

    def total(self, attr: str) -> int:
        return sum(getattr(o, attr) for o in self.operators)


def summarize(checkpoint: CheckpointMetadata, operators: list[OperatorState] | None = None) -> CheckpointSummary:
    return CheckpointSummary([summarize_operator(o) for o in (operators or checkpoint.operators)])
