"""Plans read and bound by spillway/inspect/topology.py, checked against what Flink recorded.

Expected values come from the fixtures' ids.json (Flink's own StreamGraph and JobGraph of the job that wrote the
checkpoint: every stream node's operator id and vertex, every job vertex's ``getOperatorIDs()`` — tail first,
head last —, every stream edge's partitioner) and from the plan files Flink wrote (jobgraph.json, plan.json).
Malformed plans get an error naming the file, the node and the field, never a traceback.
"""

from __future__ import annotations

import copy
import dataclasses
import json
import pickle
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest
from support.fixtures import Fixture, all_fixtures, fixture_named

from spillway.inspect.topology import (
    PlanError,
    Topology,
    as_topology,
    bind,
    bind_job,
    load_plan,
    load_uid_map,
    operator_binding,
    parse_plan,
)
from spillway.model.checkpoint import CheckpointMetadata
from spillway.storage.load import load_checkpoint

# One or two per release line and flavour of job: with and without uids, 1.x (ids only) and 2.x (names stored),
# releases that leave stateless operators out (1.10, 1.12) and ones that keep them.
#: Chained operators whose name is their uid and which nothing else in the checkpoint tells apart (Flink's ids).
OPEN_BY_NAME_GUESS = {"1.10.3-aligned": {"tostr", "Sink: sink"}}
JOB_GRAPH_FIXTURES = [
    "1.10.3-aligned",
    "1.11.4-prod",
    "1.12.5-prod-no-uid",
    "1.15.4-prod",
    "1.20.3-prod-no-uid",
    "2.3.0-prod",
    "2.3.0-finished",
]


def _ids(fx: Fixture) -> dict[str, Any]:
    doc: dict[str, Any] = json.loads((fx.root / "ids.json").read_text())
    return doc


def _checkpoint(fx: Fixture) -> CheckpointMetadata:
    return load_checkpoint(fx.checkpoint_dir).checkpoint


def _flink_vertices(fx: Fixture) -> dict[str, dict[str, Any]]:
    return {v["id"]: v for v in _ids(fx)["vertices"]}


def _in_checkpoint(cp: CheckpointMetadata, operator_id: str) -> str | None:
    return operator_id if cp.operator(operator_id) is not None else None


@pytest.mark.parametrize("name", JOB_GRAPH_FIXTURES)
def test_a_job_graph_plan_binds_every_vertex_as_flink_built_it(name: str) -> None:
    """Per job vertex of ids.json: the plan's vertex (key = Flink's vertex id, its chain's names head first, its
    parallelism), the operators of its chain head first (Flink's ids, None where the checkpoint leaves a stateless
    one out), the head (the vertex id) and the tail (``getOperatorIDs()[0]``) as the checkpoint has them, every
    member known, no problem."""
    fx = fixture_named(name)
    cp = _checkpoint(fx)
    names = {n["operator_id"]: n["name"] for n in _ids(fx)["stream_nodes"]}
    flink = _flink_vertices(fx)
    topology = load_plan(fx.root / "jobgraph.json")
    bound = bind(topology, cp)
    # A chained operator whose name is its uid, where nothing else in the checkpoint tells it from another (1.10:
    # tostr behind the source and the stateless sink, which 1.10 leaves out): the name is only a guess, so both
    # stay open, with Flink's id (or "not in the checkpoint") among their candidates.
    binding = operator_binding(topology, cp)
    assert binding is not None
    open_by_guess = {b.name for b in binding.operators if b.method == "unbound" and b.candidates}
    assert open_by_guess == OPEN_BY_NAME_GUESS.get(name, set())
    said = [b.name for b in binding.operators if "a guess the other evidence does not confirm" in b.reason]
    assert said == (["tostr"] if open_by_guess else [])
    assert set(bound) == set(flink)
    for key, b in bound.items():
        f = flink[key]
        chain = list(reversed(f["operator_ids"]))  # head first
        unknown = [names[i] in open_by_guess for i in chain]
        assert b.vertex.vertex_id == key == chain[0]
        assert b.vertex.names == tuple(names[i] for i in chain) and b.vertex.label() == " -> ".join(b.vertex.names)
        assert b.vertex.parallelism == f["parallelism"]
        assert [o.operator_id if o else None for o in b.operators] == [
            None if u else _in_checkpoint(cp, i) for i, u in zip(chain, unknown, strict=True)
        ]
        assert (b.head.operator_id if b.head else None) == _in_checkpoint(cp, chain[0])
        if not any(unknown):
            assert (b.tail.operator_id if b.tail else None) == _in_checkpoint(cp, f["operator_ids"][0])
        assert [o.operator_id for o in b.members] == [
            i for i, u in zip(chain, unknown, strict=True) if cp.operator(i) is not None and not u
        ]
        assert b.known == [not u for u in unknown] and b.complete == (not any(unknown))
        assert b.uncertain_edges == []
    for b in binding.operators:
        if b.name in open_by_guess:
            flinks = next(i for i, n in names.items() if n == b.name)
            assert (flinks if cp.operator(flinks) is not None else "-") in b.candidates


