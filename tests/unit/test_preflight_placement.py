"""Where preflight places each checkpoint operator in the new job, and what it leaves a guess, on the recorded
preflight matrix: the new job's plans as Flink submitted them (plan.json, jobgraph.json of each recorded restore),
the counted job's checkpoints, and Flink's own ids, vertices and names of that job (the fixture's ids.json).

Flink restored the unchanged job ("same") on every release; what spillway may say without the new job's uids is
"unknown" wherever Flink's id of an operator is not computed from the new job, never a placement it cannot show."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from support import finished_variants
from support.damaged import copy_fixture
from support.fixtures import fixture_named
from support.preflight_matrix import case_uids, preflight_settings, recorded_dir

from spillway.inspect import finished
from spillway.inspect.preflight import NOTE, UNKNOWN, PreflightVerdict, check, place_operators
from spillway.inspect.restore_checks import REFUSED
from spillway.inspect.topology import Topology, Vertex, bind_job, load_plan
from spillway.storage.load import load_checkpoint


def _flink(fixture: str) -> dict[str, dict[str, Any]]:
    """Stream node name -> Flink's node (operator id, job vertex, uid) as Flink built the counted job."""
    ids = json.loads((fixture_named(fixture).root / "ids.json").read_text())
    return {n["name"]: n for n in ids["stream_nodes"]}


def _spot(topology: Topology, flink: dict[str, dict[str, Any]], name: str) -> tuple[str, int]:
    """(the new plan's vertex key, chain position) of the operator Flink ran as ``name``: the plan's vertex that
    names it, at its place among the nodes Flink put in that job vertex."""
    node = flink[name]
    chain = [n["id"] for n in flink.values() if n["vertex_id"] == node["vertex_id"]]
    [key] = [k for k, v in topology.vertices.items() if name in v.names]
    return key, sorted(chain).index(node["id"])


def _placement(release: str, flavour: str, uids: dict[str, str] | None = None) -> Any:
    topology = load_plan(recorded_dir(release, "same") / flavour, uids).as_new_job()
    checkpoint = load_checkpoint(fixture_named(f"{release}-counted").checkpoint_dir).checkpoint
    return topology, place_operators(topology, checkpoint, bind_job(topology, checkpoint))


def test_without_uids_a_stream_plan_places_by_name_only_and_leaves_the_structural_guess_open() -> None:
    """1.20.3 stores no names or uids. From the new job's stream-graph plan alone, parse/count/check are found by
    the uids their names guess (the counted job's uids equal its names): placed, but as assumptions; the source,
    bound only as the last operator left of its parallelism, is a guess and placed nowhere."""
    flink = _flink("1.20.3-counted")
    topology, place = _placement("1.20.3", "plan.json")
    named = ("parse", "count", "check", "sink: Writer")
    assert place.where == {flink[n]["operator_id"]: _spot(topology, flink, n) for n in named}
    assert place.assumed == {flink[n]["operator_id"]: n for n in named}
    [guess] = place.guessed
    assert guess.startswith("'Source: seq': ") and "structural guess" in guess
    assert flink["Source: seq"]["operator_id"] not in place.where
    assert place.unknown == []
    # the answer says so first, and is unknown (Flink restored this job: the answer must not be no either)
    checkpoint = load_checkpoint(fixture_named("1.20.3-counted").checkpoint_dir).checkpoint
    answer = check(topology, checkpoint)
    notes = [(r.check, r.verdict, r.message) for r in answer.reasons if r.verdict == NOTE]
    assert notes == [("binding", NOTE, f"plan operator bound by a structural guess, not Flink's rule: {guess}")]
    assert answer.answer is PreflightVerdict.UNKNOWN
    # the source's output channel state: where it sits in the new job is not known, so neither is what Flink does
    source = flink["Source: seq"]["operator_id"]
    assert [(r.verdict, r.message) for r in answer.reasons if r.check == "channel-state"] == [
        (
            UNKNOWN,
            f"channel state of {source}: its operator's place in the new job is not known (see operator-mapping), so "
            "whether the state stays at a chain's end, and whether its exchange keeps as many channels, is not "
            "checked; Flink refuses the first, and a task given a channel index its exchange no longer has fails "
            "after start",
        )
    ]


def test_a_job_graph_plan_confirms_each_head_by_its_vertex_id() -> None:
    """The job-graph plan names each vertex by its head's id (Flink's own): no head is an assumption, and the
    source is placed by that id, not guessed."""
    flink = _flink("1.20.3-counted")
    topology, place = _placement("1.20.3", "jobgraph.json")
    assert place.where == {n["operator_id"]: _spot(topology, flink, name) for name, n in flink.items()}
    assert {n: place.where[flink[n]["operator_id"]] for n in ("Source: seq", "parse", "count", "check")} == {
        n: (flink[n]["vertex_id"], 0) for n in ("Source: seq", "parse", "count", "check")
    }
    # the chained sink heads nothing: its id comes from a uid guessed from its name, an assumption
    assert place.assumed == {flink["sink: Writer"]["operator_id"]: "sink: Writer"}
    assert place.guessed == [] and place.unknown == []


def test_a_given_uid_that_hashes_to_another_heads_id_is_not_the_new_jobs() -> None:
    """count's and check's uids given the wrong way round: each hashes to the other's id in the checkpoint, but
    the job-graph plan says its vertex's head has its own id (Flink's), so neither is placed."""
    flink = _flink("2.0.0-counted")
    uids = case_uids("2.0.0", "same") | {"count": "check", "check": "count"}
    _, place = _placement("2.0.0", "jobgraph.json", uids)
    for name, other in (("count", "check"), ("check", "count")):
        [said] = [u for u in place.unknown if u.startswith(f"{name!r}: ")]
        assert said.startswith(f"{name!r}: bound to {flink[other]['operator_id']} (")
        assert said.endswith(
            f"), but the job-graph plan says the head of its vertex has id {flink[name]['vertex_id']}: the uid "
            "given is not the new job's"
        )
        assert flink[other]["operator_id"] not in place.where
    assert set(place.where) == {flink[n]["operator_id"] for n in ("Source: seq", "parse", "sink: Writer")}


