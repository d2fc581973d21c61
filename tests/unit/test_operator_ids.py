"""Operator ids computed as Flink computes them (spillway/flink/operator_ids.py).

Expected ids come from Flink only: ``ids.json`` (Flink's own id for every stream node, its job vertices and
their operator lists), ``oracle.json`` (Flink's decode of ``_metadata``: every operator id in the checkpoint),
``jobgraph.json`` (vertex id = head operator id) and the uid table of spec 11.4. Rule tests on synthetic graphs
check the per-release chaining predicate read from the release jars (docs/format/operator-ids.md).
"""

from __future__ import annotations

import itertools
import json
from collections import Counter
from pathlib import Path
from typing import Any

import pytest

from spillway.flink.chaining import (
    RELEASE_RULES,
    edge_chainable,
    hasher_rules,
    infer_chains,
    release_for_format_version,
    vertex_operator_order,
)
from spillway.flink.operator_ids import (
    DETERMINISTIC_HASH,
    ELIMINATION,
    STORED_NAME,
    UID_HASH,
    UNBOUND,
    VERTEX_ID,
    Binding,
    BoundOperator,
    _align,
    bind,
    chained_edges_from_job_graph,
    deterministic_ids,
    uid_candidates,
    uid_hash,
)
from spillway.flink.stream_graph import (
    JobGraphPlan,
    StreamEdge,
    StreamGraph,
    StreamNode,
    parse_job_graph_plan,
    parse_stream_plan,
    split_description,
)
from spillway.inspect.topology import operator_facts, stores_stateless
from spillway.storage.load import load_checkpoint

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures"
IDS = sorted(FIXTURES.glob("*/ids.json"))
WITH_PLANS = sorted(p.parent for p in FIXTURES.glob("*/plan.json") if (p.parent / "jobgraph.json").exists())
#: Jobs without any uid: every id is StreamGraphHasherV2's generated hash.
NO_UID = ["1.15.4-no-uid", "1.20.3-no-uid", "1.20.3-sql", "2.3.0-no-uid", "2.3.0-sql"]


def _json(path: Path) -> Any:
    return json.loads(path.read_text())


def _ids_graph(doc: dict[str, Any]) -> StreamGraph:
    """The stream graph ids.json describes (Flink's own nodes, with uid, strategy, slot sharing group)."""
    nodes = tuple(
        StreamNode(
            id=n["id"],
            name=n["name"],
            parallelism=n["parallelism"],
            uid=n["uid"],
            max_parallelism=n["max_parallelism"],
            chaining_strategy=n["chaining_strategy"],
            slot_sharing_group=n["slot_sharing_group"],
        )
        for n in doc["stream_nodes"]
    )
    edges = tuple(StreamEdge(e["source"], e["target"], e["partitioner"], e["type_number"]) for e in doc["stream_edges"])
    return StreamGraph(nodes, edges, chaining_enabled=doc["chaining_enabled"])


def _oracle_ids(fixture: Path) -> list[str]:
    return [op["operator_id"] for op in _json(fixture / "oracle.json")["operators"]]


def _release(fixture: Path) -> str:
    return str(_json(fixture / "fixture.json")["release"])


# ------------------------------------------------------------------------------------------------ uid hash


@pytest.mark.parametrize(
    ("uid", "expected"),
    [
        ("src", "f362c87ffabe89c8a91fa7d0a523ba6c"),
        ("tostr", "d8cec9b362de91fa6281b2882b1d6f93"),
        ("slow", "59fa767824610e31f4a11d6125e09bf4"),
        ("len", "5f6c9c3c8fdcc0939e6c1d0276e97ad0"),
        ("sink", "2e588ce1c86a9d46e2e85186773ce4fd"),
        ("a-very-long-operator-uid-string", "fd4c9b2c538e02d96cd0ec376230e3ad"),
    ],
)
def test_uid_hash_matches_spec_table(uid: str, expected: str) -> None:
    assert uid_hash(uid) == expected


def test_uid_hash_is_utf8_and_lowercase_hex() -> None:
    h = uid_hash("zählen")
    assert len(h) == 32 and h == h.lower()
    assert h != uid_hash("zahlen")
    assert uid_hash("zählen") == uid_hash("z\u00e4hlen")


# --------------------------------------------------------------------------------------- ids.json (Flink's ids)


def test_ids_fixtures_present() -> None:
    assert len(IDS) >= 20, "ids.json fixtures missing"


@pytest.mark.parametrize("path", IDS, ids=[p.parent.name for p in IDS])
def test_every_stream_node_id_matches_flink(path: Path) -> None:
    doc = _json(path)
    graph = _ids_graph(doc)
    ids = deterministic_ids(graph, doc["release"])
    expected = {n["id"]: n["operator_id"] for n in doc["stream_nodes"]}
    assert ids == expected


@pytest.mark.parametrize("path", IDS, ids=[p.parent.name for p in IDS])
def test_chains_match_flink_job_vertices(path: Path) -> None:
    doc = _json(path)
    graph = _ids_graph(doc)
    release = doc["release"]
    op_id = {n["id"]: n["operator_id"] for n in doc["stream_nodes"]}
    chains = infer_chains(graph, release)
    got = {op_id[c[0]]: [op_id[n] for n in vertex_operator_order(graph, c[0], release)] for c in chains}
    want = {v["id"]: v["operator_ids"] for v in doc["vertices"]}
    assert got == want  # vertex id = head id; operators tail first, as JobVertex#getOperatorIDs
    for n in doc["stream_nodes"]:  # every node in the vertex Flink put it in
        head = next(c[0] for c in chains if n["id"] in c)
        assert op_id[head] == n["vertex_id"]


@pytest.mark.parametrize("path", IDS, ids=[p.parent.name for p in IDS])
def test_ids_json_agrees_with_checkpoint(path: Path) -> None:
    """Flink's decode of the checkpoint holds only ids Flink's job had (1.10-1.12 leave stateless ones out)."""
    fixture = path.parent
    assert set(_oracle_ids(fixture)) <= {n["operator_id"] for n in _json(path)["stream_nodes"]}


# ------------------------------------------------------------------------------- generated ids (no uid at all)


@pytest.mark.parametrize("name", NO_UID)
def test_generated_ids_from_execution_plan_alone(name: str) -> None:
    """No uid anywhere: ids from plan.json + Flink's default chaining = Flink's ids and the checkpoint's."""
    fixture = FIXTURES / name
    assert (fixture / "ids.json").exists(), f"{fixture.name}: not generated (tests/fixtures/generator)"
    doc = _json(fixture / "ids.json")
    assert all(n["uid"] is None for n in doc["stream_nodes"])
    graph = parse_stream_plan(_json(fixture / "plan.json"))
    ids = deterministic_ids(graph, _release(fixture))
    by_name = {graph.node(nid).name: h for nid, h in ids.items()}
    assert by_name == {n["name"]: n["operator_id"] for n in doc["stream_nodes"]}
    assert set(_oracle_ids(fixture)) <= set(ids.values())
    # the job graph's vertex ids are the chain heads' generated ids
    assert {v.id for v in parse_job_graph_plan(_json(fixture / "jobgraph.json")).vertices} <= set(ids.values())


