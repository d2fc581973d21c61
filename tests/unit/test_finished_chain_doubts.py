"""A refusal found with chains the stream-graph plan cannot show is Flink's answer only when every chaining the
plan allows refuses too. Expected outcomes are Flink's own: the recorded restores of the finished variants
(tests/fixtures/finished-variants/<release>/<variant>/result.json, real RestoreCheck runs)."""

from __future__ import annotations

import pytest
from support.finished_variants import job_uids, load_recorded, recorded_dir
from support.fixtures import fixture_named

from spillway.inspect.finished import Verdict, check
from spillway.inspect.topology import load_plan
from spillway.storage.load import load_checkpoint

RELEASES = ["1.15.4", "1.20.3"]


def _verdict(release: str, variant: str) -> Verdict:
    cp = load_checkpoint(fixture_named(f"{release}-finished").checkpoint_dir).checkpoint
    return check(load_plan(recorded_dir(release, variant) / "plan.json", job_uids(release)), cp)


@pytest.mark.parametrize("release", RELEASES)
def test_a_refusal_another_chaining_would_not_give_is_no_answer(release: str) -> None:
    """fed-by-finished: a new running sink behind the finished bmap. Chained to bmap it would make a mixed
    vertex; Flink put it in a vertex of its own and restored. The plan cannot show which: no 'no'."""
    assert load_recorded(release, "fed-by-finished")["outcome"] == "restored"
    verdict = _verdict(release, "fed-by-finished")
    assert verdict.chain_doubts and verdict.violations
    assert verdict.refusal_holds is False and verdict.answer is None and not verdict.certain


@pytest.mark.parametrize("release", RELEASES)
def test_a_refusal_every_chaining_gives_stays_a_no(release: str) -> None:
    """mixed-chain: bsink behind the partially finished pmap. Chained: a mixed vertex; cut: a fully finished
    vertex behind a partially finished one. Flink refuses either way, and refused."""
    assert load_recorded(release, "mixed-chain")["outcome"] == "refused"
    verdict = _verdict(release, "mixed-chain")
    assert verdict.chain_doubts and verdict.violations
    assert verdict.refusal_holds is True and verdict.answer is False


@pytest.mark.parametrize("release", RELEASES)
def test_chained_after_finished_is_unknown_from_the_stream_graph_plan(release: str) -> None:
    """chained-after-finished: a new operator chained after the finished bmap. Flink chained it and refused;
    with the chain cut it would restore. Only the job-graph plan shows the chain."""
    assert load_recorded(release, "chained-after-finished")["outcome"] == "refused"
    assert _verdict(release, "chained-after-finished").answer is None
    cp = load_checkpoint(fixture_named(f"{release}-finished").checkpoint_dir).checkpoint
    jobgraph = check(load_plan(recorded_dir(release, "chained-after-finished") / "jobgraph.json"), cp)
    assert jobgraph.certain and jobgraph.answer is False
