"""The two plan views of the job's own graph (``JobIds.job_graph`` and ``JobIds.stream_plan``) and the document's
field rules, against what Flink wrote: each fixture's ids.json (Flink's StreamGraph and JobGraph, read while the
checkpoint was made) and jobgraph.json (Flink's own job-graph plan of the same job)."""

from __future__ import annotations

import copy
import json
from typing import Any

import pytest
from support.fixtures import Fixture, all_fixtures, fixture_named

from spillway.flink.job_ids import parse_job_ids
from spillway.flink.stream_graph import JobVertexPlan, parse_job_graph_plan

# SQL jobs: jobgraph.json labels an operator by its long description, ids.json by its name; the shapes jobs'
# jobgraph.json is read by another engineer's fix (vertex ids of the writer's chain)
_PLAIN = [
    pytest.param(f, id=f.name)
    for f in all_fixtures()
    if (f.root / "jobgraph.json").exists() and not f.name.endswith(("-sql", "-shapes", "-shapes-no-uid"))
]


def _ids(name: str) -> dict[str, Any]:
    return json.loads((fixture_named(name).root / "ids.json").read_text())


def _shape(v: JobVertexPlan) -> tuple[object, ...]:
    return (v.operators, v.parents, tuple((i.source, i.num, i.ship_strategy) for i in v.inputs), v.parallelism)


def test_every_fixture_with_flinks_job_graph_is_here() -> None:
    assert len(_PLAIN) >= 40


@pytest.mark.parametrize("fixture", _PLAIN)
def test_the_job_graph_view_is_flinks_job_graph_plan(fixture: Fixture) -> None:
    job = parse_job_ids(json.loads((fixture.root / "ids.json").read_text()))
    flink = parse_job_graph_plan(json.loads((fixture.root / "jobgraph.json").read_text()))
    mine = job.job_graph()
    # operators head first with their chain parents, the inputs' gates and partitioners, the parallelism
    assert {v.id: _shape(v) for v in mine.vertices} == {v.id: _shape(v) for v in flink.vertices}
    flinks_names = [v["name"] for v in json.loads((fixture.root / "ids.json").read_text())["vertices"]]
    assert [v.description for v in mine.vertices] == flinks_names


def test_the_stream_plan_view_is_the_graph_flink_built() -> None:
    flink = _ids("1.20.3-shapes")  # Flink's descriptions: a window's differs from its name
    plan = parse_job_ids(flink).stream_plan()
    by_id = {n["id"]: n for n in flink["stream_nodes"]}
    targets = {e["target"] for e in flink["stream_edges"]}
    assert sorted(n["id"] for n in plan["nodes"]) == sorted(by_id)
    for node in plan["nodes"]:
        raw = by_id[node["id"]]
        assert (node["type"], node["contents"], node["parallelism"]) == (
            raw["name"],
            raw["description"],
            raw["parallelism"],
        )
        assert node["pact"] == ("Operator" if node["id"] in targets else "Data Source")
        assert [(p["id"], p["ship_strategy"]) for p in node["predecessors"]] == [
            (e["source"], e["partitioner"]) for e in flink["stream_edges"] if e["target"] == node["id"]
        ]
    # topological: every node after its inputs, and the sources (no inputs) in node-id order first
    order = [n["id"] for n in plan["nodes"]]
    sources = sorted(i for i in by_id if i not in targets)
    assert order[: len(sources)] == sources
    for e in flink["stream_edges"]:
        assert order.index(e["source"]) < order.index(e["target"])


def test_a_node_without_description_shows_its_name_as_contents() -> None:
    doc = copy.deepcopy(_ids("1.20.3-prod-no-uid"))
    for n in doc["stream_nodes"]:
        n.pop("description", None)
    plan = parse_job_ids(doc).stream_plan()
    names = {n["id"]: n["name"] for n in doc["stream_nodes"]}
    assert all(node["contents"] == names[node["id"]] for node in plan["nodes"])


def test_a_cycle_is_named() -> None:
    doc = copy.deepcopy(_ids("1.20.3-prod-no-uid"))
    first = doc["stream_edges"][0]
    doc["stream_edges"].append({"source": first["target"], "target": first["source"], "partitioner": "FORWARD"})
    job = parse_job_ids(doc)
    with pytest.raises(ValueError, match=r"^stream_edges: a cycle through stream nodes \["):
        job.stream_plan()


