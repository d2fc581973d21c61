"""Build the rescaled checkpoint's metadata from the source, the plan, the written channel files and
the redistributed keyed/operator state. Everything not touched by the rescale is kept as it was:
coordinator and master state, names, uids, finished flags, handles of untouched vertices."""

from __future__ import annotations

import copy
from collections.abc import Callable

from spillway.model.checkpoint import (
    AnyChannelHandle,
    ChannelHandle,
    Checkpoint,
    MergedChannelEntry,
    MergedChannelHandle,
    OperatorState,
    RelativeFileHandle,
    SubtaskState,
)
from spillway.rescale.channel_writer import WrittenFile
from spillway.rescale.plan import RescalePlan, RescaleRefused

MERGED_HANDLES_SINCE = 6  # metadata version that introduced merged channel-state handles

# operator, new parallelism -> new subtasks without channel state (keyed + operator state redistributed)
StateRescaler = Callable[[OperatorState, int], list[SubtaskState]]


def _filter(handles: list[AnyChannelHandle], drop: Callable[[int, int], bool]) -> list[AnyChannelHandle]:
    """Handles without the channels ``drop(a, b)`` selects (merged handles shrink; empty ones vanish)."""
    out: list[AnyChannelHandle] = []
    for h in handles:
        if isinstance(h, MergedChannelHandle):
            kept = [c for c in h.channels if not drop(c.a, c.b)]
            if len(kept) == len(h.channels):
                out.append(h)
            elif kept:
                out.append(
                    MergedChannelHandle(h.side, h.subtask_index, sum(c.state_size for c in kept), h.delegate, kept)
                )
        elif not drop(h.a, h.b):
            out.append(h)
    return out


def _new_input_handles(f: WrittenFile, version: int) -> list[AnyChannelHandle]:
    delegate = RelativeFileHandle(f.name, f.size)
    if version >= MERGED_HANDLES_SINCE:
        entries = [MergedChannelEntry(c.gate, c.up, c.size, list(c.offsets)) for c in f.channels]
        return [MergedChannelHandle("input", f.down, sum(c.size for c in f.channels), delegate, entries)]
    return [ChannelHandle("input", f.down, c.gate, c.up, list(c.offsets), c.size, delegate) for c in f.channels]


def assemble(
    source: Checkpoint, plan: RescalePlan, files: list[WrittenFile], rescale_state: StateRescaler
) -> Checkpoint:
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
        op = ops[op_id]
        for s in op.subtasks:
            s.input_channel_state = _filter(s.input_channel_state, lambda a, b, g=gates: a in g)
    for op_id, parts in drop_out.items():
        op = ops.get(op_id)
        if op is None:
            continue
        for s in op.subtasks:
            s.result_subpartition_state = _filter(s.result_subpartition_state, lambda a, b, p=parts: a in p)

    for f in files:
        op = ops.get(f.operator_id)
        if op is None:
            raise RescaleRefused(f"internal: written channel file for unknown operator {f.operator_id}")
        if f.down >= op.parallelism:
            raise RescaleRefused(f"internal: channel file for subtask {f.down} of {op.label()} (p={op.parallelism})")
        sub = op.subtask(f.down)
        if sub is None:
            sub = SubtaskState(f.down)
            op.subtasks.append(sub)
            op.subtasks.sort(key=lambda s: s.index)
        sub.input_channel_state = [*sub.input_channel_state, *_new_input_handles(f, cp.format_version)]
    return cp
