"""Real Flink restores every ``shapes`` / ``shapes-no-uid`` fixture into the job that wrote it (no state dropped):
these checkpoints are sound, which is what tests/unit/test_shapes_binding.py holds validate to. Nothing of spillway
is involved here."""

from __future__ import annotations

import json

import pytest
from support.fixtures import Fixture, all_fixtures
from support.flink_harness import restore

SHAPES = [pytest.param(f, id=f.name) for f in all_fixtures() if f.info["scenario"] in ("shapes", "shapes-no-uid")]


@pytest.mark.flink
@pytest.mark.parametrize("fx", SHAPES)
def test_flink_restores_the_shapes_job_into_itself(fx: Fixture) -> None:
    result = restore(fx.release, fx.info["scenario"], fx.checkpoint_dir, run_seconds=3)
    assert result["outcome"] == "restored", (result.get("stage"), result.get("error"))
    assert result["allow_non_restored_state"] is False
    # Every subtask of every job vertex Flink built for the job (ids.json) is running: the async, window,
    # broadcast-connect and two-input ones included. Three vertices share a name, so names are compared as a set.
    vertices = json.loads((fx.root / "ids.json").read_text())["vertices"]
    expected = {f"{v['name']} ({i}/{v['parallelism']})" for v in vertices for i in range(1, v["parallelism"] + 1)}
    assert set(result["tasks"]) == expected
    assert set(result["tasks"].values()) == {"RUNNING"}
