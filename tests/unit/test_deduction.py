"""The deduction's building blocks (spillway/flink/deduction.py) against Flink's own ids.

Expected values come from Flink: ``ids.json`` of a fixture job without a single uid (every operator id is
``StreamGraphHasherV2``'s generated hash; the job's chains are its ``vertices``), the job's plan, and for the
structural rules hand-built graphs whose answer follows from the Flink fact each rule states
(docs/format/operator-ids.md §7–8).
"""

from __future__ import annotations

import json
from functools import cache
from typing import Any

from support.fixtures import fixture_named

from spillway.flink.deduction import (
    ABSENT,
    HashHit,
    OperatorFacts,
    accept_hits,
    compatible,
    hash_search,
    id_relations,
    solve_matching,
)
from spillway.flink.stream_graph import StreamEdge, StreamGraph, StreamNode, parse_stream_plan
from spillway.inspect.topology import operator_facts
from spillway.storage.load import load_checkpoint

NO_UID = "1.15.4-prod-no-uid"  # every operator id generated; metadata V3 of 1.15 keeps stateless operators


@cache
def _job() -> tuple[StreamGraph, dict[int, str], dict[int, int], list[str]]:
    """The plan, Flink's id of each node, Flink's chained-output count of each node (out-edges whose target is
    in the same job vertex), and the checkpoint's operator ids."""
    fx = fixture_named(NO_UID)
    ids: dict[str, Any] = json.loads((fx.root / "ids.json").read_text())
    graph = parse_stream_plan(json.loads((fx.root / "plan.json").read_text()))
    flink_id = {n["id"]: n["operator_id"] for n in ids["stream_nodes"]}
    vertex = {n["id"]: n["vertex_id"] for n in ids["stream_nodes"]}
    chained = {
        n: sum(1 for e in ids["stream_edges"] if e["source"] == n and vertex[e["target"]] == vertex[n]) for n in vertex
    }
    checkpoint = load_checkpoint(fx.checkpoint_dir).checkpoint
    return graph, flink_id, chained, [o.operator_id for o in checkpoint.operators]


def _one_input_edges(graph: StreamGraph) -> list[tuple[int, int]]:
    return [(e.source, e.target) for e in graph.edges if len(graph.in_edges(e.target)) == 1]


def test_the_job_is_what_the_tests_assume() -> None:
    graph, flink_id, chained, cp_ids = _job()
    assert sorted(cp_ids) == sorted(flink_id.values())  # every operator stored, by Flink's generated id
    assert len(_one_input_edges(graph)) == 8
    assert chained == {1: 1, 2: 1, 3: 0, 4: 0, 5: 1, 6: 1, 7: 0, 10: 0, 11: 0, 13: 1, 14: 0}


def test_id_relations_are_exactly_the_jobs_one_input_edges_and_their_mirrors() -> None:
    """Every one-input node's generated id is its input's id mixed into the digest of its position and chained
    count; no other pair of the checkpoint's ids is related (128-bit ids do not collide by chance)."""
    graph, flink_id, chained, cp_ids = _job()
    rel = id_relations(cp_ids, len(graph.nodes), 1)
    expected = set()
    for u, v in _one_input_edges(graph):
        expected |= {(flink_id[v], flink_id[u]), (flink_id[u], flink_id[v])}
    assert set(rel) == expected
    for u, v in _one_input_edges(graph):
        found = rel[(flink_id[v], flink_id[u])]
        assert found == rel[(flink_id[u], flink_id[v])]  # the step can be undone: same values for the mirror
        assert len(found) == 1
        ((p, c),) = found
        assert c == chained[v], (u, v)
        assert 0 <= p < len(graph.nodes)


def test_id_relations_need_the_right_chained_count_and_ids() -> None:
    graph, flink_id, _, cp_ids = _job()
    # a count range that stops below a node's chained count cannot reproduce it: parse (1 chained output) drops out
    rel = id_relations(cp_ids, len(graph.nodes), 0)
    assert (flink_id[2], flink_id[1]) not in rel
    assert (flink_id[3], flink_id[2]) in rel  # timestamps has none
    assert id_relations([], 5, 1) == {}
    assert id_relations([flink_id[1]], len(graph.nodes), 1) == {}  # one id relates to nothing, not to itself


