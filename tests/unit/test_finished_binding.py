"""FLIP-147 verdicts from the exact binding, on every release with finished tasks (1.14 … 2.3).

Expected classes come from the job's design (tests/fixtures/generator: the bounded branch bsrc -> bmap ->
bsink has finished entirely, the branch psrc -> pmap -> psink has subtask 0 finished, the main job runs);
that Flink accepts the original topology is proven by real restores (tests/integration/test_flink_restore.py)."""

from __future__ import annotations

import pytest
from support.fixtures import Fixture, all_fixtures

from spillway.inspect.finished import FULLY, PARTIALLY, RUNNING, UNKNOWN, check
from spillway.inspect.topology import load_plan
from spillway.storage.load import load_checkpoint

FINISHED = [pytest.param(f, id=f.name) for f in all_fixtures() if f.info["scenario"] == "finished"]
UIDS = {"Source: seq": "src", "Source: bseq": "bsrc", "Source: pseq": "psrc"}  # where uid != name


def _expected(label: str) -> str:
    if "bseq" in label or "bmap" in label or "bsink" in label:
        return FULLY
    if "pseq" in label or "pmap" in label or "psink" in label:
        return PARTIALLY
    return RUNNING


def test_every_release_line_with_finished_tasks_is_covered() -> None:
    releases = {p.values[0].release.rsplit(".", 1)[0] for p in FINISHED}
    assert {"1.14", "1.15", "1.20", "2.0", "2.3"} <= releases


@pytest.mark.parametrize("fx", FINISHED)
def test_job_graph_plan_gives_a_certain_verdict(fx: Fixture) -> None:
    verdict = check(load_plan(fx.root / "jobgraph.json"), load_checkpoint(fx.checkpoint_dir).checkpoint)
    assert verdict.certain, verdict.notes
    assert verdict.restorable
    assert verdict.uncertain_vertices == []
    assert {label: _expected(label) for label in verdict.classification} == verdict.classification


@pytest.mark.parametrize("fx", FINISHED)
def test_stream_graph_plan_with_the_uids_gives_the_same_certain_verdict(fx: Fixture) -> None:
    verdict = check(load_plan(fx.root / "plan.json", UIDS), load_checkpoint(fx.checkpoint_dir).checkpoint)
    assert verdict.certain, verdict.notes
    assert verdict.restorable
    assert {label: _expected(label) for label in verdict.classification} == verdict.classification


@pytest.mark.parametrize("fx", FINISHED)
def test_stream_graph_plan_without_uids_never_claims_certainty_it_lacks(fx: Fixture) -> None:
    cp = load_checkpoint(fx.checkpoint_dir).checkpoint
    verdict = check(load_plan(fx.root / "plan.json"), cp)
    if cp.format_version >= 5:  # names stored: every operator identified
        assert verdict.certain
    # Before V5 the sources' uids are not their names; the finished flags place them (a finished downstream
    # subtask means its input ended) — certain or not, no vertex gets a class it does not have.
    # Whatever is classified is classified right.
    for label, kind in verdict.classification.items():
        if kind == UNKNOWN:  # never a wrong class: unknown, and said to be uncertain
            assert label in verdict.uncertain_vertices and not verdict.certain
            assert verdict.answer is None
        else:
            assert kind == _expected(label), label


ONE_X_FINISHED = [p for p in FINISHED if p.values[0].release.startswith("1.")]


@pytest.mark.parametrize("fx", ONE_X_FINISHED)
def test_open_operators_leave_the_verdict_unknown_only_when_their_assignments_disagree(fx: Fixture) -> None:
    """Before V5, without uids, the sink named as its uid ('sink') is only a guess: the evidence also fits it
    holding Source: bseq's id (uid 'bsrc'), the two swapped. Flink accepts the first (the job-graph plan, proven by
    real restores); the second puts a fully finished sink behind the running len, where the verdict hangs on a
    chain the plan cannot show. The assignments do not agree, so the verdict stays unknown rather than taking the
    name on trust."""
    from spillway.inspect.finished import _assignments, _check
    from spillway.inspect.topology import bind_job, bind_variant

    cp = load_checkpoint(fx.checkpoint_dir).checkpoint
    topology = load_plan(fx.root / "plan.json")
    verdict = check(topology, cp)
    assert verdict.answer is None and not verdict.certain and verdict.assignments_agree == 0
    binding = bind_job(topology, cp).operators
    assert binding is not None
    outcomes = set()
    for variant in _assignments(binding):
        used = [b.operator_id for b in variant.operators if b.operator_id and b.in_checkpoint]
        assert len(used) == len(set(used)) and set(binding.unclaimed) <= set(used)
        view, vertices, _ = bind_variant(topology, cp, variant)
        one = _check(view, cp, vertices, variant)
        outcomes.add((one.answer, one.certain))
    assert len(outcomes) == 2 and (True, True) in outcomes  # Flink's answer is one of them, not the only one