@pytest.mark.parametrize("name", NO_UID)
def test_generated_ids_depend_on_chaining(name: str) -> None:
    """The hash covers each node's chainable outputs: without chaining the chain heads' ids change."""
    fixture = FIXTURES / name
    assert (fixture / "plan.json").exists(), f"{fixture.name}: not generated (tests/fixtures/generator)"
    release = _release(fixture)
    chained = deterministic_ids(parse_stream_plan(_json(fixture / "plan.json")), release)
    unchained = deterministic_ids(parse_stream_plan(_json(fixture / "plan.json"), chaining_enabled=False), release)
    assert chained != unchained
    vertices = parse_job_graph_plan(_json(fixture / "jobgraph.json")).vertices
    chain_heads = {v.id for v in vertices if len(v.operators) > 1}
    single = {v.id for v in vertices if len(v.operators) == 1 and not v.inputs}
    assert chain_heads and not chain_heads & set(unchained.values())
    assert single <= set(unchained.values())  # a lone source chains nothing either way


# ------------------------------------------------------------------------------------- plans from the fixtures


@pytest.mark.parametrize("fixture", WITH_PLANS, ids=[p.name for p in WITH_PLANS])
def test_job_graph_plan_aligns_with_stream_plan(fixture: Path) -> None:
    graph = parse_stream_plan(_json(fixture / "plan.json"))
    job = parse_job_graph_plan(_json(fixture / "jobgraph.json"))
    assert sum(len(v.operators) for v in job.vertices) == len(graph.nodes)
    chained = chained_edges_from_job_graph(graph, job)
    if chained is None:
        # refused only where the job has twin chains (the same operators, e.g. finished-symmetric's two branches):
        # which plan nodes are which vertex's is then not decided by the plan
        twins = Counter(tuple(v.operators) for v in job.vertices)
        assert max(twins.values()) > 1, fixture.name
        return
    # Each chain edge joins two nodes of one job vertex of the job that ran, and every such edge is found.
    flink_node = _flink_node_of(fixture, graph)
    vertex_of = {k: n["vertex_id"] for k, n in flink_node.items()}
    same_vertex = {(e.source, e.target) for e in graph.edges if vertex_of[e.source] == vertex_of[e.target] is not None}
    assert chained == same_vertex
    # chains from the job-graph plan's edges
    chains = infer_chains(graph, _release(fixture), chained_edges=chained)
    assert sorted(len(c) for c in chains) == sorted(len(v.operators) for v in job.vertices)


def _two_branches(second: tuple[int, str]) -> tuple[StreamGraph, JobGraphPlan]:
    """Source: s -HASH-> Map -> Sink: Unnamed, and Source: s -``second[1]``-> Map -> Sink: Unnamed at parallelism
    ``second[0]``: two chains of one label, told apart (or not) by structure alone."""
    p, ship = second
    nodes = tuple(
        StreamNode(i, name, par)
        for i, name, par in [
            (1, "Source: s", 2),
            (2, "Map", 2),
            (3, "Sink: Unnamed", 2),
            (4, "Map", p),
            (5, "Sink: Unnamed", p),
        ]
    )
    edges = (
        StreamEdge(1, 2, "HASH"),
        StreamEdge(1, 4, ship),
        StreamEdge(2, 3, "FORWARD"),
        StreamEdge(4, 5, "FORWARD"),
    )
    chain = "Map<br/>+- Sink: Unnamed<br/>"
    plan = {
        "nodes": [
            {
                "id": "b" * 32,
                "parallelism": p,
                "description": chain,
                "inputs": [{"id": "s" * 32, "num": 0, "ship_strategy": ship}],
            },
            {
                "id": "a" * 32,
                "parallelism": 2,
                "description": chain,
                "inputs": [{"id": "s" * 32, "num": 0, "ship_strategy": "HASH"}],
            },
            {"id": "s" * 32, "parallelism": 2, "description": "Source: s<br/>"},
        ]
    }
    return StreamGraph(nodes, edges), parse_job_graph_plan({"plan": plan})


@pytest.mark.parametrize("second", [(3, "HASH"), (2, "REBALANCE")], ids=["parallelism", "partitioner"])
def test_vertices_of_one_label_are_aligned_by_structure(second: tuple[int, str]) -> None:
    """Two ``Map -> Sink: Unnamed`` vertices: the parallelism or the partitioner of the edge into each decides
    which stream nodes each holds."""
    graph, job = _two_branches(second)
    assert chained_edges_from_job_graph(graph, job) == {(2, 3), (4, 5)}
    assert _align(graph, job) == {"s" * 32: [1], "a" * 32: [2, 3], "b" * 32: [4, 5]}


def test_vertices_the_structure_cannot_tell_apart_are_not_aligned() -> None:
    """Both branches alike (same parallelism, same partitioner): two placements fit, so none is claimed."""
    graph, job = _two_branches((2, "HASH"))
    assert _align(graph, job) is None
    assert chained_edges_from_job_graph(graph, job) is None


def test_a_vertex_whose_chain_is_not_in_the_graph_is_not_aligned() -> None:
    """A chained node fed by a second edge cannot be a chain member (Flink chains a node of one input only)."""
    graph, job = _two_branches((3, "HASH"))
    extra = StreamGraph(graph.nodes, (*graph.edges, StreamEdge(2, 5, "FORWARD")))
    assert _align(extra, job) is None


@pytest.mark.parametrize("fixture", WITH_PLANS, ids=[p.name for p in WITH_PLANS])
def test_ids_from_plan_with_known_uids(fixture: Path) -> None:
    """plan.json + job graph chains + the job's uids and out-edge order (from ids.json) -> Flink's ids. The plan
    does not print the out-edge order, and a Sink V2 writer's renumbered id hides it (its edge comes first in the
    job, last by plan id), so it is taken from the job; the hash of a node without uid depends on it."""
    assert (fixture / "ids.json").exists(), f"{fixture.name}: not generated (tests/fixtures/generator)"
    doc = _json(fixture / "ids.json")
    planned = parse_stream_plan(_json(fixture / "plan.json"))
    flink_node = _flink_node_of(fixture, planned)
    job_edge = {(e["source"], e["target"]): i for i, e in enumerate(doc["stream_edges"])}
    edges = sorted(planned.edges, key=lambda e: job_edge[flink_node[e.source]["id"], flink_node[e.target]["id"]])
    graph = StreamGraph(planned.nodes, tuple(edges))
    job = parse_job_graph_plan(_json(fixture / "jobgraph.json"))
    uids = {k: n["uid"] for k, n in flink_node.items() if n["uid"] is not None}
    ids = deterministic_ids(graph, doc["release"], uids, chained_edges=chained_edges_from_job_graph(graph, job))
    assert ids == {k: n["operator_id"] for k, n in flink_node.items()}


@pytest.mark.parametrize("fixture", WITH_PLANS, ids=[p.name for p in WITH_PLANS])
def test_vertex_ids_hold_checkpoint_operators(fixture: Path) -> None:
    job = parse_job_graph_plan(_json(fixture / "jobgraph.json"))
    ckpt = set(_oracle_ids(fixture))
    heads_in_checkpoint = [v.id for v in job.vertices if v.id in ckpt]
    assert heads_in_checkpoint, "no job vertex id found among the checkpoint's operator ids"
    for v in job.vertices:
        assert len(v.id) == 32 and v.operators and v.parents[0] is None


