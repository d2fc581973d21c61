"""A renamed operator is the same operator to Flink: proven by a real restore, then checked against spillway.

Flink matches state to operators by operator id, and no name goes into an id (neither the uid's hash nor the
generated hash). RestoreCheck's variants "renamed-tostr" (the unaligned job, tostr renamed tostr2, its uid kept)
and "renamed-tostr-no-uid" (the no-uid job, tostr renamed tostr2) restore the original 2.3.0 checkpoints on a
MiniCluster; the plans Flink itself wrote for those jobs are then given to ``validate``: the rename is a
``plan-renamed`` warning naming Flink's id of tostr (ids.json), never a ``plan-mismatch`` error.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from support.fixtures import fixture_named
from support.flink_harness import restore

from spillway.inspect.topology import load_plan
from spillway.inspect.validate import validate
from spillway.storage.load import load_checkpoint

pytestmark = pytest.mark.flink


def _explain(res: dict[str, Any]) -> str:
    return json.dumps({k: res.get(k) for k in ("outcome", "stage", "error", "causes", "log")}, indent=1)


@pytest.mark.parametrize(
    ("fixture", "variant", "uids", "method"),
    [
        (
            "2.3.0-unaligned",
            "renamed-tostr",
            {"tostr2": "tostr"},
            "uid-hash (uid 'tostr', as the checkpoint stores it)",
        ),
        ("2.3.0-no-uid", "renamed-tostr-no-uid", {}, "deterministic-hash"),
    ],
    ids=["uid", "no-uid"],
)
def test_flink_restores_a_renamed_operator_and_validate_only_warns(
    fixture: str, variant: str, uids: dict[str, str], method: str, tmp_path: Path
) -> None:
    fx = fixture_named(fixture)
    res = restore(fx.release, fx.info["scenario"], fx.checkpoint_dir, variant=variant, workdir=tmp_path / "w")
    assert res["outcome"] == "restored", _explain(res)
    assert res["allow_non_restored_state"] is False
    tostr = next(n for n in json.loads((fx.root / "ids.json").read_text())["stream_nodes"] if n["name"] == "tostr")
    stream_plan = json.loads(Path(res["stream_plan"]).read_text())
    assert "tostr2" in {n["type"] for n in stream_plan["nodes"]} and "tostr" not in {
        n["type"] for n in stream_plan["nodes"]
    }
    loaded = load_checkpoint(fx.checkpoint_dir)
    report = validate(loaded, load_plan(res["stream_plan"], uids))
    assert [(f.rule, f.operator, f.message) for f in report.findings if f.rule.startswith("plan-")] == [
        (
            "plan-renamed",
            "tostr2",
            f"'tostr2' is {tostr['operator_id']} by {method}, which the checkpoint stores with the name 'tostr': the "
            "same operator renamed; Flink restores state by operator id, not by name",
        )
    ]
    assert not report.errors, [f.to_json() for f in report.errors]
    job_graph = validate(load_checkpoint(fx.checkpoint_dir), load_plan(res["jobgraph_plan"], uids))
    assert not job_graph.errors, [f.to_json() for f in job_graph.errors]
