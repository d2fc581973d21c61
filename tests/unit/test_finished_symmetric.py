"""FLIP-147 verdicts where the binding leaves operators open and every assignment of them agrees.

The ``finished-symmetric`` fixtures (1.15.4, 1.20.3; tests/fixtures/generator/README.md) are a job of two
interchangeable branches, each ``Source: half -> finish-on-0 -rebalance-> pass -> sink``, p 2, whose uids are not
their names: a 1.x plan (names only, metadata before V5 stores none) cannot tell which checkpoint id belongs to
which branch. The checkpoint's evidence splits the eight ids into three groups of interchangeable operators: the
two sources (source state, subtask 0 finished), the two finish-on-0 (subtask 0 finished, output channel state),
and the four stateless, running pass and sink. Flink's answers come from real restores (RestoreCheck) recorded in
tests/fixtures/finished-symmetric/ (tests/support/finished_symmetric.py)."""

from __future__ import annotations

import json
from math import factorial
from pathlib import Path

import pytest
from support.finished_symmetric import CASES, RELEASES, load_recorded, recorded_dir
from support.finished_variants import flink_rule
from support.fixtures import fixture_named
from support.plan_nodes import plan_to_flink_nodes

import spillway.inspect.finished as finished
from spillway.inspect.finished import PARTIALLY, RUNNING, _refused_however_chained, check
from spillway.inspect.topology import bind_job, load_plan, operator_binding
from spillway.model.checkpoint import CheckpointMetadata
from spillway.storage.load import load_checkpoint

PLANS = [pytest.param(r, p, id=f"{r}-{p}") for r in RELEASES for p in ("plan.json", "jobgraph.json")]

# The job's design: the first vertex of each branch has subtask 0 finished, everything behind the rebalance runs.
FIRST, SECOND = "Source: half -> finish-on-0", {"1.15.4": "pass -> Sink: sink", "1.20.3": "pass -> sink: Writer"}

# Assignments the evidence allows: with the stream-graph plan every operator is open, each group permuted among
# itself (2! sources, 2! finish-on-0, 4! stateless); the job-graph plan names each vertex's head (source, pass),
# leaving 2! finish-on-0 and 2! sinks.
ASSIGNMENTS = {
    "plan.json": factorial(2) * factorial(2) * factorial(4),
    "jobgraph.json": factorial(2) * factorial(2),
}


def _checkpoint(release: str) -> CheckpointMetadata:
    return load_checkpoint(fixture_named(f"{release}-finished-symmetric").checkpoint_dir).checkpoint


def _without_jid(path: Path) -> dict:
    doc = json.loads(path.read_text())
    doc.pop("jid", None)
    return doc


def test_every_case_is_recorded_on_both_releases() -> None:
    for release in RELEASES:
        assert {d.name for d in (recorded_dir(release, "x").parent).iterdir()} == set(CASES)
        for case, variant in CASES.items():
            assert load_recorded(release, case)["variant"] == variant
            assert load_recorded(release, case)["flink_version"] == release


@pytest.mark.parametrize("release", RELEASES)
def test_flink_restored_the_fixture_into_its_own_job(release: str) -> None:
    fx = fixture_named(f"{release}-finished-symmetric")
    assert flink_rule(load_recorded(release, "same-job")) is None
    assert _without_jid(recorded_dir(release, "same-job") / "jobgraph.json") == _without_jid(fx.root / "jobgraph.json")
    assert json.loads((recorded_dir(release, "same-job") / "plan.json").read_text()) == json.loads(
        (fx.root / "plan.json").read_text()
    )
    restored, made = (json.loads((d / "ids.json").read_text()) for d in (recorded_dir(release, "same-job"), fx.root))
    assert restored["stream_nodes"] == made["stream_nodes"] and restored["vertices"] == made["vertices"]


