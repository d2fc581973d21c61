"""The binding's done criterion, stated whole, on every production-shaped and uid-less fixture (``shapes*``,
``prod*``, ``*no-uid``, Flink 1.11 to 2.3):

* with only the stream-graph plan (``plan.json``, what ``getExecutionPlan()`` / ``flink info`` print) and no uid
  typed, no operator is bound to an id other than the one Flink gave it, and every operator bound exactly has
  Flink's id and that id is in the checkpoint;
* with the job's own graph (``--job``: ``ids.json`` as ``spillway ids`` reads it back from the jar), every operator
  is bound to Flink's id, exactly where the checkpoint holds that id.

Expected ids come only from each fixture's ``ids.json``, written by Flink's own StreamGraphHasherV2 and JobGraph while
the job that made the checkpoint was built."""

from __future__ import annotations

import json

import pytest
from support.fixtures import Fixture, all_fixtures
from support.plan_nodes import plan_to_flink_nodes

from spillway.api import job_plan
from spillway.flink.job_ids import parse_job_ids
from spillway.inspect.topology import bind_job, load_plan
from spillway.storage.load import load_checkpoint

DONE = [
    pytest.param(f, id=f.name)
    for f in all_fixtures()
    if f.info["scenario"].startswith(("shapes", "prod")) or f.info["scenario"].endswith("no-uid")
]


def _flink(fx: Fixture) -> dict:
    return json.loads((fx.root / "ids.json").read_text())


def test_the_criterion_covers_every_line_and_shape() -> None:
    names = {p.values[0].name for p in DONE}
    lines = {n.split("-")[0].rsplit(".", 1)[0] for n in names}
    every_line = {"1.11", "1.12", "1.13", "1.14", "1.15", "1.16", "1.17", "1.18", "1.19", "1.20", "2.0", "2.2", "2.3"}
    assert every_line <= lines
    assert {"1.14.6-shapes-no-uid", "1.20.3-prod-no-uid", "2.2.1-shapes-no-uid", "2.3.0-no-uid"} <= names


@pytest.mark.parametrize("fx", DONE)
def test_the_stream_graph_plan_alone_never_binds_an_id_other_than_flinks(fx: Fixture) -> None:
    checkpoint = load_checkpoint(fx.checkpoint_dir).checkpoint
    stored = {o.operator_id for o in checkpoint.operators}
    plan_nodes = plan_to_flink_nodes(fx.root)
    binding = bind_job(load_plan(fx.root / "plan.json"), checkpoint).operators
    assert binding is not None
    assert sorted(b.node_id for b in binding.operators if b.node_id is not None) == sorted(plan_nodes)
    wrong = []
    for b in binding.operators:
        assert b.node_id is not None, b
        flink_id = plan_nodes[b.node_id]["operator_id"]
        if b.operator_id is not None and b.operator_id != flink_id:
            wrong.append(f"{b.name} #{b.node_id}: {b.method} {b.operator_id} exact={b.exact}, Flink {flink_id}")
        if b.exact:
            assert (b.operator_id, b.operator_id in stored) == (flink_id, True), b
    assert wrong == []
    # every id the checkpoint holds is claimed by at most one operator
    claimed = [b.operator_id for b in binding.operators if b.exact]
    assert len(claimed) == len(set(claimed))


@pytest.mark.parametrize("fx", DONE)
def test_with_the_jobs_own_graph_every_operator_is_bound_to_flinks_id(fx: Fixture) -> None:
    flink = _flink(fx)
    checkpoint = load_checkpoint(fx.checkpoint_dir).checkpoint
    stored = {o.operator_id for o in checkpoint.operators}
    binding = bind_job(job_plan(parse_job_ids(flink)), checkpoint).operators
    assert binding is not None
    by_node = {n["id"]: n for n in flink["stream_nodes"]}
    assert sorted(b.node_id for b in binding.operators if b.node_id is not None) == sorted(by_node)
    for b in binding.operators:
        assert b.node_id is not None, b
        node = by_node[b.node_id]
        assert (b.name, b.operator_id) == (node["name"], node["operator_id"])
        assert b.exact == (node["operator_id"] in stored), b
    assert {o.operator_id for o in checkpoint.operators} <= {n["operator_id"] for n in flink["stream_nodes"]}
