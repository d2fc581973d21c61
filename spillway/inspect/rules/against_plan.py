"""Rules that need the plan: ``plan-mismatch``, ``plan-unbound`` (from ``plan_check``), ``topology`` notes,
``binding-uncertain``, ``channel-holder`` and ``channel-index`` (where each channel handle sits)."""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:  # types only; the checks import what they run (a plan's machinery only with a plan)
    from spillway.flink.operator_ids import Binding
    from spillway.inspect.topology import BoundVertex, Edge, JobBinding, Topology

from collections.abc import Iterator, Mapping

from spillway.inspect.channels import ChannelMap
from spillway.inspect.findings import Finding
from spillway.inspect.rules.common import Flagged, Located
from spillway.model.checkpoint import CheckpointMetadata, InputChannelHandle, ResultSubpartitionHandle

UNCERTAIN = (
    "holds channel state and is not bound to a plan operator for certain, so its channels are not checked against "
    "the plan; the binding table says what would decide it (a --uid NAME=UID, or the job-graph plan)"
)


def plan_findings(topology: Topology, job: JobBinding, cp: CheckpointMetadata) -> Iterator[Finding]:
    from spillway.inspect.plan_check import plan_mismatches, state_mismatches

    """Whether the plan describes this checkpoint at all (``plan-mismatch``, ``plan-unbound``)."""
    for rule, operator, message in plan_mismatches(job.vertices, cp, job.names) + state_mismatches(topology, cp, job):
        yield Finding(rule, message, operator=operator)


def topology_notes(cmap: ChannelMap | None, outputs: int) -> Iterator[Finding]:
    """``topology``: what the plan could not assemble; without a plan (``cmap`` None), the output-side handles
    that were not framed."""
    if cmap is not None:
        yield from (Finding("topology", note) for note in cmap.skipped)
    elif outputs:
        yield Finding(
            "topology",
            f"{outputs} output-side channel handles were not framed: output state may "
            "start mid-record and only continues an input-side stream; pass --plan to check them",
        )


def placement_findings(
    topology: Topology,
    bound: dict[str, BoundVertex],
    cp: CheckpointMetadata,
    located: list[Located],
    binding: Binding | None,
    orders: Mapping[str, tuple[Edge, ...]] | None = None,
) -> Iterator[Flagged]:
    """Input state on a chain head whose gate and channel exist; output state on a chain tail whose partition
    and subpartition exist — only for operators bound for certain (``binding``: the plan's operators bound).
    ``orders``: the order of a vertex's outputs where the plan's listing is not Flink's
    (:mod:`spillway.inspect.output_order`)."""
    heads = {b.head.operator_id: b for b in bound.values() if b.head is not None}
    tails = {b.tail.operator_id: b for b in bound.values() if b.tail is not None}
    placed = {b.operator_id for b in binding.operators if b.exact} if binding is not None else None
    problems = any(b.problem for b in bound.values())
    doubted: set[str] = set()
    for x in located:
        op = x.operator
        if placed is not None and op.operator_id not in placed:
            # Which plan operator holds this state is not certain: a finding here would be a guess.
            if op.operator_id not in doubted:
                doubted.add(op.operator_id)
                yield Flagged(Finding("binding-uncertain", f"{op.label()} {UNCERTAIN}", operator=op.label()))
            continue
        h = x.handle
        if h.side == "input":
            message = _input_fault(bound, heads.get(op.operator_id), h)
        else:
            message = _output_fault(bound, tails.get(op.operator_id), h, problems, orders or {})
        if message is not None:
            yield Flagged(x.finding(*message), (x.key,))


def _input_fault(bound: dict[str, BoundVertex], b: BoundVertex | None, h: InputChannelHandle) -> tuple[str, str] | None:
    if b is None:
        return "channel-holder", "input channel state on an operator that heads no chain in the plan"
    gates = {e.gate: e for e in b.vertex.inputs}
    edge = gates.get(h.gate_index)
    if edge is None:
        return "channel-index", f"gate {h.gate_index} does not exist (vertex has {len(gates)} inputs)"
    upstream = bound[edge.upstream].vertex.parallelism
    if h.input_channel_index >= upstream:
        return "channel-index", f"input channel {h.input_channel_index} >= upstream parallelism {upstream}"
    return None


def _output_fault(
    bound: dict[str, BoundVertex],
    b: BoundVertex | None,
    h: ResultSubpartitionHandle,
    problems: bool,
    orders: Mapping[str, tuple[Edge, ...]],
) -> tuple[str, str] | None:
    if b is None:
        if problems:
            return None
        return "channel-holder", "output channel state on an operator that ends no chain in the plan"
    outs = orders.get(b.vertex.key, b.vertex.outputs)
    if h.partition_index >= len(outs):
        return "channel-index", f"partition {h.partition_index} does not exist (vertex has {len(outs)} outputs)"
    downstream = bound[outs[h.partition_index].downstream].vertex.parallelism
    if h.subpartition_index >= downstream:
        return "channel-index", f"subpartition {h.subpartition_index} >= downstream parallelism {downstream}"
    return None
