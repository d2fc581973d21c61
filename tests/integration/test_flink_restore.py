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
from support.fixtures import fixture_named
from support.flink_harness import restore

from spillway.inspect.finished import Verdict, check
from spillway.inspect.topology import Topology, load_plan, parse_plan
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


# --- FLIP-147 variants on several releases -------------------------------------------------------------------------
#
# variant -> (Flink's rule, or None when Flink restores; restore with --allow-non-restored-state). Every expected
# outcome is what Flink itself did (messages in docs/format/finished-state.md, "Restore proofs").
VARIANTS: dict[str, tuple[str | None, bool]] = {
    # slow -> tolong -rebalance-> bsink: fully finished vertex, running predecessor
    "rewired-fully-finished": ("fully-finished-predecessor", False),
    # slow -> tolong -rebalance-> pmap: partially finished vertex, running all-to-all predecessor
    "rewired-partially-finished": ("all-to-all-predecessor", False),
    # slow -> tolong -forward-> pmap: pointwise edge from an all-running vertex into a partially finished one
    "rewired-partially-finished-pointwise": ("pointwise-predecessor", False),
    # pseq -> pmap -rebalance-> psink: partially finished predecessor over an all-to-all edge
    "partial-after-partial-all-to-all": ("all-to-all-predecessor", False),
    # bsink chained behind pmap: fully finished operator in a partially finished chain
    "mixed-chain": ("mixed", False),
    # bmap (fully finished) heads a chain with the new running bnew -> bnewsink
    "chained-after-finished": ("mixed", False),
    # new running sink bextra on its own vertex behind the fully finished bmap: allowed
    "fed-by-finished": (None, False),
    # bmap removed (bseq -> bsink); its state is left over, hence --allow-non-restored-state
    "without-bmap": (None, True),
}
# The full set on 2.3.0 (metadata V6, names stored) and 1.20.3 (V4, no names); two distinguishing variants on
# 2.0.0 (V5) and 1.15.4 (V3, legacy sinks): a refusal that needs the chain's unidentified operators counted as
# running, and one predecessor rule.
RESTORE_CASES = [
    *((release, variant) for release in ("2.3.0", "1.20.3") for variant in VARIANTS),
    ("2.0.0", "chained-after-finished"),
    ("2.0.0", "partial-after-partial-all-to-all"),
    ("1.15.4", "chained-after-finished"),
    ("1.15.4", "rewired-partially-finished-pointwise"),
]

# Stream-graph plans do not show disableChaining / startNewChain: where a forward edge joins operators of
# different finished state, whether Flink chains them decides the verdict, and spillway says it cannot be sure.
CHAIN_DOUBT = {"mixed-chain", "chained-after-finished", "fed-by-finished"}


def job_uids(release: str) -> dict[str, str]:
    """Operator name -> uid of the finished job and its variants (FixtureJob.java, RestoreCheck.java): what a
    plan does not show. Sinks are Sink V2 writers from 1.19 on ("bsink: Writer"), SinkFunctions before."""
    sink = (
        (lambda n: f"{n}: Writer") if tuple(map(int, release.split(".")[:2])) >= (1, 19) else (lambda n: f"Sink: {n}")
    )
    uids = {"Source: seq": "src", "Source: bseq": "bsrc", "Source: pseq": "psrc"}
    uids |= {n: n for n in ("tostr", "slow", "len", "bmap", "pmap", "tolong", "bnew")}
    uids |= {sink(n): n for n in ("sink", "bsink", "psink", "bextra", "bnewsink")}
    return uids


def agrees(verdict: Verdict, res: dict, rule: str | None, topology: Topology | None = None) -> bool:
    """spillway's verdict says what Flink did (and, for a refusal, names Flink's rule for Flink's vertex)."""
    if rule is None:
        return res["outcome"] == "restored" and verdict.restorable
    hits = [v for v in verdict.violations if v.rule == rule]
    if topology is not None:  # job-graph plan: Flink's one refusal, for the vertex "<name>(<job-vertex id>)"
        ids = {v.label(): v.vertex_id for v in topology.vertices.values()}
        hits = [v for v in hits if f"({ids[v.vertex]})" in res["error"]]
        return not verdict.restorable and [v.rule for v in verdict.violations] == [rule] and bool(hits)
    return not verdict.restorable and bool(hits)


@pytest.mark.parametrize(("release", "variant"), RESTORE_CASES)
def test_flink_and_spillway_agree_on_modified_topologies(tmp_path: Path, release: str, variant: str) -> None:
    rule, allow_non_restored = VARIANTS[variant]
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
    # Flink's outcome
    if rule is None:
        assert res["outcome"] == "restored", explain(res)
    else:
        assert res["outcome"] == "refused", explain(res)
        assert res["error_class"] == "org.apache.flink.util.FlinkRuntimeException", explain(res)
        assert [r for fragment, r in FLINK_RULES.items() if fragment in res["error"]] == [rule], res["error"]

    checkpoint = load_checkpoint(fx.checkpoint_dir).checkpoint
    uids = job_uids(release)
    verdicts = {}
    for flavour, plan in (("job-graph", res["jobgraph_plan"]), ("stream-graph", res["stream_plan"])):
        for given in (True, False):
            topology = load_plan(plan, uids if given else None)
            verdict = check(topology, checkpoint)
            verdicts[flavour, given] = verdict
            # never wrong when it claims to be sure
            if verdict.certain:
                assert agrees(verdict, res, rule, topology if flavour == "job-graph" else None), (
                    flavour,
                    given,
                    verdict,
                    res["error"],
                )
    # the plans Flink wrote for the variant give a certain verdict: the job graph always (its vertices are
    # Flink's chains), the stream graph with the uids unless the verdict hangs on chaining it cannot show
    assert verdicts["job-graph", True].certain, verdicts["job-graph", True].notes
    assert verdicts["job-graph", False].certain, verdicts["job-graph", False].notes
    if variant in CHAIN_DOUBT:
        assert not verdicts["stream-graph", True].certain
        assert verdicts["stream-graph", True].chain_doubts
    else:
        assert verdicts["stream-graph", True].certain, verdicts["stream-graph", True].notes


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
