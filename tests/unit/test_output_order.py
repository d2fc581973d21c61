"""Which output of a job vertex is which result partition (spillway/flink/outputs.py, spillway/inspect/output_order.py).

Output channel state is indexed by result partition. The shapes fixtures' orders `Filter` (a vertex of its own,
``startNewChain``) feeds the keyed union of ``count-all`` and, on its second input, the keyed two-input operator:
in Flink its partition 0 goes to ``count-all`` and 1 to the two-input operator (the out-edge order of ids.json's
``stream_edges``, Flink's own). The job-graph plan lists the two-input operator first, so taking its listing as
the order pairs each partition with the other consumer's input state.
"""

from __future__ import annotations

import json
from dataclasses import replace
from typing import Any

import pytest
from support.fixtures import Fixture, fixture_named

from spillway.flink.outputs import transitive_out_edges
from spillway.flink.stream_graph import StreamEdge, StreamGraph, StreamNode, parse_stream_plan
from spillway.inspect import output_order
from spillway.inspect.analyze import analyze
from spillway.inspect.topology import BoundVertex, Edge, Topology, bind, load_plan, parse_plan, stream_topology
from spillway.inspect.validate import Report, validate
from spillway.model.checkpoint import ByteStreamHandle, OperatorState, ResultSubpartitionHandle, SubtaskState
from spillway.rescale.plan import RescaleRefused, _refuse_an_open_output_order
from spillway.storage.load import load_checkpoint

SHAPES = [f"{r}-shapes{s}" for r in ("1.14.6", "1.16.3", "1.18.1", "1.20.3", "2.2.1") for s in ("", "-no-uid")]
# No id is wrong in these with the job-graph plan alone, so what their framing shows is the output order's doing.
NO_UID = [n for n in SHAPES if n.endswith("-no-uid")]
# Here both pairings of the orders Filter's output state frame cleanly (its in-flight data happens to end on
# record boundaries): the checkpoint cannot tell the order, and validate must say so rather than pick one.
UNDECIDED = {"1.18.1-shapes-no-uid"}


def _ids(fx: Fixture) -> dict[str, Any]:
    doc: dict[str, Any] = json.loads((fx.root / "ids.json").read_text())
    return doc


def _orders_filter(fx: Fixture) -> tuple[int, list[int]]:
    """The orders Filter (the one ``Filter`` that is a job vertex of its own) and its consumers' node ids in
    Flink's out-edge order (ids.json)."""
    doc = _ids(fx)
    members: dict[str, int] = {}
    for n in doc["stream_nodes"]:
        members[n["vertex_id"]] = members.get(n["vertex_id"], 0) + 1
    (node,) = [n["id"] for n in doc["stream_nodes"] if n["name"] == "Filter" and members[n["vertex_id"]] == 1]
    return node, [e["target"] for e in doc["stream_edges"] if e["source"] == node]


def _vertex_of(fx: Fixture) -> dict[int, str]:
    return {n["id"]: n["vertex_id"] for n in _ids(fx)["stream_nodes"]}


# ------------------------------------------------------------------------------------------ stream-graph plans


@pytest.mark.parametrize("name", SHAPES)
def test_a_stream_graph_vertex_lists_its_outputs_in_flinks_partition_order(name: str) -> None:
    """With Flink's own chains (ids.json), the orders Filter vertex's outputs are its out-edges in Flink's order,
    not the order of the consumers in the plan."""
    fx = fixture_named(name)
    graph = parse_stream_plan(json.loads((fx.root / "plan.json").read_text()))
    vertex_of = _vertex_of(fx)
    chained = {(e.source, e.target) for e in graph.edges if vertex_of.get(e.source) == vertex_of.get(e.target)}
    topology = stream_topology(graph, chained)
    node, consumers = _orders_filter(fx)
    assert len(consumers) == 2
    assert [int(e.downstream) for e in topology.vertices[str(node)].outputs] == consumers