@pytest.mark.parametrize("name", JOB_GRAPH_FIXTURES)
def test_a_job_graph_plans_edges_are_flinks_edges_between_vertices(name: str) -> None:
    """Every stream edge of ids.json between two vertices is one plan edge (upstream vertex, downstream vertex,
    Flink's partitioner); the edges into a vertex take the gates 0, 1, … in the plan's order."""
    fx = fixture_named(name)
    ids = _ids(fx)
    vertex_of = {n["id"]: n["vertex_id"] for n in ids["stream_nodes"]}
    expected = sorted(
        (vertex_of[e["source"]], vertex_of[e["target"]], e["partitioner"])
        for e in ids["stream_edges"]
        if vertex_of[e["source"]] != vertex_of[e["target"]]
    )
    topology = load_plan(fx.root / "jobgraph.json")
    assert topology.flavour == "job-graph" and topology.job_graph is not None and topology.stream_graph is None
    edges = topology.edges()
    assert sorted((e.upstream, e.downstream, e.ship_strategy) for e in edges) == expected
    for v in topology.vertices.values():
        assert sorted(e.gate for e in v.inputs) == list(range(len(v.inputs)))
        assert all(e in topology.vertices[e.upstream].outputs for e in v.inputs)
        assert all(e.all_to_all == (e.ship_strategy in ("HASH", "REBALANCE")) for e in v.inputs)


@pytest.mark.parametrize("name", ["1.12.5-prod", "1.15.4-prod-no-uid", "2.3.0-no-uid", "2.3.0-unaligned"])
def test_a_stream_graph_plan_is_rechained_as_flink_chained_it(name: str) -> None:
    """The binding's view of the stream-graph plan has Flink's job vertices (ids.json: which node is in which
    vertex; edges the evidence leaves open are taken as chained, Flink's default, which these jobs keep), keyed by
    the head's node id, each with its operators head first and the plan's parallelism. (The plan's node ids are
    those of getExecutionPlan(), which numbers a sink's expansion apart from the job's: compared by name.) The
    plan itself keeps its chains as read: the binding is a value, not a change to the plan."""
    fx = fixture_named(name)
    ids = _ids(fx)
    plan = load_plan(fx.root / "plan.json")
    as_read = {k: (v.node_ids, v.names) for k, v in plan.vertices.items()}
    plan_ids = {n["type"]: n["id"] for n in plan.source_doc["nodes"]}
    topology = bind_job(plan, _checkpoint(fx)).view
    assert topology is not None
    assert {k: (v.node_ids, v.names) for k, v in plan.vertices.items()} == as_read
    node_of = {n["operator_id"]: n for n in ids["stream_nodes"]}
    expected = {}
    for v in ids["vertices"]:
        chain = [node_of[i]["name"] for i in reversed(v["operator_ids"])]
        expected[str(plan_ids[chain[0]])] = (tuple(plan_ids[c] for c in chain), tuple(chain), v["parallelism"])
    assert {k: (v.node_ids, v.names, v.parallelism) for k, v in topology.vertices.items()} == expected