# ---------------------------------------------------------------------------------------------------- binding


def _expected_by_name(fixture: Path) -> dict[str, str]:
    return {n["name"]: n["operator_id"] for n in _json(fixture / "ids.json")["stream_nodes"]}


def _flink_node_of(fixture: Path, graph: StreamGraph) -> dict[int, dict[str, Any]]:
    """Plan node id -> the node of the job that ran (ids.json), by node id, not by name: names repeat (six
    ``Map``). A Sink V2 writer is the one node whose id differs (the plan draws a fresh one,
    docs/format/job-shapes.md): it pairs with the job's one node of its name the plan does not have."""
    doc = _json(fixture / "ids.json")
    nodes = doc["stream_nodes"]
    by_id = {n["id"]: n for n in nodes}
    out = {n.id: by_id[n.id] for n in graph.nodes if n.id in by_id}
    sources = {m["id"]: {e["source"] for e in doc["stream_edges"] if e["target"] == m["id"]} for m in nodes}
    for n in graph.nodes:
        if n.id not in by_id:
            # several writers of one name (twin branches): the one fed by this node's (matched) inputs
            feeding = {out[e.source]["id"] for e in graph.edges if e.target == n.id and e.source in out}
            (twin,) = [
                m
                for m in nodes
                if m["name"] == n.name and m["id"] not in {x.id for x in graph.nodes} and sources[m["id"]] == feeding
            ]
            out[n.id] = twin
    return out


def _expected_id(graph: StreamGraph, flink_node: dict[int, dict[str, Any]], b: BoundOperator) -> str:
    """Flink's id for a bound plan operator: by its stream node, or (job-graph plan) by its vertex and its label
    (a name, or the description the stream-graph plan shows)."""
    labels = {n.id: (n.name, n.description) for n in graph.nodes}
    if b.node_id is not None:
        return str(flink_node[b.node_id]["operator_id"])
    (hit,) = [
        n
        for k, n in flink_node.items()
        if n["vertex_id"] == b.vertex_id and b.name in (n["name"], n.get("description"), *labels[k])
    ]
    return str(hit["operator_id"])


BIND_FIXTURES = [p for p in WITH_PLANS if (p / "ids.json").exists() and (p / "oracle.json").exists()]


@pytest.mark.parametrize("fixture", BIND_FIXTURES, ids=[p.name for p in BIND_FIXTURES])
@pytest.mark.parametrize("mode", ["plan", "plan+jobgraph", "jobgraph"])
def test_bind_without_stored_names_is_never_wrong(fixture: Path, mode: str) -> None:
    """As with V2-V4 metadata (ids only): every id bound is Flink's id for that operator; exact bindings are
    in the checkpoint; with both plans every operator holding state is bound."""
    release = _release(fixture)
    oracle = _json(fixture / "oracle.json")
    ckpt = [op["operator_id"] for op in oracle["operators"]]
    par = {op["operator_id"]: op["parallelism"] for op in oracle["operators"]}
    graph = parse_stream_plan(_json(fixture / "plan.json"))
    job = parse_job_graph_plan(_json(fixture / "jobgraph.json"))
    # The checkpoint's own evidence (state kinds, channel placement, finished flags), as every command has it.
    cp = load_checkpoint(str(fixture / json.loads((fixture / "fixture.json").read_text())["checkpoint"])).checkpoint
    evidence = {"facts": operator_facts(cp), "absent_allowed": not stores_stateless(cp)}
    if mode == "plan":
        binding = bind(graph, ckpt, release=release, checkpoint_parallelism=par, **evidence)
    elif mode == "plan+jobgraph":
        binding = bind(graph, ckpt, release=release, job_graph=job, checkpoint_parallelism=par, **evidence)
    else:
        binding = bind(job, ckpt, release=release, checkpoint_parallelism=par, **evidence)
    flink_node = _flink_node_of(fixture, graph)
    for b in binding.operators:
        if b.operator_id is not None:
            assert b.operator_id == _expected_id(graph, flink_node, b), (b.name, b.node_id, b.method, b.reason)
        if b.exact:
            assert b.in_checkpoint and b.operator_id in ckpt
        if b.operator_id is None:  # unbound, stateless and interchangeable, or deduced to be absent
            assert b.method in (UNBOUND, "indistinct", "deduced") and not b.exact and not b.in_checkpoint
        else:
            assert b.method != UNBOUND
    if mode != "plan":
        # Every operator that holds state is bound, or left open with Flink's id among its candidates (a chained
        # operator whose name is its uid: the name is only a guess, and nothing else in the checkpoint decides).
        bound = {b.operator_id for b in binding.operators if b.in_checkpoint}
        holding = {o.operator_id for o in cp.operators if any(s.has_state() for s in o.subtasks) or o.coordinator_state}
        for h in holding - bound:
            (owner,) = [b for b in binding.operators if _expected_id(graph, flink_node, b) == h]
            assert owner.method == UNBOUND and not owner.exact, owner
            if mode == "jobgraph" and owner.position:
                # The job-graph plan alone names only chain heads' ids; a chained operator's generated id depends
                # on stream-graph positions it does not show: left open, saying what would decide it.
                assert "give its uid" in owner.reason, owner.reason
                continue
            assert h in owner.candidates, owner
            # a name guess left unconfirmed, or several assignments the evidence allows (default names repeat)
            assert "a guess the other evidence does not confirm" in owner.reason or (
                "consistent assignment(s) met" in owner.reason and len(owner.candidates) > 1
            ), owner.reason
        open_ops = [b for b in binding.operators if b.operator_id is None and b.method not in ("deduced", UNBOUND)]
        assert all(b.method == "indistinct" for b in open_ops), [(b.name, b.reason) for b in open_ops]


@pytest.mark.parametrize("name", NO_UID)
def test_bind_no_uid_jobs_exactly(name: str) -> None:
    fixture = FIXTURES / name
    assert (fixture / "oracle.json").exists(), f"{fixture.name}: not generated (tests/fixtures/generator)"
    ckpt = _oracle_ids(fixture)
    graph = parse_stream_plan(_json(fixture / "plan.json"))
    binding = bind(graph, ckpt, release=_release(fixture))
    assert all(b.method == DETERMINISTIC_HASH and b.exact for b in binding.operators)
    assert {b.name: b.operator_id for b in binding.operators} == _expected_by_name(fixture)
    # from the REST plan alone: heads by vertex id, chained operators by the hash of the rebuilt graph
    job_binding = bind(parse_job_graph_plan(_json(fixture / "jobgraph.json")), ckpt, release=_release(fixture))
    assert all(b.exact for b in job_binding.operators)
    assert {b.method for b in job_binding.operators} == {VERTEX_ID, DETERMINISTIC_HASH}
    assert not job_binding.unclaimed


def test_bind_with_stored_names() -> None:
    fixture = FIXTURES / "2.3.0-finished"
    ops = _json(fixture / "oracle.json")["operators"]
    stored = {op["operator_id"]: (op["name"], op["uid"]) for op in ops}
    graph = parse_stream_plan(_json(fixture / "plan.json"))
    binding = bind(graph, list(stored), stored=stored, release="2.3.0")
    assert all(b.method == STORED_NAME and b.exact for b in binding.operators)
    assert binding.id_of("bsink: Writer") == "e513ccc7ddc2cd22f6aaccff53e7cb36"
    assert [b.uid for b in binding.by_name("sink: Writer")] == ["sink"]