def test_chained_outputs_come_before_the_nodes_own_cut_outputs() -> None:
    """StreamingJobGraphGenerator#createChain: a node's chained successors' transitive out-edges first, then its
    own out-edges that are not chained, each in out-edge order. Node 1's out-edges are (1->3 cut, 1->2 chained),
    node 2's (2->4 cut): Flink's partitions are 2->4, then 1->3."""
    nodes = tuple(StreamNode(i, f"n{i}", 2) for i in (1, 2, 3, 4))
    edges = (StreamEdge(1, 3, "HASH"), StreamEdge(1, 2, "FORWARD"), StreamEdge(2, 4, "REBALANCE"))
    graph = StreamGraph(nodes, edges)
    order = transitive_out_edges(graph, 1, lambda e: (e.source, e.target) == (1, 2))
    assert [(e.source, e.target) for e in order] == [(2, 4), (1, 3)]
    vertex = stream_topology(graph, {(1, 2)}).vertices["1"]
    assert [(e.downstream, e.ship_strategy) for e in vertex.outputs] == [("4", "REBALANCE"), ("3", "HASH")]


# ------------------------------------------------------------------------------------------- job-graph plans


def _job_plan(fx: Fixture, reverse: bool = False) -> Topology:
    doc = json.loads((fx.root / "jobgraph.json").read_text())
    doc = doc.get("plan", doc)
    if reverse:
        doc = {**doc, "nodes": list(reversed(doc["nodes"]))}
    return parse_plan(doc, "jobgraph.json")


def _validate(fx: Fixture, topology: Topology) -> Report:
    return validate(load_checkpoint(fx.checkpoint_dir), topology, workers=1)


def _record_faults(report: Report) -> list[str]:
    return [f"{f.rule}: {f.message}" for f in report.findings if f.rule.startswith("record")]


def _order_notes(report: Report) -> list[str]:
    return [f.message for f in report.findings if "does not give the order of its" in f.message]


@pytest.mark.parametrize("reverse", [False, True], ids=["as-listed", "reversed"])
@pytest.mark.parametrize("name", NO_UID)
def test_the_job_graph_plan_order_is_never_taken_on_trust(name: str, reverse: bool) -> None:
    """Whichever consumer the job-graph plan lists first, the sound checkpoint frames cleanly: the framing picks
    the order that fits, or (both fit) says the order is open."""
    fx = fixture_named(name)
    report = _validate(fx, _job_plan(fx, reverse))
    assert _record_faults(report) == []
    notes = _order_notes(report)
    if name in UNDECIDED:
        assert len(notes) == 1 and "'Filter'" in notes[0] and "--job" in notes[0]
    else:
        assert notes == []


