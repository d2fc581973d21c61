"""Real Flink restores the 2.3.0-finished fixture: what Flink accepts or refuses, spillway's verdict must say too.

Each case builds the fixture's job (or a variant of it, see RestoreCheck.java) and submits it to a MiniCluster
restoring from a copy of the checkpoint; spillway's ``check()`` runs on the job-graph plan Flink was given.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from support.fixtures import fixture_named
from support.flink_harness import restore

from spillway.inspect.finished import Verdict, check
from spillway.inspect.topology import Topology, parse_plan
from spillway.storage.load import load_checkpoint

pytestmark = pytest.mark.flink

FIXTURE = "2.3.0-finished"

# Flink's VertexFinishedStateChecker message -> spillway rule (spec 09 §9.3)
FLINK_RULES = {
    "which contain mixed operator finished state": "mixed",
    "fully finished vertices predeceased with the ones not fully finished": "fully-finished-predecessor",
    "connected via the ALL_TO_ALL edges": "all-to-all-predecessor",
    "partially finished vertices predeceased with all running ones": "pointwise-predecessor",
}


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


@pytest.mark.parametrize(
    ("variant", "rule"),
    [
        ("rewired-fully-finished", "fully-finished-predecessor"),  # slow -rebalance-> bsink
        ("rewired-partially-finished", "all-to-all-predecessor"),  # slow -rebalance-> pmap
        ("rewired-partially-finished-pointwise", "pointwise-predecessor"),  # slow -forward-> pmap
        ("mixed-chain", "mixed"),  # bsink chained behind pmap
        ("fed-by-finished", None),  # new running sink behind bmap: allowed
    ],
)
def test_flink_and_spillway_agree_on_modified_topologies(tmp_path: Path, variant: str, rule: str | None) -> None:
    fx = fixture_named(FIXTURE)
    plan = tmp_path / "plan.json"
    res = restore(
        fx.release,
        fx.info["scenario"],
        fx.checkpoint_dir,
        variant=variant,
        plan_out=plan,
        run_seconds=3,
        workdir=tmp_path / "work",
    )
    topology, verdict = verdict_on(plan)
    if rule is None:
        assert res["outcome"] == "restored", explain(res)
        assert verdict.restorable, verdict.violations
        return
    assert res["outcome"] == "refused", explain(res)
    assert res["error_class"] == "org.apache.flink.util.FlinkRuntimeException", explain(res)
    flink_rules = [r for fragment, r in FLINK_RULES.items() if fragment in res["error"]]
    assert flink_rules == [rule], res["error"]
    assert not verdict.restorable
    assert [v.rule for v in verdict.violations] == [rule], verdict.violations
    # ... about the same vertex: Flink names it "<name>(<job-vertex id>)"
    (violation,) = verdict.violations
    (vertex,) = [v for v in topology.vertices.values() if v.label() == violation.vertex]
    assert f"({vertex.vertex_id})" in res["error"], (violation, res["error"])


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


def test_mixed_chain_without_operator_names_is_refused_with_certainty(tmp_path: Path) -> None:
    """Metadata before V5 has no operator names, but Flink's own ids bind every chained operator of the
    job-graph plan: spillway sees that the fully finished bsink now sits inside pmap's chain and, like
    Flink, refuses — with certainty (it said "uncertain" before it computed Flink's ids)."""
    fx = fixture_named("1.20.3-finished")
    plan = tmp_path / "plan.json"
    res = restore(fx.release, fx.info["scenario"], fx.checkpoint_dir, variant="mixed-chain", plan_out=plan)
    assert res["outcome"] == "refused", explain(res)
    assert "which contain mixed operator finished state" in res["error"]
    _, verdict = verdict_on(plan, fx.name)
    assert verdict.certain and not verdict.restorable
    assert [v.rule for v in verdict.violations] == ["mixed"]
    assert "bsink" in verdict.violations[0].vertex and "pmap" in verdict.violations[0].vertex