@pytest.mark.parametrize(("release", "plan"), PLANS)
def test_every_assignment_agrees_so_the_verdict_is_certain_without_uids(release: str, plan: str) -> None:
    fx = fixture_named(f"{release}-finished-symmetric")
    topology = load_plan(fx.root / plan)  # no uids given
    verdict = check(topology, _checkpoint(release))
    assert verdict.assignments_agree == ASSIGNMENTS[plan]
    assert verdict.certain
    flink_restored = flink_rule(load_recorded(release, "same-job")) is None
    assert flink_restored and verdict.answer is flink_restored
    assert verdict.violations == [] and verdict.unplaced_finished == [] and verdict.chain_doubts == []
    # the twin vertices share a label: an entry each (label and vertex), the classes the job's design gives
    assert len(verdict.classification) == 4
    assert {k.split(" (vertex ")[0]: v for k, v in verdict.classification.items()} == {
        FIRST: PARTIALLY,
        SECOND[release]: RUNNING,
    }
    # each branch's first vertex holds finished operators the binding left open: which is whose stays unsaid
    assert sum(v.startswith(f"{FIRST} (vertex ") for v in verdict.uncertain_vertices) == 2
    assert verdict.notes[-1] == (
        f"the binding leaves operators open, and each of the {ASSIGNMENTS[plan]} assignments the checkpoint's "
        "evidence allows gives this verdict: it is Flink's whichever is the job's"
    )
    # what the assignments settled is not left standing as a doubt
    assert not any("its class is unknown" in n or "cannot tell which vertex" in n for n in verdict.notes)