@pytest.mark.parametrize("name", NO_UID)
def test_only_flinks_order_frames_the_filters_output_state(name: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """The order the framing decides is Flink's: with only Flink's order (ids.json) to try, the checkpoint frames
    cleanly; with only the other order, records break at the seam (except where both fit, see UNDECIDED)."""
    fx = fixture_named(name)
    node, consumers = _orders_filter(fx)
    vertex_of = _vertex_of(fx)
    topology = _job_plan(fx)
    filter_vertex = topology.vertices[vertex_of[node]]
    by_consumer = {e.downstream: e for e in filter_vertex.outputs}
    flinks = tuple(by_consumer[vertex_of[c]] for c in consumers)
    other = tuple(reversed(flinks))

    def only(order: tuple[Edge, ...]) -> None:
        real = output_order.candidate_orders
        monkeypatch.setattr(
            output_order,
            "candidate_orders",
            lambda t, b: [order] if b.vertex.key == filter_vertex.key else real(t, b),
        )

    only(flinks)
    assert _record_faults(_validate(fx, _job_plan(fx))) == []
    only(other)
    faults = _record_faults(_validate(fx, _job_plan(fx)))
    assert (faults == []) == (name in UNDECIDED), faults


@pytest.mark.parametrize("name", NO_UID)
def test_the_output_state_rules_out_no_order_of_equal_consumers(name: str) -> None:
    """Both consumers of the orders Filter run at parallelism 2 behind HASH: its stored subpartitions fit either
    order, so both stay candidates (the plan's listing first)."""
    fx = fixture_named(name)
    topology = _job_plan(fx)
    cp = load_checkpoint(fx.checkpoint_dir).checkpoint
    node, _ = _orders_filter(fx)
    b = bind(topology, cp)[_vertex_of(fx)[node]]
    orders = output_order.candidate_orders(topology, b)
    assert orders == [b.vertex.outputs, tuple(reversed(b.vertex.outputs))]


def test_a_stored_subpartition_rules_out_an_order() -> None:
    """A FORWARD output has one subpartition: output state stored on subpartition 1 of a partition rules out the
    orders that put a FORWARD output there. The orders Filter's HASH outputs, one made FORWARD."""
    fx = fixture_named("1.20.3-shapes-no-uid")
    topology = _job_plan(fx)
    cp = load_checkpoint(fx.checkpoint_dir).checkpoint
    node, _ = _orders_filter(fx)
    b = bind(topology, cp)[_vertex_of(fx)[node]]
    first, second = b.vertex.outputs
    forward = Edge(second.upstream, second.downstream, second.gate, "FORWARD")
    b.vertex = replace(b.vertex, outputs=(first, forward))
    highest: dict[int, int] = {}
    for sub in b.tail.subtasks if b.tail is not None else []:
        for h in _handles(sub):
            highest[h.info[0]] = max(highest.get(h.info[0], 0), h.info[1])
    assert set(highest) == {0, 1}
    expected = [
        order
        for order in [(first, forward), (forward, first)]
        if highest[order.index(forward)] == 0  # the FORWARD output's partition holds subpartition 0 only
    ]
    assert output_order.candidate_orders(topology, b) == expected


def _handles(sub: Any) -> list[Any]:
    from spillway.model.checkpoint import channel_handles

    return list(channel_handles(sub.result_subpartition_state))


def test_a_stream_graph_plan_is_not_second_guessed() -> None:
    fx = fixture_named("1.20.3-shapes-no-uid")
    topology = load_plan(fx.root / "plan.json")
    cp = load_checkpoint(fx.checkpoint_dir).checkpoint
    bound = bind(topology, cp)
    for b in bound.values():
        assert output_order.candidate_orders(topology, b) == [b.vertex.outputs]


def test_rescale_refuses_to_move_output_state_by_an_order_the_plan_does_not_give() -> None:
    """Rescaling a consumer of the orders Filter with only the job-graph plan would route the Filter's output
    state by a guessed partition order: refused, naming what gives the order."""
    fx = fixture_named("1.20.3-shapes-no-uid")
    topology = _job_plan(fx)
    cp = load_checkpoint(fx.checkpoint_dir).checkpoint
    bound = bind(topology, cp)
    node, consumers = _orders_filter(fx)
    vertex_of = _vertex_of(fx)
    with pytest.raises(RescaleRefused, match=r"'Filter'.*does not give the order of its 2 outputs.*--job"):
        _refuse_an_open_output_order(topology, bound, {vertex_of[consumers[0]]})
    # A rescale that touches neither the Filter nor its consumers moves none of its output state.
    _refuse_an_open_output_order(topology, bound, {vertex_of[node] + "-elsewhere"})
    # With the stream-graph plan the order is Flink's: nothing to refuse.
    stream = load_plan(fx.root / "plan.json")
    _refuse_an_open_output_order(stream, bind(stream, cp), set(stream.vertices))


@pytest.mark.parametrize("reverse", [False, True], ids=["as-listed", "reversed"])
@pytest.mark.parametrize("name", NO_UID)
def test_analyze_pairs_output_state_by_the_order_that_frames(name: str, reverse: bool) -> None:
    """analyze assembles the same channels: each parses into whole records whichever consumer the plan lists
    first, and says so when the checkpoint cannot tell the order."""
    fx = fixture_named(name)
    loaded = load_checkpoint(fx.checkpoint_dir)
    loaded.resolve_files()
    result = analyze(loaded, _job_plan(fx, reverse))
    assert [c.label for c in result.channels if c.problem] == []
    open_order = [s for s in result.skipped if "does not give the order of its" in s]
    assert len(open_order) == (1 if name in UNDECIDED else 0)


def _stream_plan(writer_parallelism: int) -> Topology:
    """Source: s (node 1) feeds a keyed Map (node 2) and a Sink V2 writer (node 9, the fresh id a plan gives it)."""
    node = lambda i, name, p, preds: {  # noqa: E731
        "id": i,
        "type": name,
        "pact": "Data Source" if not preds else "Operator",
        "contents": name,
        "parallelism": p,
        "predecessors": [{"id": u, "ship_strategy": s, "side": "second"} for u, s in preds],
    }
    writer_edge = "FORWARD" if writer_parallelism == 2 else "REBALANCE"
    doc = {
        "nodes": [
            node(1, "Source: s", 2, []),
            node(2, "Map", 2, [(1, "HASH")]),
            node(3, "Sink: Unnamed", 2, [(1, "HASH")]),
            node(9, "Sink: Writer", writer_parallelism, [(1, writer_edge)]),
        ]
    }
    return parse_plan(doc, "plan.json")


def test_a_cut_edge_to_a_sink_v2_writer_leaves_a_stream_graph_plans_order_open() -> None:
    """The writer's plan id is not its place among its producer's out-edges: cut next to other outputs, the
    order is open (every order is a candidate); chained (no outputs of its own), the other outputs' order holds."""
    cut = _stream_plan(writer_parallelism=3)
    source = cut.vertices["1"]
    assert [e.downstream for e in source.outputs] == ["2", "3", "9"]
    assert not output_order.known_order(cut, source)
    orders = output_order.candidate_orders(cut, BoundVertex(source, None, None))
    assert len(orders) == 6 and orders[0] == source.outputs
    chained = _stream_plan(writer_parallelism=2)
    source = chained.vertices["1"]
    assert [e.downstream for e in source.outputs] == ["2", "3"]
    assert output_order.known_order(chained, source)


def test_a_deep_chain_sends_its_innermost_outputs_first() -> None:
    """Depth first over chained successors, each in out-edge order: 1 chains 2 and 7, 2 chains 3. Node 3's cut
    edge (3->5) comes before 2's (2->4), both before 7's (7->8) — 7 is node 1's second out-edge — and node 1's
    own cut edge (1->6) comes last."""
    nodes = tuple(StreamNode(i, f"n{i}", 2) for i in range(1, 9))
    edges = (
        StreamEdge(1, 2, "FORWARD"),
        StreamEdge(1, 6, "HASH"),
        StreamEdge(1, 7, "FORWARD"),
        StreamEdge(2, 3, "FORWARD"),
        StreamEdge(2, 4, "HASH"),
        StreamEdge(3, 5, "HASH"),
        StreamEdge(7, 8, "HASH"),
    )
    chained = {(1, 2), (2, 3), (1, 7)}
    order = transitive_out_edges(StreamGraph(nodes, edges), 1, lambda e: (e.source, e.target) in chained)
    assert [(e.source, e.target) for e in order] == [(3, 5), (2, 4), (7, 8), (1, 6)]


# ----------------------------------------------------------------------------------------- the rules at their edges


def _tail_with(stored: list[tuple[int, int]]) -> OperatorState:
    """An operator whose one subtask stores output state on (partition, subpartition) ``stored``, in that order."""
    blob = ByteStreamHandle("b", b"")
    handles = [ResultSubpartitionHandle(0, p, s, [0], 0, blob) for p, s in stored]
    return OperatorState("t" * 32, 2, 128, subtasks=[SubtaskState(0, result_subpartition_state=handles)])  # type: ignore[arg-type]


def _three_outputs(flavour_plan: Topology) -> BoundVertex:
    return BoundVertex(flavour_plan.vertices["1"], None, None)


def test_stored_subpartitions_rule_out_orders_by_their_highest_index() -> None:
    """Partition 0 holds subpartitions 1 then 0 (highest 1), partition 1 only 0: a FORWARD output (one
    subpartition) fits partition 1 or 2, never 0; a stored partition past the last output fits no order."""
    plan = _stream_plan(writer_parallelism=3)  # three outputs, order open
    v = plan.vertices["1"]
    hash_a, hash_b, writer = v.outputs
    forward = Edge(writer.upstream, writer.downstream, writer.gate, "FORWARD")
    b = BoundVertex(replace(v, outputs=(hash_a, hash_b, forward)), None, _tail_with([(0, 1), (0, 0), (1, 0)]))
    orders = output_order.candidate_orders(plan, b)
    assert orders and all(order[0] != forward for order in orders)
    assert len(orders) == 4  # 6 orders, less the 2 with FORWARD first
    b.tail = _tail_with([(3, 0)])
    assert output_order.candidate_orders(plan, b) == []


def test_candidates_stop_at_the_most_kept() -> None:
    """Five outputs and no output state: 120 orders fit; the plan's listing and the next MAX_ORDERS - 1."""
    nodes = [
        {"id": 1, "type": "Source: s", "pact": "Data Source", "contents": "s", "parallelism": 2, "predecessors": []}
    ]
    nodes += [
        {"id": i, "type": f"m{i}", "pact": "Operator", "contents": f"m{i}", "parallelism": 2,
         "predecessors": [{"id": 1, "ship_strategy": "HASH", "side": "second"}]}
        for i in range(2, 7)
    ]  # fmt: skip
    doc = {"nodes": [{"id": str(n["id"]), "parallelism": 2, "description": n["contents"],
                      "inputs": [{"id": "1", "num": 0, "ship_strategy": "HASH"}] if n["predecessors"] else []}
                     for n in nodes]}  # fmt: skip
    plan = parse_plan(doc, "jobgraph.json")
    v = plan.vertices["1"]
    orders = output_order.candidate_orders(plan, BoundVertex(v, None, _tail_with([])))
    assert len(orders) == output_order.MAX_ORDERS and orders[0] == v.outputs and len(set(orders)) == len(orders)


def _graph_plan(edges: list[tuple[int, int, str]], names: dict[int, str], inferred: bool = True) -> Topology:
    """A stream-graph topology of nodes 1.. (all at parallelism 2 but ``Committer`` at 3) with these edges."""
    ids = sorted({n for e in edges for n in e[:2]})
    nodes = tuple(StreamNode(i, names.get(i, f"n{i}"), 3 if names.get(i) == "Committer" else 2) for i in ids)
    graph = StreamGraph(nodes, tuple(StreamEdge(s, t, p) for s, t, p in edges), inferred_edge_order=inferred)
    return stream_topology(graph)


WRITER = {9: "Sink: Writer", 10: "Committer"}


@pytest.mark.parametrize(
    ("edges", "inferred", "known"),
    [
        # a writer chained, sending nothing, next to another chained edge: the cut edges' order holds
        ([(1, 2, "FORWARD"), (1, 9, "FORWARD"), (2, 3, "HASH"), (1, 4, "HASH")], True, True),
        # the writer chained and sending to its committer, next to another chained edge that sends: open
        ([(1, 2, "FORWARD"), (1, 9, "FORWARD"), (9, 10, "REBALANCE"), (2, 3, "HASH")], True, False),
        # the same with Flink's own out-edge order (a job's graph, not a plan): known
        ([(1, 2, "FORWARD"), (1, 9, "FORWARD"), (9, 10, "REBALANCE"), (2, 3, "HASH")], False, True),
        # the writer's edge cut next to one other cut edge of its node: open
        ([(1, 9, "REBALANCE"), (1, 3, "HASH")], True, False),
        # the writer's edge the only cut edge of its node (the other output leaves a chained node): known
        ([(1, 2, "FORWARD"), (1, 9, "REBALANCE"), (2, 3, "HASH")], True, True),
        # no writer at all: known
        ([(1, 2, "HASH"), (1, 3, "HASH")], True, True),
    ],
    ids=["chained-silent", "chained-sending", "jobs-order", "cut-pair", "cut-alone", "no-writer"],
)
def test_where_a_writer_leaves_a_stream_graph_plans_order_open(
    edges: list[tuple[int, int, str]], inferred: bool, known: bool
) -> None:
    names = dict(WRITER)
    if any(s == 9 for s, _, _ in edges) and not any(t == 10 for _, t, _ in edges):
        names[9] = "Sink: Writer"
    topology = _graph_plan(edges, names, inferred)
    v = topology.vertices["1"]
    assert len(v.outputs) == 2
    assert output_order.known_order(topology, v) is known


def test_a_job_graph_vertex_of_one_output_has_a_known_order() -> None:
    fx = fixture_named("1.20.3-shapes-no-uid")
    topology = _job_plan(fx)
    single = [v for v in topology.vertices.values() if len(v.outputs) == 1]
    several = [v for v in topology.vertices.values() if len(v.outputs) > 1]
    assert single and several
    assert all(output_order.known_order(topology, v) for v in single)
    assert not any(output_order.known_order(topology, v) for v in several)


def test_each_order_is_tried_on_the_channels_out_of_its_vertex_only() -> None:
    """choose_orders hands the framing the channels of the vertex being decided, nothing else; it takes the
    order that frames, and with several names the count in its note."""
    fx = fixture_named("1.20.3-shapes-no-uid")
    topology = _job_plan(fx)
    cp = load_checkpoint(fx.checkpoint_dir).checkpoint
    bound = bind(topology, cp)
    node, consumers = _orders_filter(fx)
    vertex_of = _vertex_of(fx)
    key = vertex_of[node]
    flinks = [vertex_of[c] for c in consumers]
    seen: list[list[str]] = []

    def flinks_frames(cmap: Any) -> bool:
        assert cmap.channels and {lc.edge.upstream for lc in cmap.channels} == {key}
        seen.append([lc.edge.downstream for lc in cmap.channels])
        partition_of = {
            lc.edge.downstream: lc.parts[-1].handle.info[0]
            for lc in cmap.channels
            if lc.parts[-1].handle.side == "output"
        }
        return all(partition_of.get(d, i) == i for i, d in enumerate(flinks))  # fmt: skip

    orders, notes = output_order.choose_orders(topology, bound, cp, flinks_frames)
    assert len(seen) == 2 and notes == []
    assert [e.downstream for e in orders.get(key, bound[key].vertex.outputs)] == flinks
    orders, notes = output_order.choose_orders(topology, bound, cp, lambda cmap: True)
    assert len(notes) == 1 and "and 2 orders frame" in notes[0]
    assert notes[0].endswith("give the stream-graph plan or --job to make the pairing certain")
    assert [e.downstream for e in orders.get(key, bound[key].vertex.outputs)] == [
        e.downstream for e in bound[key].vertex.outputs
    ]  # the plan's listing, first of the candidates


def test_no_fitting_order_keeps_the_plans_listing(monkeypatch: pytest.MonkeyPatch) -> None:
    """Output state on a partition no output has: no order fits; the listing stays (the placement rule reports
    the state) and the framing is not asked."""
    fx = fixture_named("1.20.3-shapes-no-uid")
    topology = _job_plan(fx)
    cp = load_checkpoint(fx.checkpoint_dir).checkpoint
    bound = bind(topology, cp)
    monkeypatch.setattr(output_order, "_partitions_used", lambda b: {7: 0})

    def never(cmap: Any) -> bool:
        raise AssertionError("no order to frame")

    assert output_order.choose_orders(topology, bound, cp, never) == ({}, [])
