"""The binding parts of spillway/inspect/topology.py, unit by unit, on a real checkpoint.

2.3.0-unaligned (FixtureJob, oracle.json): slow holds input channel state (and output state), tostr output state
only, len and the sink none; the source holds a source reader's state. Ids are Flink's (ids.json).
"""

from __future__ import annotations

import json
from functools import cache

import pytest
from support.fixtures import fixture_named

from spillway.flink.operator_ids import DEDUCED, BoundOperator
from spillway.inspect.topology import (
    CHAINED,
    CUT,
    UNKNOWN,
    _side_empty,
    bind_job,
    load_plan,
    operator_facts,
    parse_plan,
    stores_stateless,
)
from spillway.model.checkpoint import CheckpointMetadata
from spillway.storage.load import load_checkpoint

FX = "2.3.0-unaligned"


@cache
def _ids() -> dict[str, str]:
    ids = json.loads((fixture_named(FX).root / "ids.json").read_text())
    return {n["name"]: n["operator_id"] for n in ids["stream_nodes"]}


@cache
def _checkpoint(name: str = FX) -> CheckpointMetadata:
    return load_checkpoint(fixture_named(name).checkpoint_dir).checkpoint


def _open(*names: str) -> BoundOperator:
    """An operator the binding left open between the named checkpoint operators ("-": not in the checkpoint)."""
    cands = tuple("-" if n == "-" else _ids()[n] for n in names)
    return BoundOperator("x", DEDUCED, None, False, False, "open", candidates=cands)


@pytest.mark.parametrize(
    ("candidates", "input_empty", "output_empty"),
    [
        pytest.param(("len", "sink: Writer"), True, True, id="neither-holds-channel-state"),
        pytest.param(("len", "slow"), False, False, id="slow-holds-both"),
        pytest.param(("tostr", "-"), True, False, id="tostr-holds-output-only"),
        pytest.param(("-", "slow"), False, False, id="absent-or-slow"),
        pytest.param(("-",), True, True, id="absent"),
    ],
)
def test_a_side_is_empty_when_no_candidate_holds_state_there(
    candidates: tuple[str, ...], input_empty: bool, output_empty: bool
) -> None:
    cp = _checkpoint()
    b = _open(*candidates)
    assert _side_empty(b, cp, "input") is input_empty
    assert _side_empty(b, cp, "output") is output_empty


def test_nothing_to_go_on_is_never_empty() -> None:
    cp = _checkpoint()
    assert _side_empty(None, cp, "input") is False
    assert _side_empty(_open(), cp, "output") is False
    # an id the checkpoint does not have holds nothing
    unknown = BoundOperator("x", DEDUCED, None, False, False, "open", candidates=("0" * 32,))
    assert _side_empty(unknown, cp, "input") is True


def test_operator_facts_are_the_checkpoints() -> None:
    """What binding reads of each operator, against the fixture's job."""
    facts = {f.operator_id: f for f in operator_facts(_checkpoint())}
    ids = _ids()
    slow, tostr, src, length = facts[ids["slow"]], facts[ids["tostr"]], facts[ids["Source: seq"]], facts[ids["len"]]
    assert (slow.keyed, slow.source_reader, slow.input_gates, slow.max_input_channel) == (True, False, (0,), 1)
    assert (slow.output_partitions, slow.max_subpartition, slow.stateless, slow.holds_state) == ((0,), 1, False, True)
    assert (tostr.keyed, tostr.input_gates, tostr.output_partitions, tostr.max_subpartition) == (False, (), (0,), 1)
    assert (src.source_reader, src.keyed, src.holds_state) == (True, False, True)
    assert (length.stateless, length.holds_state, length.input_gates, length.max_input_channel) == (True, False, (), -1)
    # a stateless operator stores no subtask entries, so no finished flags either
    assert (length.name, length.uid, length.parallelism, length.finished) == ("len", "len", 2, ())
    assert stores_stateless(_checkpoint())
    assert not stores_stateless(_checkpoint("1.12.5-unaligned"))  # 1.12 leaves stateless operators out


def test_finished_flags_of_operator_facts() -> None:
    """2.3.0-finished (oracle.json): bsrc fully finished, psrc subtask 0 finished."""
    ids = json.loads((fixture_named("2.3.0-finished").root / "ids.json").read_text())
    by_uid = {n["uid"]: n["operator_id"] for n in ids["stream_nodes"] if n["uid"]}
    facts = {f.operator_id: f for f in operator_facts(_checkpoint("2.3.0-finished"))}
    assert facts[by_uid["bsrc"]].finished == (True, True)
    assert facts[by_uid["psrc"]].finished == (True, False)
    assert facts[by_uid["bsrc"]].stateless is False and facts[by_uid["psrc"]].stateless is False


