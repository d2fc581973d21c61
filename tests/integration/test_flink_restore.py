"""Real Flink restores the ``<release>-finished`` fixtures: what Flink accepts or refuses, spillway's verdict must say.

Each case builds the fixture's job (or a variant of it, see RestoreCheck.java) and submits it to a MiniCluster
restoring from a copy of the checkpoint. spillway's ``check()`` runs on both plans RestoreCheck wrote for the
submitted job (job graph: ``JsonPlanGenerator``; stream graph: ``getExecutionPlan()``), with and without the
job's uids: whenever it says it is certain it must agree with Flink, and the job-graph plan must make it certain
(on 1.20.3, metadata V4 without operator names, too: Flink's ids bind every chained operator).
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from support.finished_variants import RECORDED_KEYS, VARIANTS, check_variant, load_recorded, recorded_dir
from support.fixtures import fixture_named
from support.flink_harness import restore

from spillway.inspect.finished import Verdict, check
from spillway.inspect.topology import Topology, parse_plan
from spillway.storage.load import load_checkpoint

pytestmark = pytest.mark.flink

FIXTURE = "2.3.0-finished"


def verdict_on(plan: Path, fixture: str = FIXTURE) -> tuple[Topology, Verdict]:
    fx = fixture_named(fixture)
    topology = parse_plan(json.loads(plan.read_text()))
    return topology, check(topology, load_checkpoint(fx.checkpoint_dir).checkpoint)


def explain(res: dict) -> str:
    return json.dumps({k: res.get(k) for k in ("outcome", "stage", "error", "causes", "log")}, indent=1)


def without_jid(plan: Path) -> dict:
    doc = json.loads(plan.read_text())
    doc.pop("jid")
    return doc


def test_flink_restores_the_original_topology(tmp_path: Path) -> None:
    fx = fixture_named(FIXTURE)
    plan = tmp_path / "plan.json"
    res = restore(fx.release, fx.info["scenario"], fx.checkpoint_dir, plan_out=plan, workdir=tmp_path / "work")
    assert res["outcome"] == "restored", explain(res)
    # the harness submitted exactly the job graph the fixture was taken from
    assert without_jid(plan) == without_jid(fx.root / "jobgraph.json")
    _, verdict = verdict_on(fx.root / "jobgraph.json")
    assert verdict.restorable, verdict.violations
    # FLIP-147 on restore: fully finished vertices and the finished subtask 0 of the psink chain finish at once
    tasks = res["tasks"]
    for name in ("Source: bseq", "bmap", "bsink: Writer"):
        assert tasks[f"{name} (1/2)"] == tasks[f"{name} (2/2)"] == "FINISHED", tasks
    assert tasks["Source: pseq -> pmap -> psink: Writer (1/2)"] == "FINISHED", tasks
    assert tasks["Source: pseq -> pmap -> psink: Writer (2/2)"] == "RUNNING", tasks
    assert tasks["slow (1/2)"] == tasks["slow (2/2)"] == "RUNNING", tasks


# --- FLIP-147 variants on several releases -------------------------------------------------------------------------
# The variants and the checks on spillway's verdict: tests/support/finished_variants.py. Every variant is recorded
# on 1.15.4, 1.20.3, 2.0.0 and 2.3.0 (tests/fixtures/finished-variants/, checked offline by
# tests/unit/test_finished_variants.py); real Flink re-proves the full set on 2.3.0 (metadata V6, names stored)
# and 1.20.3 (V4, no names) and two distinguishing variants on 2.0.0 (V5) and 1.15.4 (V3, SinkFunction sinks):
# the refusal that needs a chain's unidentified operators counted as running, and one predecessor rule.
RESTORE_CASES = [
    *((release, variant) for release in ("2.3.0", "1.20.3") for variant in VARIANTS),
    ("2.0.0", "chained-after-finished"),
    ("2.0.0", "partial-after-partial-all-to-all"),
    ("1.15.4", "chained-after-finished"),
    ("1.15.4", "rewired-partially-finished-pointwise"),
]


@pytest.mark.parametrize(("release", "variant"), RESTORE_CASES)
def test_flink_and_spillway_agree_on_modified_topologies(tmp_path: Path, release: str, variant: str) -> None:
    _, allow_non_restored = VARIANTS[variant]
    fx = fixture_named(f"{release}-finished")
    res = restore(
        fx.release,
        fx.info["scenario"],
        fx.checkpoint_dir,
        variant=variant,
        allow_non_restored=allow_non_restored,
        run_seconds=3,
        workdir=tmp_path / "work",
    )
    assert res["outcome"] in ("restored", "refused"), explain(res)
    # Flink did what it did when the case was recorded, on the same plans
    rec = recorded_dir(release, variant)
    expected = load_recorded(release, variant)
    assert {k: res[k] for k in RECORDED_KEYS} == expected, explain(res)
    jobgraph, plan = Path(res["jobgraph_plan"]), Path(res["stream_plan"])
    assert without_jid(jobgraph) == without_jid(rec / "jobgraph.json")
    assert json.loads(plan.read_text()) == json.loads((rec / "plan.json").read_text())
    check_variant(release, variant, load_checkpoint(fx.checkpoint_dir).checkpoint, jobgraph, plan, res)


def test_allow_non_restored_state(tmp_path: Path) -> None:
    """The checkpoint restored into the 'unaligned' job, which lacks the b*/p* operators."""
    fx = fixture_named(FIXTURE)
    refused = restore(fx.release, "unaligned", fx.checkpoint_dir, workdir=tmp_path / "strict")
    assert refused["outcome"] == "refused", explain(refused)
    assert refused["error_class"] == "java.lang.IllegalStateException"
    assert "because the operator is not available in the new program" in refused["error"]
    allowed = restore(
        fx.release, "unaligned", fx.checkpoint_dir, allow_non_restored=True, run_seconds=2, workdir=tmp_path / "lax"
    )
    assert allowed["outcome"] == "restored", explain(allowed)
