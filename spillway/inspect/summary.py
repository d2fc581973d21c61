"""Per-operator figures for the people-facing views: state bytes by kind, files, finished state."""

from __future__ import annotations

from dataclasses import dataclass, field

from spillway.flink.features import FormatFeatures
from spillway.model.checkpoint import FILE_BACKED_TYPES, ByteStreamHandle, Checkpoint, OperatorState, stream_size
from spillway.model.walk import stream_leaves, subtask_handles


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
    # Runs over every handle of a checkpoint (hundreds of thousands): leaves without their roles,
    # channels counted without unmerging them.
    s = OperatorSummary(op, coordinator_bytes=stream_size(op.coordinator_state))
    files = s.files
    for sub in op.subtasks:
        if sub.finished:
            s.finished_subtasks += 1
        for kind, top in subtask_handles(sub):
            if kind.endswith("keyed_state"):
                s.keyed_bytes += top.state_size
            elif kind.endswith("operator_state"):
                s.operator_bytes += top.state_size
            else:
                s.channel_bytes += top.state_size
            for leaf in stream_leaves(top):
                if isinstance(leaf, FILE_BACKED_TYPES):
                    files.add(leaf.file_name)
                elif type(leaf) is ByteStreamHandle:
                    s.inline_bytes += leaf.state_size
        for channels in sub.input_channel_state:
            s.channels += channels.channel_count
        for out in sub.result_subpartition_state:
            s.channels += out.channel_count
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


def summarize(checkpoint: Checkpoint, operators: list[OperatorState] | None = None) -> CheckpointSummary:
    return CheckpointSummary([summarize_operator(o) for o in (operators or checkpoint.operators)])
