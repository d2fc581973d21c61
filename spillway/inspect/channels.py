"""Logical channels: the byte stream a downstream subtask would process after the cut (docs/format/record-framing.md).

For the channel from upstream subtask u to downstream subtask d over gate g::

    logical(u→d) = input_state(d, gate g, channel u) ++ output_state(u, partition p, subpartition d)

Input state sits on the downstream chain's head operator, output state on the upstream chain's tail.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING

if TYPE_CHECKING:  # types only: validate without a plan loads no plan machinery
    from spillway.inspect.topology import BoundVertex, Edge, Topology

from dataclasses import dataclass, field

from spillway.model.checkpoint import ChannelHandle, CheckpointMetadata, OperatorState, channel_handles


@dataclass
class ChannelPart:
    operator: OperatorState
    handle: ChannelHandle

    def label(self) -> str:
        return f"{self.operator.label()}#{self.handle.subtask_index} {self.handle.label()}"


@dataclass
class LogicalChannel:
    edge: Edge | None
    upstream: str  # label of the upstream operator (tail)
    downstream: str  # label of the downstream operator (head)
    upstream_subtask: int
    downstream_subtask: int
    gate: int
    parts: list[ChannelPart] = field(default_factory=list)  # input part first, then output part
    upstream_op: OperatorState | None = None  # the tail holding output state (when known)
    downstream_op: OperatorState | None = None  # the head holding input state (when in the checkpoint)

    def label(self) -> str:
        return (
            f"{self.upstream}#{self.upstream_subtask} -> {self.downstream}#{self.downstream_subtask} (gate {self.gate})"
        )


def index_channels(op: OperatorState, side: str) -> dict[tuple[int, int, int], list[ChannelHandle]]:
    """(subtask, gate, input channel) or (subtask, partition, subpartition) -> handles (more than one is a
    fault the validator reports)."""
    out: dict[tuple[int, int, int], list[ChannelHandle]] = {}
    for sub in op.subtasks:
        handles = channel_handles(sub.input_channel_state if side == "input" else sub.result_subpartition_state)
        for h in handles:
            out.setdefault((sub.index, *h.info), []).append(h)
    return out


# operator id, side, subtask, then (gate, input channel) or (partition, subpartition)
ChannelKey = tuple[str, str, int, int, int]


def channel_key(op: OperatorState, h: ChannelHandle) -> ChannelKey:
    return (op.operator_id, h.side, h.subtask_index, *h.info)


@dataclass
class ChannelMap:
    channels: list[LogicalChannel]
    skipped: list[str]  # what could not be assembled, and why
    used: set[ChannelKey]  # every handle placed into a logical channel


def logical_channels(
    topology: Topology,
    bound: dict[str, BoundVertex],
    checkpoint: CheckpointMetadata,
    orders: Mapping[str, tuple[Edge, ...]] | None = None,
    upstream: str | None = None,
    plan_names: Mapping[str, str] | None = None,
) -> ChannelMap:
    """``orders``: vertex key -> the order of its outputs (result partitions) where the plan's listing is not
    Flink's (:mod:`spillway.inspect.output_order`); ``upstream``: only the channels out of that vertex;
    ``plan_names``: the names a bound plan gives operators stored by id only (``JobBinding.names``)."""
    channels: list[LogicalChannel] = []
    skipped: list[str] = []
    used: set[ChannelKey] = set()
    for down in bound.values():
        for edge in down.vertex.inputs:
            if upstream is not None and edge.upstream != upstream:
                continue
            up = bound[edge.upstream]
            if down.head is None and down.problem:
                skipped.append(f"edge into {down.vertex.label()!r}: {down.problem}")
                continue
            if up.tail is None and up.problem:
                skipped.append(f"edge {up.vertex.label()!r} -> {down.vertex.label()!r}: {up.problem}")
                continue
            all_to_all = edge.all_to_all  # once per edge: a large job has many thousands of channels per edge
            if not all_to_all and not edge.partitioner.is_forward:
                skipped.append(
                    f"edge {up.vertex.label()!r} -> {down.vertex.label()!r}: {edge.ship_strategy} channel layout "
                    "is not reconstructed"
                )
                continue
            outputs = (orders or {}).get(edge.upstream, up.vertex.outputs)
            partition = outputs.index(edge) if edge in outputs else 0
            ins = index_channels(down.head, "input") if down.head is not None else {}
            outs = index_channels(up.tail, "output") if up.tail is not None else {}
            pairs = (
                [(u, d) for d in range(down.vertex.parallelism) for u in range(up.vertex.parallelism)]
                if all_to_all
                else [(i, i) for i in range(min(up.vertex.parallelism, down.vertex.parallelism))]
            )
            up_label = _label(
                up.tail, up.vertex.names[-1:], up.vertex.label(), plan_names
            )  # once per edge, not per channel
            down_label = _label(down.head, down.vertex.names[:1], down.vertex.label(), plan_names)
            for u, d in pairs:
                channel_in = 0 if not all_to_all else u
                subpartition = 0 if not all_to_all else d
                lc = LogicalChannel(
                    edge,
                    up_label,
                    down_label,
                    u,
                    d,
                    edge.gate,
                    upstream_op=up.tail,
                    downstream_op=down.head,
                )
                for h in ins.get((d, edge.gate, channel_in), [])[:1]:
                    assert down.head is not None
                    lc.parts.append(ChannelPart(down.head, h))
                    used.add(channel_key(down.head, h))
                if up.tail is not None:
                    for h in outs.get((u, partition, subpartition), [])[:1]:
                        lc.parts.append(ChannelPart(up.tail, h))
                        used.add(channel_key(up.tail, h))
                if lc.parts:
                    channels.append(lc)
    return ChannelMap(channels, skipped, used)


def _label(
    op: OperatorState | None, plan_name: Sequence[str], vertex_label: str, plan_names: Mapping[str, str] | None
) -> str:
    """An operator as people know it: its stored uid or name (V5+); before V5 a checkpoint stores ids
    only, so the bound operator is called by the plan's name for that chain position."""
    if op is None:
        return vertex_label
    if op.uid or op.name or not plan_name:
        return op.label(plan_names)
    return plan_name[0]
