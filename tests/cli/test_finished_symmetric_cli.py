"""`spillway analyze` on the finished-symmetric fixtures (the installed script, as users run it): with the
stream-graph plan and no uids the FLIP-147 verdict is certain, as Flink's recorded restore of the same job says
(tests/fixtures/finished-symmetric/<release>/same-job/flink.json)."""

from __future__ import annotations

import json

import pytest
from support.console import spillway
from support.finished_symmetric import RELEASES, load_recorded
from support.fixtures import fixture_named


@pytest.mark.parametrize("release", RELEASES)
def test_analyze_gives_flinks_answer_though_the_twins_stay_open(release: str) -> None:
    fx = fixture_named(f"{release}-finished-symmetric")
    assert load_recorded(release, "same-job")["outcome"] == "restored"
    run = spillway("analyze", str(fx.checkpoint_dir), "--plan", str(fx.root / "plan.json"), "--json")
    assert run.code == 0, run.output
    verdict = json.loads(run.out)["restore_verdict"]
    assert verdict["restorable"] is True and verdict["certain"] is True
    assert verdict["violations"] == []
    # 2 sources x 2 finish-on-0 x 4! stateless operators, none told apart by the checkpoint
    assert verdict["notes"] == [
        "the binding leaves operators open, and each of the 96 assignments the checkpoint's evidence allows "
        "gives this verdict: it is Flink's whichever is the job's"
    ]
    text = spillway("analyze", str(fx.checkpoint_dir), "--plan", str(fx.root / "plan.json"))
    assert text.code == 0, text.output
    assert "restore check: Flink's finished-state checks would accept this checkpoint" in text.out
    assert "cannot tell which vertex holds" not in text.out


@pytest.mark.parametrize("release", RELEASES)
def test_preflight_never_calls_channel_state_ok_where_it_cannot_place_it(release: str) -> None:
    """symmetric-unchained: Flink accepted the restore and the task then failed ("Index 1 out of bounds for
    length 1": output channel state of finish-on-0 on an exchange that became FORWARD). Without uids the job-graph
    plan cannot place the operators holding that state, so the channel-state check is unknown, never ok."""
    recorded = load_recorded(release, "symmetric-unchained")
    assert (recorded["outcome"], recorded["stage"]) == ("failed", "startup")
    fx = fixture_named(f"{release}-finished-symmetric")
    plan = fx.root.parent / "finished-symmetric" / release / "symmetric-unchained" / "jobgraph.json"
    run = spillway("preflight", str(fx.checkpoint_dir), "--plan", str(plan), "--max-parallelism", "none", "--json")
    doc = json.loads(run.out)
    assert doc["verdict"] != "yes" and run.code != 0
    channel = [r for r in doc["reasons"] if r["check"].startswith("channel-state")]
    assert channel and all(r["verdict"] != "ok" for r in channel), channel


@pytest.mark.parametrize("release", RELEASES)
def test_twin_vertices_keep_one_classification_each(release: str) -> None:
    """The job's two branches have the same names: each of its four vertices keeps its own entry (both sources'
    subtask 0 finished, by the job's design: PARTIALLY_FINISHED; the downstream pass -> sink runs)."""
    fx = fixture_named(f"{release}-finished-symmetric")
    run = spillway("analyze", str(fx.checkpoint_dir), "--plan", str(fx.root / "plan.json"), "--json")
    vertices = json.loads(run.out)["restore_verdict"]["vertices"]
    assert len(vertices) == 4, vertices
    assert sorted(vertices.values()) == ["ALL_RUNNING", "ALL_RUNNING", "PARTIALLY_FINISHED", "PARTIALLY_FINISHED"]
    assert sum(name.startswith("Source: half -> finish-on-0") for name in vertices) == 2
