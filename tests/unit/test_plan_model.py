"""The one plan model (spillway/flink/stream_graph.py, spillway/flink/partitioners.py, the parsing half of
spillway/inspect/topology.py), checked against what Flink itself recorded.

Expected values come from each fixture's ids.json (Flink's own StreamGraph and JobGraph of the job: every stream
node's name, parallelism and vertex, every stream edge's partitioner, every job vertex's operators) and from the
plan files Flink wrote; the partitioner facts are those of Flink's ``StreamPartitioner`` classes (``toString``,
``isPointwise``, ``getDownstreamSubtaskStateMapper``), the same on 1.11.4, 1.14.6, 1.20.3 and 2.3.0's jars.
"""

from __future__ import annotations

import copy
import json
import random
from collections import Counter
from dataclasses import FrozenInstanceError
from pathlib import Path
from typing import Any

import pytest
from support.fixtures import FIXTURES, Fixture, all_fixtures, fixture_named
from support.plan_nodes import plan_to_flink_nodes

from spillway.flink.partitioners import Partitioner, _classify
from spillway.flink.stream_graph import (
    PlanError,
    StreamEdge,
    StreamGraph,
    StreamNode,
    labels_of,
    parse_job_graph_plan,
    parse_stream_plan,
    split_description,
)
from spillway.inspect.topology import Edge, Topology, job_topology, load_plan, parse_plan, stream_topology

WITH_IDS = [f for f in all_fixtures() if (f.root / "ids.json").exists()]


def _json(path: Path) -> Any:
    return json.loads(path.read_text())


def _flink(fx: Fixture) -> dict[str, Any]:
    doc: dict[str, Any] = _json(fx.root / "ids.json")
    return doc


def _ids_edges(ids: dict[str, Any]) -> Counter[tuple[str, str, str]]:
    name = {n["id"]: n["name"] for n in ids["stream_nodes"]}
    return Counter((name[e["source"]], name[e["target"]], e["partitioner"]) for e in ids["stream_edges"])


# ------------------------------------------------------------------------------------------------ partitioners


@pytest.fixture(autouse=True)
def _classify_afresh() -> None:
    """Each test reads the text itself: a classification cached by an earlier test (or by the process a mutation
    run forks each mutant from) would hide what the classifier now says."""
    _classify.cache_clear()


# (printed text, isPointwise, downstream SubtaskStateMapper, upstream SubtaskStateMapper) per partitioner class.
FLINK_PARTITIONERS = [
    ("FORWARD", True, "UNSUPPORTED", "UNSUPPORTED"),
    ("RESCALE", True, "UNSUPPORTED", "UNSUPPORTED"),
    ("BROADCAST", False, "UNSUPPORTED", "UNSUPPORTED"),
    ("HASH", False, "RANGE", "ARBITRARY"),
    ("REBALANCE", False, "ROUND_ROBIN", "ARBITRARY"),
    ("SHUFFLE", False, "ROUND_ROBIN", "ARBITRARY"),
    ("GLOBAL", False, "FIRST", "ARBITRARY"),
    ("CUSTOM", False, "FULL", "ARBITRARY"),
]


@pytest.mark.parametrize(("text", "pointwise", "down", "up"), FLINK_PARTITIONERS)
def test_each_printed_partitioner_means_what_flinks_class_does(text: str, pointwise: bool, down: str, up: str) -> None:
    p = Partitioner.of(text)
    assert p.value == text and Partitioner.of(text.lower()) is p and Partitioner.of(f" {text} ") is p
    assert p.is_pointwise is pointwise and p.is_all_to_all is not pointwise
    assert p.downstream_mapper == down and p.upstream_mapper == up
    assert p.rescales_channel_state is (down != "UNSUPPORTED")
    assert p.is_forward is (text == "FORWARD")
    assert p.is_key_groups is p.is_keyed is (text == "HASH")


def test_class_names_and_the_adaptive_forwards() -> None:
    """A job's own graph may name the class: each is the partitioner it prints as; the FORWARD_FOR_* subclasses
    (1.15+) print FORWARD yet are told apart by class; the table runtime's field hash prints ``HASH[fields]`` and
    is no key-group hash (its downstream mapper is FULL)."""
    assert (
        Partitioner.of("org.apache.flink.streaming.runtime.partitioner.KeyGroupStreamPartitioner") is Partitioner.HASH
    )
    assert Partitioner.of("CustomPartitionerWrapper") is Partitioner.CUSTOM
    assert Partitioner.of("RowDataCustomStreamPartitioner") is Partitioner.CUSTOM
    for cls, kind in (
        ("ForwardForUnspecifiedPartitioner", Partitioner.FORWARD_FOR_UNSPECIFIED),
        ("ForwardForConsecutiveHashPartitioner", Partitioner.FORWARD_FOR_CONSECUTIVE_HASH),
    ):
        p = Partitioner.of(cls)
        assert p is kind and Partitioner.of(kind.value) is kind
        assert p.is_forward and p.is_pointwise and not p.is_all_to_all and p.downstream_mapper == "UNSUPPORTED"
        assert p.upstream_mapper == "UNSUPPORTED"
    table = Partitioner.of("HASH[k, v]")
    assert table is Partitioner.of("BinaryHashPartitioner") is Partitioner.TABLE_HASH
    assert table.is_keyed and not table.is_key_groups and table.is_all_to_all and table.downstream_mapper == "FULL"


