"""The deduction's searches at their edges, against Flink's own ids: the generated-id search on a node with three
inputs (a union of three streams into one keyed operator: 1.20.3-shapes-no-uid's KeyedProcess, stream node 27, fed by
three operators without uid; ids.json, Flink's StreamGraph read while the checkpoint was made, lists its in-edges in
Flink's order), with one target and within its budget; and the matching's search budgets on the job without uids."""

from __future__ import annotations

import json
from typing import Any

import pytest
from support.fixtures import fixture_named

from spillway.flink.deduction import OperatorFacts, accept_hits, compatible, hash_search, solve_matching
from spillway.flink.job_ids import parse_job_ids
from spillway.flink.stream_graph import StreamEdge, StreamGraph, StreamNode, parse_stream_plan
from spillway.inspect.topology import operator_facts
from spillway.storage.load import load_checkpoint

RELEASES = ["1.14.6", "1.20.3", "2.2.1"]


def _flink(release: str) -> tuple[dict[str, Any], StreamGraph, list[str]]:
    fx = fixture_named(f"{release}-shapes-no-uid")
    ids: dict[str, Any] = json.loads((fx.root / "ids.json").read_text())
    checkpoint = load_checkpoint(fx.checkpoint_dir).checkpoint
    return ids, parse_job_ids(ids).graph, [o.operator_id for o in checkpoint.operators]


def _union_node(ids: dict[str, Any]) -> tuple[int, list[int]]:
    counts: dict[int, list[int]] = {}
    for e in ids["stream_edges"]:
        counts.setdefault(e["target"], []).append(e["source"])
    (node,) = [t for t, sources in counts.items() if len(sources) == 3]
    return node, counts[node]


@pytest.mark.parametrize("release", RELEASES)
def test_a_three_input_node_is_found_in_every_order_the_plan_may_list(release: str) -> None:
    ids, graph, cp_ids = _flink(release)
    flink_id = {n["id"]: n["operator_id"] for n in ids["stream_nodes"]}
    node, sources = _union_node(ids)
    assert all(n["uid"] is None for n in ids["stream_nodes"])  # every id is Flink's generated hash
    known = {s: flink_id[s] for s in sources}
    expected = [(node, flink_id[node], tuple((s, flink_id[s]) for s in sources))]
    # a plan lists a node's inputs in its own order, not Flink's: every one of the six orders finds Flink's id
    # with the inputs in Flink's order (the order that went into the hash)
    for flipped in (sources, sources[::-1], [sources[1], sources[0], sources[2]], [sources[2], sources[0], sources[1]]):
        rank = {s: i for i, s in enumerate(flipped)}
        edges = sorted(graph.edges, key=lambda e: (e.target, rank.get(e.source, 0) if e.target == node else 0))
        listed = StreamGraph(graph.nodes, tuple(edges))
        assert [e.source for e in listed.in_edges(node)] == flipped
        hits = hash_search(listed, known, cp_ids, set(cp_ids), {node})
        assert [(h.node, h.operator_id, h.inputs) for h in hits] == expected
        assert flink_id[node] in cp_ids
        proven, _ = accept_hits(hits, known)
        assert proven[node].operator_id == flink_id[node]


@pytest.mark.parametrize("release", RELEASES)
def test_a_three_input_node_with_one_input_from_the_pool_names_that_input(release: str) -> None:
    ids, graph, cp_ids = _flink(release)
    flink_id = {n["id"]: n["operator_id"] for n in ids["stream_nodes"]}
    node, sources = _union_node(ids)
    known = {s: flink_id[s] for s in sources[:2]}
    hits = hash_search(graph, known, cp_ids, set(cp_ids), {node})
    ours = [h for h in hits if h.operator_id == flink_id[node]]
    assert [h.inputs for h in ours] == [tuple((s, flink_id[s]) for s in sources)]


def test_one_target_is_enough_to_search_for() -> None:
    """The search for a node not yet known looks among ``targets``: a single target (Flink's id of the node) is
    searched for and found, with the known input's id."""
    ids, graph, cp_ids = _flink("1.20.3")
    flink_id = {n["id"]: n["operator_id"] for n in ids["stream_nodes"]}
    node, sources = _union_node(ids)
    known = {s: flink_id[s] for s in sources}
    hits = hash_search(graph, known, cp_ids, [flink_id[node]], {node})
    assert [(h.node, h.operator_id) for h in hits] == [(node, flink_id[node])]


def test_the_budget_bounds_the_digests_of_a_node() -> None:
    """``budget`` bounds positions x chained counts x pool ids per input: a node whose two inputs come from the
    pool is not searched when that product is over it, and is (finding Flink's id) when it is not."""
    ids, graph, cp_ids = _flink("1.20.3")
    flink_id = {n["id"]: n["operator_id"] for n in ids["stream_nodes"]}
    targets = [e["target"] for e in ids["stream_edges"]]
    node = min(t for t in targets if targets.count(t) == 2)  # a two-input node (Co-Process-Broadcast)
    ins = graph.in_edges(node)
    size = len(graph.nodes) * (len(graph.out_edges(node)) + 1) * len(cp_ids) ** len(ins)
    assert hash_search(graph, {}, cp_ids, {flink_id[node]}, {node}, budget=size - 1) == []
    hits = hash_search(graph, {}, cp_ids, {flink_id[node]}, {node}, budget=size)
    assert flink_id[node] in {h.operator_id for h in hits}