def test_flinks_two_description_styles_give_the_same_chains() -> None:
    """1.10-1.13 describe a job vertex as ``A -&gt; B``, 1.14+ as ``A<br/>+- B<br/>``: both name the chain head
    first, as Flink's vertex names do (ids.json)."""
    for name, marker in (("1.12.5-prod", " -&gt; "), ("2.3.0-prod", "<br/>+- ")):
        fx = fixture_named(name)
        doc = json.loads((fx.root / "jobgraph.json").read_text())
        assert any(marker in n["description"] for n in doc["nodes"]), "the fixture uses the style"
        topology = parse_plan(doc)
        flink = {v["id"]: v["name"] for v in _ids(fx)["vertices"]}
        assert {k: " -> ".join(v.names) for k, v in topology.vertices.items()} == flink


def test_branch_markers_and_entities_are_not_part_of_a_name() -> None:
    """A tree description as Flink 1.15+ writes a chain with two chained outputs (``:- `` before a child that is
    not the last, ``+- `` before the last, ``:  `` / three spaces of indentation under each) and HTML escapes
    (``escapeHtml4``, then a backslash as ``&#92;``): the names only, head first, in the order written, each
    with its chain parent."""
    doc = json.loads((fixture_named("2.3.0-prod").root / "jobgraph.json").read_text())
    node = next(n for n in doc["nodes"] if "parse" in n["description"])
    node["description"] = (
        "Source: events<br/>:- parse<br/>:  +- timestamps<br/>+- side&#92;x &amp; &lt;y&gt;<br/>   +- sink<br/>"
    )
    topology = parse_plan(doc)
    names = ("Source: events", "parse", "timestamps", "side\\x & <y>", "sink")
    assert topology.vertices[node["id"]].names == names
    assert topology.job_graph is not None
    assert topology.job_graph.vertex(node["id"]).parents == (None, 0, 1, 0, 3)


def test_the_rest_apis_wrapped_plan_reads_as_the_plan() -> None:
    """``/jobs/:id/plan`` answers ``{"plan": {…}}``: the same vertices as the bare plan, and the bare plan is what
    a changed copy is written from."""
    fx = fixture_named("2.3.0-prod")
    doc = json.loads((fx.root / "jobgraph.json").read_text())
    bare, wrapped = parse_plan(doc), parse_plan({"plan": doc})
    assert wrapped.vertices == bare.vertices and wrapped.source_doc == doc == bare.source_doc


@pytest.mark.parametrize("flavour", ["jobgraph.json", "plan.json"])
def test_with_parallelism_changes_one_vertex_and_nothing_else(flavour: str, tmp_path: Path) -> None:
    """The plan of a rescaled job: the named vertex (every node of its chain, in a stream-graph plan) gets the new
    parallelism, every other node keeps Flink's (ids.json), and the copy reads back as the same vertices."""
    fx = fixture_named("2.3.0-prod")
    ids = _ids(fx)
    topology = load_plan(fx.root / flavour)
    before = copy.deepcopy(topology.source_doc)
    vertex_id = next(v["id"] for v in ids["vertices"] if v["name"].startswith("Source: rules"))
    plan_ids = {n["type"]: n["id"] for n in before["nodes"] if "type" in n}  # stream-graph plan: name -> node id
    node_ids = {plan_ids.get(n["name"]) for n in ids["stream_nodes"] if n["vertex_id"] == vertex_id}
    key = vertex_id if flavour == "jobgraph.json" else str(min(node_ids))
    doc = topology.with_parallelism({key: 7})
    assert topology.source_doc == before, "the plan as read is not changed"
    changed = {str(n["id"]) for n in doc["nodes"] if n["parallelism"] == 7}
    assert changed == ({vertex_id} if flavour == "jobgraph.json" else {str(i) for i in node_ids})
    flink_p = {n["name"]: n["parallelism"] for n in ids["stream_nodes"]}
    flink_p.update({v["id"]: v["parallelism"] for v in ids["vertices"]})
    for n in doc["nodes"]:
        if str(n["id"]) not in changed:
            assert n["parallelism"] == flink_p[n["id"] if flavour == "jobgraph.json" else n["type"]]
    again = parse_plan(doc)
    assert {k: v.parallelism for k, v in again.vertices.items()} == {
        k: 7 if k == key else v.parallelism for k, v in parse_plan(before).vertices.items()
    }
    path = tmp_path / "p.json"
    path.write_text(json.dumps(doc))
    assert as_topology(path) is not None and as_topology(path).vertices == again.vertices  # type: ignore[union-attr]
    assert as_topology(topology) is topology and as_topology(None) is None


