"""The chains a binding gives a stream-graph plan (its view), for the checkpoint's own job, for a variant binding and
for a new job's plan, held to the chains Flink built (the job vertices of ``ids.json``).

A stream-graph plan does not show chain cuts (``disableChaining``, ``startNewChain``): the production jobs' plans
chain differently from Flink by default; the checkpoint's evidence (channel state, generated ids) cuts them where
Flink did. Expected chains, heads and ids come from each fixture's ``ids.json`` (Flink's own JobGraph)."""

from __future__ import annotations

import json

import pytest
from support.fixtures import Fixture, all_fixtures, fixture_named
from support.plan_nodes import plan_to_flink_nodes

from spillway.api import job_plan
from spillway.flink.deduction import DEDUCED, INDISTINCT
from spillway.flink.job_ids import parse_job_ids
from spillway.flink.operator_ids import ELIMINATION, UID_HASH, UNBOUND, bind
from spillway.flink.stream_graph import parse_job_graph_plan
from spillway.inspect.topology import CHAINED, CUT, UNKNOWN, bind_job, bind_variant, load_plan, plan_names_of
from spillway.storage.load import load_checkpoint

#: Production jobs without uids whose every chain edge the evidence decides (no edge left unknown).
DECIDED = [
    pytest.param(fixture_named(n), id=n)
    for n in (
        "1.11.4-prod-no-uid",
        "1.13.6-prod-no-uid",
        "1.14.6-prod-no-uid",
        "1.15.4-prod-no-uid",
        "1.16.3-prod-no-uid",
        "1.18.1-prod-no-uid",
        "1.20.3-prod-no-uid",
    )
]
SHAPES_1X = [pytest.param(f, id=f.name) for f in all_fixtures() if f.info["scenario"] == "shapes" and f.release < "2"]
#: Jobs whose checkpoint's structure binds operators no generated id does (uids set in the job, or a Sink V2 writer).
STRUCTURE = [
    pytest.param(f, id=f.name)
    for f in all_fixtures()
    if f.name in ("1.14.6-prod-finished", "1.20.3-prod") or (f.info["scenario"] == "shapes-no-uid" and f.release < "2")
]


def _flink_chains(fx: Fixture) -> set[frozenset[int]]:
    """Flink's job vertices as sets of plan node ids."""
    chains: dict[str, set[int]] = {}
    for nid, node in plan_to_flink_nodes(fx.root).items():
        chains.setdefault(node["vertex_id"], set()).add(nid)
    return {frozenset(c) for c in chains.values()}


def _flink_chained_edges(fx: Fixture) -> set[tuple[int, int]]:
    """The stream edges inside Flink's job vertices, as plan node id pairs."""
    plan_nodes = plan_to_flink_nodes(fx.root)
    plan_of = {node["id"]: nid for nid, node in plan_nodes.items()}
    vertex_of = {node["id"]: node["vertex_id"] for node in plan_nodes.values()}
    flink = json.loads((fx.root / "ids.json").read_text())
    return {
        (plan_of[e["source"]], plan_of[e["target"]])
        for e in flink["stream_edges"]
        if vertex_of[e["source"]] == vertex_of[e["target"]]
    }


def _chains(vertices: object) -> set[frozenset[int]]:
    return {frozenset(v.node_ids) for v in vertices.values()}  # type: ignore[attr-defined]


def _heads(fx: Fixture) -> dict[frozenset[int], str]:
    """Flink's vertex id (its head operator's id) per chain."""
    plan_nodes = plan_to_flink_nodes(fx.root)
    out: dict[frozenset[int], str] = {}
    for chain in _flink_chains(fx):
        out[chain] = plan_nodes[next(iter(chain))]["vertex_id"]
    return out


@pytest.mark.parametrize("fx", DECIDED)
def test_the_checkpoints_evidence_rebuilds_flinks_chains(fx: Fixture) -> None:
    topology = load_plan(fx.root / "plan.json")
    checkpoint = load_checkpoint(fx.checkpoint_dir).checkpoint
    flink = _flink_chains(fx)
    assert _chains(topology.vertices) != flink  # the plan alone chains otherwise: the evidence decides
    job = bind_job(topology, checkpoint)
    assert job.view is not None
    assert _chains(job.view.vertices) == flink
    assert job.edges and CUT in job.edges.values()
    assert set(job.edge_reasons) == set(job.edges)
    # each edge Flink's defaults would chain is decided as Flink decided it: chained inside a vertex, cut between
    flink_chained = _flink_chained_edges(fx)
    assert {e: s for e, s in job.edges.items()} == {e: CHAINED if e in flink_chained else CUT for e in job.edges}
    # a variant of the same binding gives the same chains, the same heads, the same edge states
    assert job.operators is not None
    view, vertices, edges = bind_variant(topology, checkpoint, job.operators)
    assert _chains(view.vertices) == flink
    assert edges == job.edges
    heads = _heads(fx)
    stored = {o.operator_id for o in checkpoint.operators}
    for key, v in view.vertices.items():
        head = vertices[key].head
        flink_head = heads[frozenset(v.node_ids)]
        assert (head.operator_id if head else None) == (flink_head if flink_head in stored else None), v.names
    assert topology.vertices != view.vertices  # the plan given is not changed