@pytest.mark.parametrize(("release", "plan"), PLANS)
def test_past_the_most_assignments_tried_the_verdict_stays_unknown(
    release: str, plan: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    fx = fixture_named(f"{release}-finished-symmetric")
    cp = _checkpoint(release)
    monkeypatch.setattr(finished, "MAX_ASSIGNMENTS", ASSIGNMENTS[plan])
    assert check(load_plan(fx.root / plan), cp).assignments_agree == ASSIGNMENTS[plan]
    monkeypatch.setattr(finished, "MAX_ASSIGNMENTS", ASSIGNMENTS[plan] - 1)
    verdict = check(load_plan(fx.root / plan), cp)
    assert verdict.assignments_agree == 0 and not verdict.certain and verdict.answer is None
    firsts = [v for k, v in verdict.classification.items() if k.startswith(f"{FIRST} (vertex ")]
    assert firsts == [finished.UNKNOWN, finished.UNKNOWN]
    assert any("its class is unknown" in n for n in verdict.notes)


@pytest.mark.parametrize("release", RELEASES)
def test_refusal_of_a_split_branch_agrees_with_flink(release: str) -> None:
    """half -rebalance-> finish-on-0: Flink refuses (a partly finished vertex fed all-to-all by a partly finished
    one). The job-graph plan names every vertex: spillway is certain and names Flink's rule and vertex; the
    stream-graph plan of the changed job does not fit the checkpoint's evidence, so it never says restorable."""
    d = recorded_dir(release, "symmetric-split")
    flink = load_recorded(release, "symmetric-split")
    assert flink_rule(flink) == "all-to-all-predecessor"
    cp = _checkpoint(release)
    topology = load_plan(d / "jobgraph.json")
    verdict = check(topology, cp)
    assert verdict.certain and verdict.answer is False
    # the vertex heads decide it (the sinks left open are running whichever is whose): no assignment needed
    assert verdict.assignments_agree == 0
    # Flink stops at the first vertex it refuses; spillway names both branches' finish-on-0, Flink's among them
    assert [(v.rule, v.vertex) for v in verdict.violations] == [("all-to-all-predecessor", "finish-on-0")] * 2
    ids = {v.vertex_id for v in topology.vertices.values() if v.label() == "finish-on-0"}
    assert len(ids) == 2 and sum(f"finish-on-0({i})" in flink["error"] for i in ids) == 1
    assert check(load_plan(d / "plan.json"), cp).answer is not True


@pytest.mark.parametrize("release", RELEASES)
def test_a_chain_of_finished_and_running_operators_is_never_called_restorable(release: str) -> None:
    """pass and sink chained behind finish-on-0: Flink refuses (mixed finished state). The chained operators'
    ids are in no plan and the changed job does not fit the checkpoint's evidence: spillway does not know, and
    says so rather than guess."""
    d = recorded_dir(release, "symmetric-chained")
    flink = load_recorded(release, "symmetric-chained")
    assert flink_rule(flink) == "mixed"
    cp = _checkpoint(release)
    for plan in ("plan.json", "jobgraph.json"):
        verdict = check(load_plan(d / plan), cp)
        assert verdict.answer is None and not verdict.certain, plan
        assert verdict.unplaced_finished, plan


@pytest.mark.parametrize("release", RELEASES)
def test_the_binding_leaves_the_twins_open_and_keeps_flinks_id_among_the_candidates(release: str) -> None:
    """Every operator has a twin the evidence cannot tell from it: with the stream-graph plan nothing is bound
    exactly, and each operator's candidates hold Flink's id for it (ids.json); the job-graph plan names the vertex
    heads, bound to Flink's vertex ids."""
    fx = fixture_named(f"{release}-finished-symmetric")
    cp = _checkpoint(release)
    flink = plan_to_flink_nodes(fx.root)
    binding = operator_binding(load_plan(fx.root / "plan.json"), cp)
    assert binding is not None and len(binding.operators) == len(flink) == 8
    for b in binding.operators:
        assert not b.exact and b.node_id is not None
        assert flink[b.node_id]["operator_id"] in b.candidates, b
        assert len(b.candidates) >= 2, b
    ids = json.loads((fx.root / "ids.json").read_text())
    by_job = operator_binding(load_plan(fx.root / "jobgraph.json"), cp)
    assert by_job is not None
    assert {b.operator_id for b in by_job.operators if b.exact} == {v["id"] for v in ids["vertices"]}


@pytest.mark.parametrize("release", RELEASES)
def test_the_same_stream_graph_plan_hides_the_chain_that_decides(release: str) -> None:
    """finish-on-0 -> pass forward in both branches, pass chained (symmetric-chained) or not (disableChaining,
    symmetric-unchained): getExecutionPlan() writes the same plan for both. Flink refuses the first (rule 1, mixed)
    and passes the second through its FLIP-147 check (the job then fails at startup restoring finish-on-0's output
    channel state, written for a rebalance, into a forward partition: not a FLIP-147 matter). With every uid the
    job has (Flink's, ids.json) the stream-graph plan still cannot tell them apart: unknown, with both edges named."""
    chained, unchained = recorded_dir(release, "symmetric-chained"), recorded_dir(release, "symmetric-unchained")
    assert (chained / "plan.json").read_bytes() == (unchained / "plan.json").read_bytes()
    assert flink_rule(load_recorded(release, "symmetric-chained")) == "mixed"
    passed = load_recorded(release, "symmetric-unchained")
    assert passed["outcome"] == "failed" and passed["stage"] == "startup", passed
    assert passed["error_class"] == "java.lang.ArrayIndexOutOfBoundsException", passed
    uids = {f"#{pid}": n["uid"] for pid, n in plan_to_flink_nodes(chained).items()}
    assert sorted(uids.values()) == sorted(f"{op}-{b}" for op in ("half", "finish", "pass", "sink") for b in "ab")
    verdict = check(load_plan(chained / "plan.json", uids), _checkpoint(release))
    assert verdict.answer is None and not verdict.certain
    assert verdict.chain_doubts == ["finish-on-0 (PARTIALLY_FINISHED) -> pass (ALL_RUNNING)"] * 2
    assert verdict.refusal_holds is None  # no refusal found to hold or not
    # the job-graph plan of the chain Flink cut: no FLIP-147 refusal claimed
    assert check(load_plan(unchained / "jobgraph.json"), _checkpoint(release)).answer is not False


@pytest.mark.parametrize("release", RELEASES)
def test_some_chaining_of_the_doubted_edges_passes_so_no_refusal_holds(
    release: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The two doubted edges of the plan above, each chained or cut (four chainings): chained, Flink refused
    (symmetric-chained); cut, its FLIP-147 check passed (symmetric-unchained). So a refusal does not hold under
    every chaining the plan allows; past the most chainings tried it is not known."""
    d = recorded_dir(release, "symmetric-chained")
    uids = {f"#{pid}": n["uid"] for pid, n in plan_to_flink_nodes(d).items()}
    topology = load_plan(d / "plan.json", uids)
    cp = _checkpoint(release)
    job = bind_job(topology, cp)
    assert job.operators is not None
    assert _refused_however_chained(job.view or topology, cp, job.operators) is False
    monkeypatch.setattr(finished, "MAX_CHAIN_ALTERNATIVES", 2**2)
    assert _refused_however_chained(job.view or topology, cp, job.operators) is False
    monkeypatch.setattr(finished, "MAX_CHAIN_ALTERNATIVES", 2**2 - 1)
    assert _refused_however_chained(job.view or topology, cp, job.operators) is None