def test_a_plan_without_flinks_graph_binds_by_the_stored_names() -> None:
    """A Topology holding only vertices and names (no parsed job or stream graph: library use) binds a V5+
    checkpoint by the names Flink stored: each vertex's operators are the ones of ids.json, head and tail
    Flink's."""
    fx = fixture_named("2.3.0-prod")
    cp = _checkpoint(fx)
    topology = load_plan(fx.root / "jobgraph.json")
    names_only = Topology({k: replace(v, vertex_id=None) for k, v in topology.vertices.items()}, "job-graph")
    bound = bind(names_only, cp)
    flink = _flink_vertices(fx)
    assert len(bound) == len(flink)
    for key, b in bound.items():
        f = flink[key]
        chain = list(reversed(f["operator_ids"]))
        assert [o.operator_id if o else None for o in b.operators] == chain
        assert b.head is not None and b.head.operator_id == chain[0]
        assert b.tail is not None and b.tail.operator_id == f["operator_ids"][0]
        assert b.known == [True] * len(chain) and b.complete and b.problem is None


def test_a_name_stored_twice_binds_neither_operator() -> None:
    """Two checkpoint operators with one stored name: a names-only plan cannot tell them apart, so neither
    binds and the vertex says its head is not bound (the rest still bind)."""
    fx = fixture_named("2.3.0-prod")
    cp = _checkpoint(fx)
    flink = _flink_vertices(fx)
    enrich = next(k for k, v in flink.items() if v["name"] == "enrich")
    fmt = next(k for k, v in flink.items() if v["name"] == "format-out")
    other = cp.operator(fmt)
    assert other is not None
    other.name = "enrich"
    topology = load_plan(fx.root / "jobgraph.json")
    names_only = Topology({k: replace(v, vertex_id=None) for k, v in topology.vertices.items()}, "job-graph")
    bound = bind(names_only, cp)
    assert bound[enrich].head is None and bound[enrich].known == [False] and not bound[enrich].complete
    assert bound[enrich].problem == "the head of 'enrich' is not bound to a checkpoint operator"
    slow = next(k for k, v in flink.items() if v["name"] == "slow-count")
    assert bound[slow].head is not None and bound[slow].head.operator_id == slow


def test_a_1x_checkpoint_shows_the_plans_names_and_a_2x_one_keeps_flinks() -> None:
    """1.x stores ids only: the binding names each operator by the plan (ids.json's name for that id); the names
    a 2.x checkpoint stores are Flink's and stay, with no plan name added."""
    fx = fixture_named("1.15.4-prod")
    cp = _checkpoint(fx)
    names = {n["operator_id"]: n["name"] for n in _ids(fx)["stream_nodes"]}
    job = bind_job(load_plan(fx.root / "plan.json"), cp)
    assert all(o.name is None for o in cp.operators)
    assert dict(job.names) == {o.operator_id: names[o.operator_id] for o in cp.operators}
    assert {o.label(job.names) for o in cp.operators} == {names[o.operator_id] for o in cp.operators}
    new = fixture_named("2.3.0-prod")
    cp2 = _checkpoint(new)
    job2 = bind_job(load_plan(new.root / "plan.json"), cp2)
    assert not job2.names and all(o.name is not None for o in cp2.operators)