@pytest.mark.parametrize("fx", [*DECIDED, *SHAPES_1X])
def test_flinks_own_chains_given_to_a_variant_build_flinks_vertices(fx: Fixture) -> None:
    topology = load_plan(fx.root / "plan.json")
    checkpoint = load_checkpoint(fx.checkpoint_dir).checkpoint
    binding = bind_job(topology, checkpoint).operators
    assert binding is not None
    view, vertices, edges = bind_variant(topology, checkpoint, binding, _flink_chained_edges(fx))
    assert _chains(view.vertices) == _flink_chains(fx) == {frozenset(v.vertex.node_ids) for v in vertices.values()}
    assert edges == {}  # chains given, not read off the evidence


@pytest.mark.parametrize("fx", [*DECIDED, *STRUCTURE])
def test_a_new_jobs_plan_keeps_its_own_chains_and_binds_only_by_flinks_rules(fx: Fixture) -> None:
    """preflight's new job: its plan is no evidence of the checkpoint's chains, and the checkpoint's structure
    does not say which of its operators is which (only ids computed by Flink's rules bind). A uid guessed from a
    name is taken at its word there (preflight lists it as an assumption, ``uids unchanged``): not checked here."""
    topology = load_plan(fx.root / "plan.json").as_new_job()
    checkpoint = load_checkpoint(fx.checkpoint_dir).checkpoint
    plan_nodes = plan_to_flink_nodes(fx.root)
    job = bind_job(topology, checkpoint)
    assert job.edges == {} and job.edge_reasons == {}
    assert job.view is not None and _chains(job.view.vertices) == _chains(topology.vertices)
    assert job.operators is not None
    for b in job.operators.operators:
        assert b.method not in (DEDUCED, INDISTINCT, ELIMINATION), b
        if b.operator_id is not None and b.method != UID_HASH:
            assert b.node_id is not None and b.operator_id == plan_nodes[b.node_id]["operator_id"], b
    view, _, edges = bind_variant(topology, checkpoint, job.operators)
    assert edges == {} and _chains(view.vertices) == _chains(topology.vertices)


def test_the_checkpoints_structure_binds_what_a_new_jobs_plan_leaves_open() -> None:
    """The contrast of the test above: the same plans as the checkpoint's own bind some operators by structure."""
    for param in STRUCTURE:
        fx = param.values[0]
        job = bind_job(load_plan(fx.root / "plan.json"), load_checkpoint(fx.checkpoint_dir).checkpoint)
        assert job.operators is not None
        methods = {b.method for b in job.operators.operators}
        assert DEDUCED in methods, fx.name


@pytest.mark.parametrize("fx", [fixture_named("1.20.3-prod-no-uid"), fixture_named("1.16.3-shapes")], ids=str)
def test_a_job_graph_plan_has_flinks_chains_and_no_edges_to_decide(fx: Fixture) -> None:
    job = bind_job(load_plan(fx.root / "jobgraph.json"), load_checkpoint(fx.checkpoint_dir).checkpoint)
    assert job.edges == {} and job.edge_reasons == {}
    flink = json.loads((fx.root / "ids.json").read_text())
    assert job.view is not None and set(job.view.vertices) == {v["id"] for v in flink["vertices"]}


