"""FLIP-147 verdict rules one by one (docs/format/finished-state.md), on the recorded restore variants.

Every expected outcome is Flink's: either what Flink did on the recorded restore
(tests/fixtures/finished-variants/<release>/<variant>/flink.json), or what Flink's rules say for a plan that only
differs from a recorded one in a fact those rules name (a chaining strategy that forbids chaining,
docs/format/operator-ids.md §"Chaining rules"; a vertex's classes, docs/format/finished-state.md "Restore rules").
"""

from __future__ import annotations

import pytest
from support.finished_variants import job_uids, load_recorded, recorded_dir
from support.fixtures import fixture_named

from spillway.inspect.finished import FULLY, PARTIALLY, RUNNING, check
from spillway.inspect.topology import Topology, load_plan
from spillway.model.checkpoint import Checkpoint
from spillway.storage.load import load_checkpoint

RELEASES = ["1-15-4", "2-3-0"]


def _checkpoint(release: str) -> Checkpoint:
    return load_checkpoint(fixture_named(f"{release.replace('-', '.')}-finished").checkpoint_dir).checkpoint


def _plan(release: str, variant: str, flavour: str = "plan.json", uids: bool = True) -> Topology:
    r = release.replace("-", ".")
    return load_plan(recorded_dir(r, variant) / flavour, job_uids(r) if uids else None)


def _bsink(release: str) -> str:
    """The bounded branch's sink: a Sink V2 writer from 1.19 on (FixtureJob.java)."""
    return "bsink: Writer" if release.startswith("2") else "Sink: bsink"


def _with_strategy(topology: Topology, strategies: dict[str, str]) -> Topology:
    """The plan with chaining strategies it cannot show (``disableChaining()`` gives NEVER, ``startNewChain()``
    HEAD) set on the named operators."""
    sg = topology.stream_graph
    assert sg is not None
    ids = {n.name: n.id for n in sg.nodes}
    topology.stream_graph = sg.with_nodes({ids[name]: {"chaining_strategy": s} for name, s in strategies.items()})
    return topology


@pytest.mark.parametrize("release", RELEASES)
def test_the_mixed_chain_variant_is_in_doubt_without_chaining_strategies(release: str) -> None:
    """Flink refused the recorded mixed-chain restore (bsink chained behind pmap); the stream-graph plan does not
    show whether the job broke that chain, so the verdict names the edge and is not certain."""
    topology = _plan(release, "mixed-chain")
    verdict = check(topology, _checkpoint(release))
    assert load_recorded(release.replace("-", "."), "mixed-chain")["outcome"] == "refused"
    assert verdict.chain_doubts == [f"pmap ({PARTIALLY}) -> {_bsink(release)} ({FULLY})"]
    assert not verdict.certain and verdict.answer is False


@pytest.mark.parametrize("release", RELEASES)
@pytest.mark.parametrize(
    ("which", "strategy"),
    [
        pytest.param("down", "HEAD", id="startNewChain-on-bsink"),
        pytest.param("down", "NEVER", id="disableChaining-on-bsink"),
        pytest.param("up", "NEVER", id="disableChaining-on-pmap"),
    ],
)
def test_a_chaining_strategy_that_forbids_the_chain_removes_the_doubt(release: str, which: str, strategy: str) -> None:
    """With the strategy known, pmap -> bsink is certainly not chained (a downstream HEAD or NEVER, or an upstream
    NEVER, is never chained to its input): bsink is a vertex of its own, fully finished behind the partially
    finished pmap, which Flink refuses ("fully finished vertices predeceased with the ones not fully finished")."""
    name = "pmap" if which == "up" else _bsink(release)
    topology = _with_strategy(_plan(release, "mixed-chain"), {name: strategy})
    verdict = check(topology, _checkpoint(release))
    assert verdict.chain_doubts == []
    assert verdict.certain
    assert verdict.answer is False
    assert [(v.rule, v.vertex) for v in verdict.violations] == [("fully-finished-predecessor", _bsink(release))]


@pytest.mark.parametrize("release", RELEASES)
def test_an_upstream_head_still_chains_to_its_output(release: str) -> None:
    """HEAD only stops chaining to an operator's input; pmap -> bsink stays in doubt."""
    topology = _with_strategy(_plan(release, "mixed-chain"), {"pmap": "HEAD"})
    verdict = check(topology, _checkpoint(release))
    assert verdict.chain_doubts == [f"pmap ({PARTIALLY}) -> {_bsink(release)} ({FULLY})"]
    assert not verdict.certain


def test_running_and_finished_classes() -> None:
    """Flink's classes of the finished job's operators (FixtureJob: the bounded branch fully finished, the
    partial branch's subtask 0 finished, the rest running), by the job-graph plan, which binds every operator."""
    verdict = check(_plan("2-3-0", "without-bmap", "jobgraph.json"), _checkpoint("2-3-0"))
    assert verdict.classification["Source: bseq"] == FULLY
    assert verdict.classification["slow"] == RUNNING
    assert verdict.classification["Source: pseq -> pmap -> psink: Writer"] == PARTIALLY