def test_hash_search_finds_flinks_id_of_a_node_from_its_known_input() -> None:
    """Besides Flink's id of the node, the search finds exactly the ids the undone step gives: the id of u's own
    input (u's id is generated from it, so it is generated from u's id at u's position and count) when that count
    is one the node can have."""
    graph, flink_id, chained, cp_ids = _job()
    edges = _one_input_edges(graph)
    for u, v in edges:
        hits = hash_search(graph, {u: flink_id[u]}, cp_ids, set(cp_ids) - {flink_id[u]}, {v})
        got = {(h.node, h.operator_id, h.chained_outputs, h.inputs) for h in hits}
        expected = {(v, flink_id[v], chained[v], ((u, flink_id[u]),))}
        outs = len(graph.out_edges(v))
        expected |= {
            (v, flink_id[w], chained[u], ((u, flink_id[u]),)) for w, x in edges if x == u and chained[u] <= outs
        }
        assert got == expected, (u, v)
        assert len(hits) == len(got)
        # the position and count that reproduce the id are the ones id_relations finds for the pair
        rel = id_relations(cp_ids, len(graph.nodes), len(graph.out_edges(v)))
        for h in hits:
            assert rel[(h.operator_id, flink_id[u])] == {(h.position, h.chained_outputs)}


def test_hash_search_finds_a_two_input_node_in_flinks_in_edge_order() -> None:
    """slow-count (node 10) has inputs enrich (4, type number 1) and rules-timestamps (7, type number 2); Flink
    hashes them in its in-edge order (ids.json stream_edges). The plan does not show that order, so every order
    is tried and the one that reproduces Flink's id says it."""
    graph, flink_id, _, cp_ids = _job()
    hits = hash_search(graph, {4: flink_id[4], 7: flink_id[7]}, cp_ids, set(cp_ids), {10})
    assert [(h.operator_id, h.inputs, h.chained_outputs) for h in hits] == [
        (flink_id[10], ((4, flink_id[4]), (7, flink_id[7])), 0)
    ]
    # one input from the pool: the same hit with the unknown input's id found, and the undone last step (7's id
    # generated with 10's id as the last input), nothing else
    hits = hash_search(graph, {4: flink_id[4]}, cp_ids, set(cp_ids), {10})
    assert {(h.operator_id, h.inputs) for h in hits} == {
        (flink_id[10], ((4, flink_id[4]), (7, flink_id[7]))),
        (flink_id[7], ((4, flink_id[4]), (7, flink_id[10]))),
    }
    assert len(hits) == 2


def test_hash_search_keeps_only_targets_that_fit() -> None:
    graph, flink_id, _, cp_ids = _job()
    known = {1: flink_id[1]}
    assert hash_search(graph, known, cp_ids, set(cp_ids) - {flink_id[2]}, {2}) == []  # not a target
    assert hash_search(graph, known, cp_ids, set(cp_ids), {2}, fits=lambda n, i: i != flink_id[2]) == []
    # timestamps (3) from parse's id: its own id, and the source's (parse is generated from it): fits picks
    for keep in (flink_id[3], flink_id[1]):
        hits = hash_search(graph, {2: flink_id[2]}, cp_ids, set(cp_ids), {3}, fits=lambda n, i, k=keep: i == k)
        assert [h.operator_id for h in hits] == [keep]
    seen: list[tuple[int, str]] = []
    hits = hash_search(graph, known, cp_ids, set(cp_ids), {2}, fits=lambda n, i: seen.append((n, i)) or True)
    assert [h.operator_id for h in hits] == [flink_id[2]] and seen == [(2, flink_id[2])]
    assert hash_search(graph, known, cp_ids, set(), {2}) == []  # nothing to find
    assert hash_search(graph, known, cp_ids, set(cp_ids), set()) == []  # no node asked for
    # a node whose digests exceed the budget is skipped: positions x counts alone are 11 x 2 here
    assert hash_search(graph, known, cp_ids, set(cp_ids), {2}, budget=21) == []
    assert len(hash_search(graph, known, cp_ids, set(cp_ids), {2}, budget=22)) == 1