@pytest.mark.parametrize("name", ["1.15.4-prod-no-uid", "1.20.3-shapes-no-uid", "2.2.1-shapes-no-uid"])
def test_binding_is_a_value_and_leaves_the_checkpoint_and_plan_as_decoded(name: str) -> None:
    """Binding changes neither the decoded checkpoint (field by field and byte for byte when pickled) nor the
    plan, and binding again gives an equal value; a second checkpoint gets a binding of its own."""
    fx = fixture_named(name)
    topology = load_plan(fx.root / "plan.json")
    cp = _checkpoint(fx)
    cp_before, plan_before = pickle.dumps(cp), copy.deepcopy(topology)
    first = bind_job(topology, cp)
    assert bool(first.names) == name.startswith("1.")  # 2.x stores every name itself
    assert pickle.dumps(cp) == cp_before and cp == pickle.loads(cp_before)
    assert topology == plan_before
    again = bind_job(topology, cp)
    assert again == first and again is not first
    with pytest.raises(dataclasses.FrozenInstanceError):
        first.names = {}  # type: ignore[misc]
    with pytest.raises(TypeError):
        first.names["an operator id"] = "a name"  # type: ignore[index]
    other = bind_job(topology, _checkpoint(fx))
    assert other == first and dict(other.names) == dict(first.names)


# ------------------------------------------------------------------------------------------ malformed plans


def _jobgraph() -> dict[str, Any]:
    doc: dict[str, Any] = json.loads((fixture_named("2.3.0-prod").root / "jobgraph.json").read_text())
    return doc


def _streamgraph() -> dict[str, Any]:
    doc: dict[str, Any] = json.loads((fixture_named("2.3.0-prod").root / "plan.json").read_text())
    return doc


def _first_id(doc: dict[str, Any]) -> Any:
    return doc["nodes"][0]["id"]


def _set(flavour: str, key: str, value: Any) -> tuple[dict[str, Any], Any]:
    doc = _jobgraph() if flavour == "job" else _streamgraph()
    doc["nodes"][0][key] = value
    return doc, _first_id(doc)


@pytest.mark.parametrize(
    ("doc", "message"),
    [
        pytest.param([], "p.json: no 'nodes' list: not a Flink plan", id="a-list"),
        pytest.param({}, "p.json: no 'nodes' list: not a Flink plan", id="no-nodes"),
        pytest.param({"nodes": []}, "p.json: no 'nodes' list: not a Flink plan", id="empty-nodes"),
        pytest.param({"nodes": {"a": 1}}, "p.json: no 'nodes' list: not a Flink plan", id="nodes-not-a-list"),
        pytest.param({"plan": {"nodes": []}}, "p.json: no 'nodes' list: not a Flink plan", id="wrapped-empty"),
        pytest.param(
            {"nodes": [{"id": 1, "parallelism": 1}, "x"]},
            "p.json: malformed plan node (nodes[1] is str 'x', not an object)",
            id="node-not-an-object",
        ),
    ],
)
def test_a_document_that_is_not_a_plan_is_refused(doc: Any, message: str) -> None:
    with pytest.raises(PlanError) as err:
        parse_plan(doc, "p.json")
    assert str(err.value) == message


@pytest.mark.parametrize("flavour", ["job", "stream"])
@pytest.mark.parametrize(
    ("value", "shown"),
    [
        pytest.param(0, "0", id="zero"),
        pytest.param(-1, "-1", id="negative"),
        pytest.param(True, "True", id="bool"),
        pytest.param("2", "'2'", id="string"),
        pytest.param(None, "None", id="null"),
    ],
)
def test_a_parallelism_that_is_not_a_positive_integer_is_named(flavour: str, value: Any, shown: str) -> None:
    doc, nid = _set(flavour, "parallelism", value)
    with pytest.raises(PlanError) as err:
        parse_plan(doc, "p.json")
    assert (
        str(err.value)
        == f"p.json: malformed plan node (node {nid!r}: 'parallelism' is {shown}, not a positive integer)"
    )


@pytest.mark.parametrize(("flavour", "key"), [("job", "description"), ("stream", "contents"), ("stream", "type")])
def test_a_name_field_that_is_not_text_is_named(flavour: str, key: str) -> None:
    doc, nid = _set(flavour, key, 5)
    if key == "type":
        doc["nodes"][0]["contents"] = ""  # the type is read only when contents says nothing
    with pytest.raises(PlanError) as err:
        parse_plan(doc, "p.json")
    assert str(err.value) == f"p.json: malformed plan node (node {nid!r}: {key!r} is int 5, not a string)"


