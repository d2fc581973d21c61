"""Where Flink's traversal can put an operator (its breadth-first position and chained-output count, what goes into
a generated id), and the generated-id relations held to it. Flink's own ids (ids.json, StreamGraphHasherV2 while the
job was built) are the oracle: every operator without uid has its id generated from its one input's id at a place
the plan admits."""

from __future__ import annotations

import json

import pytest
from support.fixtures import Fixture, all_fixtures
from support.plan_nodes import plan_to_flink_nodes

from spillway.flink.chaining import hasher_rules
from spillway.flink.deduction import OperatorFacts, id_relations, solve_matching
from spillway.flink.operator_ids import _Candidate, _places
from spillway.flink.stream_graph import StreamEdge, StreamGraph, StreamNode, parse_stream_plan

SHAPED = [
    pytest.param(f, id=f.name)
    for f in all_fixtures()
    if f.info["scenario"].startswith(("shapes", "prod")) or f.info["scenario"].endswith("no-uid")
]


@pytest.mark.parametrize("fx", SHAPED)
def test_flinks_generated_ids_sit_at_a_place_the_plan_admits(fx: Fixture) -> None:
    ids = json.loads((fx.root / "ids.json").read_text())
    graph = parse_stream_plan(json.loads((fx.root / "plan.json").read_text()))
    flink = plan_to_flink_nodes(fx.root)
    places = _places(_Candidate(graph, {}, None), hasher_rules(ids["release"]))
    assert places is not None
    generated = [
        (n.id, graph.in_edges(n.id)[0].source)
        for n in graph.nodes
        if flink[n.id]["uid"] is None and len(graph.in_edges(n.id)) == 1
    ]
    assert generated  # every one of these jobs has operators without uid behind one input
    every = [flink[n.id]["operator_id"] for n in graph.nodes]
    relations = id_relations(every, len(graph.nodes), max(len(graph.out_edges(n.id)) for n in graph.nodes))
    for child, parent in generated:
        found = relations[(flink[child]["operator_id"], flink[parent]["operator_id"])]
        assert found & places[child], (child, found, sorted(places[child]))
        assert len(places[child]) < len(graph.nodes) * (1 + len(graph.out_edges(child)))  # it does narrow


A, B, C, D = "a" * 32, "b" * 32, "c" * 32, "d" * 32


def test_a_relation_holds_only_at_a_place_the_child_can_have() -> None:
    """Two FORWARD pairs, 1 -> 2 and 3 -> 4; a and b are generated one from the other at position 1. Without places
    either pair may hold them, either way round (8 matchings); only node 2 can stand at position 1, so they sit on
    1 -> 2 (4 matchings)."""
    nodes = tuple(StreamNode(i, f"n{i}", 2, is_source=i in (1, 3)) for i in (1, 2, 3, 4))
    graph = StreamGraph(nodes, (StreamEdge(1, 2, "FORWARD"), StreamEdge(3, 4, "FORWARD")))
    facts = [OperatorFacts(h, 2) for h in (A, B, C, D)]
    relations = {(B, A): {(1, 0)}, (A, B): {(1, 0)}}
    loose = solve_matching(graph, [1, 2, 3, 4], facts, absent_allowed=False, relations=relations)
    assert loose.count == 8 and loose.values[1] == {A, B, C, D}
    places = {1: {(0, 0), (0, 1)}, 2: {(1, 0)}, 3: {(2, 0), (2, 1)}, 4: {(3, 0)}}
    m = solve_matching(graph, [1, 2, 3, 4], facts, absent_allowed=False, relations=relations, places=places)
    assert m.count == 4 and m.complete
    assert m.values == {1: {A, B}, 2: {A, B}, 3: {C, D}, 4: {C, D}}