def test_hash_search_checks_a_known_node_and_names_its_input() -> None:
    """A node whose id is known (its uid's hash, or bound already) is checked against that id only; the hit
    says which pool id its input has."""
    graph, flink_id, _, cp_ids = _job()
    # the sink (14) has no output: only its input's id reproduces it
    hits = hash_search(graph, {14: flink_id[14]}, cp_ids, set(), {14})
    assert [(h.node, h.operator_id, h.inputs) for h in hits] == [(14, flink_id[14], ((13, flink_id[13]),))]
    nodes, inputs = accept_hits(hits, {14: flink_id[14]})
    assert nodes == {} and inputs == {13: flink_id[13]}
    # parse (2): its input's id and, undone, its one-input child's id both reproduce it: the input stays open
    hits = hash_search(graph, {2: flink_id[2]}, cp_ids, set(), {2})
    assert {h.inputs for h in hits} == {((1, flink_id[1]),), ((1, flink_id[3]),)}
    assert accept_hits(hits, {2: flink_id[2]}) == ({}, {})


def test_accept_hits_takes_a_hit_whose_inputs_were_known() -> None:
    graph, flink_id, chained, cp_ids = _job()
    hits = hash_search(graph, {1: flink_id[1]}, cp_ids, set(cp_ids), {2})
    nodes, inputs = accept_hits(hits, {1: flink_id[1]})
    assert {n: (h.operator_id, h.chained_outputs) for n, h in nodes.items()} == {2: (flink_id[2], chained[2])}
    assert (nodes[2].node, nodes[2].position, nodes[2].inputs) == (2, hits[0].position, ((1, flink_id[1]),))
    assert inputs == {}


def test_accept_hits_refuses_what_a_mirror_contradicts() -> None:
    """With neither id known, parse (2) from input 1 and the mirror (1 generated from 2's id) are both hits for
    node 2: two ids for one node, nothing is certain."""
    graph, flink_id, _, cp_ids = _job()
    hits = hash_search(graph, {}, cp_ids, set(cp_ids), {2})
    # every related pair of the checkpoint's ids (the job's one-input edges and their mirrors, checked above)
    assert {(h.operator_id, h.inputs[0][1]) for h in hits} == set(id_relations(cp_ids, len(graph.nodes), 1))
    assert accept_hits(hits, {}) == ({}, {})
    # parse's own id alone (from input 1, and undone from its child 3): one id, no mirror among these hits,
    # but two chained counts (1 and timestamps' 0) and two input ids: the node is taken, count and input are not
    single = [h for h in hits if h.operator_id == flink_id[2]]
    nodes, inputs = accept_hits(single, {})
    assert {n: (h.operator_id, h.chained_outputs) for n, h in nodes.items()} == {2: (flink_id[2], -1)}
    assert inputs == {}
    # with the hit from input 1 alone, the input is taken too
    nodes, inputs = accept_hits([h for h in single if h.inputs == ((1, flink_id[1]),)], {})
    assert {n: (h.operator_id, h.chained_outputs) for n, h in nodes.items()} == {2: (flink_id[2], 1)}
    assert inputs == {1: flink_id[1]}
    mirror = hash_search(graph, {}, cp_ids, set(cp_ids), {3})
    both = single + [h for h in mirror if h.operator_id == flink_id[1]]
    nodes, _ = accept_hits(both, {})
    assert 2 not in nodes


# ---------------------------------------------------------------------------------------------- the matching


def _facts(name: str) -> list[OperatorFacts]:
    return operator_facts(load_checkpoint(fixture_named(name).checkpoint_dir).checkpoint)


def test_relations_leave_one_matching_and_it_is_flinks() -> None:
    """Every plan operator of the job without uids onto the checkpoint's ids: the structure alone (parallelism,
    keyed state behind keyBy, channel state) leaves 12 matchings, each with Flink's id among its values; the
    generated-id relations (which id is generated from which) leave exactly Flink's assignment."""
    graph, flink_id, _, cp_ids = _job()
    facts = _facts(NO_UID)
    nodes = [n.id for n in graph.nodes]
    loose = solve_matching(graph, nodes, facts, absent_allowed=False)
    assert loose.count == 12 and loose.complete and not loose.forward_keyed
    assert all(flink_id[n] in loose.values[n] for n in nodes)
    assert {n for n in nodes if len(loose.values[n]) > 1} == {2, 3, 6, 13, 14}
    rel = id_relations(cp_ids, len(graph.nodes), 1)
    m = solve_matching(graph, nodes, facts, absent_allowed=False, relations=rel)
    assert m.count == 1 and m.complete
    assert m.values == {n: {flink_id[n]} for n in nodes}


