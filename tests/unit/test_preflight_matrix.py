"""spillway preflight on every recorded real restore (tests/fixtures/preflight-matrix/): the answer agrees with what
Flink did, row by row, without a JVM. The expected outcome of each row is Flink's own (flink.json, written by
tests/support/preflight_matrix.py from a real restore); nothing here is derived from the code under test."""

from __future__ import annotations

import re
from typing import Any

import pytest
from support import finished_variants
from support.fixtures import fixture_named
from support.preflight_matrix import (
    CASES,
    RELEASES,
    expected_rows,
    job_uids,
    load_recorded,
    preflight_row,
    recorded,
    recorded_dir,
)

from spillway.inspect.preflight import (
    FAILS,
    LOSS,
    REFUSED,
    UNKNOWN,
    FlinkDoes,
    PreflightAnswer,
    PreflightVerdict,
    Settings,
    check,
)
from spillway.inspect.topology import load_plan
from spillway.storage.load import load_checkpoint

# Flink's message -> the preflight check that must name it (docs/format/restore-checks.md)
FLINK_CHECKS = {
    "Cannot map checkpoint/savepoint state for operator": "operator-mapping",
    "Max parallelism mismatch between checkpoint/savepoint state and new program": "max-parallelism",
    "of the restored state is lower than the configured parallelism": "max-parallelism",
    "is higher than the max parallelism": "parallelism",
    "Cannot rescale the given pointwise partitioner": "channel-state-rescale",
    "data exchanges with persisted data are now chained": "channel-state-chained",
    "out of bounds for length": "channel-state-channels",
}
# Cut records: rows that drop an operator's channel state while the other side of a channel is restored. Where a record
# is cut between the two, preflight says unknown: Flink failed ("Corrupt stream", EOFException, a key group out of
# range when the misread bytes are a key) on most such rows and accepted some, reading the cut bytes as records.
CUT = {"dropped-channel-state", "channel-state-chained"}
# Rows the evidence given does not decide, and the check that says so: the user did not give the max parallelism the
# new job sets; a job without uids whose chained operators' ids a plan JSON does not show (where preflight still
# says no, the refusal it names may be another than the one Flink met first) — nor, then, where the channel state of
# an operator it cannot place goes.
UNDECIDED = {
    "max-parallelism-set-unseen": {"max-parallelism"},
    "added-no-uid": {"operator-mapping", "channel-state"},
}

ROWS = recorded()


def run(release: str, case: str, flavour: str, uids: bool) -> PreflightAnswer:
    """preflight on the recorded submitted plan, with what the job's user knows (preflight_settings)."""
    return preflight_row(release, case, flavour, uids)


def flink_answer(release: str, case: str) -> PreflightVerdict:
    """What Flink did, as preflight's answer: refused or failed is no; restored is yes, unless the restored job's
    output missed records or state (checked to the end: flink.json "data") or the restore dropped an operator's
    state (--allow-non-restored-state with that operator gone)."""
    flink = load_recorded(release, case)
    if flink["outcome"] != "restored":
        return PreflightVerdict.NO
    data = flink.get("data")
    if data is not None:
        return PreflightVerdict.YES if data["complete"] else PreflightVerdict.RESTORES_WITH_LOSS
    return PreflightVerdict.RESTORES_WITH_LOSS if CASES[case].allow_non_restored else PreflightVerdict.YES


def flink_check(flink: dict[str, Any]) -> str:
    hits = [name for fragment, name in FLINK_CHECKS.items() if fragment in (flink["error"] or "")]
    assert len(hits) == 1, flink["error"]
    return hits[0]


def _normal(message: str) -> str:
    """Flink names the restore path (or "Checkpoint Metadata") in some messages: not part of the check."""
    return re.sub(r"checkpoint/savepoint \S.*?\. (Cannot|Max)", r"checkpoint/savepoint <path>. \1", message)


