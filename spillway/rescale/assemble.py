"""Build the rescaled checkpoint's metadata from the source, the plan, the written channel files and
the redistributed keyed/operator state. Everything not touched by the rescale is kept as it was:
coordinator and master state, names, uids, finished flags, handles of untouched vertices."""

from __future__ import annotations

import copy
from collections.abc import Callable
from typing import TypeVar

from spillway.flink.features import FormatFeatures
from spillway.model.checkpoint import (
    ChannelState,
    CheckpointMetadata,
    InputChannelEntry,
    InputChannelHandle,
    InputChannelState,
    KeepChannel,
    MergedInputChannelHandle,
    OperatorState,
    RelativeFileHandle,
    SubtaskState,
)
from spillway.rescale.channel_writer import WrittenFile
from spillway.rescale.plan import RescalePlan, RescaleRefused

# operator, new parallelism -> new subtasks without channel state (keyed + operator state redistributed)
StateRescaler = Callable[[OperatorState, int], list[SubtaskState]]


H = TypeVar("H", bound=ChannelState)


def _filter(handles: list[H], keep: KeepChannel) -> list[H]:
    """Handles without the channels ``keep(first, second)`` rejects (merged handles shrink; empty ones
    vanish). The pair is (gate, input channel) on the input side, (partition, subpartition) on the output side."""
    return [k for k in (h.kept(keep) for h in handles) if k is not None]


def _first_not_in(indices: set[int]) -> KeepChannel:
    """Keep the channels whose gate (input side) or partition (output side) is not in ``indices``."""
    return lambda first, _second: first not in indices


def _new_input_handles(f: WrittenFile, features: FormatFeatures) -> list[InputChannelState]:
    delegate = RelativeFileHandle(f.name, f.size)
    if features.merged_channel_handles:
        entries = [InputChannelEntry(c.gate, c.up, c.size, list(c.offsets)) for c in f.channels]
        return [MergedInputChannelHandle(f.down, sum(c.size for c in f.channels), delegate, entries)]
    return [InputChannelHandle(f.down, c.gate, c.up, list(c.offsets), c.size, delegate) for c in f.channels]


def assemble(
    source: CheckpointMetadata, plan: RescalePlan, files: list[WrittenFile], rescale_state: StateRescaler
) -> CheckpointMetadata:
    cp = copy.deepcopy(source)
    ops = {o.operator_id: o for o in cp.operators}
    drop_in: dict[str, set[int]] = {}  # head operator -> gates whose input state is rebuilt
    drop_out: dict[str, set[int]] = {}  # tail operator -> partitions whose output state moved downstream
    for ep in plan.edges:
        drop_in.setdefault(ep.down_head, set()).add(ep.gate)
        if ep.up_tail is not None:
            drop_out.setdefault(ep.up_tail, set()).add(ep.partition)

    for vp in plan.rescaled():
        for old in vp.operators:
            op = ops[old.operator_id]
            if op.fully_finished:
                op.parallelism = vp.new_p
                op.finished_marker = -vp.new_p if op.finished_marker < 0 else op.finished_marker
                continue
            subtasks = rescale_state(old, vp.new_p)
            for s in subtasks:
                if s.input_channel_state or s.result_subpartition_state:
                    raise AssertionError("state rescaler must not carry channel state")
            op.subtasks = subtasks
            op.parallelism = vp.new_p

    for op_id, gates in drop_in.items():
        head = ops.get(op_id)
        if head is None:
            continue  # a head that holds no state here (plan.NO_HEAD): no input state to rebuild
        for s in head.subtasks:
            s.input_channel_state = _filter(s.input_channel_state, _first_not_in(gates))
    for op_id, partitions in drop_out.items():
        tail = ops.get(op_id)
        if tail is None:
            continue
        for s in tail.subtasks:
            s.result_subpartition_state = _filter(s.result_subpartition_state, _first_not_in(partitions))

    for f in files:
        target = ops.get(f.operator_id)
        if target is None:
            raise RescaleRefused(f"internal: written channel file for unknown operator {f.operator_id}")
        if f.down >= target.parallelism:
            raise RescaleRefused(
                f"internal: channel file for subtask {f.down} of {target.label()} (p={target.parallelism})"
            )
        sub = target.subtask(f.down)
        if sub is None:
            sub = SubtaskState(f.down)
            target.subtasks.append(sub)
            target.subtasks.sort(key=lambda s: s.index)
        sub.input_channel_state = [*sub.input_channel_state, *_new_input_handles(f, cp.features)]
    return cp
