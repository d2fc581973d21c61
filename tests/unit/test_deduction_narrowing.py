"""The matching's narrowing before its search: an id whose generated-id partner no neighbour of a node can be is
taken out of that node's domain (Flink generates an operator's id without uid from its one input's id, so two
related ids sit on adjacent operators, the child with that one input)."""

from __future__ import annotations

from spillway.flink.deduction import OperatorFacts, _narrow, solve_matching
from spillway.flink.stream_graph import StreamEdge, StreamGraph, StreamNode

A, B, C = "a" * 32, "b" * 32, "c" * 32


def _graph() -> StreamGraph:
    """1 -> 2 (2 has one input), and 3 alone."""
    nodes = (
        StreamNode(1, "src", 2, is_source=True),
        StreamNode(2, "map", 2),
        StreamNode(3, "other", 2, is_source=True),
    )
    return StreamGraph(nodes, (StreamEdge(1, 2, "FORWARD"),))


def _domains() -> dict[int, list[str]]:
    return {1: [A, B, C], 2: [A, B, C], 3: [A, B, C]}


def test_related_ids_stay_only_where_a_neighbour_can_be_their_partner() -> None:
    domains = _domains()
    # each true pair comes with its mirror: either may be the child
    _narrow(_graph(), domains, {A, B, C}, {}, {(B, A): {(1, 0)}, (A, B): {(1, 0)}})
    assert domains == {1: [A, B, C], 2: [A, B, C], 3: [C]}


def test_the_child_sits_behind_its_parent_and_the_parent_in_front() -> None:
    domains = _domains()
    _narrow(_graph(), domains, {A, B, C}, {}, {(B, A): {(1, 0)}})  # b is generated from a
    assert domains == {1: [A, C], 2: [B, C], 3: [C]}


def test_a_known_operator_holds_its_id_and_a_partner_not_placed_binds_nothing() -> None:
    domains = {2: [B, C], 3: [B, C]}
    _narrow(_graph(), domains, {B, C}, {1: A}, {(B, A): {(1, 0)}})
    assert domains == {2: [B, C], 3: [C]}
    domains = {2: [B, C], 3: [B, C]}
    _narrow(_graph(), domains, {B, C}, {}, {(B, A): {(1, 0)}})  # a is no operator's: nothing to sit next to
    assert domains == {2: [B, C], 3: [B, C]}


def test_narrowing_goes_on_until_nothing_changes() -> None:
    """1 -> 2 -> 4, 3 alone: c is generated from b, b from a. The first pass leaves a on 2 (b may still sit on 4
    then), and takes b off 4 (c, b's child, cannot follow 4); the second pass then takes a off 2: only the chain
    a, b, c is left."""
    nodes = (
        StreamNode(1, "src", 2, is_source=True),
        StreamNode(2, "map", 2),
        StreamNode(3, "other", 2, is_source=True),
        StreamNode(4, "sink", 2),
    )
    graph = StreamGraph(nodes, (StreamEdge(1, 2, "FORWARD"), StreamEdge(2, 4, "FORWARD")))
    domains = {1: [A, B], 2: [A, B, C], 3: [A, B, C], 4: [B, C]}
    _narrow(graph, domains, {A, B, C}, {}, {(B, A): {(1, 0)}, (C, B): {(1, 0)}})
    assert domains == {1: [A], 2: [B], 3: [], 4: [C]}


def test_the_search_meets_the_same_matchings() -> None:
    """The narrowing only takes out what no complete matching holds: the matchings of the chain are those the
    relations allow, and each is met."""
    graph = _graph()
    facts = [OperatorFacts(A, 2), OperatorFacts(B, 2), OperatorFacts(C, 2)]
    m = solve_matching(graph, [1, 2, 3], facts, absent_allowed=False, relations={(B, A): {(1, 0)}})
    assert m.count == 1 and m.complete
    assert m.assignments == [{1: A, 2: B, 3: C}]
    assert m.values == {1: {A}, 2: {B}, 3: {C}}