def test_known_operators_and_their_facts_narrow_the_rest() -> None:
    """Nodes already bound (here by Flink's own id) take part through the relations: the others still come out as
    Flink's."""
    graph, flink_id, _, cp_ids = _job()
    facts = _facts(NO_UID)
    known = {1: flink_id[1], 5: flink_id[5], 10: flink_id[10]}
    rest = [n.id for n in graph.nodes if n.id not in known]
    open_facts = [f for f in facts if f.operator_id not in known.values()]
    rel = id_relations(cp_ids, len(graph.nodes), 1)
    m = solve_matching(
        graph,
        rest,
        open_facts,
        absent_allowed=False,
        known=known,
        relations=rel,
        known_facts=[f for f in facts if f.operator_id in known.values()],
    )
    assert m.count == 1 and m.values == {n: {flink_id[n]} for n in rest}


def test_releases_without_stateless_operators_match_them_to_absent() -> None:
    """1.12 leaves stateless operators out of _metadata: such a plan operator is in no id (ABSENT)."""
    fx = fixture_named("1.12.5-prod-no-uid")
    ids = json.loads((fx.root / "ids.json").read_text())
    flink_id = {n["id"]: n["operator_id"] for n in ids["stream_nodes"]}
    graph = parse_stream_plan(json.loads((fx.root / "plan.json").read_text()))
    facts = _facts("1.12.5-prod-no-uid")
    in_cp = {f.operator_id for f in facts}
    assert len(in_cp) < len(graph.nodes)
    expected = {n.id: {flink_id[n.id] if flink_id[n.id] in in_cp else ABSENT} for n in graph.nodes}
    rel = id_relations(sorted(in_cp), len(graph.nodes), 1)
    m = solve_matching(graph, [n.id for n in graph.nodes], facts, absent_allowed=True, relations=rel)
    assert m.count == 1 and m.values == expected
    # without ABSENT no matching covers more plan operators than there are ids
    assert solve_matching(graph, [n.id for n in graph.nodes], facts, absent_allowed=False, relations=rel).count == 0


def _graph(nodes: dict[int, int], edges: list[tuple[int, int, str]]) -> StreamGraph:
    """Node id -> parallelism, (source, target, partitioner)."""
    return StreamGraph(
        tuple(StreamNode(i, f"n{i}", p) for i, p in nodes.items()),
        tuple(StreamEdge(s, t, part) for s, t, part in edges),
    )


def _f(i: str, p: int = 2, **kw: Any) -> OperatorFacts:
    return OperatorFacts(i * 32, p, **kw)


def test_the_cap_ends_the_enumeration_and_says_so() -> None:
    """Three interchangeable operators: 3! = 6 matchings."""
    g = _graph({1: 2, 2: 2, 3: 2}, [(1, 2, "REBALANCE"), (2, 3, "REBALANCE")])
    facts = [_f("a"), _f("b"), _f("c")]
    m = solve_matching(g, [1, 2, 3], facts, absent_allowed=False)
    assert (m.count, m.complete) == (6, True)
    assert m.values == {n: {f.operator_id for f in facts} for n in (1, 2, 3)}
    m = solve_matching(g, [1, 2, 3], facts, absent_allowed=False, cap=7)
    assert (m.count, m.complete) == (6, True)
    m = solve_matching(g, [1, 2, 3], facts, absent_allowed=False, cap=5)
    assert (m.count, m.complete) == (5, False)
    m = solve_matching(g, [1, 2, 3], facts, absent_allowed=False, cap=1)
    assert (m.count, m.complete) == (1, False)
    # with ABSENT allowed, every id must still be taken: 3! again, plus nothing else
    assert solve_matching(g, [1, 2, 3], facts, absent_allowed=True).count == 6
    # two ids for three nodes: one node is absent, 3 x 2 ways
    m = solve_matching(g, [1, 2, 3], facts[:2], absent_allowed=True)
    assert m.count == 6 and m.values == {n: {"a" * 32, "b" * 32, ABSENT} for n in (1, 2, 3)}