def test_a_missing_field_is_named() -> None:
    doc = _jobgraph()
    del doc["nodes"][0]["parallelism"]
    with pytest.raises(PlanError) as err:
        parse_plan(doc, "p.json")
    assert str(err.value) == (
        f"p.json: malformed plan node (node {doc['nodes'][0]['id']!r}: 'parallelism' is None, not a positive integer)"
    )


@pytest.mark.parametrize("description", ["", "<br/>", None])
def test_a_job_vertex_described_by_no_operator_is_refused(description: Any) -> None:
    doc, nid = _set("job", "description", description)
    with pytest.raises(PlanError) as err:
        parse_plan(doc, "p.json")
    assert str(err.value) == f"p.json: malformed plan node (node {nid!r}: 'description' names no operator)"


def test_an_input_that_is_no_node_is_refused() -> None:
    doc = _jobgraph()
    node = next(n for n in doc["nodes"] if n.get("inputs"))
    node["inputs"][0]["id"] = "00000000000000000000000000000000"
    with pytest.raises(PlanError) as err:
        parse_plan(doc, "p.json")
    assert str(err.value) == (
        f"p.json: malformed plan node (input 00000000000000000000000000000000 of {node['id']} is not a node)"
    )


def test_a_stream_graph_node_name_falls_back_to_its_type_then_its_id() -> None:
    """Flink's stream-graph plan names a node by ``contents`` (and ``type``): an empty one falls back to the
    type, then to the node id, never to nothing."""
    doc = _streamgraph()
    first = doc["nodes"][0]
    first["contents"] = ""
    assert parse_plan(doc).vertices[str(first["id"])].names[0] == first["type"]
    first["type"] = ""
    assert parse_plan(doc).vertices[str(first["id"])].names[0] == str(first["id"])


def test_load_plan_names_the_file_it_cannot_read(tmp_path: Path) -> None:
    with pytest.raises(PlanError) as err:
        load_plan(tmp_path / "gone.json")
    assert str(err.value) == f"{tmp_path / 'gone.json'}: no such plan file"
    bad = tmp_path / "bad.json"
    bad.write_text("{nodes")
    with pytest.raises(PlanError, match=rf"^{bad}: not a readable JSON plan \(Expecting property name"):
        load_plan(bad)
    with pytest.raises(PlanError, match=rf"^{tmp_path}: not a readable JSON plan \("):
        load_plan(tmp_path)  # a directory
    empty = tmp_path / "empty.json"
    empty.write_text("{}")
    with pytest.raises(PlanError, match=rf"^{empty}: no 'nodes' list"):
        load_plan(empty)


def test_load_plan_keeps_the_uids_given() -> None:
    fx = fixture_named("2.3.0-prod")
    uids = {"parse": "parse-uid"}
    topology = load_plan(fx.root / "plan.json", uids)
    assert topology.uids == uids and topology.uids is not uids
    assert load_plan(fx.root / "plan.json").uids == {}


def test_a_uid_map_file(tmp_path: Path) -> None:
    """``{"operator name": "uid"}``; entries left empty (the template's) say nothing; anything else is refused
    naming the file."""
    path = tmp_path / "uids.json"
    path.write_text(json.dumps({"parse": "p-1", "enrich": "", "Source: events": "events-src"}))
    assert load_uid_map(path) == {"parse": "p-1", "Source: events": "events-src"}
    with pytest.raises(PlanError) as err:
        load_uid_map(tmp_path / "gone.json")
    assert str(err.value) == f"{tmp_path / 'gone.json'}: no such uid-map file"
    path.write_text("[")
    with pytest.raises(PlanError, match=rf"^{path}: not a readable JSON uid map \("):
        load_uid_map(path)
    for doc in (["parse", "p-1"], {"parse": 1}, {"parse": None}):
        path.write_text(json.dumps(doc))
        with pytest.raises(PlanError) as err:
            load_uid_map(path)
        assert str(err.value) == f'{path}: a uid map is a JSON object {{"operator name": "uid", …}}'