def test_bind_sql_stored_names_without_uids() -> None:
    fixture = FIXTURES / "2.3.0-sql"
    ops = _json(fixture / "oracle.json")["operators"]
    stored = {op["operator_id"]: (op["name"], op["uid"]) for op in ops}
    binding = bind(parse_stream_plan(_json(fixture / "plan.json")), list(stored), stored=stored, release="2.3.0")
    assert {b.name: b.operator_id for b in binding.operators} == _expected_by_name(fixture)
    assert all(b.method == STORED_NAME for b in binding.operators)


def test_bind_legacy_checkpoint_source_needs_uid() -> None:
    """1.10: stateless len/sink are not in the checkpoint; the source's uid 'src' is not its name."""
    fixture = FIXTURES / "1.10.3-aligned"
    ckpt = _oracle_ids(fixture)
    graph = parse_stream_plan(_json(fixture / "plan.json"))
    binding = bind(graph, ckpt, release="1.10.3")
    src = binding.by_name("Source: seq")[0]
    assert src.method == UNBOUND and "--uid 'Source: seq'=UID" in src.reason
    assert binding.unclaimed == ("f362c87ffabe89c8a91fa7d0a523ba6c",)
    tostr = binding.by_name("tostr")[0]
    assert (tostr.method, tostr.operator_id, tostr.exact) == (UID_HASH, "d8cec9b362de91fa6281b2882b1d6f93", True)
    # the user gives the uid
    fixed = bind(graph, ckpt, release="1.10.3", uid_overrides={"Source: seq": "src"})
    src = fixed.by_name("Source: seq")[0]
    assert (src.method, src.exact, src.uid) == (UID_HASH, True, "src")
    # a wrong uid is reported, not silently replaced by a guess
    wrong = bind(graph, ckpt, release="1.10.3", uid_overrides={"Source: seq": "source"})
    src = wrong.by_name("Source: seq")[0]
    assert src.method == UID_HASH and not src.in_checkpoint and not src.exact and "not in the checkpoint" in src.reason
    # with the job graph: the source heads vertex f362c87f…; len heads a vertex with no state in the checkpoint
    with_job = bind(graph, ckpt, release="1.10.3", job_graph=parse_job_graph_plan(_json(fixture / "jobgraph.json")))
    src = with_job.by_name("Source: seq")[0]
    assert (src.method, src.operator_id, src.exact) == (VERTEX_ID, "f362c87ffabe89c8a91fa7d0a523ba6c", True)
    length = with_job.by_name("len")[0]
    assert (length.method, length.in_checkpoint, length.exact) == (VERTEX_ID, False, False)
    sink = with_job.by_name("Sink: sink")[0]
    assert sink.method == UNBOUND and not with_job.unclaimed


def test_bind_elimination_is_not_exact() -> None:
    fixture = FIXTURES / "1.15.4-unaligned"
    binding = bind(parse_stream_plan(_json(fixture / "plan.json")), _oracle_ids(fixture), release="1.15.4")
    src = binding.by_name("Source: seq")[0]
    assert (src.method, src.operator_id, src.exact) == (ELIMINATION, "f362c87ffabe89c8a91fa7d0a523ba6c", False)
    sink = binding.by_name("Sink: sink")[0]
    assert (sink.method, sink.uid, sink.exact) == (UID_HASH, "sink", True)


def test_bind_two_sources_with_unknown_uids_stay_unbound() -> None:
    """Three uid'd sources whose uids are not their names: nothing structural tells them apart."""
    fixture = FIXTURES / "2.3.0-finished"
    binding = bind(parse_stream_plan(_json(fixture / "plan.json")), _oracle_ids(fixture), release="2.3.0")
    unbound = sorted(b.name for b in binding.operators if b.method == UNBOUND)
    assert unbound == ["Source: bseq", "Source: pseq", "Source: seq"]
    assert len(binding.unclaimed) == 3


def test_bind_accepts_format_version_and_rejects_bad_ids() -> None:
    fixture = FIXTURES / "2.3.0-no-uid"
    graph = parse_stream_plan(_json(fixture / "plan.json"))
    binding = bind(graph, [i.upper() for i in _oracle_ids(fixture)], format_version=3)
    assert binding.rules == "1.15-1.17" and all(b.exact for b in binding.operators)
    with pytest.raises(ValueError):
        bind(graph, ["xyz"])


def test_bind_job_graph_plan_with_several_sources_and_no_uids() -> None:
    """Internal consistency (no Flink output): ids generated for a two-source graph are recovered from its
    job-graph plan alone, although the plan does not say which source came first."""
    nodes = tuple(
        StreamNode(i, name, 2)
        for i, name in [(1, "Source: a"), (2, "amap"), (3, "Source: b"), (4, "bmap"), (5, "join"), (6, "out")]
    )
    edges = (
        StreamEdge(1, 2, "FORWARD"),
        StreamEdge(3, 4, "FORWARD"),
        StreamEdge(2, 5, "HASH", 1),
        StreamEdge(4, 5, "HASH", 2),
        StreamEdge(5, 6, "FORWARD"),
    )
    graph = StreamGraph(nodes, edges)
    ids = deterministic_ids(graph, "1.20")
    head = {1: ids[1], 3: ids[3], 5: ids[5]}
    plan = {
        "nodes": [
            {
                "id": head[5],
                "parallelism": 2,
                "description": "join<br/>+- out<br/>",
                "inputs": [
                    {"id": head[1], "num": 0, "ship_strategy": "HASH"},
                    {"id": head[3], "num": 1, "ship_strategy": "HASH"},
                ],
            },
            {"id": head[3], "parallelism": 2, "description": "Source: b<br/>+- bmap<br/>"},
            {"id": head[1], "parallelism": 2, "description": "Source: a<br/>+- amap<br/>"},
        ]
    }
    binding = bind(parse_job_graph_plan({"plan": plan}), list(ids.values()), release="1.20")
    assert {b.name: b.operator_id for b in binding.operators} == {graph.node(k).name: v for k, v in ids.items()}
    assert {b.name: b.method for b in binding.operators if b.position} == dict.fromkeys(
        ["amap", "bmap", "out"], DETERMINISTIC_HASH
    )


# ------------------------------------------------------------------------------------------------ uid guesses


@pytest.mark.parametrize(
    ("name", "uid"),
    [
        ("sink: Writer", "sink"),  # Sink V2 (1.15+): the writer has the sink's uid
        ("Source: seq", "seq"),
        ("Sink: sink", "sink"),  # SinkFunction
        ("files: Committer", "Sink Committer: files"),
        ("files: Global Committer", "Sink files Global Committer"),
        ("Sink Writer: files", "files"),  # Sink V1, 1.12-1.13
        ("Sink files Writer", "files"),  # Sink V1, 1.14
        ("Sink files", "files"),
        ("Sink Committer: files", "Sink Committer: files"),
        ("tostr", "tostr"),
    ],
)
def test_uid_candidates(name: str, uid: str) -> None:
    assert uid in [u for u, _ in uid_candidates(name)]
    assert uid_candidates(name)[0][0] == name