def test_keyed_state_sits_behind_a_keyed_edge_and_forward_only_when_nothing_else_fits() -> None:
    g = _graph({1: 2, 2: 2, 3: 2}, [(1, 2, "FORWARD"), (2, 3, "HASH")])
    facts = [_f("a"), _f("b"), _f("k", keyed=True)]
    m = solve_matching(g, [1, 2, 3], facts, absent_allowed=False)
    assert m.values[3] == {"k" * 32} and m.count == 2 and not m.forward_keyed
    assert m.ruled_out[1] == {"k" * 32: "it holds keyed state and no input of this operator is keyed"}
    # no keyed edge at all: only reinterpretAsKeyedStream (a FORWARD input) can explain keyed state
    g = _graph({1: 2, 2: 2}, [(1, 2, "FORWARD")])
    m = solve_matching(g, [1, 2], [_f("a"), _f("k", keyed=True)], absent_allowed=False)
    assert m.forward_keyed and m.count == 1 and m.values == {1: {"a" * 32}, 2: {"k" * 32}}
    assert m.ruled_out[1] == {"k" * 32: "it holds keyed state and no input of this operator is keyed"}
    assert m.ruled_out[2] == {}


def test_an_extra_rule_rules_ids_out() -> None:
    g = _graph({1: 2, 2: 2}, [(1, 2, "REBALANCE")])
    m = solve_matching(
        g,
        [1, 2],
        [_f("a"), _f("b")],
        absent_allowed=False,
        extra=lambda n, f: "no" if (n, f.operator_id[0]) == (1, "a") else None,
    )
    assert m.count == 1 and m.values == {1: {"b" * 32}, 2: {"a" * 32}}
    assert m.ruled_out[1] == {"a" * 32: "no"}


def test_a_finished_downstream_subtask_needs_finished_input() -> None:
    """A task that is not a source finishes only once every channel into it has ended: over an all-to-all edge
    every upstream subtask has finished, over FORWARD its own."""
    running, part0, part1, done = (False, False), (True, False), (False, True), (True, True)
    # all-to-all: the one with a finished subtask cannot sit below the running one
    g = _graph({1: 2, 2: 2}, [(1, 2, "REBALANCE")])
    m = solve_matching(g, [1, 2], [_f("a", finished=part0), _f("b", finished=running)], absent_allowed=False)
    assert m.count == 1 and m.values == {1: {"a" * 32}, 2: {"b" * 32}}
    m = solve_matching(g, [1, 2], [_f("a", finished=part0), _f("b", finished=part0)], absent_allowed=False)
    assert m.count == 0
    # ... nor below one that finished only partly
    m = solve_matching(g, [1, 2], [_f("a", finished=part0), _f("b", finished=part1)], absent_allowed=False)
    assert m.count == 0
    # ... but below a fully finished one (either way round here: both have finished subtasks)
    m = solve_matching(g, [1, 2], [_f("a", finished=part0), _f("b", finished=done)], absent_allowed=False)
    assert m.count == 1 and m.values == {1: {"b" * 32}, 2: {"a" * 32}}
    # an upstream with no subtask flags at all has not finished
    m = solve_matching(g, [1, 2], [_f("a", finished=part0), _f("b", finished=())], absent_allowed=False)
    assert m.count == 1 and m.values == {1: {"a" * 32}, 2: {"b" * 32}}
    # FORWARD: subtask i feeds subtask i only
    g = _graph({1: 2, 2: 2}, [(1, 2, "FORWARD")])
    m = solve_matching(g, [1, 2], [_f("a", finished=part0), _f("b", finished=part0)], absent_allowed=False)
    assert m.count == 2  # over REBALANCE none: checked below
    m = solve_matching(g, [1, 2], [_f("a", finished=part0), _f("b", finished=done)], absent_allowed=False)
    assert m.count == 1 and m.values == {1: {"b" * 32}, 2: {"a" * 32}}
    m = solve_matching(g, [1, 2], [_f("a", finished=part0), _f("b", finished=part1)], absent_allowed=False)
    assert m.count == 0
    m = solve_matching(g, [1, 2], [_f("a", finished=part0), _f("b", finished=running)], absent_allowed=False)
    assert m.count == 1 and m.values == {1: {"a" * 32}, 2: {"b" * 32}}
    # RESCALE: which upstream subtasks feed which is not modelled, nothing is ruled out
    g = _graph({1: 2, 2: 2}, [(1, 2, "RESCALE")])
    m = solve_matching(g, [1, 2], [_f("a", finished=part0), _f("b", finished=running)], absent_allowed=False)
    assert m.count == 2
    # the rule also holds against a node bound already (its facts given as known_facts)
    g = _graph({1: 2, 2: 2}, [(1, 2, "REBALANCE")])
    m = solve_matching(
        g,
        [2],
        [_f("a", finished=part0)],
        absent_allowed=False,
        known={1: "b" * 32},
        known_facts=[_f("b", finished=running)],
    )
    assert m.count == 0
    m = solve_matching(
        g,
        [1],
        [_f("a", finished=running)],
        absent_allowed=False,
        known={2: "b" * 32},
        known_facts=[_f("b", finished=part0)],
    )
    assert m.count == 0