def test_every_node_and_vertex_field_as_flink_wrote_it() -> None:
    flink = _ids("1.20.3-prod")
    job = parse_job_ids(flink)
    assert (job.release, job.max_parallelism, job.entry_class, job.job_name) == ("1.20.3", None, None, None)
    raw_vertex = {o: v for v in flink["vertices"] for o in v["operator_ids"]}
    for raw, node in zip(flink["stream_nodes"], job.nodes, strict=True):
        assert (node.node_id, node.name, node.uid, node.operator_id, node.vertex_id, node.parallelism) == (
            raw["id"],
            raw["name"],
            raw["uid"],
            raw["operator_id"],
            raw["vertex_id"],
            raw["parallelism"],
        )
        assert node.max_parallelism is None  # -1: not set on the operator
        assert node.vertex_id == raw_vertex[node.operator_id]["id"]
        assert job.node(raw["id"]) is node
        g = job.graph.node(raw["id"])
        assert (g.operator_id, g.vertex_id, g.uid, g.description, g.chaining_strategy, g.slot_sharing_group) == (
            raw["operator_id"],
            raw["vertex_id"],
            raw["uid"],
            raw.get("description"),
            raw["chaining_strategy"],
            raw["slot_sharing_group"],
        )
    for raw, v in zip(flink["vertices"], job.vertices, strict=True):
        assert (v.id, v.name, v.parallelism, v.max_parallelism) == (raw["id"], raw["name"], raw["parallelism"], None)
        assert v.user_defined_operator_ids == (None,) * len(raw["operator_ids"])
    assert job.graph.chaining_enabled is True
    sources = {n.id for n in job.graph.nodes if n.is_source}
    assert sources == {n["id"] for n in flink["stream_nodes"]} - {e["target"] for e in flink["stream_edges"]}


def test_the_helpers_extra_fields_are_read() -> None:
    doc = copy.deepcopy(_ids("1.20.3-prod-no-uid"))
    doc.update(release="1.20.3", entry_class="com.example.Job", job_name="counts", max_parallelism=256)
    doc["chaining_enabled"] = False
    node = doc["stream_nodes"][0]
    node.update(max_parallelism=64, chain_position=0, user_hash=node["operator_id"].upper())
    vertex = doc["vertices"][0]
    vertex["max_parallelism"] = 128
    vertex["user_defined_operator_ids"] = [o.upper() for o in vertex["operator_ids"]]
    doc["stream_edges"][0].update(type_number=3, exchange_mode="BATCH")
    job = parse_job_ids(doc)
    assert (job.entry_class, job.job_name, job.max_parallelism) == ("com.example.Job", "counts", 256)
    assert job.graph.chaining_enabled is False
    first = job.nodes[0]
    assert (first.max_parallelism, first.chain_position, first.user_hash) == (64, 0, node["operator_id"])
    assert job.graph.node(first.node_id).user_hash == node["operator_id"]
    assert job.vertices[0].max_parallelism == 128
    assert job.vertices[0].user_defined_operator_ids == tuple(reversed(vertex["operator_ids"]))
    edge = job.graph.edges[0]
    assert (edge.type_number, edge.exchange_mode) == (3, "BATCH")
    assert job.graph.edges[1].exchange_mode == "UNDEFINED"


@pytest.mark.parametrize(
    ("change", "message"),
    [
        (lambda d: d.pop("stream_nodes"), "ids: no field 'stream_nodes'"),
        (lambda d: d.pop("stream_edges"), "ids: no field 'stream_edges'"),
        (lambda d: d.update(vertices={}), "ids.vertices: {} is not a list"),
        (lambda d: d["stream_nodes"][0].update(id=True), "stream_nodes[0].id: True is not a int"),
        (lambda d: d["stream_nodes"][0].pop("name"), "stream_nodes[0]: no field 'name'"),
        (lambda d: d["stream_nodes"][0].update(uid=7), "stream_nodes[0].uid: 7 is not a string"),
        (lambda d: d["stream_nodes"][0].update(user_hash="zz"), "stream_nodes[0].user_hash: 'zz' is not"),
        (lambda d: d["stream_edges"][1].update(partitioner=None), "stream_edges[1].partitioner: None is not a str"),
        (lambda d: d["vertices"][0].update(parallelism="2"), "vertices[0].parallelism: '2' is not a int"),
        (lambda d: d["vertices"][0]["operator_ids"].append("x"), "vertices[0].operator_ids: 'x' is not an operator id"),
        (lambda d: d.update(entry_class=3), "ids.entry_class: 3 is not a string"),
    ],
)
def test_each_bad_field_is_named_exactly(change, message: str) -> None:  # type: ignore[no-untyped-def]
    doc = copy.deepcopy(_ids("1.20.3-prod"))
    change(doc)
    with pytest.raises(ValueError) as err:
        parse_job_ids(doc)
    assert str(err.value).startswith(message)


