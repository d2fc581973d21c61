"""preflight's answers that depend on the restoring release or on what the new job's own graph tells, each on a
recorded real restore (tests/fixtures/preflight-matrix/): the expected answer is what Flink did with that job."""

from __future__ import annotations

from dataclasses import replace

from support.fixtures import fixture_named
from support.preflight_matrix import case_uids, load_recorded, preflight_settings, recorded_dir

from spillway.inspect.preflight import (
    LOSS,
    REFUSED,
    UNKNOWN,
    FlinkDoes,
    PreflightAnswer,
    PreflightVerdict,
    check,
    to_doc,
)
from spillway.inspect.restore_checks import flink_31963_fixed
from spillway.inspect.topology import load_plan
from spillway.storage.load import load_checkpoint


def _run(
    release: str, case: str, version: tuple[int, int, int] | None, fixture_release: str | None = None
) -> PreflightAnswer:
    """preflight on the recorded job-graph plan of (release, case), the fixture checkpoint of ``fixture_release``
    (default: the same release), as restored by ``version``."""
    src = fixture_release or release
    loaded = load_checkpoint(fixture_named(f"{src}-counted").checkpoint_dir)
    plan = load_plan(recorded_dir(release, case) / "jobgraph.json", case_uids(release, case))
    settings = preflight_settings(src, case, "x")
    settings.flink_version = version
    return check(plan, loaded.checkpoint, settings, loaded)


def test_output_state_off_a_chains_end_depends_on_the_release() -> None:
    """A map chained after count (which holds output channel state, and check downstream holds input state):
    1.20.3, 2.0.0 and 2.3.0 refused the restore; 1.15.4 accepted it and the task then failed on the record cut
    between count's dropped output state and check's restored input state."""
    assert [load_recorded(r, "chained-after-channel-state")["outcome"] for r in ("1.15.4", "1.20.3", "2.3.0")] == [
        "failed",
        "refused",
        "refused",
    ]
    refused = _run("1.15.4", "chained-after-channel-state", (1, 20, 3), "1.15.4")
    assert refused.answer == PreflightVerdict.NO
    assert [r.check for r in refused.reasons if r.verdict == REFUSED] == ["channel-state-chained"]
    accepted = _run("1.15.4", "chained-after-channel-state", (1, 15, 4))
    assert accepted.answer == PreflightVerdict.UNKNOWN  # cut record: Flink fails or misreads, never a yes
    unsure = [r for r in accepted.reasons if r.verdict == UNKNOWN]
    assert [r.check for r in unsure] == ["channel-state-chained"]
    assert unsure[0].flink_does == FlinkDoes.FAILS_AFTER_START
    # what 1.15.4 drops: count's output channel state, listed as lost in flight
    count = load_recorded("1.15.4", "chained-after-channel-state")["error"] or ""
    assert [(x.side, x.bytes > 0) for x in accepted.loss.in_flight] == [("output", True)], count
    # the release not given: Flink from FLINK-31963 on refuses, before it drops: unknown
    without = _run("1.15.4", "chained-after-channel-state", None)
    assert without.answer == PreflightVerdict.UNKNOWN
    assert any(r.flink_issue == "FLINK-31963" for r in without.reasons if r.verdict == UNKNOWN)


def test_flink_31963_is_in_the_classes_from_1_16_2_and_1_17_1() -> None:
    """hasDownstreamInputStates guards the output-side check in the 1.16.3, 1.17.2, 1.18.1, 1.19.3, 1.20.3, 2.0.0 and
    2.3.0 classes, not in 1.15.4's (javap of StateAssignmentOperation, docs/format/restore-checks.md)."""
    assert flink_31963_fixed((1, 15, 4)) is False
    assert all(flink_31963_fixed(v) for v in [(1, 16, 3), (1, 17, 2), (1, 18, 1), (1, 19, 3), (1, 20, 3), (2, 0, 0)])
    assert flink_31963_fixed((2, 3, 0)) is True and flink_31963_fixed(None) is None


def test_max_parallelism_from_the_jobs_own_graph_is_exact() -> None:
    """The job that sets max parallelism 256 was refused on every release: a plan JSON cannot show it (unknown);
    the job's own graph (--job) can, and then the answer is Flink's refusal, with Flink's message."""
    release, case = "2.3.0", "max-parallelism-set-unseen"
    flink = load_recorded(release, case)
    assert flink["outcome"] == "refused"
    loaded = load_checkpoint(fixture_named(f"{release}-unaligned").checkpoint_dir)
    plan = load_plan(recorded_dir(release, case) / "jobgraph.json", case_uids(release, case))
    settings = preflight_settings(release, case, "x")
    assert check(plan, loaded.checkpoint, settings, loaded).answer == PreflightVerdict.UNKNOWN
    # what the job's own graph carries: every vertex's max parallelism as the job sets it
    plan = replace(
        plan,
        max_parallelism_known=True,
        vertices={k: replace(v, max_parallelism=256) for k, v in plan.vertices.items()},
    )
    result = check(plan, loaded.checkpoint, settings, loaded)
    assert result.answer == PreflightVerdict.NO
    words = flink["error"].split("Max parallelism mismatch")[1]
    assert any(words in (r.flink_message or "") for r in result.reasons if r.verdict == REFUSED)
    # the job's graph saying it sets none: Flink adopts the checkpoint's (the unaligned job sets none and restored)
    plan = replace(plan, vertices={k: replace(v, max_parallelism=None) for k, v in plan.vertices.items()})
    assert load_recorded(release, "same")["outcome"] == "restored"
    assert check(plan, loaded.checkpoint, settings, loaded).answer != PreflightVerdict.NO