# Jobs that set no chaining control (no startNewChain / disableChaining / slot sharing groups; the README of the
# generator): Flink chained them by its defaults, which the plan alone must reproduce before any evidence.
DEFAULT_CHAINED = [
    f
    for f in all_fixtures()
    if (f.root / "ids.json").exists()
    and (f.root / "plan.json").exists()
    and not f.info["scenario"].startswith(("prod", "finished", "sql", "shapes"))
]


@pytest.mark.parametrize("fx", [pytest.param(f, id=f.name) for f in DEFAULT_CHAINED])
def test_a_stream_graph_plan_alone_chains_as_flinks_defaults_do(fx: Fixture) -> None:
    """Before any binding, a stream-graph plan's vertices are Flink's job vertices (ids.json) — every FORWARD edge
    between equal parallelisms with one output and one input chained, nothing else — each named head first, with
    the plan's parallelism and the node ids of its operators."""
    ids = _ids(fx)
    doc = json.loads((fx.root / "plan.json").read_text())
    plan_id = {n["type"]: n["id"] for n in doc["nodes"]}
    name_of = {n["operator_id"]: n["name"] for n in ids["stream_nodes"]}
    expected = {}
    for v in ids["vertices"]:
        chain = [name_of[i] for i in reversed(v["operator_ids"])]
        expected[str(plan_id[chain[0]])] = (tuple(chain), tuple(plan_id[c] for c in chain), v["parallelism"])
    topology = parse_plan(doc)
    assert topology.flavour == "stream-graph" and topology.stream_graph is not None and topology.job_graph is None
    assert {k: (v.names, v.node_ids, v.parallelism) for k, v in topology.vertices.items()} == expected
    vertex_of = {
        plan_id[name_of[i]]: str(plan_id[name_of[v["id"]]]) for v in ids["vertices"] for i in v["operator_ids"]
    }
    by_type = {n["id"]: n for n in doc["nodes"]}
    expected_edges = sorted(
        (vertex_of[p["id"]], vertex_of[n["id"]], p["ship_strategy"])
        for n in doc["nodes"]
        for p in n.get("predecessors", [])
        if vertex_of[p["id"]] != vertex_of[n["id"]]
    )
    assert sorted((e.upstream, e.downstream, e.ship_strategy) for e in topology.edges()) == expected_edges
    assert by_type  # every node listed once
    for v in topology.vertices.values():
        assert sorted(e.gate for e in v.inputs) == list(range(len(v.inputs)))


def test_an_operator_chains_every_forward_output_as_flink_did() -> None:
    """Flink's chaining does not count an operator's outputs: in the finished job's mixed-chain variant pmap feeds
    psink and bsink over FORWARD edges of equal parallelism, and Flink's job graph (the variant's jobgraph.json,
    and its refusal naming the vertex ``Source: pseq -> pmap -> (psink: Writer, bsink: Writer)``) has all four in
    one vertex. The stream-graph plan alone gives that vertex too."""
    root = fixture_named("2.3.0-finished").root.parent / "finished-variants" / "2.3.0" / "mixed-chain"
    flink = json.loads((root / "jobgraph.json").read_text())
    pseq = next(n for n in flink["nodes"] if n["description"].startswith("Source: pseq"))
    assert (
        "Source: pseq -> pmap -> (psink: Writer, bsink: Writer)"
        in json.loads((root / "flink.json").read_text())["error"]
    )
    flink_names = parse_plan(flink).vertices[pseq["id"]].names
    assert flink_names == ("Source: pseq", "pmap", "psink: Writer", "bsink: Writer")
    stream = parse_plan(json.loads((root / "plan.json").read_text()))
    assert [v.names for v in stream.vertices.values() if v.names[0] == "Source: pseq"] == [flink_names]


def test_a_sql_plans_vertices_are_named_by_their_descriptions_in_both_flavours() -> None:
    """Flink's SQL operators carry a short name (``type``) and a description (``contents`` in the stream-graph
    plan, the job-graph plan's ``description``): vertices show the description in both flavours, alike."""
    fx = fixture_named("2.3.0-sql")
    stream = json.loads((fx.root / "plan.json").read_text())
    assert any(n["contents"] != n["type"] for n in stream["nodes"])
    by_stream = sorted(v.names for v in parse_plan(stream).vertices.values())
    assert by_stream == sorted(v.names for v in load_plan(fx.root / "jobgraph.json").vertices.values())
    assert {name for names in by_stream for name in names} == {n["contents"] for n in stream["nodes"]}