@pytest.mark.parametrize("fx", SHAPES_1X)
def test_plan_names_are_shown_only_for_operators_bound_exactly(fx: Fixture) -> None:
    """A checkpoint before metadata V5 stores no names; the plan's name is shown for an id only when the binding is
    exact. The job-graph plan with the parallelisms binds the rules branch's Map by elimination (Flink's id, a
    guess): no name for it."""
    flink = json.loads((fx.root / "ids.json").read_text())
    shown_as = {n["operator_id"]: (n["name"], n.get("description")) for n in flink["stream_nodes"]}
    map_id = next(n["operator_id"] for n in flink["stream_nodes"] if n["parallelism"] == 1 and n["name"] == "Map")
    checkpoint = load_checkpoint(str(fx.checkpoint_dir)).checkpoint
    parallelism = {o.operator_id: o.parallelism for o in checkpoint.operators}
    job = parse_job_graph_plan(json.loads((fx.root / "jobgraph.json").read_text()))
    binding = bind(job, list(parallelism), release=fx.release, checkpoint_parallelism=parallelism)
    assert any(b.method == ELIMINATION and b.operator_id == map_id for b in binding.operators)
    names = plan_names_of(binding, checkpoint)
    exact = {b.operator_id for b in binding.operators if b.exact}
    assert map_id not in names
    assert set(names) == exact and exact
    for op_id, name in names.items():
        assert name in shown_as[op_id], (op_id, name)
    assert not any(b.method == UNBOUND and b.operator_id in names for b in binding.operators)


@pytest.mark.parametrize("fx", [pytest.param(fixture_named("1.20.3-shapes"), id="1.20.3-shapes")])
def test_uids_given_by_plan_node_bind_those_operators_to_flinks_ids(fx: Fixture) -> None:
    """``--uid 'NAME#N'=UID`` (the form that picks one of the nodes a default name repeats): every uid the job set
    (ids.json), each given for its plan node, binds that node to Flink's id."""
    plan_nodes = plan_to_flink_nodes(fx.root)
    uids = {f"{n['name']}#{nid}": n["uid"] for nid, n in plan_nodes.items() if n["uid"] is not None}
    assert len(uids) > 10 and len({k.split("#")[0] for k in uids}) < len(uids)  # names repeat
    checkpoint = load_checkpoint(fx.checkpoint_dir).checkpoint
    stored = {o.operator_id for o in checkpoint.operators}
    binding = bind_job(load_plan(fx.root / "plan.json", uids), checkpoint).operators
    assert binding is not None
    given = {b.node_id: b for b in binding.operators if b.node_id is not None and plan_nodes[b.node_id]["uid"]}
    assert len(given) == len(uids)
    for nid, b in given.items():
        flink = plan_nodes[nid]
        assert (b.method, b.uid, b.operator_id) == (UID_HASH, flink["uid"], flink["operator_id"]), b
        assert b.exact == (flink["operator_id"] in stored)


@pytest.mark.parametrize("fx", [fixture_named("1.14.6-prod-finished"), fixture_named("1.20.3-prod-finished")], ids=str)
def test_an_indistinct_operator_shows_the_finished_flags_of_the_operator_flink_says_it_is(fx: Fixture) -> None:
    """Stateless operators that finished alike cannot be told apart (no uids, no state): the vertex counts them as
    known (no state whichever it is) and shows any candidate's finished flags, which are those of the operator
    Flink's id (ids.json) names; none of them is taken as the member's identity."""
    checkpoint = load_checkpoint(fx.checkpoint_dir).checkpoint
    plan_nodes = plan_to_flink_nodes(fx.root)
    job = bind_job(load_plan(fx.root / "plan.json"), checkpoint)
    assert job.operators is not None
    by_node = {b.node_id: b for b in job.operators.operators}
    seen = 0
    for bound in job.vertices.values():
        member_ids = {m.operator_id for m in bound.members}
        for nid, shown, known in zip(bound.vertex.node_ids, bound.operators, bound.known, strict=True):
            b = by_node[nid]
            if b.method != INDISTINCT:
                continue
            seen += 1
            flink = checkpoint.operator(plan_nodes[nid]["operator_id"])
            assert flink is not None and flink.operator_id in b.candidates
            assert known and shown is not None and shown.operator_id in b.candidates
            assert ([s.finished for s in shown.subtasks], shown.fully_finished) == (
                [s.finished for s in flink.subtasks],
                flink.fully_finished,
            )
            assert shown.operator_id not in member_ids
    assert seen == 4  # the fifth stateless bounded operator, the bounded sink, is bound exactly (test_binding_done)


EVERY_1X = [
    pytest.param(f, id=f.name)
    for f in all_fixtures()
    if f.info["metadata_version"] < 5
    and (f.info["scenario"].startswith(("shapes", "prod", "finished")) or f.info["scenario"].endswith("no-uid"))
]


