"""CheckpointMetadata rewrites that remove state: channel state (whole logical channels), finished markers,
whole operators. Each works on a deep copy and says exactly what it removed.

Channel state is removed a whole logical channel at a time — the downstream's input half *and* the
upstream's output half. Removing one half only would let Flink replay a stream that may start in
the middle of a record, which fails deserialization on recovery.
"""

from __future__ import annotations

import copy
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import TypeVar

from spillway.inspect.analyze import Analysis
from spillway.inspect.channels import ChannelKey
from spillway.model.checkpoint import ChannelState, CheckpointMetadata, KeepChannel, OperatorState, channel_handles
from spillway.repair.common import RepairError


@dataclass
class ChannelLoss:
    channel: str
    upstream: str
    downstream: str
    edge: str | None
    records: int | None
    bytes: int


@dataclass
class StripResult:
    checkpoint: CheckpointMetadata
    losses: list[ChannelLoss] = field(default_factory=list)
    handles_removed: int = 0

    @property
    def records_dropped(self) -> int | None:
        if any(loss.records is None for loss in self.losses):
            return None
        return sum(loss.records or 0 for loss in self.losses)

    @property
    def bytes_dropped(self) -> int:
        return sum(loss.bytes for loss in self.losses)


def strip_channel_state(cp: CheckpointMetadata, analysis: Analysis, operator_ids: set[str] | None) -> StripResult:
    """Drop every logical channel that touches one of ``operator_ids`` (all channels when None)."""
    chosen = [
        ch
        for ch in analysis.channels
        if operator_ids is None
        or ch.upstream.get("operator_id") in operator_ids
        or ch.downstream.get("operator_id") in operator_ids
    ]
    keys: set[ChannelKey] = {k for ch in chosen for k in ch.part_keys}
    remove_all = operator_ids is None
    out = copy.deepcopy(cp)
    result = StripResult(out)
    for op in out.operators:
        for sub in op.subtasks:
            sub.input_channel_state, n_in = _without(op, sub.input_channel_state, keys, remove_all)
            sub.result_subpartition_state, n_out = _without(op, sub.result_subpartition_state, keys, remove_all)
            result.handles_removed += n_in + n_out
    for ch in chosen:
        result.losses.append(
            ChannelLoss(
                ch.label, ch.upstream["operator"], ch.downstream["operator"], ch.ship_strategy, ch.records, ch.bytes
            )
        )
    return result


H = TypeVar("H", bound=ChannelState)


def _not_in(keys: set[ChannelKey], operator_id: str, side: str, subtask: int) -> KeepChannel:
    return lambda first, second: (operator_id, side, subtask, first, second) not in keys


def _without(op: OperatorState, handles: list[H], keys: set[ChannelKey], remove_all: bool) -> tuple[list[H], int]:
    kept: list[H] = []
    if not remove_all:
        for h in handles:
            k = h.kept(_not_in(keys, op.operator_id, h.side, h.subtask_index))
            if k is not None:
                kept.append(k)
    return kept, len(channel_handles(handles)) - len(channel_handles(kept))


def clear_finished(
    cp: CheckpointMetadata, operator_ids: set[str], plan_names: Mapping[str, str] | None = None
) -> tuple[CheckpointMetadata, list[str]]:
    """Turn FLIP-147 markers of the chosen operators into running state with nothing stored; ``plan_names``
    (``JobBinding.names``) names them in the changes."""
    out = copy.deepcopy(cp)
    changed: list[str] = []
    for op in out.operators:
        if op.operator_id not in operator_ids:
            continue
        if op.fully_finished:
            op.fully_finished = False
            op.subtasks = []
            changed.append(f"{op.label(plan_names)}: fully finished -> running (no state)")
        finished = [s.index for s in op.subtasks if s.finished]
        if finished:
            op.subtasks = [s for s in op.subtasks if not s.finished]
            changed.append(f"{op.label(plan_names)}: finished subtasks {finished} -> running (no state)")
    return out, changed


def drop_operators(cp: CheckpointMetadata, operator_ids: set[str]) -> CheckpointMetadata:
    missing = operator_ids - {o.operator_id for o in cp.operators}
    if missing:
        raise RepairError(f"no operator {sorted(missing)} in the checkpoint")
    out = copy.deepcopy(cp)
    out.operators = [o for o in out.operators if o.operator_id not in operator_ids]
    return out
