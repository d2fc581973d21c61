"""Facts of Flink that rule a checkpoint operator out of a plan node, at their edges (``compatible``).

Each expectation is a fact of Flink's network stack: a subtask has one input channel per upstream subtask on an
all-to-all edge (``REBALANCE``, ``HASH``), so channel indexes of an input fed by one subtask stop at 0."""

from __future__ import annotations

from spillway.flink.deduction import OperatorFacts, compatible
from spillway.flink.stream_graph import StreamEdge, StreamGraph, StreamNode


def test_an_input_fed_by_one_subtask_has_only_channel_0() -> None:
    graph = StreamGraph(
        (StreamNode(1, "Source: one", 1, is_source=True), StreamNode(2, "spread", 2)),
        (StreamEdge(1, 2, "REBALANCE"),),
    )
    node = graph.node(2)
    assert compatible(graph, node, OperatorFacts("a" * 32, 2, input_gates=(0,), max_input_channel=0)) is None
    assert compatible(graph, node, OperatorFacts("a" * 32, 2, input_gates=(0,), max_input_channel=1)) == (
        "input channel 1, no input of this operator has that many channels"
    )
