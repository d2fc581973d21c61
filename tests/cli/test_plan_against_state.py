"""A plan that contradicts the checkpoint's state is a plan of another job: an error in validate and a refusal in
every writing command, through the installed console script. The contradictions are Flink's rules (keyed state
lives behind a keyed edge; metadata V5+ stores every operator with its name), the fixtures are real."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from support.console import spillway
from support.fixtures import fixture_named

FX = fixture_named("2.3.0-unaligned")  # slow: keyed state behind the keyBy (HASH) edge


def _without_keyby(flavour: str, tmp_path: Path) -> Path:
    """The fixture's own plan with the keyBy edge into `slow` turned into a rebalance."""
    doc = json.loads((FX.root / flavour).read_text())
    for node in doc["nodes"]:
        for edge in node.get("inputs", []) + node.get("predecessors", []):
            if str(edge.get("ship_strategy", "")).upper().startswith("HASH"):
                edge["ship_strategy"] = "REBALANCE"
    out = tmp_path / flavour
    out.write_text(json.dumps(doc))
    return out


@pytest.mark.parametrize("flavour", ["plan.json", "jobgraph.json"])
def test_keyed_state_behind_a_rebalance_is_a_plan_mismatch(flavour: str, tmp_path: Path) -> None:
    plan = _without_keyby(flavour, tmp_path)
    run = spillway("validate", str(FX.checkpoint_dir), "--plan", str(plan), "--json")
    assert run.code == 1, run.output
    errors = [f for f in json.loads(run.out)["findings"] if f["severity"] == "error"]
    assert [f["rule"] for f in errors] == ["plan-mismatch"]
    assert "keyed" in errors[0]["message"] and errors[0]["operator"] == "slow"
    # Flink fails this restore (a key group outside the subtask's range); spillway writes nothing.
    out = tmp_path / "out"
    run = spillway("rescale", str(FX.checkpoint_dir), "--plan", str(plan), "-p", "slow=3", "--out", str(out),
                   "--master", "inprocess")  # fmt: skip
    assert run.code == 1 and "plan-mismatch" in run.output
    assert not out.exists()


def test_strip_refuses_the_plan_of_another_job_on_v5(tmp_path: Path) -> None:
    """V5+ stores every operator's name: a plan whose operators the checkpoint does not have is certain to be
    of another job, and strip must not write with it."""
    other = fixture_named("2.3.0-sql").root / "plan.json"
    out = tmp_path / "out"
    run = spillway("repair", "strip-channel-state", str(FX.checkpoint_dir), "--plan", str(other), "--out", str(out))
    assert run.code == 1, run.output
    assert "plan" in run.output and not out.exists()
    assert "None" not in run.output and "?" not in run.output.replace("?)", "")
