"""FLIP-147 verdict rules one by one (docs/format/finished-state.md), on the recorded restore variants.

Every expected outcome is Flink's: either what Flink did on the recorded restore
(tests/fixtures/finished-variants/<release>/<variant>/flink.json), or what Flink's rules say for a plan that only
differs from a recorded one in a fact those rules name (a chaining strategy that forbids chaining,
docs/format/operator-ids.md §"Chaining rules"; a vertex's classes, docs/format/finished-state.md "Restore rules").
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import replace
from typing import Any

import pytest
from support.finished_variants import job_uids, load_recorded, recorded_dir
from support.fixtures import fixture_named

from spillway.flink.stream_graph import StreamGraph
from spillway.inspect.finished import FULLY, PARTIALLY, RUNNING, UNKNOWN, check
from spillway.inspect.topology import Topology, load_plan, parse_plan
from spillway.model.checkpoint import CheckpointMetadata
from spillway.storage.load import load_checkpoint

RELEASES = ["1-15-4", "2-3-0"]


def _checkpoint(release: str) -> CheckpointMetadata:
    return load_checkpoint(fixture_named(f"{release.replace('-', '.')}-finished").checkpoint_dir).checkpoint


def _plan(release: str, variant: str, flavour: str = "plan.json", uids: bool = True) -> Topology:
    r = release.replace("-", ".")
    return load_plan(recorded_dir(r, variant) / flavour, job_uids(r) if uids else None)


def _bsink(release: str) -> str:
    """The bounded branch's sink: a Sink V2 writer from 1.19 on (FixtureJob.java)."""
    return "bsink: Writer" if release.startswith("2") else "Sink: bsink"


def _with_strategy(topology: Topology, strategies: dict[str, str]) -> Topology:
    """The plan with chaining strategies it cannot show (``disableChaining()`` gives NEVER, ``startNewChain()``
    HEAD) set on the named operators."""
    sg = topology.stream_graph
    assert sg is not None
    ids = {n.name: n.id for n in sg.nodes}
    return replace(
        topology, stream_graph=sg.with_nodes({ids[name]: {"chaining_strategy": s} for name, s in strategies.items()})
    )


@pytest.mark.parametrize("release", RELEASES)
def test_the_mixed_chain_variant_is_in_doubt_without_chaining_strategies(release: str) -> None:
    """Flink refused the recorded mixed-chain restore (bsink chained behind pmap); the stream-graph plan does not
    show whether the job broke that chain, so the verdict names the edge and is not certain."""
    topology = _plan(release, "mixed-chain")
    verdict = check(topology, _checkpoint(release))
    assert load_recorded(release.replace("-", "."), "mixed-chain")["outcome"] == "refused"
    assert verdict.chain_doubts == [f"pmap ({PARTIALLY}) -> {_bsink(release)} ({FULLY})"]
    assert not verdict.certain and verdict.answer is False


@pytest.mark.parametrize("release", RELEASES)
@pytest.mark.parametrize(
    ("which", "strategy"),
    [
        pytest.param("down", "HEAD", id="startNewChain-on-bsink"),
        pytest.param("down", "NEVER", id="disableChaining-on-bsink"),
        pytest.param("up", "NEVER", id="disableChaining-on-pmap"),
    ],
)
def test_a_chaining_strategy_that_forbids_the_chain_removes_the_doubt(release: str, which: str, strategy: str) -> None:
    """With the strategy known, pmap -> bsink is certainly not chained (a downstream HEAD or NEVER, or an upstream
    NEVER, is never chained to its input): bsink is a vertex of its own, fully finished behind the partially
    finished pmap, which Flink refuses ("fully finished vertices predeceased with the ones not fully finished")."""
    name = "pmap" if which == "up" else _bsink(release)
    topology = _with_strategy(_plan(release, "mixed-chain"), {name: strategy})
    verdict = check(topology, _checkpoint(release))
    assert verdict.chain_doubts == []
    assert verdict.certain
    assert verdict.answer is False
    assert [(v.rule, v.vertex) for v in verdict.violations] == [("fully-finished-predecessor", _bsink(release))]


@pytest.mark.parametrize("release", RELEASES)
def test_an_upstream_head_still_chains_to_its_output(release: str) -> None:
    """HEAD only stops chaining to an operator's input; pmap -> bsink stays in doubt."""
    topology = _with_strategy(_plan(release, "mixed-chain"), {"pmap": "HEAD"})
    verdict = check(topology, _checkpoint(release))
    assert verdict.chain_doubts == [f"pmap ({PARTIALLY}) -> {_bsink(release)} ({FULLY})"]
    assert not verdict.certain