def test_dropped_state_is_listed_with_its_kinds_and_bytes() -> None:
    """2.0.0 restored the counted job whose check got a new uid (--allow-non-restored-state) and check saw fewer
    records than the source sent: preflight says restores-with-loss and names check's state."""
    flink = load_recorded("2.0.0", "check-uid-changed-allowed")
    assert flink["outcome"] == "restored" and flink["data"]["complete"] is False
    result = _run("2.0.0", "check-uid-changed-allowed", (2, 0, 0))
    assert result.answer == PreflightVerdict.RESTORES_WITH_LOSS and result.restorable is True
    [state] = result.loss.state
    assert state.label.startswith("check ") and state.bytes > 0
    # the 2.0.0 checkpoint holds check's operator state ("seen") and no channel state of check's
    assert state.kinds == ("operator",) and result.loss.in_flight == []
    # what check missed is what its dropped state had counted
    assert flink["data"]["checked_records"] < flink["data"]["expected_records"]
    assert flink["data"]["counted_records"] == flink["data"]["expected_records"]  # count's state was restored
    assert [r.check for r in result.reasons if r.verdict == LOSS] == ["operator-mapping"]


def test_the_document_and_every_check_on_a_restore_flink_accepted() -> None:
    """2.3.0 restored the same job: every check passes once, by name, and the document carries the answer, the empty
    loss and the new job's vertices (the recorded plan's: four vertices at parallelism 2, as Flink ran them)."""
    assert load_recorded("2.3.0", "same")["outcome"] == "restored"
    result = _run("2.3.0", "same", (2, 3, 0))
    checks = ["operator-mapping", "max-parallelism", "channel-state", "keyed-exchange", "finished-state", "files"]
    assert [r.check for r in result.reasons] == checks
    assert all(r.verdict == "ok" and r.message for r in result.reasons)
    doc = to_doc(result, {"plan": "p"})
    assert list(doc) == ["schema", "verdict", "restorable", "loss", "reasons", "vertices", "plan"]
    assert doc["schema"] == "spillway.preflight/2" and doc["verdict"] == "yes" and doc["restorable"] is True
    assert doc["loss"] == {
        "state": [],
        "in_flight": [],
        "state_bytes": 0,
        "in_flight_bytes": 0,
        "in_flight_records": 0,
    }
    assert [r["check"] for r in doc["reasons"]] == checks and all("flink_does" not in r for r in doc["reasons"])
    import json

    plan = json.loads((recorded_dir("2.3.0", "same") / "jobgraph.json").read_text())
    assert sorted((v["key"], v["parallelism"]) for v in doc["vertices"]) == sorted(
        (n["id"], n["parallelism"]) for n in plan["nodes"]
    )
    assert all(v["checkpoint_parallelism"] == 2 and v["operators"] for v in doc["vertices"])


def test_a_name_only_mapping_names_each_operator_and_the_assumption() -> None:
    """2.3.0 refused the job whose count has a new uid under the old name. Its stream-graph plan without uids maps
    count (and the rest) by the names the checkpoint stores: unknown, each one named, the assumption said."""
    assert load_recorded("2.3.0", "uid-changed")["outcome"] == "refused"
    loaded = load_checkpoint(fixture_named("2.3.0-counted").checkpoint_dir)
    plan = load_plan(recorded_dir("2.3.0", "uid-changed") / "plan.json")
    result = check(plan, loaded.checkpoint, preflight_settings("2.3.0", "uid-changed", "x"), loaded)
    assert result.answer == PreflightVerdict.UNKNOWN
    [assumed] = [r for r in result.reasons if r.verdict == UNKNOWN and r.check == "operator-mapping"]
    count = next(o for o in loaded.checkpoint.operators if o.name == "count")
    assert f"'count' = count ({count.operator_id})" in assumed.message
    assert "uids unchanged" in assumed.message and assumed.flink_does == FlinkDoes.REFUSES


def test_a_plan_operator_without_a_known_id_is_a_binding_note() -> None:
    """The new map of added-operator (restored by 2.3.0) has no uid the checkpoint knows: a note names it."""
    loaded = load_checkpoint(fixture_named("2.3.0-counted").checkpoint_dir)
    uids = {"Source: seq": "src", "sink: Writer": "sink"}  # the job-graph plan's vertex ids name the others
    plan = load_plan(recorded_dir("2.3.0", "added-operator") / "jobgraph.json", uids)
    result = check(plan, loaded.checkpoint, preflight_settings("2.3.0", "added-operator", "x"), loaded)
    assert result.answer == PreflightVerdict.YES
    notes = [r.message for r in result.reasons if r.check == "binding"]
    assert len(notes) == 1 and "'added'" in notes[0]