def same_message(flink_error: str, ours: str) -> bool:
    if "now chained" in flink_error:
        # Flink lists the operators of the first side it checks (output before input); preflight lists both
        head = flink_error.split("[")[0]
        theirs = set(re.findall(r"[0-9a-f]{32}", flink_error))
        return ours.startswith(head) and theirs <= set(re.findall(r"[0-9a-f]{32}", ours))
    return _normal(flink_error) == _normal(ours)


def test_every_release_and_case_is_recorded() -> None:
    assert sorted(ROWS) == expected_rows()


def test_the_data_check_tells_a_complete_restore_from_a_lossy_one() -> None:
    """The output check is not vacuous: the same job run to its end is complete on every release, and the job whose
    check operator lost its state and in-flight input is not, wherever Flink restored it."""
    for release in RELEASES:
        same = load_recorded(release, "same-to-the-end")
        assert same["outcome"] == "restored" and same["data"]["complete"] is True, same
        lossy = load_recorded(release, "check-uid-changed-allowed")
        if lossy["outcome"] == "restored":
            assert lossy["data"]["complete"] is False, lossy
            assert lossy["data"]["checked_records"] < lossy["data"]["expected_records"], lossy


@pytest.mark.parametrize(("release", "case"), ROWS, ids=[f"{r}-{c}" for r, c in ROWS])
def test_preflight_agrees_with_flink(release: str, case: str) -> None:
    flink = load_recorded(release, case)
    c = CASES[case]
    assert flink["variant"] == c.variant and flink["allow_non_restored_state"] == c.allow_non_restored
    expected = flink_answer(release, case)
    for flavour in ("jobgraph.json", "plan.json"):
        result = run(release, case, flavour, uids=True)
        refused = [r for r in result.reasons if r.verdict in (REFUSED, FAILS)]
        unknown = [r for r in result.reasons if r.verdict == UNKNOWN]
        where = (flavour, [r.to_doc() for r in refused + unknown], flink["error"], flink.get("data"))
        if result.answer == PreflightVerdict.UNKNOWN:
            # never unknown without a named reason the evidence does not decide
            assert {r.check for r in unknown} <= (CUT | UNDECIDED.get(case, set())), where
            assert expected != PreflightVerdict.YES or {r.check for r in unknown} <= CUT, where
            continue
        assert result.answer == expected, where
        if expected == PreflightVerdict.RESTORES_WITH_LOSS:
            assert result.loss and all(
                r.flink_does == FlinkDoes.RESTORES_AND_DROPS for r in result.reasons if r.verdict == LOSS
            )
        elif expected == PreflightVerdict.NO and flink["outcome"] == "refused" and case not in UNDECIDED:
            name = flink_check(flink)
            mine = [r for r in refused if r.check == name]
            assert mine and all(r.flink_does == FlinkDoes.REFUSES for r in mine), where
            assert any(same_message(flink["error"], r.flink_message or "") for r in mine), where
        elif expected == PreflightVerdict.NO and "Key group" in (flink["error"] or ""):
            # accepted, then failed on the first record of another subtask's key group
            assert [r.check for r in refused] == ["keyed-exchange"], where
            assert refused[0].verdict == FAILS and refused[0].flink_does == FlinkDoes.FAILS_AFTER_START, where


@pytest.mark.parametrize(("release", "case"), ROWS, ids=[f"{r}-{c}" for r, c in ROWS])
def test_without_uids_never_contradicts_flink(release: str, case: str) -> None:
    """Without the uids a plan cannot show, the binding may be unsure: then unknown, never the wrong answer; a
    mapping by name alone is unknown ("uids unchanged"), never yes."""
    expected = flink_answer(release, case)
    for flavour in ("jobgraph.json", "plan.json"):
        answer = run(release, case, flavour, uids=False).answer
        assert answer in (expected, PreflightVerdict.UNKNOWN), (flavour, answer, expected)