def test_sink_writer_uid_from_fixture() -> None:
    """2.3.0 stores uids: 'sink: Writer' carries the sink's uid 'sink' (SinkTransformationTranslator)."""
    ops = {op["name"]: op["uid"] for op in _json(FIXTURES / "2.3.0-unaligned" / "oracle.json")["operators"]}
    assert ops["sink: Writer"] == "sink"
    assert ("sink", "Sink V2 writer: the sink's uid") in uid_candidates("sink: Writer")


# ---------------------------------------------------------------------------------------------- release rules


def _pair(up: dict[str, Any] | None = None, down: dict[str, Any] | None = None, **edge: Any) -> StreamGraph:
    nodes = (
        StreamNode(**{"id": 1, "name": "src", "parallelism": 2, **(up or {})}),
        StreamNode(**{"id": 2, "name": "op", "parallelism": 2, **(down or {})}),
    )
    return StreamGraph(nodes, (StreamEdge(1, 2, edge.pop("partitioner", "FORWARD"), **edge),))


def _chainable(graph: StreamGraph, release: str) -> bool:
    return edge_chainable(graph, graph.edges[0], hasher_rules(release))


@pytest.mark.parametrize(
    ("release", "line"),
    [
        ("1.10.3", "1.10"),
        ("1.11.4", "1.11"),
        ("1.13.6", "1.12-1.13"),
        ("1.14.6", "1.14"),
        ("1.17.2", "1.15-1.17"),
        ("1.20.3", "1.18-1.20"),
        ("2.0.0", "2.0-2.3"),
        ("2.3.0", "2.0-2.3"),
        ("release-1.19.1", "1.18-1.20"),
        ("2.9", "2.0-2.3"),
        ("1.8.0", "1.10"),
    ],
)
def test_hasher_rules_lines(release: str, line: str) -> None:
    assert hasher_rules(release).line == line


def test_release_lines_cover_without_gaps() -> None:
    assert RELEASE_RULES[0].first == (1, 0)
    for a, b in itertools.pairwise(RELEASE_RULES):
        assert b.first in ((a.last[0], a.last[1] + 1), (a.last[0] + 1, 0)), (a.line, b.line)
        assert a.first <= a.last
    assert [release_for_format_version(v) for v in (2, 3, 4, 5, 6)] == [(1, 10), (1, 15), (1, 20), (2, 0), (2, 3)]


def test_rules_default_chain() -> None:
    for rules in RELEASE_RULES:
        assert _chainable(_pair(), str(rules.first))


@pytest.mark.parametrize("release", ["1.10.3", "1.11.4", "1.15.4", "2.3.0"])
def test_rules_never_chain(release: str) -> None:
    assert not _chainable(_pair(partitioner="REBALANCE"), release)
    assert not _chainable(_pair(partitioner="HASH"), release)
    assert not _chainable(_pair(down={"chaining_strategy": "NEVER"}), release)
    assert not _chainable(_pair(up={"chaining_strategy": "NEVER"}), release)
    assert not _chainable(_pair(down={"chaining_strategy": "HEAD"}), release)
    assert not _chainable(_pair(down={"slot_sharing_group": "other"}), release)
    assert not _chainable(_pair(down={"parallelism": 3}), release)
    g = _pair()
    assert not _chainable(StreamGraph(g.nodes, g.edges, chaining_enabled=False), release)


def test_rules_exchange_mode_only_tested_from_1_11() -> None:
    """1.10's hasher has its own copy of the predicate, without the shuffle-mode test."""
    g = _pair(exchange_mode="BATCH")
    assert _chainable(g, "1.10.3")
    assert not _chainable(g, "1.11.4") and not _chainable(g, "2.3.0")


def test_rules_head_with_sources_from_1_12() -> None:
    g = _pair(up={"source_kind": "flip27"}, down={"chaining_strategy": "HEAD_WITH_SOURCES"})
    assert not _chainable(g, "1.11.4")
    assert _chainable(g, "1.12.5") and _chainable(g, "2.3.0")
    legacy = _pair(up={"source_kind": "legacy"}, down={"chaining_strategy": "HEAD_WITH_SOURCES"})
    assert not _chainable(legacy, "1.12.5")


def test_rules_upstream_head_with_sources_and_1_10_upstream_set() -> None:
    g = _pair(up={"chaining_strategy": "HEAD_WITH_SOURCES"})
    assert not _chainable(g, "1.10.3")  # 1.10: upstream must be HEAD or ALWAYS
    assert _chainable(g, "1.12.5")


def test_rules_yielding_operator_behind_legacy_source_from_1_11() -> None:
    g = _pair(up={"source_kind": "legacy"}, down={"yielding": True})
    assert _chainable(g, "1.10.3")
    assert not _chainable(g, "1.11.4") and not _chainable(g, "2.3.0")
    assert _chainable(_pair(up={"source_kind": "flip27"}, down={"yielding": True}), "2.3.0")


def test_rules_max_parallelism_option_from_1_18() -> None:
    nodes = (StreamNode(1, "src", 2, max_parallelism=128), StreamNode(2, "op", 2, max_parallelism=256))
    g = StreamGraph(nodes, (StreamEdge(1, 2, "FORWARD"),), chain_different_max_parallelism=False)
    assert _chainable(g, "1.17.2")
    assert not _chainable(g, "1.18.1") and not _chainable(g, "2.3.0")
    assert _chainable(StreamGraph(nodes, g.edges), "2.3.0")


def test_rules_union_input_never_chained() -> None:
    nodes = (StreamNode(1, "a", 2), StreamNode(2, "b", 2), StreamNode(3, "u", 2))
    g = StreamGraph(nodes, (StreamEdge(1, 3, "FORWARD"), StreamEdge(2, 3, "FORWARD")))
    assert not any(edge_chainable(g, e, hasher_rules("2.3")) for e in g.edges)
    assert infer_chains(g, "2.3") == [[1], [2], [3]]


def test_partitioner_class_names_count_as_forward() -> None:
    for p in ("ForwardPartitioner", "ForwardForUnspecifiedPartitioner", "ForwardForConsecutiveHashPartitioner"):
        assert _chainable(_pair(partitioner=p), "1.15.4")
    assert not _chainable(_pair(partitioner="RescalePartitioner"), "1.15.4")


def test_deterministic_ids_rejects_uid_collision_and_unreachable_nodes() -> None:
    g = StreamGraph((StreamNode(1, "a", 1, uid="x"), StreamNode(2, "b", 1, uid="x")), (StreamEdge(1, 2, "FORWARD"),))
    with pytest.raises(ValueError, match="same uid hash"):
        deterministic_ids(g, "2.3")
    cyc = StreamGraph(
        (StreamNode(1, "s", 1), StreamNode(2, "a", 1), StreamNode(3, "b", 1)),
        (StreamEdge(1, 2, "HASH"), StreamEdge(3, 2, "HASH"), StreamEdge(2, 3, "HASH")),
    )
    with pytest.raises(ValueError, match="not reachable"):
        deterministic_ids(cyc, "2.3")