# ------------------------------------------------------------------------------- compatible: one fact at a time


def _why(g: StreamGraph, node: int, f: OperatorFacts, **kw: Any) -> str | None:
    return compatible(g, g.node(node), f, **kw)


def test_parallelism_and_stored_name() -> None:
    g = _graph({1: 1, 2: 2}, [(1, 2, "REBALANCE")])
    assert _why(g, 1, _f("a", 2)) == "parallelism 2 in the checkpoint, 1 in the plan"
    assert _why(g, 2, _f("a", 3)) == "parallelism 3 in the checkpoint, 2 in the plan"
    assert _why(g, 2, _f("a", 2)) is None
    # a plan without the parallelism (-1: the job's default) does not rule anything out by it
    g = _graph({1: -1}, [])
    assert _why(g, 1, _f("a", 5)) is None
    g = _graph({1: 2}, [])
    assert _why(g, 1, _f("a", name="n1")) is None
    assert _why(g, 1, _f("a", name="other")) == "the checkpoint stores the name 'other'"


def test_keyed_state_needs_a_keyed_input() -> None:
    """keyBy is a HASH edge (KeyGroupStreamPartitioner, printed HASH or by its class name); reinterpretAsKeyedStream
    keeps a FORWARD edge: admitted only when asked (forward_keyed), never a REBALANCE."""
    g = _graph(
        {1: 2, 2: 2, 3: 2, 4: 2, 5: 2},
        [(1, 2, "HASH"), (1, 3, "FORWARD"), (1, 4, "REBALANCE"), (1, 5, "KeyGroupStreamPartitioner")],
    )
    keyed = _f("k", keyed=True)
    no = "it holds keyed state and no input of this operator is keyed"
    assert _why(g, 2, keyed) is None
    assert _why(g, 5, keyed) is None
    assert _why(g, 3, keyed) == no
    assert _why(g, 3, keyed, forward_keyed=True) is None
    assert _why(g, 4, keyed) == no
    assert _why(g, 4, keyed, forward_keyed=True) == no
    assert _why(g, 1, keyed, forward_keyed=True) == no


def test_source_reader_state_sits_on_a_source() -> None:
    g = _graph({1: 2, 2: 2}, [(1, 2, "FORWARD")])
    assert _why(g, 1, _f("s", source_reader=True)) is None
    assert (
        _why(g, 2, _f("s", source_reader=True)) == "it holds a source reader's state and this operator is not a source"
    )


def test_input_channel_state_needs_the_gate_and_the_channel() -> None:
    """Gate i is the i-th input; a subtask has as many channels on an all-to-all input as the upstream has
    subtasks, on a pointwise one (FORWARD, RESCALE) ceil(upstream / downstream)."""
    g = _graph({1: 4, 2: 2, 3: 2, 4: 2}, [(1, 2, "RESCALE"), (1, 3, "REBALANCE"), (2, 4, "FORWARD"), (3, 4, "HASH")])
    assert _why(g, 1, _f("a", 4, input_gates=(0,))) == "it holds input channel state and this operator has no input"
    assert _why(g, 2, _f("a", input_gates=(0,), max_input_channel=1)) is None
    assert _why(g, 2, _f("a", input_gates=(0,), max_input_channel=2)) == (
        "input channel 2, no input of this operator has that many channels"
    )
    assert _why(g, 3, _f("a", input_gates=(0,), max_input_channel=3)) is None
    assert _why(g, 3, _f("a", input_gates=(1,))) == "input channel state on gate 1, this operator has 1 input(s)"
    assert _why(g, 4, _f("a", input_gates=(0, 1), max_input_channel=1)) is None
    assert _why(g, 4, _f("a", input_gates=(2,))) == "input channel state on gate 2, this operator has 2 input(s)"


