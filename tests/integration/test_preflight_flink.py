"""Real Flink restores a few rows of the preflight matrix again: the outcome, Flink's message and the submitted plan
are the recorded ones, and spillway preflight on the plan Flink was just given says what Flink just did.

The whole matrix is checked without a JVM by tests/unit/test_preflight_matrix.py; this test proves the recordings
still describe real Flink (one refusal per check kind, a rescale that restores, FLINK-38267 on both sides, a job that
fails after start, restores whose output is checked to the end: complete, or short of what preflight lists as lost)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from support.fixtures import fixture_named
from support.flink_harness import restore
from support.preflight_matrix import CASES, case_uids, data_check, load_recorded, preflight_settings

from spillway.inspect.preflight import FAILS, REFUSED, PreflightVerdict, check
from spillway.inspect.topology import load_plan
from spillway.storage.load import load_checkpoint

pytestmark = pytest.mark.flink

ROWS = [
    ("2.3.0", "keyed-up"),
    ("2.3.0", "removed-stateful"),
    ("2.3.0", "max-parallelism-changed"),
    ("2.3.0", "chained-edge-with-state"),
    ("2.3.0", "mixed-inputs-rescaled"),
    ("2.0.0", "mixed-inputs-rescaled"),
    ("1.20.3", "pointwise-rescaled"),
    ("1.15.4", "above-max-parallelism"),
    ("2.3.0", "keyed-rebalance"),
    ("1.20.3", "uid-changed"),
    ("2.0.0", "check-uid-changed-allowed"),
    ("2.3.0", "same-to-the-end"),
    ("1.15.4", "chained-after-channel-state"),
]


def _stage(stage: str | None) -> str | None:
    """A job that fails after Flink accepted the restore fails before or after every task was seen running, as the
    harness's polling happens to see it (the same restore was seen both ways): one stage."""
    return "after the restore" if stage in ("startup", "running") else stage


def _without_jid(path: Path) -> dict:
    doc = json.loads(path.read_text())
    doc.pop("jid", None)
    return doc


@pytest.mark.parametrize(("release", "case"), ROWS, ids=[f"{r}-{c}" for r, c in ROWS])
def test_live_restore_matches_the_recording_and_preflight(release: str, case: str, tmp_path: Path) -> None:
    c = CASES[case]
    fx = fixture_named(f"{release}-{c.fixture}")
    res = restore(
        release,
        fx.info["scenario"],
        fx.checkpoint_dir,
        variant=c.variant,
        parallelism=c.parallelism,
        allow_non_restored=c.allow_non_restored,
        vertex_parallelism=c.vertex_parallelism or None,
        max_parallelism=c.max_parallelism,
        run_seconds=3,
        workdir=tmp_path / "work",
        until_finished=c.data_checked,
    )
    recorded = load_recorded(release, case)
    assert (res["outcome"], _stage(res["stage"]), res["error_class"]) == (
        recorded["outcome"],
        _stage(recorded["stage"]),
        recorded["error_class"],
    ), res.get("log")
    jobgraph = Path(res["jobgraph_plan"])
    assert _without_jid(jobgraph) == _without_jid(
        fx.root.parents[0] / "preflight-matrix" / release / case / "jobgraph.json"
    )
    loaded = load_checkpoint(fx.checkpoint_dir)
    result = check(
        load_plan(jobgraph, case_uids(release, case)), loaded.checkpoint, preflight_settings(release, case, "x"), loaded
    )
    reasons = [r.to_doc() for r in result.reasons]
    if res["outcome"] == "restored":
        data = data_check(res["results"]) if c.data_checked else None
        if data is not None:
            assert data == recorded["data"], data
        lost = (data is not None and not data["complete"]) or c.allow_non_restored
        assert result.answer == (PreflightVerdict.RESTORES_WITH_LOSS if lost else PreflightVerdict.YES), reasons
        if data is not None and lost:
            # what preflight lists as lost is where the records went: check's state and its in-flight input
            assert {x.label.split(" ")[0] for x in result.loss.state} == {"check"}, reasons
    elif res["stage"] == "restore":
        assert result.answer == PreflightVerdict.NO, reasons
        # Flink's words (after the restore path it names, which differs per run) are among preflight's
        tail = res["error"].split(". ", 1)[-1] if res["error"].startswith("Failed to rollback") else res["error"]
        messages = [r.flink_message or "" for r in result.reasons if r.verdict == REFUSED]
        if "now chained" in tail:
            tail = tail.split("[")[0]
        assert any(tail in m for m in messages), (tail, messages)
    elif "Key group" in (res["error"] or ""):
        assert result.answer == PreflightVerdict.NO, reasons
        assert [r.check for r in result.reasons if r.verdict == FAILS] == ["keyed-exchange"], reasons
    else:
        # accepted, then failed reading a record cut between dropped and restored channel state: not a yes
        assert result.answer == PreflightVerdict.UNKNOWN, reasons
        assert {r.check for r in result.reasons if r.verdict == "unknown"} <= {"channel-state-chained"}, reasons


def test_flink_fails_on_the_missing_file_preflight_names(tmp_path: Path) -> None:
    """The damaged copy of tests/cli/test_preflight_cli.py (a channel-state file deleted): Flink accepts the restore
    and the tasks reading that file fail, naming it."""
    from support.damaged import copy_fixture

    copy = copy_fixture("2.3.0-counted", tmp_path / "copy")
    missing = "df5c04a7-2c53-4ce9-b955-0d92013988d7"
    (copy.chk / missing).unlink()
    res = restore("2.3.0", "counted", copy.chk, run_seconds=3, workdir=tmp_path / "work")
    assert res["outcome"] == "failed", res
    assert any(missing in c for c in res["causes"]), res["causes"]