# ------------------------------------------------------------------------------- the matching's search budgets


def _prod_no_uid() -> tuple[StreamGraph, list[int], list[OperatorFacts]]:
    fx = fixture_named("1.15.4-prod-no-uid")
    graph = parse_stream_plan(json.loads((fx.root / "plan.json").read_text()))
    facts = operator_facts(load_checkpoint(fx.checkpoint_dir).checkpoint)
    return graph, [n.id for n in graph.nodes], facts


def test_a_search_over_budget_is_unsure_never_narrower() -> None:
    """The job without uids, by structure alone (12 consistent matchings). One matching of its 11 operators takes
    12 steps (one per operator placed, one at the leaf): a budget of 11 finds none, so every pairing the facts
    allow stays possible and the answer says it is incomplete; 12 finds one and goes on. Never fewer values than
    the true ones."""
    graph, nodes, facts = _prod_no_uid()
    assert len(nodes) == 11
    truth = solve_matching(graph, nodes, facts, absent_allowed=False)
    assert (truth.count, truth.complete) == (12, True)
    allowed = {n: {f.operator_id for f in facts if compatible(graph, graph.node(n), f) is None} for n in nodes}
    short = solve_matching(graph, nodes, facts, absent_allowed=False, budget=11)
    assert (short.count, short.complete) == (1, False)
    assert short.values == allowed
    assert any(allowed[n] != truth.values[n] for n in nodes)  # the budget made it wider than the truth
    enough = solve_matching(graph, nodes, facts, absent_allowed=False, budget=12)
    assert enough.values == truth.values and 1 < enough.count <= 12
    assert enough.complete is False  # counting all 12 takes more than 5 x 12 steps
    assert solve_matching(graph, nodes, facts, absent_allowed=False, budget=100).complete is True


def test_the_total_budget_spent_on_the_first_matching_leaves_the_rest_possible() -> None:
    graph, nodes, facts = _prod_no_uid()
    truth = solve_matching(graph, nodes, facts, absent_allowed=False)
    m = solve_matching(graph, nodes, facts, absent_allowed=False, total_budget=12)
    assert (m.count, m.complete) == (1, False)
    assert all(truth.values[n] <= m.values[n] for n in nodes)
    assert m.values != truth.values  # pairings no search could check are kept as possible
    allowed = {n: {f.operator_id for f in facts if compatible(graph, graph.node(n), f) is None} for n in nodes}
    assert m.values != allowed  # the first matching, found with the 12 steps, still rules pairings out
    assert solve_matching(graph, nodes, facts, absent_allowed=False, total_budget=11).values == allowed


def test_two_generated_ids_never_share_a_position() -> None:
    """Flink's hasher numbers the operators it hashes breadth first, each position once (docs/format/operator-ids.md):
    two ids generated at the same position cannot both be generated ids of one job. Two one-input edges and two
    related pairs of ids (each with its mirror, as id_relations gives them): at distinct positions each pair sits
    on either edge in either direction; at one shared position no matching exists, whether the first pair is
    placed by the search or already known."""
    graph = StreamGraph(
        tuple(StreamNode(i, f"n{i}", 2) for i in (1, 2, 3, 4)),
        (StreamEdge(1, 2, "REBALANCE"), StreamEdge(3, 4, "REBALANCE")),
    )
    a, b, c, d = (x * 32 for x in "abcd")
    facts = [OperatorFacts(x, 2) for x in (a, b, c, d)]

    def relations(first: int, second: int) -> dict[tuple[str, str], set[tuple[int, int]]]:
        return {(b, a): {(first, 0)}, (a, b): {(first, 0)}, (d, c): {(second, 0)}, (c, d): {(second, 0)}}

    apart = solve_matching(graph, [1, 2, 3, 4], facts, absent_allowed=False, relations=relations(5, 6))
    assert apart.count == 8 and apart.values == {n: {a, b, c, d} for n in (1, 2, 3, 4)}
    shared = solve_matching(graph, [1, 2, 3, 4], facts, absent_allowed=False, relations=relations(5, 5))
    assert shared.count == 0
    known = {1: a, 2: b}
    apart = solve_matching(
        graph, [3, 4], facts[2:], absent_allowed=False, relations=relations(5, 6), known=known, known_facts=facts[:2]
    )
    assert apart.count == 2 and apart.values == {3: {c, d}, 4: {c, d}}
    shared = solve_matching(
        graph, [3, 4], facts[2:], absent_allowed=False, relations=relations(5, 5), known=known, known_facts=facts[:2]
    )
    assert shared.count == 0