@pytest.mark.parametrize("text", ["", None, "UNKNOWN", "ROUND_ROBIN", "HASH[", "FORWARDS", "SomePartitioner"])
def test_text_no_flink_prints_is_unknown_and_claims_nothing(text: str | None) -> None:
    p = Partitioner.of(text)
    assert p is Partitioner.UNKNOWN
    assert not (p.is_forward or p.is_pointwise or p.is_all_to_all or p.is_keyed or p.rescales_channel_state)
    assert p.downstream_mapper is None and p.upstream_mapper is None


def test_every_partitioner_in_the_fixtures_is_known() -> None:
    """Every ship strategy Flink wrote into a fixture plan (both flavours, every release) is a known partitioner
    whose printed form is the text itself."""
    seen: Counter[str] = Counter()
    for path in sorted(FIXTURES.rglob("*.json")):
        if path.name not in ("plan.json", "jobgraph.json"):
            continue
        doc = _json(path)
        doc = doc.get("plan", doc)
        for node in doc["nodes"]:
            for e in (node.get("predecessors") or []) + (node.get("inputs") or []):
                seen[e["ship_strategy"]] += 1
                assert Partitioner.of(e["ship_strategy"]).value == e["ship_strategy"], path
    assert {"FORWARD", "HASH", "REBALANCE"} <= set(seen) and sum(seen.values()) > 1000


# ------------------------------------------------------------------------------------ both flavours, one model


@pytest.mark.parametrize("fx", [pytest.param(f, id=f.name) for f in WITH_IDS])
def test_the_stream_plan_model_is_flinks_stream_graph(fx: Fixture) -> None:
    """Per stream node of ids.json (matched by name: the plan numbers a sink's expansion apart): the same
    parallelism; and the same edges with the same partitioners."""
    ids = _flink(fx)
    graph = parse_stream_plan(_json(fx.root / "plan.json"))
    # names repeat in production-shaped jobs (three KeyedProcess, six Map): compared as multisets
    assert Counter((n.name, n.parallelism) for n in graph.nodes) == Counter(
        (n["name"], n["parallelism"]) for n in ids["stream_nodes"]
    )
    name = {n.id: n.name for n in graph.nodes}
    assert Counter((name[e.source], name[e.target], e.partitioner) for e in graph.edges) == _ids_edges(ids)
    assert all(e.kind is Partitioner.of(e.partitioner) is not Partitioner.UNKNOWN for e in graph.edges)


@pytest.mark.parametrize("fx", [pytest.param(f, id=f.name) for f in WITH_IDS])
def test_the_job_graph_plan_model_is_flinks_job_graph(fx: Fixture) -> None:
    """Per job vertex of ids.json: the same id and parallelism; the chain description split into exactly its
    operators, head (the vertex id's operator) first, each with its chain predecessor as parent (the stream edge
    into it inside the vertex); its inputs the stream edges entering the vertex, with their partitioners, each
    on the gate Flink numbered. An operator's label is its description from 1.15 on, its name before (what
    Flink wrote as ``contents`` in the stream-graph plan)."""
    ids = _flink(fx)
    raw = _json(fx.root / "jobgraph.json")
    job = parse_job_graph_plan(raw)
    label = {n["type"]: n["contents"] for n in _json(fx.root / "plan.json")["nodes"]}
    node = {n["operator_id"]: {**n, "name": label[n["name"]]} for n in ids["stream_nodes"]}
    by_id = {n["id"]: {**n, "name": label[n["name"]]} for n in ids["stream_nodes"]}
    assert {v.id for v in job.vertices} == {v["id"] for v in ids["vertices"]}
    for fv in ids["vertices"]:
        v = job.vertex(fv["id"])
        members = {node[i]["id"] for i in fv["operator_ids"]}
        assert v.parallelism == fv["parallelism"]
        assert sorted(v.operators) == sorted(node[i]["name"] for i in fv["operator_ids"])
        assert v.operators[0] == node[fv["id"]]["name"]
        index = {name: i for i, name in enumerate(v.operators)}
        for i, label in enumerate(v.operators):
            into = [e for e in ids["stream_edges"] if by_id[e["target"]]["name"] == label and e["source"] in members]
            assert v.parents[i] == (index[by_id[into[0]["source"]]["name"]] if into else None), label
        entering = Counter(
            (by_id[e["source"]]["vertex_id"], e["partitioner"])
            for e in ids["stream_edges"]
            if e["target"] in members and e["source"] not in members
        )
        assert Counter((i.source, i.ship_strategy) for i in v.inputs) == entering
    for n in raw["nodes"]:  # Flink numbers each vertex's inputs in order: what an input without "num" gets
        assert [i.num for i in job.vertex(n["id"]).inputs] == [i["num"] for i in n.get("inputs", [])]
        assert [i["num"] for i in n.get("inputs", [])] == list(range(len(n.get("inputs", []))))