@pytest.mark.parametrize("fx", EVERY_1X)
def test_no_chain_edge_is_decided_against_flink(fx: Fixture) -> None:
    """An edge the evidence calls chained is inside one of Flink's job vertices, one it calls cut is between two;
    what it cannot decide stays unknown."""
    job = bind_job(load_plan(fx.root / "plan.json"), load_checkpoint(fx.checkpoint_dir).checkpoint)
    flink_chained = _flink_chained_edges(fx)
    wrong = [
        (e, state) for e, state in job.edges.items() if state != UNKNOWN and (state == CHAINED) != (e in flink_chained)
    ]
    assert wrong == []


DONE_FIXTURES = [
    pytest.param(f, id=f.name)
    for f in all_fixtures()
    if f.info["scenario"].startswith(("shapes", "prod")) or f.info["scenario"].endswith("no-uid")
]


@pytest.mark.parametrize("fx", DONE_FIXTURES)
def test_with_the_jobs_graph_every_vertex_has_flinks_head_tail_and_members(fx: Fixture) -> None:
    """The job's own graph (``--job``): each vertex's head is its vertex id, its tail Flink's
    ``getOperatorIDs()[0]`` (first in ids.json: a chain that branches, ``Window -> (Sink, Map)``, ends in its first
    leaf), its members the vertex's operators the checkpoint holds; a stateless head or tail absent from the
    checkpoint is known absent, not a problem."""
    flink = json.loads((fx.root / "ids.json").read_text())
    checkpoint = load_checkpoint(fx.checkpoint_dir).checkpoint
    stored = {o.operator_id for o in checkpoint.operators}
    job = bind_job(job_plan(parse_job_ids(flink)), checkpoint)
    node_vertex = {n["id"]: n["vertex_id"] for n in flink["stream_nodes"]}
    by_vertex = {v["id"]: v for v in flink["vertices"]}
    assert len(job.vertices) == len(by_vertex)
    for bound in job.vertices.values():
        [vertex_id] = {node_vertex[n] for n in bound.vertex.node_ids}
        ids = by_vertex[vertex_id]["operator_ids"]
        tail = ids[0]
        assert (bound.head.operator_id if bound.head else None) == (vertex_id if vertex_id in stored else None)
        assert (bound.tail.operator_id if bound.tail else None) == (tail if tail in stored else None), bound
        assert {m.operator_id for m in bound.members} == {i for i in ids if i in stored}
        assert bound.problem is None and bound.complete and all(bound.known)
        assert bound.uncertain_edges == []


GENERATED_FROM_INPUT = [
    "1.12.5-prod-no-uid",
    "1.16.3-shapes-no-uid",
    "1.20.3-prod",
    "1.20.3-shapes-no-uid",
    "2.2.1-shapes",
]


@pytest.mark.parametrize("fx", [pytest.param(fixture_named(n), id=n) for n in GENERATED_FROM_INPUT])
def test_a_deduced_operator_says_no_uid_exactly_when_flink_gave_it_none(fx: Fixture) -> None:
    """An operator bound by the checkpoint's structure whose id is the one Flink generates from its single input's id
    has no uid (ids.json: uid null), and says so; one the job gave a uid does not. Its chained out-edges are then
    known: as many as Flink chained (ids.json: edges inside its job vertex). A stateless operator of a release that
    writes none (1.12) is known to be absent, not open."""
    checkpoint = load_checkpoint(fx.checkpoint_dir).checkpoint
    stored = {o.operator_id for o in checkpoint.operators}
    plan_nodes = plan_to_flink_nodes(fx.root)
    topology = load_plan(fx.root / "plan.json")
    assert topology.stream_graph is not None
    binding = bind_job(topology, checkpoint).operators
    assert binding is not None
    chained = _flink_chained_edges(fx)
    said = 0
    for i, b in enumerate(binding.operators):
        if b.method != DEDUCED:
            continue
        assert b.node_id is not None
        flink = plan_nodes[b.node_id]
        if b.operator_id is None:
            assert flink["operator_id"] not in stored and fx.release.startswith(("1.10", "1.12"))
            assert b.reason.startswith("not in the checkpoint: every one of the "), b.reason
            assert b.reason.endswith(" leaves it out (a stateless operator; this release writes no state for those)")
            said += 1
            continue
        generated = flink["uid"] is None and len(topology.stream_graph.in_edges(b.node_id)) == 1
        no_uid = "; no uid: the id is the one Flink generates from its input's id (position " in b.reason
        assert no_uid == generated, (b.name, b.reason)
        if generated:
            said += 1
            assert binding.chained_outputs[i] == sum(1 for e in chained if e[0] == b.node_id), b.name
    assert said >= 2
