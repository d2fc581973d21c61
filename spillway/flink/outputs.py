"""The order of a job vertex's outputs (its result partitions), which output channel state is indexed by.

Flink numbers a vertex's produced data sets in the order ``StreamingJobGraphGenerator#createChain`` collects the
chain's *transitive out-edges* (1.10 … 2.3): depth first from the chain head, each node contributes first the
transitive out-edges of the nodes it chains to, in its own out-edge order, then its out-edges that are not
chained, in that same order. The job vertex connects one data set per such edge, in that order, and a subtask's
result partition ``p`` (``ResultSubpartitionInfo#partitionIdx``) is the ``p``-th of them.

A stream graph carries each node's out-edge order (Flink's edge-creation order; a stream-graph plan does not
print it, see :func:`spillway.flink.stream_graph.parse_stream_plan`), so it gives this order. A job-graph plan
lists inputs per consumer only: for a vertex with more than one output it does not say which is partition 0.
"""

from __future__ import annotations

from collections.abc import Callable

from spillway.flink.stream_graph import StreamEdge, StreamGraph

__all__ = ["transitive_out_edges"]


def transitive_out_edges(graph: StreamGraph, head: int, chained: Callable[[StreamEdge], bool]) -> list[StreamEdge]:
    """The chain of ``head``'s edges leaving the chain, in Flink's result-partition order. ``chained(e)``: Flink
    chained edge ``e`` (its target is in the same chain)."""
    out: list[StreamEdge] = []
    stack: list[tuple[int, bool]] = [(head, False)]
    # Iterative form of the recursion: a node's chained successors are expanded before its own cut edges.
    while stack:
        nid, expanded = stack.pop()
        edges = graph.out_edges(nid)
        if expanded:
            out.extend(e for e in edges if not chained(e))
            continue
        stack.append((nid, True))
        stack.extend((e.target, False) for e in reversed(edges) if chained(e))
    return out