def _shape(
    t: Topology,
) -> tuple[Counter[tuple[tuple[str, ...], int]], Counter[tuple[tuple[str, ...], tuple[str, ...], int, str]]]:
    # A chain by its head and its other members: siblings chained behind one operator (a window feeding a Map and
    # a sink) are listed by node id in one flavour and by Flink's out-edge order in the other.
    names = {k: (v.names[0], *sorted(v.names[1:])) for k, v in t.vertices.items()}
    return (
        Counter((names[k], v.parallelism) for k, v in t.vertices.items()),
        Counter((names[e.upstream], names[e.downstream], e.gate, e.ship_strategy) for e in t.edges()),
    )


@pytest.mark.parametrize("fx", [pytest.param(f, id=f.name) for f in WITH_IDS])
def test_both_flavours_give_one_topology(fx: Fixture) -> None:
    """The stream-graph plan chained as Flink chained it (ids.json's vertex of each node) and the job-graph plan
    give the same vertices (operators head first, parallelism) and the same edges between them (each on the
    same input gate, with the same partitioner)."""
    ids = _flink(fx)
    graph = parse_stream_plan(_json(fx.root / "plan.json"))
    vertex = {pid: n["vertex_id"] for pid, n in plan_to_flink_nodes(fx.root).items()}
    chained = {(e.source, e.target) for e in graph.edges if vertex[e.source] == vertex[e.target]}
    from_stream = stream_topology(graph, chained)
    from_job = job_topology(parse_job_graph_plan(_json(fx.root / "jobgraph.json")))
    assert len(from_job.vertices) == len(ids["vertices"])
    stream_vertices, stream_edges = _shape(from_stream)
    job_vertices, job_edges = _shape(from_job)
    assert stream_vertices == job_vertices
    assert stream_edges == job_edges
    flink_vertex = {n["id"]: n["vertex_id"] for n in ids["stream_nodes"]}
    assert sum(job_edges.values()) == sum(
        1 for e in ids["stream_edges"] if flink_vertex[e["source"]] != flink_vertex[e["target"]]
    )


def test_an_edge_means_its_partitioner() -> None:
    for text, all_to_all in (("HASH", True), ("REBALANCE", True), ("FORWARD", False), ("RESCALE", False)):
        e = Edge("a", "b", 0, text)
        assert e.partitioner is Partitioner.of(text) and e.all_to_all is all_to_all
    assert Edge("a", "b", 0, "SOMETHING").all_to_all is False


# --------------------------------------------------------------------------------------- chain descriptions


@pytest.mark.parametrize(
    ("description", "labels", "parents"),
    [
        # before 1.15: createChainedName joins several chained outputs with a bare comma inside " -> (…)"
        ("Source: x -&gt; (Map,Filter)", ["Source: x", "Map", "Filter"], [None, 0, 0]),
        ("Source: x -&gt; (Map -&gt; Sink: a,Filter -&gt; (b,c))", ["Source: x", "Map", "Sink: a", "Filter", "b", "c"],
         [None, 0, 1, 0, 3, 3]),
        # a name with brackets, commas or an arrow inside brackets stays one name
        ("Window(Tumbling(1000), Count) -&gt; Calc(select=[a -&gt; b, c])", ["Window(Tumbling(1000), Count)",
         "Calc(select=[a -> b, c])"], [None, 0]),
        ("Count per key (1s) -&gt; Sink: out", ["Count per key (1s)", "Sink: out"], [None, 0]),
        # 1.15+ tree: "&#92;" is a backslash, every HTML entity is decoded, in both styles
        ("a&#92;b &amp; c -&gt; d", ["a\\b & c", "d"], [None, 0]),
        ("a&#92;b<br/>+- &quot;d&quot;<br/>", ["a\\b", '"d"'], [None, 0]),
        ("a<br/>:- b<br/>:  :- c<br/>:  +- d<br/>+- e<br/>   +- f<br/>", ["a", "b", "c", "d", "e", "f"],
         [None, 0, 1, 1, 0, 4]),
        # three outputs; brackets inside a name; an arrow between a name's brackets; capitals near brackets
        ("x -&gt; (a,b,c)", ["x", "a", "b", "c"], [None, 0, 0, 0]),
        ("f(g(a), b -&gt; c) -&gt; d", ["f(g(a), b -> c)", "d"], [None, 0]),
        ("f(X -&gt; y) -&gt; g", ["f(X -> y)", "g"], [None, 0]),
        ("Xa -&gt; b", ["Xa", "b"], [None, 0]),
        # one chained output whose name is in brackets is no fan-out; nor are two bracket groups
        ("x -&gt; (a) -&gt; (b)", ["x", "(a)", "(b)"], [None, 0, 1]),
        ("x -&gt; (a),(b)", ["x", "(a),(b)"], [None, 0]),
        ("x -&gt; (a,b) -&gt; c", ["x", "(a,b)", "c"], [None, 0, 1]),
        ("x -&gt; (Xa,bX)", ["x", "Xa", "bX"], [None, 0, 0]),
        ("x -&gt; ((p,q),c)", ["x", "(p,q)", "c"], [None, 0, 0]),
        ("x -&gt; (a,b", ["x", "(a,b"], [None, 0]),
        ("x -&gt; (a,b)c", ["x", "(a,b)c"], [None, 0]),
        ("(a -&gt; b) -&gt; c", ["(a -> b)", "c"], [None, 0]),
        # a name with a newline: Flink writes it as <br/> too, without a branch marker
        ("multi<br/>line<br/>+- b<br/>", ["multi\nline", "b"], [None, 0]),
        ("a<br/>+- b<br/>second line<br/>", ["a", "b\nsecond line"], [None, 0]),
        ("<br/>", [], []),
        ("", [], []),
    ],
)  # fmt: skip
def test_chain_descriptions_split_as_flink_writes_them(description: str, labels: list[str], parents: list[int]) -> None:
    assert split_description(description) == (labels, parents)


