"""Which output of a job vertex is which result partition, when the plan does not say (docs/format/record-framing.md).

Output channel state is indexed by result partition (:mod:`spillway.flink.outputs` gives Flink's numbering). A
stream-graph plan (or the job's own graph) gives that order; a job-graph plan does not: it lists each consumer's
inputs, and the producer's partition order is not among them. For a vertex with several outputs, every order
is then a candidate that the checkpoint's evidence has not ruled out: a partition index it stores must exist,
and its subpartitions must fit the consumer on that partition (one per consumer subtask over an all-to-all
exchange, one over FORWARD). Which candidate is Flink's is left to the record framing (validate): pairing
output state with the wrong consumer's input state breaks records at the seam.
"""

from __future__ import annotations

import itertools
from collections.abc import Callable, Iterator, Mapping
from typing import TYPE_CHECKING

from spillway.inspect.channels import ChannelKey, ChannelMap, channel_key, logical_channels

if TYPE_CHECKING:
    from spillway.inspect.topology import BoundVertex, Edge, Topology, Vertex
    from spillway.model.checkpoint import CheckpointMetadata

__all__ = ["MAX_ORDERS", "OutputOrders", "candidate_orders", "choose_orders", "known_order", "uncertain_note"]

#: Most candidate orders of one vertex kept, and most orders looked at (a vertex of many outputs): the framing
#: tries each one kept.
MAX_ORDERS = 24
MAX_LOOKED_AT = 5040

#: vertex key -> the order of its outputs to use, where it differs from ``Vertex.outputs``.
OutputOrders = Mapping[str, tuple["Edge", ...]]


def known_order(topology: Topology, v: Vertex) -> bool:
    """The plan gives the order of ``v``'s outputs: one output at most, or a stream-graph plan whose out-edge
    order is Flink's. A plan does not print that order; it is taken by target node id (consumers are translated
    in the order they were created), which a Sink V2 writer breaks: its plan id is drawn afresh and larger than
    every other, while in the job its edge comes first (docs/format/job-shapes.md). Flink takes a node's chained
    out-edges first and its cut ones after, each group in out-edge order; so the order is open where a writer's
    edge is cut next to another cut edge of the same node, or chained next to another chained edge while the
    writer itself sends out (a committer behind it)."""
    if len(v.outputs) <= 1:
        return True
    graph = topology.stream_graph
    if topology.flavour != "stream-graph" or graph is None:
        return False
    if not graph.inferred_edge_order:
        return True
    members = set(v.node_ids)
    for nid in v.node_ids:
        outs = graph.out_edges(nid)
        cut = [e for e in outs if e.target not in members]
        chained = [e for e in outs if e.target in members]
        if len(cut) > 1 and any(_is_writer(graph.node(e.target).name) for e in cut):
            return False
        if len(chained) > 1 and any(
            _is_writer(graph.node(e.target).name) and graph.out_edges(e.target) for e in chained
        ):
            return False
    return True


def _is_writer(name: str) -> bool:
    """A Sink V2 writer node: ``Sink: Writer``, ``<sink name>: Writer`` (SQL: ``snk[5]: Writer``)."""
    return name.endswith(": Writer")


def candidate_orders(topology: Topology, b: BoundVertex) -> list[tuple[Edge, ...]]:
    """The orders of ``b``'s outputs its output channel state allows, the plan's own listing first; just that
    one where the plan gives the order; none when none fits (the placement rules then report the state)."""
    v = b.vertex
    if known_order(topology, v):
        return [v.outputs]
    used = _partitions_used(b)
    out = []
    for order in itertools.islice(_orders(v.outputs), MAX_LOOKED_AT):
        if all(p < len(order) and top < _subpartitions(topology, order[p]) for p, top in used.items()):
            out.append(order)
            if len(out) == MAX_ORDERS:
                break
    return out


def choose_orders(
    topology: Topology,
    bound: dict[str, BoundVertex],
    checkpoint: CheckpointMetadata,
    frames_clean: Callable[[ChannelMap], bool],
) -> tuple[dict[str, tuple[Edge, ...]], list[str]]:
    """For each vertex whose output order the plan does not give, the order to pair its output state by, and the
    notes of those the checkpoint cannot decide. ``frames_clean(cmap)``: every channel of ``cmap`` (the channels
    out of one vertex under one order) frames without a fault. Output state paired with the wrong consumer's
    input state breaks records at the seam, so an order that frames cleanly is taken; when several do, the data
    is sound either way and the pairing is noted as open; when none does, a fault is certain whichever order is
    Flink's, and the first candidate is kept to locate it."""
    orders: dict[str, tuple[Edge, ...]] = {}
    notes: list[str] = []
    for key, b in bound.items():
        if known_order(topology, b.vertex) or b.tail is None:
            continue
        fitting = candidate_orders(topology, b)
        if fitting and fitting[0] != b.vertex.outputs:
            orders[key] = fitting[0]
        distinct: dict[frozenset[tuple[ChannelKey, ...]], ChannelMap] = {}
        by_pairing: dict[frozenset[tuple[ChannelKey, ...]], tuple[Edge, ...]] = {}
        for order in fitting:
            cmap = logical_channels(topology, bound, checkpoint, {key: order}, upstream=key)
            pairing = frozenset(tuple(channel_key(p.operator, p.handle) for p in lc.parts) for lc in cmap.channels)
            if pairing not in distinct:
                distinct[pairing], by_pairing[pairing] = cmap, order
        if len(distinct) < 2:
            continue  # every order pairs the same state (e.g. no output state): nothing to decide
        clean = [by_pairing[k] for k, cmap in distinct.items() if frames_clean(cmap)]
        if clean:
            orders[key] = clean[0]
        if len(clean) > 1:
            notes.append(uncertain_note(b.vertex, len(clean)))
    return orders, notes


def uncertain_note(v: Vertex, fitting: int) -> str:
    """Why validate leaves the pairing of a vertex's output state open."""
    return (
        f"vertex {v.label()!r}: the plan does not give the order of its {len(v.outputs)} outputs (its result "
        f"partitions), and {fitting} orders frame its output channel state cleanly; the channels are framed by the "
        "first — give the stream-graph plan or --job to make the pairing certain"
    )


def _orders(outputs: tuple[Edge, ...]) -> Iterator[tuple[Edge, ...]]:
    yield outputs
    for order in itertools.permutations(outputs):
        if order != outputs:
            yield order


def _partitions_used(b: BoundVertex) -> dict[int, int]:
    """Partition index -> the highest subpartition index the tail stores output state for."""
    used: dict[int, int] = {}
    if b.tail is None:
        return used
    from spillway.model.checkpoint import channel_handles

    for sub in b.tail.subtasks:
        for h in channel_handles(sub.result_subpartition_state):
            p, s = h.info
            used[p] = max(used.get(p, -1), s)
    return used


def _subpartitions(topology: Topology, e: Edge) -> int:
    """How many subpartitions an upstream subtask has on edge ``e``, at most."""
    if e.partitioner.is_forward:
        return 1
    return topology.vertices[e.downstream].parallelism  # all-to-all, and the most any pointwise edge has