# The FLIP-147 restore proofs (tests/fixtures/finished-variants/: "a chain changed after tasks finished" and more)
# are matrix rows too: preflight on the recorded job-graph plan with the job's uids gives Flink's outcome.
FINISHED = finished_variants.recorded()


@pytest.mark.parametrize(("release", "variant"), FINISHED, ids=[f"{r}-{v}" for r, v in FINISHED])
def test_preflight_agrees_with_flink_on_the_finished_variants(release: str, variant: str) -> None:
    flink = finished_variants.load_recorded(release, variant)
    rule, allow = finished_variants.VARIANTS[variant]
    fx = fixture_named(f"{release}-finished")
    loaded = load_checkpoint(fx.checkpoint_dir)
    plan = load_plan(
        finished_variants.recorded_dir(release, variant) / "jobgraph.json", finished_variants.job_uids(release)
    )
    version = tuple(map(int, release.split(".")))
    settings = Settings(allow, {}, version, str(fx.checkpoint_dir), no_max_parallelism=True)  # type: ignore[arg-type]
    result = check(plan, loaded.checkpoint, settings, loaded)
    refused = [r for r in result.reasons if r.verdict == REFUSED]
    if flink["outcome"] == "restored":
        assert rule is None and result.restorable is True, [r.to_doc() for r in result.reasons]
    else:
        assert flink["outcome"] == "refused" and rule is not None, flink
        assert result.restorable is False, [r.to_doc() for r in result.reasons]
        # Flink checks FLIP-147 before assigning state, so that is the refusal it names; preflight lists every one
        # (the rewired variants also chain slow, which holds output channel state, in front of tolong)
        assert "finished-state" in {r.check for r in refused}, [r.to_doc() for r in refused]


def test_flink_38267_without_the_release_is_unknown() -> None:
    """The same job and checkpoint were refused by 1.15.4 and 2.0.0 and restored by 1.20.3 and 2.3.0: without
    --flink-version preflight cannot tell which, and says so."""
    outcomes = {r: load_recorded(r, "mixed-inputs-rescaled")["outcome"] for r in RELEASES}
    assert outcomes == {"1.15.4": "refused", "1.20.3": "restored", "2.0.0": "refused", "2.3.0": "restored"}
    for release in RELEASES:
        fx = fixture_named(f"{release}-counted")
        loaded = load_checkpoint(fx.checkpoint_dir)
        plan = load_plan(recorded_dir(release, "mixed-inputs-rescaled") / "jobgraph.json", job_uids(release, "counted"))
        result = check(plan, loaded.checkpoint, Settings(max_parallelism={None: 128}), loaded)
        unknown = [r for r in result.reasons if r.verdict == UNKNOWN]
        assert result.restorable is None and {r.flink_issue for r in unknown} == {"FLINK-38267"}, unknown


def test_the_python_api_gives_flinks_answer() -> None:
    import spillway
    from spillway.api import PreflightOptions

    recorded_error = load_recorded("2.3.0", "removed-stateful")["error"]
    cp = spillway.open(fixture_named("2.3.0-counted").checkpoint_dir)
    plan = load_plan(recorded_dir("2.3.0", "removed-stateful") / "jobgraph.json", job_uids("2.3.0", "counted"))
    doc = cp.preflight(plan, PreflightOptions(max_parallelism={None: 128})).to_json()
    assert doc["schema"] == "spillway.preflight/2" and doc["restorable"] is False and doc["verdict"] == "no"
    refused = [r for r in doc["reasons"] if r["verdict"] == "refused"]
    assert [r["check"] for r in refused] == ["operator-mapping"]
    assert refused[0]["operator"] in recorded_error
    same = recorded_dir("2.3.0", "same") / "jobgraph.json"
    # a plan does not show the max parallelism the job sets (Counted.java: 128): unknown until it is given
    assert cp.preflight(same).restorable is None
    assert cp.preflight(same, PreflightOptions(max_parallelism={None: 128})).restorable is True
