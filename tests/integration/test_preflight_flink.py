"""Real Flink restores a few rows of the preflight matrix again: the outcome, Flink's message and the submitted plan
are the recorded ones, and spillway preflight on the plan Flink was just given says what Flink just did.

The whole matrix is checked without a JVM by tests/unit/test_preflight_matrix.py; this test proves the recordings
still describe real Flink (one refusal per check kind, a rescale that restores, FLINK-38267 on both sides)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from support.fixtures import fixture_named
from support.flink_harness import restore
from support.preflight_matrix import CASES, job_uids, load_recorded, preflight_settings

from spillway.inspect.preflight import REFUSED, check
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
]


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
    )
    recorded = load_recorded(release, case)
    assert (res["outcome"], res["stage"], res["error_class"]) == (
        recorded["outcome"],
        recorded["stage"],
        recorded["error_class"],
    ), res.get("log")
    jobgraph = Path(res["jobgraph_plan"])
    assert _without_jid(jobgraph) == _without_jid(
        fx.root.parents[0] / "preflight-matrix" / release / case / "jobgraph.json"
    )
    plan = load_plan(jobgraph, job_uids(release, c.fixture))
    result = check(plan, load_checkpoint(fx.checkpoint_dir).checkpoint, preflight_settings(release, case, "x"))
    if res["outcome"] == "restored":
        assert result.restorable is True, [r.to_doc() for r in result.reasons]
    else:
        assert result.restorable is False, [r.to_doc() for r in result.reasons]
        # Flink's words (after the restore path it names, which differs per run) are among preflight's
        tail = res["error"].split(". ", 1)[-1] if res["error"].startswith("Failed to rollback") else res["error"]
        messages = [r.flink_message or "" for r in result.reasons if r.verdict == REFUSED]
        if "now chained" in tail:
            tail = tail.split("[")[0]
        assert any(tail in m for m in messages), (tail, messages)


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
