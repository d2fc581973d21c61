"""Real Flink re-proves the recorded restores of the ``finished-symmetric`` fixtures: the same plans are submitted
and Flink does the same (tests/unit/test_finished_symmetric.py checks spillway against the recordings)."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
from support.finished_symmetric import CASES, RECORDED_KEYS, load_recorded, recorded_dir
from support.fixtures import fixture_named
from support.flink_harness import restore

pytestmark = pytest.mark.flink


def _without_jid(path: Path) -> dict:
    doc = json.loads(Path(path).read_text())
    doc.pop("jid", None)
    return doc


@pytest.mark.parametrize("case", list(CASES))
def test_flink_does_what_was_recorded(case: str, tmp_path: Path) -> None:
    release = "1.20.3"
    fx = fixture_named(f"{release}-finished-symmetric")
    res = restore(release, fx.info["scenario"], fx.checkpoint_dir, variant=CASES[case], workdir=tmp_path / "work")
    recorded = load_recorded(release, case)
    assert {k: res[k] for k in RECORDED_KEYS if k != "error"} == {k: recorded[k] for k in RECORDED_KEYS if k != "error"}
    # Flink names the first vertex it refuses, which may be either twin: the message up to the vertex id agrees
    vertex_id = re.compile(r"\([0-9a-f]{32}\)")
    assert vertex_id.sub("(ID)", res["error"] or "") == vertex_id.sub("(ID)", recorded["error"] or "")
    assert _without_jid(res["jobgraph_plan"]) == _without_jid(recorded_dir(release, case) / "jobgraph.json")
    assert json.loads(Path(res["stream_plan"]).read_text()) == json.loads(
        (recorded_dir(release, case) / "plan.json").read_text()
    )