def test_running_and_finished_classes() -> None:
    """Flink's classes of the finished job's operators (FixtureJob: the bounded branch fully finished, the
    partial branch's subtask 0 finished, the rest running), by the job-graph plan, which binds every operator."""
    verdict = check(_plan("2-3-0", "without-bmap", "jobgraph.json"), _checkpoint("2-3-0"))
    assert verdict.classification["Source: bseq"] == FULLY
    assert verdict.classification["slow"] == RUNNING
    assert verdict.classification["Source: pseq -> pmap -> psink: Writer"] == PARTIALLY


# ------------------------------------------------------------------ notes, uncertain vertices, exact messages


def _vertex_ids(release: str, variant: str) -> dict[str, str]:
    """Job-vertex label -> Flink's job-vertex id (= the head operator's id), from the recorded job graph."""
    doc = json.loads((recorded_dir(release.replace("-", "."), variant) / "jobgraph.json").read_text())
    return {n["description"].split("<br/>")[0]: n["id"] for n in doc["nodes"]}


def test_finished_sources_that_cannot_be_placed_are_named_with_their_class() -> None:
    """1.15.4 (metadata V3, no names): the sources' uids differ from their names (FixtureJob), so without the
    uids the stream-graph plan cannot give their ids. The finished ones are Flink's bsrc (fully finished) and psrc
    (subtask 0 finished, oracle.json), under the ids the job graph gives their vertices; every vertex that holds
    a source may hold them: its class is unknown and the verdict is not certain."""
    ids = _vertex_ids("1-15-4", "fed-by-finished")
    verdict = check(_plan("1-15-4", "fed-by-finished", uids=False), _checkpoint("1-15-4"))
    unplaced = [f"{ids['Source: bseq']} ({FULLY})", f"{ids['Source: pseq']} ({PARTIALLY})"]
    assert verdict.unplaced_finished == unplaced
    with_source = [label for label in verdict.classification if label.startswith("Source: ")]
    assert len(with_source) == 3
    assert verdict.uncertain_vertices == with_source
    assert {label: verdict.classification[label] for label in with_source} == dict.fromkeys(with_source, UNKNOWN)
    assert verdict.answer is None and verdict.violations == []
    assert verdict.notes == [
        "cannot tell which vertex holds the finished operator(s) "
        + ", ".join(unplaced)
        + " (no operator names before metadata V5, no chained-operator ids in plans): if one now sits in a "
        "chain with running operators, Flink refuses the restore",
        *(
            f"{label}: not every chained operator could be identified, and a finished operator could be one of "
            "them: its class is unknown"
            for label in with_source
        ),
    ]


def test_a_finished_operator_left_out_of_the_new_job_is_not_checked() -> None:
    """without-bmap: Flink restored (with --allowNonRestoredState) although bmap, fully finished, is gone."""
    ids = _vertex_ids("1-15-4", "mixed-chain")  # bmap's job vertex in a job that still has it
    verdict = check(_plan("1-15-4", "without-bmap", "jobgraph.json", uids=False), _checkpoint("1-15-4"))
    assert load_recorded("1.15.4", "without-bmap")["outcome"] == "restored"
    assert verdict.certain and verdict.answer is True
    assert verdict.unplaced_finished == []
    assert verdict.notes == [f"{ids['bmap']} ({FULLY}) is not in the plan: Flink does not check it"]


def test_new_chained_operators_count_as_running() -> None:
    """chained-after-finished: bmap (fully finished) heads a chain with the new bnew and bnewsink, which have no
    state; Flink counts them running and refuses the mixed vertex, with its words."""
    flink = load_recorded("1.15.4", "chained-after-finished")
    verdict = check(_plan("1-15-4", "chained-after-finished", "jobgraph.json", uids=False), _checkpoint("1-15-4"))
    label = "bmap -> bnew -> Sink: bnewsink"
    assert verdict.uncertain_vertices == [label]
    assert verdict.classification[label] in (RUNNING, FULLY)  # one of its classes (Flink gives none: it refuses)
    assert verdict.notes == [
        f"{label}: chained operator(s) not found in the checkpoint count as running (every finished operator of "
        "the checkpoint is placed elsewhere)"
    ]
    assert "which contain mixed operator finished state" in flink["error"]
    assert [(v.rule, v.vertex, v.message) for v in verdict.violations] == [
        (
            "mixed",
            label,
            f"Can not restore vertex {label} which contain mixed operator finished state: ['{RUNNING}', '{FULLY}']",
        )
    ]