def test_output_channel_state_sits_on_a_chain_tail_that_sends() -> None:
    """Output state belongs to the chain's tail (the first operator without chained outputs); the chain sends on
    every edge that leaves it. 0 -REBALANCE-> 1 -FORWARD-> 2 (a sink), 1 -FORWARD-> 6 -REBALANCE-> 7: chained
    1 -> {2, 6}, the sink 2 can be the tail of a chain that sends on 6 -> 7 (one output, 2 subpartitions)."""
    g = _graph(
        {0: 2, 1: 2, 2: 2, 6: 2, 7: 2, 8: 2},
        [(0, 1, "REBALANCE"), (1, 2, "FORWARD"), (1, 6, "FORWARD"), (6, 7, "REBALANCE"), (7, 8, "REBALANCE")],
    )
    ok = _f("a", output_partitions=(0,), max_subpartition=1)
    assert _why(g, 2, ok) is None
    assert _why(g, 2, _f("a", output_partitions=(0,), max_subpartition=2)) == (
        "subpartition 2, no output its chain can have has that many subpartitions"
    )
    assert _why(g, 2, _f("a", output_partitions=(1,))) == "output partition 1, its chain can have 1 output(s)"
    assert _why(g, 0, ok) is None  # sends on 0 -> 1
    # a sink fed over the network sends nothing, whatever is around it
    assert _why(g, 8, ok) == "it holds output channel state and this operator sends nothing over the network"
    # 0 -FORWARD-> 1 and nothing else: the chain has no network output, so no output state
    g = _graph({0: 2, 1: 2}, [(0, 1, "FORWARD")])
    assert _why(g, 1, _f("a", output_partitions=(0,), max_subpartition=0)) == (
        "subpartition 0, no output its chain can have has that many subpartitions"
    )
    # pointwise outputs: ceil(downstream / upstream) subpartitions
    g = _graph({1: 2, 2: 4, 3: 4}, [(1, 2, "RESCALE"), (1, 3, "HASH")])
    assert _why(g, 1, _f("a", output_partitions=(0, 1), max_subpartition=3)) is None
    g = _graph({1: 2, 2: 4}, [(1, 2, "RESCALE")])
    assert _why(g, 1, _f("a", output_partitions=(0,), max_subpartition=1)) is None
    assert _why(g, 1, _f("a", output_partitions=(0,), max_subpartition=2)) == (
        "subpartition 2, no output its chain can have has that many subpartitions"
    )


def test_generated_ids_follow_flinks_hashing_order() -> None:
    """parse -> timestamps -> enrich of the job without uids, as a graph of their own with nothing else to tell
    them apart: the relations put timestamps' id in the middle (it relates to both others), but a relation and its
    mirror fit either direction. Flink hashes a node only after its input, so the one generated at the later
    position sits downstream: only Flink's order is left."""
    _, flink_id, _, cp_ids = _job()
    g = _graph({2: 2, 3: 2, 4: 2}, [(2, 3, "FORWARD"), (3, 4, "FORWARD")])
    facts = [OperatorFacts(flink_id[n], 2) for n in (2, 3, 4)]
    rel = id_relations(cp_ids, 11, 1)
    assert solve_matching(g, [2, 3, 4], facts, absent_allowed=False).count == 6
    m = solve_matching(g, [2, 3, 4], facts, absent_allowed=False, relations=rel)
    assert m.count == 1 and m.values == {n: {flink_id[n]} for n in (2, 3, 4)}
    # the same with the middle one bound already: its position counts too
    m = solve_matching(
        g,
        [2, 4],
        [f for f in facts if f.operator_id != flink_id[3]],
        absent_allowed=False,
        known={3: flink_id[3]},
        relations=rel,
        known_facts=[facts[1]],
    )
    assert m.count == 1 and m.values == {2: {flink_id[2]}, 4: {flink_id[4]}}
    # a related id must sit next to its partner: with enrich's id in the middle, parse's id (related to
    # timestamps' only) and timestamps' id cannot both sit next to theirs
    m = solve_matching(g, [2, 4], [facts[0], facts[1]], absent_allowed=False, known={3: flink_id[4]}, relations=rel)
    assert m.count == 0