def test_chain_edges_decided_by_generated_ids_are_flinks() -> None:
    """1.15.4-prod-no-uid: where the generated ids decide an edge (the count of chained outputs a hash was made
    with), the answer is Flink's chain (ids.json vertices: startNewChain before enrich, disableChaining after
    slow-count, length -> discard chained); the rest stay open and say so."""
    fx = fixture_named("1.15.4-prod-no-uid")
    ids = json.loads((fx.root / "ids.json").read_text())
    vertex = {n["id"]: n["vertex_id"] for n in ids["stream_nodes"]}
    jb = bind_job(load_plan(fx.root / "plan.json"), load_checkpoint(fx.checkpoint_dir).checkpoint)
    decided = {e: s for e, s in jb.edges.items() if s != UNKNOWN}
    # No operator has a uid: every generated id is found, each tells its chained outputs, and every edge the
    # release's rules could chain is decided — as Flink chained it.
    assert set(decided) == set(jb.edges) and jb.uncertain_edges() == []
    assert {(3, 4): CUT, (10, 11): CUT, (13, 14): CHAINED}.items() <= decided.items()
    assert all((s == CHAINED) == (vertex[a] == vertex[b]) for (a, b), s in decided.items())
    assert jb.edge_reasons[(3, 4)] == "the upstream operator's generated id counts no chained output"
    assert jb.edge_reasons[(13, 14)] == "the upstream operator's generated id counts this many chained outputs"


def test_chain_edges_cut_by_channel_state() -> None:
    """2.3.0-unaligned's plan with its keyBy and rebalance printed FORWARD (so the rules would chain them): slow
    holds input channel state (only a chain head does) and output channel state (only a chain's tail does), so
    Flink cut both edges around it."""
    fx = fixture_named(FX)
    doc = json.loads((fx.root / "plan.json").read_text())
    for n in doc["nodes"]:
        for p in n.get("predecessors", []):
            p["ship_strategy"] = "FORWARD"
    by_name = {n["type"]: n["id"] for n in doc["nodes"]}
    jb = bind_job(parse_plan(doc), _checkpoint())
    into, out = (by_name["tostr"], by_name["slow"]), (by_name["slow"], by_name["len"])
    assert (jb.edges[into], jb.edge_reasons[into]) == (CUT, "the downstream operator holds input channel state")
    assert (jb.edges[out], jb.edge_reasons[out]) == (CUT, "the upstream operator holds output channel state")


def test_chain_edges_cut_between_subtasks_that_finished_differently() -> None:
    """The mixed-chain variant's plan: pmap (subtask 0 finished) -> bsink (fully finished) — a task finishes with
    all its operators, so they were not one chain in the checkpointed job."""
    from support.finished_variants import job_uids, recorded_dir

    topology = load_plan(recorded_dir("2.3.0", "mixed-chain") / "plan.json", job_uids("2.3.0"))
    names = {n.name: n.id for n in topology.stream_graph.nodes} if topology.stream_graph else {}
    jb = bind_job(topology, _checkpoint("2.3.0-finished"))
    edge = (names["pmap"], names["bsink: Writer"])
    assert (jb.edges[edge], jb.edge_reasons[edge]) == (CUT, "their subtasks finished differently")
    assert jb.edges[(names["Source: pseq"], names["pmap"])] != CUT  # both finished alike: not cut by this


@pytest.mark.parametrize("name", ["1.15.4-prod-no-uid", "1.20.3-prod-no-uid", "2.3.0-unaligned", "1.12.5-unaligned"])
def test_bound_vertices_have_flinks_heads_and_tails(name: str) -> None:
    """Every vertex whose head and tail are bound has Flink's: the head is the job vertex's id, the tail its
    ``getOperatorIDs()[0]`` (ids.json vertices); the members are Flink's ids of the chain; a doubtful edge inside
    a vertex is named on it."""
    fx = fixture_named(name)
    ids = json.loads((fx.root / "ids.json").read_text())
    vertices = {v["id"]: v for v in ids["vertices"]}
    cp = load_checkpoint(fx.checkpoint_dir).checkpoint
    topology = load_plan(fx.root / "plan.json")
    jb = bind_job(topology, cp)
    sg = topology.stream_graph
    assert sg is not None
    seen = 0
    for b in jb.vertices.values():
        if b.head is not None:
            flink = vertices[b.head.operator_id]  # a head is always a job vertex's id
            seen += 1
            if b.tail is not None:
                assert b.tail.operator_id == flink["operator_ids"][0]
            assert {o.operator_id for o in b.members} <= set(flink["operator_ids"])
        assert b.uncertain_edges == [
            f"{sg.node(a).name} -> {sg.node(c).name}"
            for (a, c), state in jb.edges.items()
            if state == UNKNOWN and a in b.vertex.node_ids and c in b.vertex.node_ids
        ]
        assert len(b.known) == len(b.operators) == len(b.vertex.node_ids)
        assert b.complete == all(b.known)
    assert seen >= 2