def test_the_chain_doubt_note_names_each_edge() -> None:
    verdict = check(_plan("2-3-0", "fed-by-finished", uids=False), _checkpoint("2-3-0"))
    doubt = f"bmap ({FULLY}) -> bextra: Writer ({RUNNING})"
    assert verdict.chain_doubts == [doubt]
    assert verdict.notes[-1] == (
        "the stream-graph plan does not show where Flink breaks chains (disableChaining, startNewChain, slot "
        f"sharing groups); whether these operators share a vertex decides the verdict: {doubt} (give the "
        "job-graph plan to be sure)"
    )


@pytest.mark.parametrize("release", RELEASES)
def test_refusals_name_the_vertex_its_predecessor_and_their_classes(release: str) -> None:
    """Flink's rule and vertex for each recorded refusal, and spillway's words for it."""
    r = release.replace("-", ".")
    sink = "bsink: Writer" if r >= "1.19" else "Sink: bsink"
    psink = "psink: Writer" if r >= "1.19" else "Sink: psink"
    cases = {
        "rewired-fully-finished": (
            "fully-finished-predecessor",
            sink,
            f"fully finished vertex {sink} has predecessor slow -> tolong that is {RUNNING}",
        ),
        "rewired-partially-finished": (
            "all-to-all-predecessor",
            f"pmap -> {psink}",
            f"partially finished vertex pmap -> {psink} is fed by slow -> tolong ({RUNNING}) over an all-to-all edge",
        ),
        "rewired-partially-finished-pointwise": (
            "pointwise-predecessor",
            f"pmap -> {psink}",
            f"partially finished vertex pmap -> {psink} is fed by all-running slow -> tolong over a pointwise edge",
        ),
    }
    for variant, expected in cases.items():
        verdict = check(_plan(release, variant, "jobgraph.json"), _checkpoint(release))
        assert [(v.rule, v.vertex, v.message) for v in verdict.violations] == [expected], variant


# ------------------------------------------------------- job graphs edited where the recorded ones are silent


def _edited(
    release: str, variant: str, edit: Callable[[dict[str, dict[str, Any]], list[dict[str, Any]]], None]
) -> Topology:
    """The recorded job graph of ``variant`` with ``edit(nodes by first chained name, node list)`` applied, and the
    job's uids."""
    r = release.replace("-", ".")
    doc = json.loads((recorded_dir(r, variant) / "jobgraph.json").read_text())
    by_head = {n["description"].split("<br/>")[0]: n for n in doc["nodes"]}
    edit(by_head, doc["nodes"])
    topology = parse_plan(doc, uids=job_uids(r))
    return topology


def _edge(node: dict[str, Any], ship: str, num: int) -> dict[str, Any]:
    return {"id": node["id"], "num": num, "ship_strategy": ship}


@pytest.mark.parametrize("release", RELEASES)
def test_an_all_to_all_edge_counts_even_next_to_a_pointwise_one_from_the_same_vertex(release: str) -> None:
    """The partially finished psrc chain fed by the running slow twice, over REBALANCE and FORWARD: the
    all-to-all edge from a predecessor that is not fully finished is Flink's refusal (rule 3)."""

    def edit(v: dict[str, dict[str, Any]], _: list[dict[str, Any]]) -> None:
        v["Source: pseq"]["inputs"] = [_edge(v["slow"], "REBALANCE", 0), _edge(v["slow"], "FORWARD", 1)]

    verdict = check(_edited(release, "fed-by-finished", edit), _checkpoint(release))
    assert [v.rule for v in verdict.violations] == ["all-to-all-predecessor"]


@pytest.mark.parametrize("release", RELEASES)
def test_a_mixed_vertex_gets_no_predecessor_check(release: str) -> None:
    """Flink fails computing a mixed vertex's state before it looks at predecessors: mixed only."""

    def edit(v: dict[str, dict[str, Any]], _: list[dict[str, Any]]) -> None:
        v["Source: pseq"]["inputs"] = [_edge(v["slow"], "REBALANCE", 0)]

    verdict = check(_edited(release, "mixed-chain", edit), _checkpoint(release))
    assert [v.rule for v in verdict.violations] == ["mixed"]
    label = verdict.violations[0].vertex
    assert verdict.classification[label] in (FULLY, PARTIALLY)  # one of its classes (Flink gives none)