def test_one_description_gives_one_answer_in_every_view() -> None:
    """The topology's names of a job vertex are the parsed job graph's operators: one parse, one answer."""
    for fx in WITH_IDS:
        topology = load_plan(fx.root / "jobgraph.json")
        assert topology.job_graph is not None
        assert {k: v.names for k, v in topology.vertices.items()} == {
            v.id: v.operators for v in topology.job_graph.vertices
        }


# ------------------------------------------------------------------------------------------------ immutability


def test_the_model_is_not_changed_after_it_is_built() -> None:
    """Vertices and edges are frozen; giving uids, taking the plan as a new job's or at another parallelism gives
    a new topology and leaves the one read as it was."""
    fx = fixture_named("2.3.0-prod")
    uids = {"parse": "parse-events"}
    topology = load_plan(fx.root / "plan.json", uids)
    uids["parse"] = "changed"
    assert topology.uids == {"parse": "parse-events"}
    v = next(vx for vx in topology.vertices.values() if vx.inputs)
    with pytest.raises(FrozenInstanceError):
        v.parallelism = 9  # type: ignore[misc]
    with pytest.raises(FrozenInstanceError):
        v.inputs[0].gate = 3  # type: ignore[misc]
    before = (copy.deepcopy(topology.source_doc), dict(topology.vertices), dict(topology.uids))
    given = topology.with_uids({"enrich": "e"})
    new_job = topology.as_new_job()
    key = next(k for k, vx in topology.vertices.items() if vx.names[0] == "slow-count")
    rescaled = topology.rescaled({key: 5})
    assert given.uids == {"enrich": "e"} and given is not topology
    assert new_job.describes_checkpoint is False and topology.describes_checkpoint is True
    assert rescaled.vertices[key].parallelism == 5 and rescaled.uids == topology.uids
    assert (topology.source_doc, dict(topology.vertices), dict(topology.uids)) == before
    assert topology.vertices[key].parallelism == 2


# --------------------------------------------------------------------------------------------- malformed plans


def test_a_predecessor_that_is_not_an_object_is_named() -> None:
    doc = _json(fixture_named("2.3.0-prod").root / "plan.json")
    doc["nodes"][1]["predecessors"] = [None]
    with pytest.raises(PlanError) as err:
        parse_plan(doc, "p.json")
    nid = doc["nodes"][1]["id"]
    assert (
        str(err.value) == f"p.json: malformed plan node (node {nid}: predecessors[0] is NoneType None, not an object)"
    )


@pytest.mark.parametrize(
    ("flavour", "edit", "message"),
    [
        ("plan.json", lambda d: d["nodes"][1]["predecessors"][0].update(id=999), "names node 999, which is not in"),
        ("plan.json", lambda d: d["nodes"][1].update(id=d["nodes"][0]["id"]), "occurs twice"),
        ("plan.json", lambda d: d["nodes"][1]["predecessors"][0].update(id="1"), "'id' is '1', not an integer"),
        ("plan.json", lambda d: d["nodes"][0].update(predecessors=[{"id": d["nodes"][-1]["id"]}]), "lead back"),
        ("plan.json", lambda d: d["nodes"][1].update(predecessors="x"), "'predecessors' is str 'x', not a list"),
        ("jobgraph.json", lambda d: d["nodes"][0].update(inputs=[{"id": None}]), "inputs[0]: 'id' names no vertex"),
        ("jobgraph.json", lambda d: d["nodes"][0]["inputs"][0].update(num=-1), "'num' is -1, not a non-negative"),
        ("jobgraph.json", lambda d: d["nodes"][1].update(id=d["nodes"][0]["id"]), "occurs twice"),
        ("jobgraph.json", lambda d: d["nodes"][0].update(id=7.5), "'id' is float 7.5, not a string"),
    ],
)
def test_each_malformed_field_is_named(flavour: str, edit: Any, message: str) -> None:
    doc = _json(fixture_named("2.3.0-prod").root / flavour)
    edit(doc)
    with pytest.raises(PlanError) as err:
        parse_plan(doc, "p.json")
    assert str(err.value).startswith("p.json: malformed plan node (") and message in str(err.value)


_JUNK: list[Any] = [None, -1, 0, 1.5, True, "x", "2", [], {}, [None], [1], {"id": None}, "", 2**70]