def test_generated_hash_inputs_wait_and_fan_out_positions() -> None:
    """Positions count every hashed node; a node with two inputs waits for both (re-queued by the second)."""
    nodes = tuple(StreamNode(i, f"n{i}", 1) for i in (1, 2, 3, 4, 5))
    edges = (
        StreamEdge(1, 2, "HASH"),
        StreamEdge(2, 3, "HASH"),
        StreamEdge(3, 5, "HASH", 1),
        StreamEdge(4, 5, "HASH", 2),
    )
    ids = deterministic_ids(StreamGraph(nodes, edges), "2.3")
    # sources 1 and 4 take positions 0 and 1: node 4 alone hashes like position 1 without inputs
    alone = deterministic_ids(StreamGraph((StreamNode(9, "x", 1), StreamNode(10, "y", 1)), ()), "2.3")
    assert ids[1] == alone[9] and ids[4] == alone[10]
    # a uid on node 2 changes node 3 (input hash) but not node 1 or 4
    with_uid = deterministic_ids(StreamGraph(nodes, edges), "2.3", {2: "two"})
    assert with_uid[1] == ids[1] and with_uid[4] == ids[4] and with_uid[3] != ids[3]
    assert with_uid[2] == uid_hash("two")


SQL_SOURCE = "bc764cd8ddf7a0cff126f51c16239658"  # 2.3.0-sql: position 0, no chained output, no input
SQL_AGGREGATE = "20ba6b65f97481d5570070de90e4e791"  # position 1, one chained output, input = SQL_SOURCE


def test_sql_fixture_grounds_the_building_blocks() -> None:
    expected = _expected_by_name(FIXTURES / "2.3.0-sql")
    assert expected["Source: src[1]"] == SQL_SOURCE and expected["GroupAggregate[3]"] == SQL_AGGREGATE


def test_sources_are_hashed_in_id_order() -> None:
    """Flink sorts the source ids: the smaller id takes position 0, whatever the node order."""
    graph = StreamGraph((StreamNode(7, "late", 2), StreamNode(3, "early", 2)), ())
    ids = deterministic_ids(graph, "2.3")
    assert ids[3] == SQL_SOURCE and ids[7] != SQL_SOURCE


def test_fan_out_follows_out_edge_order() -> None:
    """Breadth first in out-edge order: the first output takes position 1."""
    nodes = tuple(StreamNode(i, f"n{i}", 2) for i in (1, 2, 3, 4))
    first = (StreamEdge(1, 2, "HASH"), StreamEdge(1, 3, "HASH"), StreamEdge(2, 4, "FORWARD"))
    ids = deterministic_ids(StreamGraph(nodes, first), "2.3")
    assert ids[1] == SQL_SOURCE and ids[2] == SQL_AGGREGATE
    swapped = (StreamEdge(1, 3, "HASH"), StreamEdge(1, 2, "HASH"), StreamEdge(2, 4, "FORWARD"))
    assert deterministic_ids(StreamGraph(nodes, swapped), "2.3")[2] != SQL_AGGREGATE


# ------------------------------------------------------------------------------------------------ JSON parsing


def test_parse_stream_plan_fields() -> None:
    graph = parse_stream_plan(_json(FIXTURES / "2.3.0-sql" / "plan.json"))
    assert graph.source_ids() == [1]
    agg = graph.by_name("GroupAggregate[3]")[0]
    assert agg.description is not None and agg.description.startswith("[3]:GroupAggregate(")
    assert [(e.source, e.target, e.partitioner) for e in graph.in_edges(agg.id)] == [(1, agg.id, "HASH")]
    assert graph.inferred_edge_order


def test_parse_job_graph_plan_tree_and_wrapper() -> None:
    raw = _json(FIXTURES / "2.3.0-finished" / "jobgraph.json")
    for obj in (raw, {"plan": raw}, json.dumps({"plan": raw})):
        job = parse_job_graph_plan(obj)
        v = job.vertex("9fb621cfbecf96a557c3ffc11ab9ad39")
        assert v.operators == ("Source: pseq", "pmap", "psink: Writer") and v.parents == (None, 0, 1)
    slow = job.vertex("59fa767824610e31f4a11d6125e09bf4")
    assert [(i.source, i.num, i.ship_strategy) for i in slow.inputs] == [
        ("f362c87ffabe89c8a91fa7d0a523ba6c", 0, "HASH")
    ]


def test_parse_job_graph_plan_cascading_1_10() -> None:
    job = parse_job_graph_plan(_json(FIXTURES / "1.10.3-aligned" / "jobgraph.json"))
    v = job.vertex("5f6c9c3c8fdcc0939e6c1d0276e97ad0")
    assert v.operators == ("len", "Sink: sink") and v.parents == (None, 0)


@pytest.mark.parametrize(
    ("description", "labels", "parents"),
    [
        ("a -&gt; (b -&gt; c, d)", ["a", "b", "c", "d"], [None, 0, 1, 0]),
        ("a<br/>:- b<br/>:  +- c<br/>+- d<br/>", ["a", "b", "c", "d"], [None, 0, 1, 0]),
        ("x &amp; y<br/>+- z&#92;w<br/>", ["x & y", "z\\w"], [None, 0]),
        ("single", ["single"], [None]),
    ],
)
def test_split_description(description: str, labels: list[str], parents: list[int | None]) -> None:
    assert split_description(description) == (labels, parents)


# ------------------------------------------------------------------------------- mutation-testing survivors


@pytest.mark.parametrize("name", NO_UID)
def test_the_chains_given_replace_the_release_rules(name: str) -> None:
    """Hashing a graph whose own flags chain nothing, with the chains read off Flink's job graph, gives
    Flink's ids: the chains given, not the rules, decide each node's chainable outputs."""
    fixture = FIXTURES / name
    unchained = parse_stream_plan(_json(fixture / "plan.json"), chaining_enabled=False)
    chained = chained_edges_from_job_graph(unchained, parse_job_graph_plan(_json(fixture / "jobgraph.json")))
    assert chained  # every NO_UID job chains something
    ids = deterministic_ids(unchained, _release(fixture), chained_edges=chained)
    assert {unchained.node(k).name: v for k, v in ids.items()} == _expected_by_name(fixture)


def test_a_uid_collision_names_both_nodes() -> None:
    g = StreamGraph((StreamNode(4, "a", 1, uid="x"), StreamNode(9, "b", 1, uid="x")), (StreamEdge(4, 9, "FORWARD"),))
    with pytest.raises(ValueError, match=r"^nodes 4 and 9 have the same uid hash"):
        deterministic_ids(g, "2.3")


def test_id_of_answers_only_for_exactly_one_operator_in_the_checkpoint() -> None:
    def op(name: str, op_id: str, in_checkpoint: bool = True) -> BoundOperator:
        return BoundOperator(name, UID_HASH, op_id, in_checkpoint, in_checkpoint, "")

    binding = Binding(
        (op("twice", "1" * 32), op("twice", "2" * 32), op("once", "3" * 32), op("absent", "4" * 32, False)),
        (),
        "2.x",
    )
    assert binding.id_of("once") == "3" * 32
    assert binding.id_of("twice") is None  # ambiguous
    assert binding.id_of("absent") is None and binding.id_of("nobody") is None