@pytest.mark.parametrize("release", RELEASES)
def test_a_mixed_vertex_does_not_hide_the_refusals_after_it(release: str) -> None:
    """The mixed vertex listed first, and bmap (fully finished) fed by it and by the running slow: bmap breaks
    rule 2 through slow whatever the mixed vertex is; both refusals are reported."""

    def edit(v: dict[str, dict[str, Any]], nodes: list[dict[str, Any]]) -> None:
        mixed = v["Source: pseq"]
        v["bmap"]["inputs"] = [_edge(mixed, "REBALANCE", 0), _edge(v["slow"], "REBALANCE", 1)]
        nodes.remove(mixed)
        nodes.insert(0, mixed)

    verdict = check(_edited(release, "mixed-chain", edit), _checkpoint(release))
    assert [(v.rule, v.vertex) for v in verdict.violations] == [
        ("mixed", verdict.violations[0].vertex),
        ("fully-finished-predecessor", "bmap"),
    ]
    assert verdict.violations[0].vertex.startswith("Source: pseq -> pmap")
    assert verdict.violations[1].message == f"fully finished vertex bmap has predecessor slow that is {RUNNING}"


@pytest.mark.parametrize("release", RELEASES)
def test_a_batch_exchange_is_never_chained(release: str) -> None:
    """A BATCH exchange is never chained (StreamingJobGraphGenerator#isChainable, 1.11+): pmap -> bsink over one is
    two vertices, and Flink's rule 2 refuses the fully finished bsink behind the partially finished pmap."""
    topology = _plan(release, "mixed-chain")
    sg = topology.stream_graph
    assert sg is not None
    ids = {n.name: n.id for n in sg.nodes}
    edge = (ids["pmap"], ids[_bsink(release)])
    topology = replace(
        topology,
        stream_graph=StreamGraph(
            sg.nodes,
            tuple(replace(e, exchange_mode="BATCH") if (e.source, e.target) == edge else e for e in sg.edges),
            sg.chaining_enabled,
            sg.chain_different_max_parallelism,
            sg.inferred_edge_order,
        ),
    )
    verdict = check(topology, _checkpoint(release))
    assert verdict.chain_doubts == []
    assert verdict.certain and verdict.answer is False
    assert [(v.rule, v.vertex) for v in verdict.violations] == [("fully-finished-predecessor", _bsink(release))]


def test_every_doubtful_edge_is_named() -> None:
    """fed-by-finished with a new running operator pextra behind pmap, and the running sink fed by len and by
    slow (a union: two inputs, never chained): both edges where operators of different classes may share a chain
    are named, whatever edges come before them."""
    r = "2.3.0"
    doc = json.loads((recorded_dir(r, "fed-by-finished") / "plan.json").read_text())
    by_name = {n["type"]: n for n in doc["nodes"]}
    by_name["sink: Writer"]["predecessors"].append({"id": by_name["slow"]["id"], "ship_strategy": "REBALANCE"})
    doc["nodes"].append(
        {
            "id": 30,
            "type": "pextra",
            "pact": "Operator",
            "contents": "pextra",
            "parallelism": 2,
            "predecessors": [{"id": by_name["pmap"]["id"], "ship_strategy": "FORWARD"}],
        }
    )
    topology = parse_plan(doc, uids=job_uids(r))
    verdict = check(topology, _checkpoint("2-3-0"))
    doubts = [f"bmap ({FULLY}) -> bextra: Writer ({RUNNING})", f"pmap ({PARTIALLY}) -> pextra ({RUNNING})"]
    assert verdict.chain_doubts == doubts
    assert verdict.notes[-1] == (
        "the stream-graph plan does not show where Flink breaks chains (disableChaining, startNewChain, slot "
        f"sharing groups); whether these operators share a vertex decides the verdict: {'; '.join(doubts)} (give "
        "the job-graph plan to be sure)"
    )


def test_a_predecessor_of_unknown_class_is_not_leaned_on() -> None:
    """rewired-fully-finished on 1.15.4 without the uids: bsink is fully finished, its predecessor's vertex
    (slow -> tolong chain cut, tolong alone) may hold a finished source, so its class is unknown. Flink refused
    (tolong was running); spillway cannot know that here and says so instead of guessing either way."""
    verdict = check(_plan("1-15-4", "rewired-fully-finished", uids=False), _checkpoint("1-15-4"))
    assert load_recorded("1.15.4", "rewired-fully-finished")["outcome"] == "refused"
    assert verdict.classification["Sink: bsink"] == FULLY
    assert verdict.classification["tolong"] == UNKNOWN
    assert verdict.violations == [] and verdict.answer is None