def test_a_node_in_no_vertex_and_a_document_that_is_not_an_object() -> None:
    doc = copy.deepcopy(_ids("1.20.3-prod"))
    node = doc["stream_nodes"][0]
    node.pop("vertex_id")
    parse_job_ids(doc)  # the vertex that lists its operator id says where it is
    for v in doc["vertices"]:
        v["operator_ids"] = [o for o in v["operator_ids"] if o != node["operator_id"]]
    with pytest.raises(ValueError, match=rf"^stream_nodes\[0\]: operator {node['operator_id']} is in no job vertex$"):
        parse_job_ids(doc)
    with pytest.raises(ValueError, match=r"^the job's ids: not a JSON object$"):
        parse_job_ids([])
    with pytest.raises(ValueError, match=r"^vertices\[0\]: no field 'id'$"):
        parse_job_ids({"vertices": ["x"]})


def test_max_parallelism_counts_only_when_set() -> None:
    for value, read in ((0, None), (-1, None), (True, None), ("128", None), (1, 1), (32768, 32768)):
        doc = copy.deepcopy(_ids("1.20.3-prod"))
        doc["max_parallelism"] = value
        assert parse_job_ids(doc).max_parallelism == read, value


@pytest.mark.parametrize(
    ("change", "message"),
    [
        (lambda d: d["vertices"][0].update(id="zz"), "vertices[0].id: 'zz' is not an operator id"),
        (lambda d: d["vertices"][0].update(operator_ids="x"), "vertices[0].operator_ids: 'x' is not a list"),
        (lambda d: d["vertices"][0].update(user_defined_operator_ids=["zz"]), "vertices[0]: 'zz' is not an operator"),
        (lambda d: d["stream_nodes"][0].update(description=3), "stream_nodes[0].description: 3 is not a string"),
        (lambda d: d["stream_nodes"][0].update(chaining_strategy=3), "stream_nodes[0].chaining_strategy: 3 is not"),
        (lambda d: d["stream_nodes"][0].update(slot_sharing_group=3), "stream_nodes[0].slot_sharing_group: 3 is not"),
        (lambda d: d["stream_edges"][0].update(source="1"), "stream_edges[0].source: '1' is not a int"),
        (lambda d: d["stream_edges"][0].update(target="2"), "stream_edges[0].target: '2' is not a int"),
        (lambda d: d.update(job_name=3), "ids.job_name: 3 is not a string"),
    ],
)
def test_each_optional_field_of_the_wrong_kind_is_named(change, message: str) -> None:  # type: ignore[no-untyped-def]
    doc = copy.deepcopy(_ids("1.20.3-prod"))
    change(doc)
    with pytest.raises(ValueError) as err:
        parse_job_ids(doc)
    assert str(err.value).startswith(message)


def test_what_a_document_leaves_out_has_its_default() -> None:
    """A fixture's ids.json lacks the helper's extra fields; an older helper may leave out more."""
    doc = copy.deepcopy(_ids("1.20.3-prod"))
    for key in ("release", "chaining_enabled"):
        doc.pop(key, None)
    doc["job_name"] = "counts"
    for v in doc["vertices"]:
        v.pop("name")
        v.pop("user_defined_operator_ids", None)
    for e in doc["stream_edges"]:
        e.pop("type_number", None)
    node = doc["stream_nodes"][0]
    node["max_parallelism"] = 64
    job = parse_job_ids(doc)
    assert (job.release, job.graph.chaining_enabled) == ("", True)
    assert all(v.name == "" and set(v.user_defined_operator_ids) == {None} for v in job.vertices)
    assert {e.type_number for e in job.graph.edges} == {0}
    assert job.graph.node(node["id"]).max_parallelism == 64
    assert job.job_graph().name == "counts"
    # a node that names its vertex needs no vertex listing it
    for v in doc["vertices"]:
        v["operator_ids"] = [o for o in v["operator_ids"] if o != node["operator_id"]] or v["operator_ids"]
    assert parse_job_ids(doc).nodes[0].vertex_id == node["vertex_id"]