def test_the_uid_hint_quotes_only_names_that_need_it() -> None:
    """1.10.3-aligned: 'len' and 'Sink: sink' are stateless and not in the checkpoint, so they stay unbound."""
    fixture = FIXTURES / "1.10.3-aligned"
    binding = bind(parse_stream_plan(_json(fixture / "plan.json")), _oracle_ids(fixture), release="1.10.3")
    length = binding.by_name("len")[0]
    assert length.method == UNBOUND and length.reason.endswith("give its uid: --uid len=UID")
    sink = binding.by_name("Sink: sink")[0]
    assert sink.method == UNBOUND and sink.reason.endswith("give its uid: --uid 'Sink: sink'=UID")


def _job_plan(vertices: list[tuple[str, str, list[str]]]) -> JobGraphPlan:
    """A REST job-graph plan: (vertex id, chained operator names, upstream vertex ids)."""
    nodes = [
        {
            "id": vid,
            "parallelism": 2,
            "description": "<br/>+- ".join(ops) + "<br/>",
            "inputs": [{"id": up, "num": i, "ship_strategy": "HASH"} for i, up in enumerate(ups)],
        }
        for vid, ops, ups in vertices
    ]
    return parse_job_graph_plan({"plan": {"nodes": nodes}})


def test_a_generated_id_behind_a_fan_out_holds_under_every_output_order_that_fits() -> None:
    """From a job-graph plan the order of a node's outputs is not known. A chained operator whose position
    depends on it (some node on its way from a source has two outputs) is taken only when every order that
    reproduces the known ids gives it, and says so; one that does not depend on it, does not.
    The graph: source -> (a1 -> a2 chained) and source -> b1; c1 -> c2 chained from a second source."""
    nodes = tuple(
        StreamNode(i, name, 2)
        for i, name in [(1, "Source: s"), (2, "a1"), (3, "a2"), (4, "b1"), (5, "Source: c"), (6, "c2")]
    )
    edges = (
        StreamEdge(1, 2, "HASH"),
        StreamEdge(1, 4, "HASH"),
        StreamEdge(2, 3, "FORWARD"),
        StreamEdge(5, 6, "FORWARD"),
    )
    ids = deterministic_ids(StreamGraph(nodes, edges), "1.20")
    job = _job_plan(
        [
            (ids[1], ["Source: s"], []),
            (ids[2], ["a1", "a2"], [ids[1]]),
            (ids[4], ["b1"], [ids[1]]),
            (ids[5], ["Source: c", "c2"], []),
        ]
    )
    binding = bind(job, list(ids.values()), release="1.20")
    generated = {b.name: b.reason for b in binding.operators if b.method == DETERMINISTIC_HASH}
    assert set(generated) == {"a2", "c2"}
    assert "every one that reproduces the ids known gives it" in generated["a2"]
    assert "order of outputs" not in generated["c2"]


@pytest.mark.parametrize(
    ("name", "candidates"),
    [
        ("sink: Writer", [("sink", "Sink V2 writer: the sink's uid")]),
        ("files: Committer", [("Sink Committer: files", "Sink V2 committer: 'Sink Committer: UID'")]),
        (
            "files: Global Committer",
            [("Sink files Global Committer", "Sink V2 global committer: 'Sink UID Global Committer'")],
        ),
        ("Sink Writer: files", [("files", "Sink V1 (1.12-1.13) writer: the sink's uid")]),
        ("Sink files Writer", [("files", "Sink V1 (1.14) writer: the sink's uid")]),
        ("Sink files", [("files", "Sink V1 (1.14) writer: the sink's uid")]),
        ("Sink: sink", [("sink", "name without prefix")]),  # a SinkFunction, not a 1.14 Sink V1 named ": sink"
        ("Source: seq", [("seq", "name without prefix")]),
        ("Source: ", []),  # nothing left after the prefix: no empty uid
        ("Sink Committer: files", []),  # a 1.12-1.13 committer's uid is its own name
        ("tostr", []),
    ],
)
def test_uid_candidates_exactly(name: str, candidates: list[tuple[str, str]]) -> None:
    """Every guess, in order, with how it was derived (bind quotes the latter in its reasons); the rules are
    those of uid_candidates' docstring, read from each release's sink translators (docs/format/operator-ids.md)."""
    assert uid_candidates(name) == [(name, "name"), *candidates]


def test_checkpoint_ids_are_read_in_any_case_and_with_dashes() -> None:
    fixture = FIXTURES / "2.3.0-no-uid"
    graph = parse_stream_plan(_json(fixture / "plan.json"))
    ids = _oracle_ids(fixture)
    dashed = [f"{i[:8]}-{i[8:12]}-{i[12:16]}-{i[16:20]}-{i[20:]}".upper() for i in ids]
    binding = bind(graph, dashed, release="2.3.0")
    assert {b.operator_id for b in binding.operators if b.exact} == set(ids)
    with pytest.raises(ValueError, match=r"^not an operator id \(32 hex chars\): 'xyz'$"):
        bind(graph, ["xyz"])


def test_bind_without_a_release_uses_the_newest_rules() -> None:
    fixture = FIXTURES / "2.3.0-no-uid"
    binding = bind(parse_stream_plan(_json(fixture / "plan.json")), _oracle_ids(fixture))
    assert binding.rules == "2.0-2.3"
    assert {b.name: b.operator_id for b in binding.operators if b.exact} == _expected_by_name(fixture)


def test_a_generated_id_names_its_breadth_first_position() -> None:
    """2.3.0-sql: Flink hashed the source at position 0 and the aggregate at position 1 (SQL_SOURCE,
    SQL_AGGREGATE above: these positions reproduce Flink's ids)."""
    fixture = FIXTURES / "2.3.0-sql"
    binding = bind(parse_stream_plan(_json(fixture / "plan.json")), _oracle_ids(fixture), release="2.3.0")
    reasons = {b.operator_id: b.reason for b in binding.operators}
    assert "(no uid, breadth-first position 0)" in reasons[SQL_SOURCE]
    assert "(no uid, breadth-first position 1)" in reasons[SQL_AGGREGATE]


def test_a_job_graph_plan_missing_a_vertex_does_not_align() -> None:
    """Every vertex of the plan matches, but the plan leaves stream nodes uncovered (here its 'len -> sink'
    vertex is dropped): not the same job, so no chains and no vertex ids are taken from it."""
    fixture = FIXTURES / "2.3.0-no-uid"
    graph = parse_stream_plan(_json(fixture / "plan.json"))
    doc = _json(fixture / "jobgraph.json")
    plan = doc.get("plan", doc)
    nodes = [n for n in plan["nodes"] if not n["description"].startswith("len<br/>")]
    assert len(nodes) == len(plan["nodes"]) - 1
    partial = parse_job_graph_plan({"plan": {**plan, "nodes": nodes}})
    assert chained_edges_from_job_graph(graph, partial) is None
    binding = bind(graph, _oracle_ids(fixture), release="2.3.0", job_graph=partial)
    assert "the job-graph plan could not be matched onto the stream graph; vertex ids not used" in binding.notes


