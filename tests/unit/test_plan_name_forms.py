"""Names where a plan operator is meant (``--uid``, ``-p``, ``--operator``): every name Flink's plans show for it,
a shared name refused with the form that picks one. The plans are Flink's own (``getExecutionPlan()`` as plan.json,
the job-graph plan as jobgraph.json); node ids, vertex ids and names below are read from those files."""

from __future__ import annotations

import json

import pytest
from support.fixtures import fixture_named

from spillway.errors import UsageError
from spillway.inspect.plan_names import (
    PlanNode,
    check_uid_names,
    job_ref,
    plan_nodes,
    resolve_node,
    split_ref,
    vertex_nodes,
)
from spillway.inspect.topology import Topology, Vertex, load_plan


def _plan(fixture: str, name: str = "plan.json") -> Topology:
    return load_plan(fixture_named(fixture).root / name)


def _flink_nodes(fixture: str) -> list[dict]:  # type: ignore[type-arg]
    return list(json.loads((fixture_named(fixture).root / "plan.json").read_text())["nodes"])


def _refs(nodes: list[PlanNode]) -> list[str]:
    return [n.ref for n in nodes]


# 1.20.3-shapes: default names; Flink's plan numbers the six Map operators 2, 8, 13, 18, 23, 30
SHAPES = "1.20.3-shapes"


def _maps() -> list[str]:
    return [f"#{n['id']}" for n in _flink_nodes(SHAPES) if n["type"] == "Map"]


@pytest.mark.parametrize(
    ("text", "split"),
    [
        ("Map#7", ("Map", "#7")),
        ("#7", ("", "#7")),
        ("#CBC357CC.1", ("", "#cbc357cc.1")),
        ("parse#cbc357cc", ("parse", "#cbc357cc")),
        ("#cbc357ccb763df2852fee8c4fc7d55f2", ("", "#cbc357ccb763df2852fee8c4fc7d55f2")),
        ("#cbc357ccb763df2852fee8c4fc7d55f2.2", ("", "#cbc357ccb763df2852fee8c4fc7d55f2.2")),
        ("a#b#12", ("a#b", "#12")),
        ("Sink#Writer", ("Sink#Writer", None)),
        ("x#cbc357c", ("x#cbc357c", None)),  # seven hex digits: part of the name
        ("x#cbc357ccb", ("x#cbc357ccb", None)),  # nine
        ("x#12a", ("x#12a", None)),
        ("x#7.1", ("x#7.1", None)),  # a position needs a vertex id
        ("x#cbc357cc.", ("x#cbc357cc.", None)),
        ("x#", ("x#", None)),
        ("no ref", ("no ref", None)),
    ],
)
def test_split_ref(text: str, split: tuple[str, str | None]) -> None:
    assert split_ref(text) == split


def test_job_ref_and_picked() -> None:
    assert job_ref("cbc357ccb763df2852fee8c4fc7d55f2", 1) == "#cbc357cc.1"
    assert PlanNode("#7", "7", "dedup", frozenset({"dedup"})).picked() == "dedup#7"


def test_stream_plan_nodes_are_flinks_nodes_with_their_vertex() -> None:
    nodes = plan_nodes(_plan(SHAPES))
    flink = _flink_nodes(SHAPES)
    assert sorted(n.ref for n in nodes) == sorted(f"#{n['id']}" for n in flink)
    by_ref = {n.ref: n for n in nodes}
    for raw in flink:
        node = by_ref[f"#{raw['id']}"]
        assert node.name == raw["type"]
        assert {raw["type"], raw["contents"]} == set(node.names)
    # Flink chained Source: events -> Map -> Timestamps/Watermarks -> Filter (ids 1-4): one vertex, keyed by its head
    assert {by_ref[f"#{i}"].vertex for i in (1, 2, 3, 4)} == {"1"}
    assert by_ref["#7"].vertex == "7"


