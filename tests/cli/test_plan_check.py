"""A plan that does not describe the checkpoint is never "sound" (each case failed before its fix)."""

from __future__ import annotations

import json

from click.testing import CliRunner
from support.fixtures import fixture_named

from spillway.cli.app import app


def _validate(fx_name: str, plan_of: str, flavour: str) -> dict:
    fx, other = fixture_named(fx_name), fixture_named(plan_of)
    res = CliRunner().invoke(app, ["validate", str(fx.checkpoint_dir), "--plan", str(other.root / flavour), "--json"])
    doc = json.loads(res.stdout)
    doc["exit_code"] = res.exit_code
    return doc


def test_plan_of_another_job_is_never_sound() -> None:
    """counted shares only its source and sink with this job (oracle.json of each: the names Flink stored, V6).
    The verdict names the misfit exactly — each plan operator the checkpoint does not have (plan-mismatch), or,
    where that is not decided, each input handle Flink stored on slow as held by no chain head of that plan
    (channel-holder) — and the output side, in no logical channel of that plan, is left unchecked."""
    mine = json.loads(fixture_named("2.3.0-unaligned").oracle.read_text())
    theirs = json.loads(fixture_named("2.3.0-counted").oracle.read_text())
    absent = {o["name"] for o in theirs["operators"]} - {o["name"] for o in mine["operators"]}
    assert absent == {"parse", "count", "check"}
    slow = next(o for o in mine["operators"] if o["name"] == "slow")
    inputs = sorted(
        (sub["index"], f"in({ch['gate_index']},{ch['input_channel_index']})")
        for sub in slow["subtasks"]
        for h in sub["input_channel_state"]
        for ch in h["channels"]
    )
    outputs = sum(
        len(h["channels"]) for o in mine["operators"] for s in o["subtasks"] for h in s["result_subpartition_state"]
    )
    for flavour in ("jobgraph.json", "plan.json"):
        doc = _validate("2.3.0-unaligned", "2.3.0-counted", flavour)
        assert doc["exit_code"] == 1 and not doc["ok"], flavour
        errors = [f for f in doc["findings"] if f["severity"] == "error"]
        mismatched = {f["operator"] for f in errors if f["rule"] == "plan-mismatch"}
        holders = sorted((f["subtask"], f["channel"]) for f in errors if f["rule"] == "channel-holder")
        assert mismatched == absent or holders == inputs, (flavour, errors)
        assert doc["complete"] is False
        assert sum(1 for u in doc["unchecked"] if u["channel"].startswith("out(")) == outputs, flavour


def test_job_graph_plan_sharing_no_id_is_a_plan_mismatch() -> None:
    doc = _validate("2.3.0-unaligned", "2.3.0-sql", "jobgraph.json")  # a SQL job: no id in common
    errors = {f["rule"] for f in doc["findings"] if f["severity"] == "error"}
    assert doc["exit_code"] == 1 and "plan-mismatch" in errors


def test_stream_graph_plan_binding_nothing_is_said() -> None:
    doc = _validate("2.3.0-unaligned", "2.3.0-sql", "plan.json")
    assert "plan-unbound" in {f["rule"] for f in doc["findings"]}


def test_plan_with_other_parallelism_is_an_error() -> None:
    # 2.3.0-unaligned-p3 is the same job (same uids, same ids) at parallelism 3
    doc = _validate("2.3.0-unaligned", "2.3.0-unaligned-p3", "jobgraph.json")
    mism = [f for f in doc["findings"] if f["rule"] == "plan-mismatch"]
    assert doc["exit_code"] == 1 and mism and "parallelism 2 in the checkpoint, 3 in the plan" in mism[0]["message"]


def test_the_right_plan_raises_no_plan_finding() -> None:
    for flavour in ("jobgraph.json", "plan.json"):
        doc = _validate("2.3.0-unaligned", "2.3.0-unaligned", flavour)
        assert not {f["rule"] for f in doc["findings"]} & {"plan-mismatch", "plan-unbound"}