def _paths(obj: Any, prefix: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
    out = [prefix]
    if isinstance(obj, dict):
        for k, v in obj.items():
            out += _paths(v, (*prefix, k))
    elif isinstance(obj, list):
        for i, v in enumerate(obj):
            out += _paths(v, (*prefix, i))
    return out


def _mutate(doc: Any, rng: random.Random) -> Any:
    doc = copy.deepcopy(doc)
    path = rng.choice(_paths(doc)[1:])
    parent = doc
    for step in path[:-1]:
        parent = parent[step]
    last = path[-1]
    action = rng.randrange(3)
    if action == 0:
        parent[last] = rng.choice(_JUNK)
    elif action == 1 and isinstance(parent, dict):
        del parent[last]
    elif isinstance(parent, list):
        parent.insert(last, rng.choice(_JUNK))
    else:
        parent[last] = copy.deepcopy(rng.choice(_JUNK))
    return doc


def test_random_damage_to_every_fixture_plan_is_a_plan_error_or_a_plan() -> None:
    """Random changes (a value replaced by junk, a key removed, junk inserted in a list; fixed seed) to every plan
    Flink wrote for the fixtures, both flavours: each reads as a plan or is refused as a PlanError naming the
    plan — never another exception."""
    rng = random.Random(30)
    plans = sorted(p for p in FIXTURES.rglob("*.json") if p.name in ("plan.json", "jobgraph.json"))
    assert len(plans) > 300
    refused = read = 0
    for path in plans:
        doc = _json(path)
        for _ in range(12):
            damaged = _mutate(doc, rng)
            try:
                parse_plan(damaged, "p.json")
            except PlanError as exc:
                assert str(exc).startswith("p.json: "), exc
                refused += 1
            else:
                read += 1
    assert refused > 1000 and read > 500  # both outcomes occur: the damage is neither all fatal nor all harmless


# ------------------------------------------------------------------------------------ the model's every field


def test_a_job_graph_plan_keeps_every_field_flink_wrote() -> None:
    """jid, name, each vertex's raw description, each input's exchange: as in the file."""
    raw = _json(fixture_named("2.3.0-prod").root / "jobgraph.json")
    job = parse_job_graph_plan(raw)
    assert (job.jid, job.name) == (raw["jid"], raw["name"])
    for n in raw["nodes"]:
        v = job.vertex(n["id"])
        assert v.description == n["description"]
        assert [(i.source, i.exchange) for i in v.inputs] == [(i["id"], i["exchange"]) for i in n.get("inputs", [])]
    bare = parse_job_graph_plan({"nodes": raw["nodes"]})
    assert (bare.jid, bare.name) == (None, None)
    with pytest.raises(KeyError) as err:
        job.vertex("0" * 32)
    assert err.value.args == ("0" * 32,)


def test_an_input_without_its_number_takes_its_position() -> None:
    raw = _json(fixture_named("2.3.0-prod").root / "jobgraph.json")
    two = next(n for n in raw["nodes"] if len(n.get("inputs", [])) == 2)
    for i in two["inputs"]:
        del i["num"]
    assert [i.num for i in parse_job_graph_plan(raw).vertex(two["id"]).inputs] == [0, 1]


def test_a_stream_plan_keeps_every_field_flink_wrote() -> None:
    """A node's name is ``type`` (``contents`` when there is none), its description ``contents``; a source is
    what ``pact`` calls a Data Source, and without ``pact`` a node without inputs."""
    raw = _json(fixture_named("2.3.0-sql").root / "plan.json")
    graph = parse_stream_plan(raw)
    for n in raw["nodes"]:
        node = graph.node(n["id"])
        assert (node.name, node.description) == (n["type"], n["contents"])
        assert node.is_source is (n["pact"] == "Data Source")
    assert graph.source_ids() == sorted(n["id"] for n in raw["nodes"] if n["pact"] == "Data Source")
    first, second = raw["nodes"][0], raw["nodes"][1]
    del first["type"], first["pact"], second["type"], second["contents"]
    second["pact"] = "Operator"
    graph = parse_stream_plan(raw)
    assert graph.node(first["id"]).name == first["contents"] and graph.node(first["id"]).is_source is None
    assert graph.node(second["id"]).name == "" and graph.node(second["id"]).is_source is False
    assert first["id"] in graph.source_ids()


def test_the_out_edge_order_follows_the_node_ids_and_the_in_edge_order_the_predecessors() -> None:
    """Flink creates edges as it creates the downstream operators (ids ascending); a plan may list a node
    (a registered sink) after higher ids. Each node's predecessors keep their order."""
    doc = {
        "nodes": [
            {"id": 1, "type": "src", "pact": "Data Source", "parallelism": 1},
            {"id": 4, "type": "late", "parallelism": 1, "predecessors": [{"id": 1, "ship_strategy": "HASH"}]},
            {"id": 2, "type": "a", "parallelism": 1, "predecessors": [{"id": 1, "ship_strategy": "REBALANCE"}]},
            {"id": 3, "type": "b", "parallelism": 1, "predecessors": [{"id": 2, "ship_strategy": "FORWARD"}]},
            {
                "id": 5,
                "type": "join",
                "parallelism": 1,
                "predecessors": [{"id": 3, "ship_strategy": "HASH"}, {"id": 2, "ship_strategy": "HASH"}],
            },
        ]
    }
    graph = parse_stream_plan(doc)
    assert [e.target for e in graph.out_edges(1)] == [2, 4]
    assert [e.source for e in graph.in_edges(5)] == [3, 2]
    assert [(e.source, e.target) for e in graph.edges] == [(1, 2), (2, 3), (1, 4), (3, 5), (2, 5)]


def test_the_flavour_is_told_by_the_nodes() -> None:
    """A stream-graph plan of one node (no predecessors anywhere) is still one: its id is an integer."""
    topology = parse_plan({"nodes": [{"id": 1, "type": "src", "parallelism": 2}]})
    assert topology.flavour == "stream-graph" and list(topology.vertices) == ["1"]
    with pytest.raises(PlanError) as err:  # string ids with predecessors: a stream plan with a bad id
        parse_plan({"nodes": [{"id": "1", "parallelism": 1, "predecessors": []}]}, "p.json")
    assert str(err.value) == "p.json: malformed plan node (node '1': 'id' is '1', not an integer)"
    with pytest.raises(PlanError) as err:  # a boolean id is no integer: a job-graph plan with a bad id
        parse_plan({"nodes": [{"id": True, "parallelism": 1, "description": "a"}]}, "p.json")
    assert str(err.value) == "p.json: malformed plan node (nodes[0]: 'id' is bool True, not a string)"


def test_the_plan_is_the_nodes_even_beside_a_plan_key() -> None:
    doc = _json(fixture_named("2.3.0-prod").root / "plan.json")
    assert parse_plan({**doc, "plan": {"nodes": [{"id": 9, "parallelism": 1}]}}).vertices == parse_plan(doc).vertices


@pytest.mark.parametrize(
    ("doc", "message"),
    [
        ("{bad", "not a readable JSON plan (Expecting property name enclosed in double quotes"),
        ('{"nodes": []}', "no 'nodes' list: not a Flink plan"),
        ("[1]", "no 'nodes' list: not a Flink plan"),
    ],
)
def test_plan_text_that_is_no_plan(doc: str, message: str) -> None:
    for parse in (parse_stream_plan, parse_job_graph_plan):
        with pytest.raises(PlanError) as err:
            parse(doc)
        assert str(err.value).startswith(message)


@pytest.mark.parametrize(
    ("flavour", "edit", "message"),
    [
        ("plan.json", lambda d: d["nodes"][0].pop("id"), "nodes[0]: 'id' is None, not an integer"),
        ("plan.json", lambda d: d["nodes"][1].update(parallelism=0), "node 2: 'parallelism' is 0, not a positive"),
        ("plan.json", lambda d: d["nodes"][1].update(predecessors=["x"]), "node 2: predecessors[0] is str 'x', not"),
        ("plan.json", lambda d: d["nodes"][1]["predecessors"][0].update(id=None), "node 2: predecessors[0]: 'id' is"),
        ("plan.json", lambda d: d["nodes"][1]["predecessors"][0].update(ship_strategy=1), "node 2: predecessors[0]: "),
        ("plan.json", lambda d: d["nodes"][1].update(pact=3), "node 2: 'pact' is int 3, not a string"),
        ("jobgraph.json", lambda d: d["nodes"][0].update(id=""), "nodes[0]: 'id' is '', not a job vertex id"),
        ("jobgraph.json", lambda d: d["nodes"][0].update(id=None), "nodes[0]: 'id' is None, not a job vertex id"),
        ("jobgraph.json", lambda d: d["nodes"][0].update(inputs={}), "'inputs' is dict {}, not a list"),
        ("jobgraph.json", lambda d: d["nodes"][0]["inputs"][0].update(id=5), "inputs[0]: 'id' is int 5, not a str"),
        ("jobgraph.json", lambda d: d["nodes"][0]["inputs"][0].update(num="0"), "inputs[0]: 'num' is '0', not a non-"),
        ("jobgraph.json", lambda d: d["nodes"][0]["inputs"][0].update(ship_strategy=[]), "inputs[0]: 'ship_strat"),
        ("jobgraph.json", lambda d: d["nodes"][0]["inputs"][0].update(exchange=1), "inputs[0]: 'exchange' is int 1"),
    ],
)
def test_the_node_and_the_field_are_named(flavour: str, edit: Any, message: str) -> None:
    doc = _json(fixture_named("2.3.0-prod").root / flavour)
    first = doc["nodes"][0]["id"]
    edit(doc)
    with pytest.raises(PlanError) as err:
        parse_plan(doc, "p.json")
    text = str(err.value)
    where = f"node {first!r}: " if flavour == "jobgraph.json" and not message.startswith("nodes[") else ""
    assert text.startswith(f"p.json: malformed plan node ({where}{message}"), text


# ------------------------------------------------------------------------------------ the graph's own checks


def test_a_graph_of_unknown_or_twice_used_nodes_is_refused() -> None:
    a, b = StreamNode(1, "a", 1), StreamNode(2, "b", 1)
    with pytest.raises(ValueError, match=r"^duplicate stream node id 1$"):
        StreamGraph((a, StreamNode(1, "c", 1)), ())
    for edge in (StreamEdge(1, 3, "FORWARD"), StreamEdge(3, 1, "FORWARD")):
        with pytest.raises(ValueError, match=rf"^edge {edge.source}->{edge.target} names a node that is not in"):
            StreamGraph((a, b), (edge,))
    graph = StreamGraph((a, b, StreamNode(3, "c", 1, is_source=False), StreamNode(4, "d", 1, is_source=True)), ())
    assert graph.source_ids() == [1, 2, 4]


def test_with_nodes_replaces_fields_and_keeps_the_rest() -> None:
    graph = parse_stream_plan(_json(fixture_named("2.3.0-prod").root / "plan.json"))
    graph = StreamGraph(graph.nodes, graph.edges, False, False, True)
    changed = graph.with_nodes({2: {"chaining_strategy": "HEAD", "uid": "u"}})
    assert changed.node(2).chaining_strategy == "HEAD" and changed.node(2).uid == "u"
    assert graph.node(2).chaining_strategy is None and graph.node(2).uid is None
    assert [n for n in changed.nodes if n.id != 2] == [n for n in graph.nodes if n.id != 2]
    assert changed.edges == graph.edges
    assert (changed.chaining_enabled, changed.chain_different_max_parallelism, changed.inferred_edge_order) == (
        False,
        False,
        True,
    )


def test_the_labels_a_node_may_carry() -> None:
    assert list(labels_of(StreamNode(1, "a", 1))) == ["a"]
    assert list(labels_of(StreamNode(1, "a", 1, description="a"))) == ["a"]
    assert list(labels_of(StreamNode(1, "a", 1, description="[1]:A(x)"))) == ["a", "[1]:A(x)"]


# ------------------------------------------------------------------------------------------- the topology view


@pytest.mark.parametrize("plan", ["plan.json", "jobgraph.json"])
def test_each_vertex_knows_its_key_and_its_edges(plan: str) -> None:
    """A vertex's key is the one it is filed under; its inputs are the edges into it, its outputs the edges out of
    it, each edge once on each side."""
    for fx in (fixture_named("2.3.0-prod"), fixture_named("1.12.5-prod"), fixture_named("2.3.0-finished")):
        topology = load_plan(fx.root / plan)
        edges = topology.edges()
        assert edges and all(topology.vertices[e.downstream].inputs.count(e) >= 1 for e in edges)
        for key, v in topology.vertices.items():
            assert v.key == key
            assert list(v.inputs) == [e for e in edges if e.downstream == key]
            assert sorted(v.outputs, key=repr) == sorted((e for e in edges if e.upstream == key), key=repr)
            assert v.label() == " -> ".join(v.names)


def test_a_vertex_without_names_is_labelled_by_its_key() -> None:
    from spillway.inspect.topology import Vertex

    assert Vertex("7", (), 1).label() == "7"


def test_nodes_in_any_order_chain_alike() -> None:
    """A plan lists registered sinks last, not always after their inputs: the chains do not depend on the order
    the nodes come in (a diamond, and every node listed in reverse)."""
    nodes = [
        {"id": 1, "type": "src", "pact": "Data Source", "parallelism": 2},
        {"id": 2, "type": "a", "parallelism": 2, "predecessors": [{"id": 1, "ship_strategy": "FORWARD"}]},
        {"id": 3, "type": "b", "parallelism": 2, "predecessors": [{"id": 1, "ship_strategy": "FORWARD"}]},
        {
            "id": 4,
            "type": "join",
            "parallelism": 2,
            "predecessors": [{"id": 2, "ship_strategy": "HASH"}, {"id": 3, "ship_strategy": "HASH"}],
        },
        {"id": 5, "type": "sink", "parallelism": 2, "predecessors": [{"id": 4, "ship_strategy": "FORWARD"}]},
    ]
    forward = parse_plan({"nodes": nodes})
    assert {k: (v.names, v.node_ids) for k, v in forward.vertices.items()} == {
        "1": (("src", "a", "b"), (1, 2, 3)),
        "4": (("join", "sink"), (4, 5)),
    }
    assert [(e.upstream, e.downstream, e.gate) for e in forward.edges()] == [("1", "4", 0), ("1", "4", 0)]
    backward = parse_plan({"nodes": list(reversed(nodes))})
    assert {k: (v.names, v.node_ids, v.inputs) for k, v in backward.vertices.items()} == {
        k: (v.names, v.node_ids, v.inputs) for k, v in forward.vertices.items()
    }
    # an input reached twice before it is placed (listed first: a join of a node and that node's own input)
    join = [
        {"id": 3, "type": "join", "parallelism": 1, "predecessors": [{"id": 2, "ship_strategy": "HASH"}, {"id": 1}]},
        {"id": 2, "type": "a", "parallelism": 1, "predecessors": [{"id": 1, "ship_strategy": "HASH"}]},
        {"id": 1, "type": "src", "parallelism": 1},
    ]
    chains = {k: (v.names, v.node_ids) for k, v in parse_plan({"nodes": join}).vertices.items()}
    assert chains == {k: (v.names, v.node_ids) for k, v in parse_plan({"nodes": list(reversed(join))}).vertices.items()}


def test_a_copy_for_another_checkpoint_has_the_chains_as_first_read() -> None:
    """Binding a stream-graph plan rewrites its chains from the checkpoint's evidence; the copy for another
    checkpoint has the plan's own chains again, its uids, and no binding. A job-graph plan's chains are Flink's:
    copied as they are."""
    fx = fixture_named("1.20.3-prod")
    topology = load_plan(fx.root / "plan.json", {"parse": "parse-events"})
    first = dict(topology.vertices)
    from spillway.inspect.topology import bind_job
    from spillway.storage.load import load_checkpoint

    bound = bind_job(topology, load_checkpoint(fx.checkpoint_dir).checkpoint)
    assert dict(topology.vertices) == first  # binding writes nothing into the plan ...
    assert bound.view is not None and dict(bound.view.vertices) != first  # ... its chains: enrich starts its own
    copy_ = topology.unbound_copy()
    assert dict(copy_.vertices) == first and copy_.uids == {"parse": "parse-events"} and copy_ is not topology
    job = load_plan(fx.root / "jobgraph.json")
    assert dict(job.unbound_copy().vertices) == dict(job.vertices)
    new_job = topology.as_new_job()
    assert dict(new_job.unbound_copy().vertices) == dict(new_job.vertices)


def test_a_rescaled_plan_names_itself_in_its_errors() -> None:
    topology = load_plan(fixture_named("2.3.0-prod").root / "plan.json")
    key = next(iter(topology.vertices))
    with pytest.raises(PlanError, match=r"^rescaled plan: malformed plan node \(node 1: 'parallelism' is 0, not a "):
        topology.rescaled({key: 0})
    with pytest.raises(PlanError, match=r"^new\.json: malformed plan node"):
        topology.rescaled({key: 0}, "new.json")
    with pytest.raises(PlanError, match=r"^plan: no 'nodes' list"):
        parse_plan({})


PLAN_PAIRS = sorted(p.parent for p in FIXTURES.rglob("jobgraph.json") if (p.parent / "plan.json").exists())


@pytest.mark.parametrize(
    "root", [pytest.param(r, id=str(r.relative_to(FIXTURES)).replace("/", "-")) for r in PLAN_PAIRS]
)
def test_a_stream_plan_numbers_the_gates_as_flink_did(root: Path) -> None:
    """Every plan pair Flink wrote (fixtures, preflight matrix, finished variants): chained as the job-graph plan
    says, the stream-graph plan gives each vertex the upstream vertices on the gates Flink numbered
    (``inputs[].num``) — the order Flink connects chains, not the order of a node's predecessors."""
    graph = parse_stream_plan(_json(root / "plan.json"))
    job = parse_job_graph_plan(_json(root / "jobgraph.json"))
    if (root / "ids.json").exists():  # names may repeat: Flink's own node of each plan node
        flink_nodes = plan_to_flink_nodes(root)
        vertex_of = {pid: n["vertex_id"] for pid, n in flink_nodes.items()}
        head_of = {n["operator_id"]: pid for pid, n in flink_nodes.items()}  # a job vertex id is its head's id
        head_node = {v.id: head_of[v.id] for v in job.vertices}
    else:
        node_of = {n.description or n.name: n.id for n in graph.nodes}
        assert len(node_of) == len(graph.nodes)  # labels name nodes uniquely in these jobs
        vertex_of = {node_of[label]: v.id for v in job.vertices for label in v.operators}
        head_node = {v.id: node_of[v.operators[0]] for v in job.vertices}
    chained = {(e.source, e.target) for e in graph.edges if vertex_of[e.source] == vertex_of[e.target]}
    topology = stream_topology(graph, chained)
    head_vertex = {str(node): vid for vid, node in head_node.items()}
    for v in job.vertices:
        flink = list(dict.fromkeys(i.source for i in sorted(v.inputs, key=lambda i: i.num)))
        mine = topology.vertices[str(head_node[v.id])]
        by_gate = sorted({(e.gate, head_vertex[e.upstream]) for e in mine.inputs})
        assert [vid for _, vid in by_gate] == flink, v.operators[0]
        assert [g for g, _ in by_gate] == list(range(len(flink)))


def test_a_plan_too_deep_to_follow_is_refused_not_a_traceback() -> None:
    """Chains are followed depth first, as Flink does; a line of thousands of exchanges (no real job) is refused
    as a usage error naming the plan."""
    nodes: list[dict[str, Any]] = [{"id": 1, "type": "n1", "parallelism": 1}]
    nodes += [
        {"id": i, "type": f"n{i}", "parallelism": 1, "predecessors": [{"id": i - 1, "ship_strategy": "REBALANCE"}]}
        for i in range(2, 5002)
    ]
    with pytest.raises(PlanError) as err:
        parse_plan({"nodes": nodes}, "deep.json")
    assert str(err.value) == "deep.json: malformed plan node (the plan is nested too deeply to follow)"
    assert len(parse_plan({"nodes": nodes[:300]}, "p.json").vertices) == 300