def test_accept_hits_rules_on_hand_built_hits() -> None:
    """accept_hits' rules one by one (an id is certain only when nothing contradicts it): a node with two
    different ids is open, an id two nodes reach is open, and neither hides the nodes after them."""
    a, b, x, y, z = ("a" * 32, "b" * 32, "x" * 32, "y" * 32, "z" * 32)
    known = {4: a, 6: b}
    ok = HashHit(7, z, 2, 1, ((6, b),))
    two_ids = [HashHit(5, x, 0, 0, ((4, a),)), HashHit(5, y, 1, 0, ((4, a),))]
    assert accept_hits([*two_ids, ok], known) == ({7: ok}, {})
    one_id_twice = [HashHit(5, x, 0, 0, ((4, a),)), HashHit(8, x, 3, 0, ((4, a),))]
    assert accept_hits([*one_id_twice, ok], known) == ({7: ok}, {})
    # the same id from two positions and counts: taken, with the first hit's position and no count
    nodes, _ = accept_hits([HashHit(7, z, 2, 1, ((6, b),)), HashHit(7, z, 4, 0, ((6, b),))], known)
    assert nodes == {7: HashHit(7, z, 2, -1, ((6, b),))}


def test_hash_search_goes_on_after_a_node_with_nothing_to_find() -> None:
    """No targets: a node whose id is not known has nothing to look for, a known one is still checked."""
    graph, flink_id, _, cp_ids = _job()
    hits = hash_search(graph, {2: flink_id[2]}, cp_ids, set(), {1, 2})
    assert (2, flink_id[2], ((1, flink_id[1]),)) in {(h.node, h.operator_id, h.inputs) for h in hits}


def test_hash_search_tries_every_order_of_the_inputs() -> None:
    """The plan does not print Flink's in-edge order: listed the other way round (rules-timestamps first), the
    search still finds slow-count's id, with the inputs in Flink's order."""
    graph, flink_id, _, cp_ids = _job()
    edges = sorted(graph.edges, key=lambda e: (e.target, -e.source))
    flipped = StreamGraph(graph.nodes, tuple(edges))
    assert [e.source for e in flipped.in_edges(10)] == [7, 4]
    hits = hash_search(flipped, {4: flink_id[4], 7: flink_id[7]}, cp_ids, set(cp_ids), {10})
    assert [(h.operator_id, h.inputs) for h in hits] == [(flink_id[10], ((4, flink_id[4]), (7, flink_id[7])))]


def test_related_ids_sit_on_a_one_input_edge() -> None:
    """The relation is the one-input step (a node whose only input is the other): two related ids of the job
    (parse generated from the source's id) fit neither two nodes joined by two edges nor a node with two inputs
    and one of its inputs."""
    _, flink_id, _, cp_ids = _job()
    rel = id_relations(cp_ids, 11, 1)
    facts = [OperatorFacts(flink_id[1], 2), OperatorFacts(flink_id[2], 2)]
    twice = _graph({1: 2, 2: 2}, [(1, 2, "FORWARD"), (1, 2, "REBALANCE")])
    assert solve_matching(twice, [1, 2], facts, absent_allowed=False).count == 2
    assert solve_matching(twice, [1, 2], facts, absent_allowed=False, relations=rel).count == 0
    join = _graph({1: 2, 2: 2, 3: 2}, [(1, 3, "HASH"), (2, 3, "HASH")])
    three = [*facts, OperatorFacts(flink_id[10], 2)]  # slow-count's id: related to neither
    assert solve_matching(join, [1, 2, 3], three, absent_allowed=False).count == 6
    assert solve_matching(join, [1, 2, 3], three, absent_allowed=False, relations=rel).count == 0
    # likewise with the downstream one bound first
    m = solve_matching(join, [1, 2], [facts[0], three[2]], absent_allowed=False, known={3: flink_id[2]}, relations=rel)
    assert m.count == 0
    # on a one-input edge they fit, the generated one downstream
    line = _graph({1: 2, 2: 2}, [(1, 2, "FORWARD")])
    m = solve_matching(line, [1, 2], facts, absent_allowed=False, relations=rel)
    assert m.count == 2  # two nodes alone give no hashing order to tell the direction
    m = solve_matching(line, [2], facts[1:], absent_allowed=False, known={1: flink_id[1]}, relations=rel)
    assert m.count == 1 and m.values == {2: {flink_id[2]}}