def test_an_edge_without_a_ship_strategy_says_nothing_rather_than_none() -> None:
    doc = _streamgraph()
    node = next(n for n in doc["nodes"] if n.get("predecessors"))
    del node["predecessors"][0]["ship_strategy"]
    topology = parse_plan(doc)
    edge = next(e for e in topology.edges() if e.downstream == str(node["id"]))
    assert edge.ship_strategy == "" and not edge.all_to_all
    jobs = _jobgraph()
    vertex = next(n for n in jobs["nodes"] if n.get("inputs"))
    del vertex["inputs"][0]["ship_strategy"]
    edge = next(e for e in parse_plan(jobs).edges() if e.downstream == vertex["id"])
    assert edge.ship_strategy == ""


def test_a_job_graph_input_arrives_on_the_gate_its_num_names() -> None:
    """``inputs[].num`` is the input gate (Flink's JsonPlanGenerator writes the edge's input number): slow-count's
    two inputs listed in the other order keep their gates — events on 0, rules on 1 (ids.json: type numbers 1
    and 2 of the two-input operator)."""
    fx = fixture_named("2.3.0-prod")
    ids = _ids(fx)
    vertex_of = {n["id"]: n["vertex_id"] for n in ids["stream_nodes"]}
    gate_of = {vertex_of[e["source"]]: e["type_number"] - 1 for e in ids["stream_edges"] if e["type_number"] > 0}
    doc = _jobgraph()
    node = next(n for n in doc["nodes"] if len(n.get("inputs", [])) == 2)
    node["inputs"].reverse()
    gates = {e.upstream: e.gate for e in parse_plan(doc).vertices[node["id"]].inputs}
    assert gates == gate_of and sorted(gates.values()) == [0, 1]


@pytest.mark.parametrize("flavour", ["job", "stream"])
def test_a_parallelism_of_one_is_a_plan(flavour: str) -> None:
    """A job at parallelism 1 (the smallest Flink runs) is a valid plan."""
    doc, nid = _set(flavour, "parallelism", 1)
    key = nid if flavour == "job" else str(nid)
    assert parse_plan(doc).vertices[key].parallelism == 1


def test_a_v6_checkpoint_binds_operators_without_uid_by_the_names_flink_stored() -> None:
    """2.3.0-no-uid: Flink 2.3 stores every operator's name (oracle.json) and no uid; the plan's operators bind by
    those names, each to Flink's id (ids.json)."""
    fx = fixture_named("2.3.0-no-uid")
    cp = _checkpoint(fx)
    stored = {o["operator_id"]: (o["name"], o["uid"]) for o in json.loads(fx.oracle.read_text())["operators"]}
    assert all(uid is None for _, uid in stored.values())
    flink = {n["name"]: n["operator_id"] for n in _ids(fx)["stream_nodes"]}
    binding = bind_job(load_plan(fx.root / "plan.json"), cp).operators
    assert binding is not None
    assert {b.name: (b.operator_id, b.method) for b in binding.operators} == {
        name: (i, "stored-name") for name, i in flink.items()
    }


def test_an_edge_no_evidence_decides_says_so() -> None:
    """2.3.0-prod's stream-graph plan: the FORWARD edges Flink's rules would chain but the checkpoint does not
    decide are UNKNOWN, each with the reason that says what is missing."""
    fx = fixture_named("2.3.0-prod")
    jb = bind_job(load_plan(fx.root / "plan.json"), _checkpoint(fx))
    unknown = [k for k, state in jb.edges.items() if state == "unknown"]
    assert unknown and jb.uncertain_edges() == unknown
    assert {jb.edge_reasons[k] for k in unknown} == {
        "the plan does not show whether Flink chained it, and nothing in the checkpoint decides"
    }