def test_a_job_graph_plan_that_fits_two_places_does_not_align() -> None:
    """Two identical branches (a source feeding a chained map, twice): each vertex fits either branch, so
    which vertex id belongs to which operators is not known, and none is taken."""
    nodes = tuple(StreamNode(i, name, 1) for i, name in [(1, "Source: s"), (2, "m"), (3, "Source: s"), (4, "m")])
    graph = StreamGraph(nodes, (StreamEdge(1, 2, "FORWARD"), StreamEdge(3, 4, "FORWARD")))
    job = _job_plan([("a" * 32, ["Source: s", "m"], []), ("b" * 32, ["Source: s", "m"], [])])
    assert chained_edges_from_job_graph(graph, job) is None


SRC, TOSTR, SLOW, LEN = (
    "f362c87ffabe89c8a91fa7d0a523ba6c",  # uid 'src' (spec table above; Flink's id of the 1.10.3 job's source)
    "d8cec9b362de91fa6281b2882b1d6f93",
    "59fa767824610e31f4a11d6125e09bf4",
    "5f6c9c3c8fdcc0939e6c1d0276e97ad0",
)


def _unbound(name: str, tried: str, hint: str, before: str = "") -> tuple:
    return (
        name,
        UNBOUND,
        None,
        False,
        None,
        f"{before}no id computed by Flink's rules for {name!r} is in the checkpoint (uids tried: {tried}; generated"
        f" id tried). If it has state there, give its uid: --uid {hint}=UID",
    )


def test_every_binding_of_the_1_10_job_says_how_exactly() -> None:
    """1.10.3-aligned, whose checkpoint holds the source (uid 'src'), tostr and slow: method, id, whether the
    checkpoint has it, uid and reason of every operator, by plan alone, with uids given, with the job graph."""
    fixture = FIXTURES / "1.10.3-aligned"
    ckpt = _oracle_ids(fixture)
    assert sorted(ckpt) == sorted([SRC, TOSTR, SLOW])
    graph = parse_stream_plan(_json(fixture / "plan.json"))

    def rows(binding: Binding) -> list[tuple]:
        return [(b.name, b.method, b.operator_id, b.in_checkpoint, b.uid, b.reason) for b in binding.operators]

    tostr = ("tostr", UID_HASH, TOSTR, True, "tostr", "uid 'tostr' (name) hashes to this id")
    slow = ("slow", UID_HASH, SLOW, True, "slow", "uid 'slow' (name) hashes to this id")
    length = _unbound("len", "'len'", "len")
    sink = _unbound("Sink: sink", "'Sink: sink', 'sink'", "'Sink: sink'")
    plain = bind(graph, ckpt, release="1.10.3")
    assert rows(plain) == [_unbound("Source: seq", "'Source: seq', 'seq'", "'Source: seq'"), tostr, slow, length, sink]
    assert plain.unclaimed == (SRC,)
    # a given uid wins over guesses; the same uid given twice binds the first operator only
    given = bind(graph, ckpt, release="1.10.3", uid_overrides={"Source: seq": "src", "tostr": "src"})
    taken = f"given uid 'src' hashes to {SRC}, already bound to 'Source: seq'; "
    tostr_given = (*_unbound("tostr", "none", "tostr", taken)[:4], "src", _unbound("tostr", "none", "tostr", taken)[5])
    assert rows(given) == [
        ("Source: seq", UID_HASH, SRC, True, "src", "given uid 'src' hashes to this id"),
        tostr_given,
        slow,
        length,
        sink,
    ]
    assert given.unclaimed == (TOSTR,)
    with_job = bind(graph, ckpt, release="1.10.3", job_graph=parse_job_graph_plan(_json(fixture / "jobgraph.json")))
    assert rows(with_job) == [
        ("Source: seq", VERTEX_ID, SRC, True, None, f"head of job vertex {SRC} (vertex id = head operator id)"),
        tostr,
        # a vertex id is Flink's own: it outranks the uid guessed from the name
        ("slow", VERTEX_ID, SLOW, True, None, f"head of job vertex {SLOW} (vertex id = head operator id)"),
        (
            "len",
            VERTEX_ID,
            LEN,
            False,
            None,
            f"head of job vertex {LEN} (vertex id = head operator id); not in the checkpoint (no state for it there)",
        ),
        sink,
    ]
    assert with_job.unclaimed == () and with_job.notes == ()


def test_elimination_by_parallelism_says_it_is_a_guess() -> None:
    fixture = FIXTURES / "1.15.4-unaligned"
    ops = _json(fixture / "oracle.json")["operators"]
    par = {op["operator_id"]: op["parallelism"] for op in ops}
    binding = bind(
        parse_stream_plan(_json(fixture / "plan.json")),
        list(par),
        release="1.15.4",
        checkpoint_parallelism=par,
    )
    src = binding.by_name("Source: seq")[0]
    assert (src.method, src.operator_id, src.reason) == (
        ELIMINATION,
        SRC,
        "the only operator left with parallelism 2 and the only checkpoint id left: structural guess, not Flink's rule",
    )
    assert par[SRC] == 2


def test_consumers_placed_first_decide_their_sources() -> None:
    """Two sources of one label, told apart only by what their consumers receive (HASH into x, REBALANCE into y):
    x and y have one placement each and are placed first, so the sources' placement is checked against them."""
    nodes = tuple(StreamNode(i, name, 2) for i, name in [(1, "Source: s"), (2, "x"), (3, "Source: s"), (4, "y")])
    graph = StreamGraph(nodes, (StreamEdge(1, 2, "HASH"), StreamEdge(3, 4, "REBALANCE")))
    plan = {
        "nodes": [
            {"id": "x" * 32, "parallelism": 2, "description": "x<br/>",
             "inputs": [{"id": "1" * 32, "num": 0, "ship_strategy": "HASH"}]},
            {"id": "y" * 32, "parallelism": 2, "description": "y<br/>",
             "inputs": [{"id": "3" * 32, "num": 0, "ship_strategy": "REBALANCE"}]},
            {"id": "3" * 32, "parallelism": 2, "description": "Source: s<br/>"},
            {"id": "1" * 32, "parallelism": 2, "description": "Source: s<br/>"},
        ]
    }  # fmt: skip
    job = parse_job_graph_plan({"plan": plan})
    assert _align(graph, job) == {"x" * 32: [2], "y" * 32: [4], "1" * 32: [1], "3" * 32: [3]}


def test_alignment_gives_up_past_its_budget_and_size(monkeypatch: pytest.MonkeyPatch) -> None:
    """The search of the two-branch job takes four steps (place each of the three vertices, then the complete
    placement): with a budget of four it aligns, with three it gives up; a job of more vertices than allowed is
    not searched at all."""
    import spillway.flink.operator_ids as ids_module

    graph, job = _two_branches((3, "HASH"))
    monkeypatch.setattr(ids_module, "_ALIGN_BUDGET", 4)
    assert _align(graph, job) is not None
    monkeypatch.setattr(ids_module, "_ALIGN_BUDGET", 3)
    assert _align(graph, job) is None
    monkeypatch.setattr(ids_module, "_ALIGN_BUDGET", 4)
    monkeypatch.setattr(ids_module, "_ALIGN_MAX_VERTICES", 3)
    assert _align(graph, job) is not None
    monkeypatch.setattr(ids_module, "_ALIGN_MAX_VERTICES", 2)
    assert _align(graph, job) is None