def test_a_shared_default_name_names_every_node_and_a_ref_picks_one() -> None:
    plan = _plan(SHAPES)
    maps = _maps()
    assert len(maps) == 6
    assert _refs(resolve_node(plan, "Map")) == maps
    assert _refs(resolve_node(plan, f"Map{maps[1]}")) == [maps[1]]
    assert _refs(resolve_node(plan, maps[1])) == [maps[1]]
    assert resolve_node(plan, f"Filter{maps[1]}") == []  # the ref is a Map
    assert resolve_node(plan, "#999") == []
    assert resolve_node(plan, "map") == []  # names are exact


def test_a_windows_description_is_a_name_too() -> None:
    plan = _plan(SHAPES)
    (window,) = [n for n in _flink_nodes(SHAPES) if n["type"] != n["contents"]]
    assert _refs(resolve_node(plan, window["contents"])) == [f"#{window['id']}"]
    assert _refs(resolve_node(plan, window["type"])) == [f"#{window['id']}"]


def test_sqls_simplified_kind_n_names_the_operator() -> None:
    plan = _plan("1.20.3-sql")
    flink = {n["id"]: n for n in _flink_nodes("1.20.3-sql")}
    # Flink's plan: [3]:GroupAggregate(...) as node 3's contents; its UI shows GroupAggregate[3]
    assert flink[3]["contents"].startswith("[3]:GroupAggregate(")
    assert _refs(resolve_node(plan, "GroupAggregate[3]")) == ["#3"]
    assert _refs(resolve_node(plan, flink[3]["contents"])) == ["#3"]
    assert _refs(resolve_node(plan, "TableSourceScan[1]")) == ["#1"]
    assert resolve_node(plan, "GroupAggregate[4]") == []
    # GroupAggregate and Calc are one chain (Flink's vertex 3): both name that vertex
    assert vertex_nodes(plan, "GroupAggregate[3]") == {"3"}
    assert vertex_nodes(plan, "Calc[4]") == {"3"}
    assert vertex_nodes(plan, "Calc") is None


def test_job_graph_nodes_are_picked_by_vertex_and_position() -> None:
    root = fixture_named("1.20.3-prod-no-uid").root
    plan = load_plan(root / "jobgraph.json")
    flink = json.loads((root / "jobgraph.json").read_text())
    nodes = plan_nodes(plan)
    expected = []
    for v in flink["nodes"]:
        for pos, label in enumerate(_labels(plan, v["id"])):
            expected.append((job_ref(v["id"], pos), v["id"], label))
    assert [(n.ref, n.vertex, n.name) for n in nodes] == expected
    (events,) = [v["id"] for v in flink["nodes"] if _labels(plan, v["id"])[0] == "Source: events"]
    # the chain Source: events -> parse -> timestamps, head first
    assert [n.name for n in resolve_node(plan, f"#{events[:8]}.1")] == ["parse"]
    assert [n.name for n in resolve_node(plan, f"#{events}")] == ["Source: events"]  # the full id: the head
    assert [n.name for n in resolve_node(plan, f"#{events}.2")] == ["timestamps"]
    assert [n.name for n in resolve_node(plan, f"parse#{events}.1")] == ["parse"]
    assert resolve_node(plan, f"#{events[:8]}") == []  # eight digits pick nothing without a position
    assert resolve_node(plan, f"#{events}.3") == []
    other = "0" * 8 + events[8:]
    assert resolve_node(plan, f"#{other}.1") == []
    assert vertex_nodes(plan, "timestamps") == {events}


def _labels(plan: Topology, vertex_id: str) -> list[str]:
    assert plan.job_graph is not None
    (jv,) = [v for v in plan.job_graph.vertices if v.id == vertex_id]
    return list(jv.operators)


