"""Metadata-level rules: ``subtask-index``, ``duplicate-channel``, ``finished-state`` (and, per operator, the
key-group family of ``key_groups``)."""

from __future__ import annotations

from collections.abc import Iterator, Mapping

from spillway.inspect.channels import channel_key
from spillway.inspect.findings import Finding
from spillway.inspect.rules.common import Flagged
from spillway.inspect.rules.key_groups import key_group_findings
from spillway.model.checkpoint import CheckpointMetadata, OperatorState, SubtaskState, channel_handles


def structure_findings(cp: CheckpointMetadata, plan_names: Mapping[str, str] | None = None) -> Iterator[Flagged]:
    """Every metadata-level fault, operator by operator; ``plan_names``: a bound plan's (``JobBinding.names``)."""
    for op in cp.operators:
        label = op.label(plan_names)
        seen: set[int] = set()
        for sub in op.subtasks:
            yield from _subtask_findings(op, label, sub, seen)
            seen.add(sub.index)
        if op.fully_finished and op.coordinator_state is not None:
            yield Flagged(Finding("finished-state", "fully finished operator holds coordinator state", operator=label))
        yield from (Flagged(f) for f in key_group_findings(op, label))


def _subtask_findings(op: OperatorState, label: str, sub: SubtaskState, seen: set[int]) -> Iterator[Flagged]:
    if not 0 <= sub.index < op.parallelism:
        message = f"subtask index {sub.index} outside [0, {op.parallelism})"
        yield Flagged(Finding("subtask-index", message, operator=label, subtask=sub.index))
    if sub.index in seen:
        yield Flagged(Finding("subtask-index", f"subtask {sub.index} appears twice", operator=label, subtask=sub.index))
    if sub.finished and sub.has_state():
        yield Flagged(Finding("finished-state", "finished subtask holds state", operator=label, subtask=sub.index))
    for side, handles in (("input", sub.input_channel_state), ("output", sub.result_subpartition_state)):
        keys: set[tuple[int, int]] = set()
        for h in channel_handles(handles):
            if h.subtask_index != sub.index:
                message = f"{side} channel handle says subtask {h.subtask_index}"
                finding = Finding("subtask-index", message, operator=label, subtask=sub.index, channel=h.label())
                yield Flagged(finding, (channel_key(op, h),))
            if h.info in keys:
                message = f"two {side} handles for channel {h.label()}"
                finding = Finding("duplicate-channel", message, operator=label, subtask=sub.index, channel=h.label())
                yield Flagged(finding, (channel_key(op, h),))
            keys.add(h.info)
