"""Binding held to Flink's ids on the production-shaped ``shapes`` jobs (tests/fixtures/generator/README.md): a name
that is another operator's uid, default names repeated across the job (three ``KeyedProcess``, six ``Map``, four
``Sink: Unnamed``), an operator without uid feeding a Sink V2 writer and two keyed branches, a window with a side
output, async I/O with ``setUidHash``, a union of three inputs, broadcast-connect and a keyed two-input operator.

Expected ids come from each fixture's ``ids.json`` only (Flink's StreamGraphHasherV2 and JobGraph, written while
the job that made the checkpoint was built); the uids given in (c) are the ones the job set (also ``ids.json``)."""

from __future__ import annotations

import json
import re
from collections import Counter

import pytest
from support.console import spillway
from support.fixtures import Fixture, all_fixtures
from support.plan_nodes import plan_to_flink_nodes

from spillway.flink.operator_ids import BoundOperator
from spillway.inspect.topology import load_plan, operator_binding
from spillway.inspect.validate import validate
from spillway.storage.load import load_checkpoint

SHAPES = [pytest.param(f, id=f.name) for f in all_fixtures() if f.info["scenario"] in ("shapes", "shapes-no-uid")]
WITH_UIDS = [pytest.param(f, id=f.name) for f in all_fixtures() if f.info["scenario"] == "shapes"]
FLAVOURS = ["plan.json", "jobgraph.json"]


def _ids(fx: Fixture) -> dict:
    return json.loads((fx.root / "ids.json").read_text())


def _plan_to_flink_nodes(fx: Fixture) -> dict[int, dict]:
    return plan_to_flink_nodes(fx.root)


def _flink_node(fx: Fixture, b: BoundOperator, plan_nodes: dict[int, dict]) -> dict:
    """The stream node a binding entry stands for: by plan node id (stream-graph plan), else by job vertex id
    (Flink's JobVertexID, which the job-graph plan names) and the operator inside that vertex, which the job-graph
    plan shows by its description from 1.15 on (``Window(TumblingEventTimeWindows(1000), …)`` for the node named
    ``TumblingEventTimeWindows``)."""
    if b.node_id is not None:
        return plan_nodes[b.node_id]
    assert b.vertex_id is not None, b
    hits = [
        n
        for n in _ids(fx)["stream_nodes"]
        if n["vertex_id"] == b.vertex_id and b.name in (n["name"], n.get("description"))
    ]
    assert len(hits) == 1, (b, hits)
    return hits[0]


def _wrong(fx: Fixture, flavour: str, uids: dict[str, str] | None = None) -> list[str]:
    """Every binding entry whose id is not the one Flink gave that operator."""
    plan_nodes = _plan_to_flink_nodes(fx)
    binding = operator_binding(load_plan(fx.root / flavour, uids), load_checkpoint(fx.checkpoint_dir).checkpoint)
    assert binding is not None
    assert len(binding.operators) == len(plan_nodes)
    wrong = []
    for b in binding.operators:
        flink = _flink_node(fx, b, plan_nodes)
        if b.operator_id is not None and b.operator_id != flink["operator_id"]:
            wrong.append(f"{b.name} (Flink node {flink['id']}): {b.method} {b.operator_id}, exact={b.exact}")
    return wrong


def _uids_by_unique_name(fx: Fixture) -> dict[str, str]:
    """name -> uid of every node the job gave a uid whose name no other node has (a name is all --uid takes)."""
    nodes = _ids(fx)["stream_nodes"]
    count = Counter(n["name"] for n in nodes)
    return {n["name"]: n["uid"] for n in nodes if n["uid"] is not None and count[n["name"]] == 1}


@pytest.mark.parametrize("flavour", FLAVOURS)
@pytest.mark.parametrize("fx", SHAPES)
def test_no_operator_is_bound_to_an_id_other_than_flinks(fx: Fixture, flavour: str) -> None:
    assert _wrong(fx, flavour) == []


@pytest.mark.parametrize("flavour", FLAVOURS)
@pytest.mark.parametrize("fx", SHAPES)
def test_the_sound_checkpoint_validates_without_error(fx: Fixture, flavour: str) -> None:
    report = validate(load_checkpoint(fx.checkpoint_dir), load_plan(fx.root / flavour))
    assert [f"{f.rule}: {f.message}" for f in report.errors] == []


@pytest.mark.parametrize("flavour", FLAVOURS)
@pytest.mark.parametrize("fx", WITH_UIDS)
def test_the_jobs_own_uids_given_still_bind_nothing_wrong(fx: Fixture, flavour: str) -> None:
    uids = _uids_by_unique_name(fx)
    assert uids["dedup"] == "dedup-v2" and uids["legacy-dedup"] == "dedup"  # the case that matters most
    assert _wrong(fx, flavour, uids) == []
    report = validate(load_checkpoint(fx.checkpoint_dir), load_plan(fx.root / flavour, uids))
    assert [f"{f.rule}: {f.message}" for f in report.errors] == []


@pytest.mark.parametrize("fx", SHAPES)
def test_a_uid_for_a_name_three_nodes_carry_is_refused_naming_them(fx: Fixture) -> None:
    """``--uid KeyedProcess=…`` cannot say which of the three KeyedProcess nodes is meant: usage error (2), and the
    message lists the nodes (their plan node ids) so the user can pick one."""
    plan = json.loads((fx.root / "plan.json").read_text())
    keyed = [n["id"] for n in plan["nodes"] if n["type"] == "KeyedProcess"]
    assert len(keyed) == 3
    run = spillway("validate", str(fx.checkpoint_dir), "--plan", str(fx.root / "plan.json"), "--uid",
                   "KeyedProcess=count-all")  # fmt: skip
    assert run.code == 2, run.output
    for node in keyed:
        assert re.search(rf"\b{node}\b", run.output), (node, run.output)


def test_the_plan_helper_matches_every_node_of_a_sink_v2_job() -> None:
    """The mapping the tests above rely on: a Sink V2 writer is a node whose plan id differs from the job's."""
    fx = next(f for f in all_fixtures() if f.name == "1.20.3-shapes")
    plan_nodes = _plan_to_flink_nodes(fx)
    moved = {p: n["id"] for p, n in plan_nodes.items() if p != n["id"]}
    assert [plan_nodes[p]["name"] for p in moved] == ["Sink: Writer"]
    assert {n["operator_id"] for n in plan_nodes.values()} == {n["operator_id"] for n in _ids(fx)["stream_nodes"]}