def test_a_name_of_several_vertices_is_refused_with_the_form_that_picks_one() -> None:
    plan = _plan(SHAPES)
    maps = _maps()
    by_ref = {n.ref: n for n in plan_nodes(plan)}
    listed = ", ".join(f"Map{r} (vertex {by_ref[r].vertex})" for r in maps)
    with pytest.raises(UsageError) as err:
        vertex_nodes(plan, "Map")
    assert str(err.value) == (
        f"'Map' names more than one operator of the plan: {listed}; "
        f"pick one by its plan node, e.g. -p 'Map{maps[-1]}=N'"
    )
    assert vertex_nodes(plan, f"Map{maps[0]}") == {by_ref[maps[0]].vertex}
    assert vertex_nodes(plan, "dedup") == {"7"}
    assert vertex_nodes(plan, "no such operator") is None


def test_uid_names_refuse_a_shared_name_and_a_ref_that_matches_nothing() -> None:
    plan = _plan(SHAPES)
    maps = _maps()
    check_uid_names(plan, {"dedup": "dedup-v2", f"Map{maps[2]}": "m", "#7": "d", "not in the plan": "x"})
    with pytest.raises(UsageError) as err:
        check_uid_names(plan, {"dedup": "dedup-v2", "KeyedProcess": "join-state"})
    keyed = [f"#{n['id']}" for n in _flink_nodes(SHAPES) if n["type"] == "KeyedProcess"]
    assert len(keyed) == 3
    assert str(err.value).startswith("'KeyedProcess' names more than one operator of the plan: KeyedProcess#")
    assert str(err.value).endswith(f"e.g. --uid 'KeyedProcess{keyed[-1]}=join-state'")
    with pytest.raises(UsageError) as err:
        check_uid_names(plan, {"Map#999": "m"})
    known = ", ".join(n.picked() for n in plan_nodes(plan))
    assert str(err.value) == f"--uid 'Map#999': no plan operator is Map#999; the plan's operators: {known}"
    with pytest.raises(UsageError, match="no plan operator is Filter#7"):
        check_uid_names(plan, {"Filter#7": "f"})


def test_a_name_on_exactly_two_vertices_is_refused_too() -> None:
    plan = _plan(SHAPES)
    filters = [f"#{n['id']}" for n in _flink_nodes(SHAPES) if n["type"] == "Filter"]
    assert len(filters) == 2  # Flink's plan: one Filter in each of two source chains
    with pytest.raises(UsageError, match=rf"e\.g\. -p 'Filter{filters[-1]}=N'$"):
        vertex_nodes(plan, "Filter")
    with pytest.raises(UsageError, match=rf"e\.g\. --uid 'Filter{filters[-1]}=f'$"):
        check_uid_names(plan, {"Filter": "f"})


def test_a_plan_of_vertices_only_names_them_by_key_and_position() -> None:
    """A topology with neither of Flink's graphs (built from vertices alone): each operator is ``#KEY.POS``."""
    plan = Topology(
        {"a": Vertex("a", ["Source: x", "[2]:Calc(select=[k])"], 2), "b": Vertex("b", ["Sink: y"], 1)}, "job-graph"
    )
    nodes = plan_nodes(plan)
    assert [(n.ref, n.vertex, n.name) for n in nodes] == [
        ("#a.0", "a", "Source: x"),
        ("#a.1", "a", "[2]:Calc(select=[k])"),
        ("#b.0", "b", "Sink: y"),
    ]
    assert nodes[1].names == frozenset({"[2]:Calc(select=[k])", "Calc[2]"})
    assert vertex_nodes(plan, "Calc[2]") == {"a"}
    assert vertex_nodes(plan, "Sink: y") == {"b"}


@pytest.mark.parametrize("fixture", ["1.14.6-shapes", "1.20.3-prod-no-uid", "2.3.0-sql"])
def test_every_operator_flinks_job_graph_plan_labels_is_found_by_that_label(fixture: str) -> None:
    """1.14.6-shapes: Flink describes the window's chain with a nested ``(Sink: Unnamed, Map)``; whatever the
    vertex's names, each chained operator's own label names it."""
    plan = _plan(fixture, "jobgraph.json")
    assert plan.job_graph is not None
    for jv in plan.job_graph.vertices:
        for pos, label in enumerate(jv.operators):
            assert job_ref(jv.id, pos) in _refs(resolve_node(plan, label)), (jv.id, pos, label)
