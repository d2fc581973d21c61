"""FLIP-147 restore variants of the ``finished`` job: what Flink did, and the checks spillway's verdict must pass.

``tests/fixtures/finished-variants/<release>/<variant>/`` holds what the restore harness recorded for each variant
(``RestoreCheck``, tests/fixtures/generator/README.md): the submitted job's ``jobgraph.json`` (``JsonPlanGenerator``)
and ``plan.json`` (``getExecutionPlan()``), and ``flink.json`` (Flink's outcome and message). The integration test
(tests/integration/test_flink_restore.py) restores with real Flink and insists on the same plans and outcome; the
unit test (tests/unit/test_finished_variants.py) checks spillway on every recorded case without a JVM.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from spillway.inspect.finished import Verdict, check
from spillway.inspect.topology import Topology, load_plan
from spillway.model.checkpoint import CheckpointMetadata

RECORDED = Path(__file__).resolve().parents[1] / "fixtures" / "finished-variants"

# Flink's VertexFinishedStateChecker message -> spillway rule (docs/format/finished-state.md)
FLINK_RULES = {
    "which contain mixed operator finished state": "mixed",
    "fully finished vertices predeceased with the ones not fully finished": "fully-finished-predecessor",
    "connected via the ALL_TO_ALL edges": "all-to-all-predecessor",
    "partially finished vertices predeceased with all running ones": "pointwise-predecessor",
}

# variant -> (Flink's rule, or None when Flink restores; restore with --allow-non-restored-state). Every expected
# outcome is what Flink itself did (flink.json; docs/format/finished-state.md, "Restore proofs per release").
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

# Stream-graph plans do not show disableChaining / startNewChain: where a forward edge joins operators of
# different finished state, whether Flink chains them decides the verdict, and spillway says it cannot be sure.
CHAIN_DOUBT = {"mixed-chain", "chained-after-finished", "fed-by-finished"}


def job_uids(release: str) -> dict[str, str]:
    """Operator name -> uid of the finished job and its variants (FixtureJob.java, RestoreCheck.java): what a
    plan does not show. Sinks are Sink V2 writers from 1.19 on ("bsink: Writer"), SinkFunctions before."""
    sink_v2 = tuple(map(int, release.split(".")[:2])) >= (1, 19)
    uids = {"Source: seq": "src", "Source: bseq": "bsrc", "Source: pseq": "psrc"}
    uids |= {n: n for n in ("tostr", "slow", "len", "bmap", "pmap", "tolong", "bnew")}
    uids |= {(f"{n}: Writer" if sink_v2 else f"Sink: {n}"): n for n in ("sink", "bsink", "psink", "bextra", "bnewsink")}
    return uids


def recorded() -> list[tuple[str, str]]:
    """(release, variant) of every recorded case."""
    return sorted((d.parent.name, d.name) for d in RECORDED.glob("*/*") if (d / "flink.json").is_file())


def recorded_dir(release: str, variant: str) -> Path:
    return RECORDED / release / variant


def flink_rule(flink: dict[str, Any]) -> str | None:
    """The FLIP-147 rule of Flink's outcome (None: restored); anything else fails the check."""
    if flink["outcome"] == "restored":
        return None
    assert flink["outcome"] == "refused", flink
    assert flink["error_class"] == "org.apache.flink.util.FlinkRuntimeException", flink
    rules = [r for fragment, r in FLINK_RULES.items() if fragment in flink["error"]]
    assert len(rules) == 1, flink["error"]
    return rules[0]


def agrees(verdict: Verdict, flink: dict[str, Any], topology: Topology | None = None) -> bool:
    """spillway's verdict says what Flink did; with a job-graph plan also Flink's one refusal, for the vertex
    Flink names "<name>(<job-vertex id>)"."""
    rule = flink_rule(flink)
    if rule is None:
        return verdict.restorable
    hits = [v for v in verdict.violations if v.rule == rule]
    if topology is not None:
        ids = {v.label(): v.vertex_id for v in topology.vertices.values()}
        hits = [v for v in hits if f"({ids[v.vertex]})" in flink["error"]]
        return not verdict.restorable and [v.rule for v in verdict.violations] == [rule] and bool(hits)
    return not verdict.restorable and bool(hits)


def check_variant(
    release: str, variant: str, checkpoint: CheckpointMetadata, jobgraph: Path, plan: Path, flink: dict[str, Any]
) -> dict[tuple[str, bool], Verdict]:
    """Flink's outcome is the variant's expected one, and spillway, on both plan flavours with and without the
    job's uids, is never wrong when certain; certain with the job graph, and with the stream graph plus uids
    unless the verdict hangs on chaining the plan cannot show (CHAIN_DOUBT). Returns the four verdicts."""
    rule, _ = VARIANTS[variant]
    assert flink_rule(flink) == rule, flink
    verdicts = {}
    for flavour, path in (("job-graph", jobgraph), ("stream-graph", plan)):
        for given in (True, False):
            topology = load_plan(path, job_uids(release) if given else None)
            verdict = check(topology, checkpoint)
            verdicts[flavour, given] = verdict
            if verdict.certain:  # never wrong when it claims to be sure
                assert agrees(verdict, flink, topology if flavour == "job-graph" else None), (
                    flavour,
                    given,
                    verdict,
                    flink["error"],
                )
    # the job graph's vertices are Flink's chains: certain, with or without uids (Flink's ids bind every
    # chained operator even on metadata before V5, which stores no names)
    assert verdicts["job-graph", True].certain, verdicts["job-graph", True].notes
    assert verdicts["job-graph", False].certain, verdicts["job-graph", False].notes
    if variant in CHAIN_DOUBT:
        assert not verdicts["stream-graph", True].certain
        assert verdicts["stream-graph", True].chain_doubts
    else:
        assert verdicts["stream-graph", True].certain, verdicts["stream-graph", True].notes
    return verdicts


def load_recorded(release: str, variant: str) -> dict[str, Any]:
    return json.loads((recorded_dir(release, variant) / "flink.json").read_text())


RECORDED_KEYS = ("flink_version", "variant", "allow_non_restored_state", "outcome", "stage", "error_class", "error")


def record(release: str, variant: str) -> dict[str, Any]:
    """Restore the variant with real Flink and (re)write its recorded plans and outcome."""
    import shutil
    import tempfile

    from support.fixtures import fixture_named
    from support.flink_harness import restore

    fx = fixture_named(f"{release}-finished")
    with tempfile.TemporaryDirectory(prefix="spillway-record-") as tmp:
        res = restore(
            release,
            fx.info["scenario"],
            fx.checkpoint_dir,
            variant=variant,
            allow_non_restored=VARIANTS[variant][1],
            run_seconds=3,
            workdir=Path(tmp) / "work",
        )
        out = recorded_dir(release, variant)
        out.mkdir(parents=True, exist_ok=True)
        shutil.copy(res["jobgraph_plan"], out / "jobgraph.json")
        shutil.copy(res["stream_plan"], out / "plan.json")
    doc = {k: res[k] for k in RECORDED_KEYS}
    (out / "flink.json").write_text(json.dumps(doc, indent=1) + "\n")
    return doc


if __name__ == "__main__":  # python tests/support/finished_variants.py RELEASE [VARIANT ...]
    import sys

    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
    release, *names = sys.argv[1:]
    for name in names or list(VARIANTS):
        print(name, json.dumps(record(release, name)))