def test_a_plan_without_a_graph_places_nothing_and_says_so() -> None:
    """A plan whose operators have no Flink id at all (neither flavour's graph): nothing is placed, and the answer
    is unknown, never yes."""
    checkpoint = load_checkpoint(fixture_named("2.0.0-counted").checkpoint_dir).checkpoint
    bare = Topology({"v": Vertex("v", ("count",), 2)}, "job-graph")
    place = place_operators(bare, checkpoint)
    assert place.where == {} and place.unknown == ["the plan could not be bound to the checkpoint at all"]
    answer = check(bare, checkpoint)
    assert answer.answer is PreflightVerdict.UNKNOWN
    assert [(r.verdict, r.message) for r in answer.reasons if r.check == "binding"] == [
        (NOTE, "plan operator without a known Flink id: the plan could not be bound to the checkpoint at all")
    ]
    held = {
        o.operator_id
        for o in checkpoint.operators
        if o.operator_id != _flink("2.0.0-counted")["sink: Writer"]["operator_id"]
    }
    unknown = [r for r in answer.reasons if r.check == "operator-mapping" and r.verdict == UNKNOWN]
    assert {next(i for i in held if i in r.message) for r in unknown} == held


def test_damage_in_a_1x_checkpoint_is_named_by_the_new_plans_names(tmp_path: Path) -> None:
    """1.20.3 stores ids only; a missing channel-state file of parse (Flink fails the task that opens it) is named
    by the name the new job's plan gives that operator."""
    parse = _flink("1.20.3-counted")["parse"]["operator_id"]
    copy = copy_fixture("1.20.3-counted", tmp_path)
    [state] = [p for p, pairs in copy.channel_files() if any(op.operator_id == parse for op, _ in pairs)]
    state.unlink()
    loaded = load_checkpoint(copy.chk)
    topology = load_plan(recorded_dir("1.20.3", "same") / "jobgraph.json", case_uids("1.20.3", "same"))
    answer = check(topology, loaded.checkpoint, preflight_settings("1.20.3", "same", str(copy.chk)), loaded)
    [damage] = [r for r in answer.reasons if r.check == "files"]
    assert damage.verdict == REFUSED
    assert damage.message == f"file-exists: missing file (referenced by parse input_channel_state) ({state})"
    assert answer.answer is PreflightVerdict.NO


def test_an_uncertain_flip147_verdict_is_unknown_with_its_notes() -> None:
    """1.15.4 stores no names: without the uids, the new job's plan cannot say which vertex holds the finished
    sources (bsrc fully, psrc partly finished: the fixture's oracle.json), so the FLIP-147 rules are not decided."""
    release = "1.15.4"
    plan = load_plan(finished_variants.recorded_dir(release, "fed-by-finished") / "plan.json")
    checkpoint = load_checkpoint(fixture_named(f"{release}-finished").checkpoint_dir).checkpoint
    verdict = finished.check(plan, checkpoint)
    assert verdict.answer is None and verdict.notes
    answer = check(plan, checkpoint)
    assert [(r.verdict, r.message) for r in answer.reasons if r.check == "finished-state"] == [
        (UNKNOWN, "; ".join(verdict.notes))
    ]
    assert answer.answer is PreflightVerdict.UNKNOWN


def test_each_new_vertex_lists_the_checkpoint_operators_it_gets() -> None:
    """The counted job restored unchanged on 2.0.0 (Flink restored it): each job vertex gets the operators Flink ran
    in it (ids.json), at the checkpoint's parallelism, with the channel-state bytes Flink wrote for them."""
    fx = fixture_named("2.0.0-counted")
    ids = json.loads((fx.root / "ids.json").read_text())
    checkpoint = load_checkpoint(fx.checkpoint_dir).checkpoint
    stored = {o.operator_id: o for o in checkpoint.operators}
    topology = load_plan(recorded_dir("2.0.0", "same") / "jobgraph.json", case_uids("2.0.0", "same"))
    rows = check(topology, checkpoint).vertices
    flink: dict[str, list[str]] = {}
    for n in ids["stream_nodes"]:
        if n["operator_id"] in stored:
            flink.setdefault(n["vertex_id"], []).append(n["operator_id"])

    def channel_bytes(vertex: str, side: str) -> int:
        return sum(
            h.state_size
            for i in flink[vertex]
            for s in stored[i].subtasks
            for h in (s.input_channel_state if side == "input" else s.result_subpartition_state)
        )

    assert {r["key"]: sorted(r["operators"]) for r in rows} == {k: sorted(v) for k, v in flink.items()}
    assert [set(r) for r in rows] == [
        {
            "vertex",
            "key",
            "parallelism",
            "checkpoint_parallelism",
            "operators",
            "input_channel_bytes",
            "output_channel_bytes",
        }
    ] * len(rows)
    for r in rows:
        assert r["vertex"] == topology.vertices[r["key"]].label()
        assert (r["parallelism"], r["checkpoint_parallelism"]) == (2, 2)
        assert r["input_channel_bytes"] == channel_bytes(r["key"], "input")
        assert r["output_channel_bytes"] == channel_bytes(r["key"], "output")
    assert sum(r["input_channel_bytes"] + r["output_channel_bytes"] for r in rows) > 0
