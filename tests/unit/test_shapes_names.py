"""Binding on production-shaped jobs (the <release>-shapes fixtures: default names, an operator named as another's
uid, a Sink V2 writer beside keyed branches, windows, async I/O, broadcast), without the jar and without uids
given: nothing bound wrong, and names as people give them. Expected ids are Flink's (ids.json)."""

from __future__ import annotations

import json
from typing import Any

import pytest
from support.fixtures import Fixture, all_fixtures

from spillway.errors import UsageError
from spillway.inspect.topology import load_plan, operator_binding
from spillway.storage.load import load_checkpoint

SHAPES = [pytest.param(f, id=f.name) for f in all_fixtures() if f.name.endswith("-shapes")]
NO_UID = [pytest.param(f, id=f.name) for f in all_fixtures() if f.name.endswith("-shapes-no-uid")]


def _nodes(fx: Fixture) -> dict[int, dict[str, Any]]:
    return {n["id"]: n for n in json.loads((fx.root / "ids.json").read_text())["stream_nodes"]}


def _flinks_id(fx: Fixture, node_id: int, name: str) -> str | None:
    """Flink's id of stream node ``node_id`` when ids.json names it so (Flink numbered the writer apart in the
    plan and in the job it ran), else of the only node with that name."""
    nodes = _nodes(fx)
    if node_id in nodes and nodes[node_id]["name"] == name:
        return str(nodes[node_id]["operator_id"])
    named = [n["operator_id"] for n in nodes.values() if n["name"] == name]
    return str(named[0]) if len(named) == 1 else None


def test_the_shapes_fixtures_are_here() -> None:
    assert len(SHAPES) >= 5 and len(NO_UID) >= 5


@pytest.mark.parametrize("fx", SHAPES + NO_UID)
def test_the_stream_graph_plan_alone_binds_nothing_wrong(fx: Fixture) -> None:
    cp = load_checkpoint(fx.checkpoint_dir).checkpoint
    binding = operator_binding(load_plan(fx.root / "plan.json"), cp)
    assert binding is not None
    checked = 0
    for b in binding.operators:
        assert b.node_id is not None
        flink = _flinks_id(fx, b.node_id, b.name)
        if b.exact:
            assert flink is not None and b.operator_id == flink, (b.name, b.node_id, b.method, b.reason)
            checked += 1
    assert checked >= 5


@pytest.mark.parametrize("fx", SHAPES)
def test_dedup_is_not_bound_by_its_name_which_is_legacy_dedups_uid(fx: Fixture) -> None:
    nodes = _nodes(fx)
    (legacy,) = [n for n in nodes.values() if n["name"] == "legacy-dedup"]
    if legacy["uid"] != "dedup":
        pytest.fail(f"{fx.name}: legacy-dedup's uid is {legacy['uid']!r}, the shape needs 'dedup'")
    cp = load_checkpoint(fx.checkpoint_dir).checkpoint
    binding = operator_binding(load_plan(fx.root / "plan.json"), cp)
    assert binding is not None
    (dedup,) = binding.by_name("dedup")
    assert dedup.operator_id != legacy["operator_id"] or not dedup.exact
    if not dedup.exact and cp.format_version < 5:
        assert "a guess the other evidence does not confirm" in dedup.reason


@pytest.mark.parametrize("fx", NO_UID)
def test_without_uids_the_stream_graph_plan_binds_every_operator_to_flinks_id(fx: Fixture) -> None:
    cp = load_checkpoint(fx.checkpoint_dir).checkpoint
    binding = operator_binding(load_plan(fx.root / "plan.json"), cp)
    assert binding is not None
    got = {b.node_id: (b.operator_id, b.exact) for b in binding.operators}
    want = {b.node_id: (_flinks_id(fx, b.node_id, b.name), True) for b in binding.operators if b.node_id}
    assert got == want


@pytest.mark.parametrize("fx", SHAPES)
def test_a_uid_for_a_default_name_three_operators_carry_is_refused(fx: Fixture) -> None:
    from spillway.api import read_plan

    keyed = [n for n in _nodes(fx).values() if n["name"] == "KeyedProcess"]
    assert len(keyed) == 3
    with pytest.raises(UsageError) as err:
        read_plan(fx.root / "plan.json", uids={"KeyedProcess": "join-state"})
    for n in keyed:
        assert f"KeyedProcess#{n['id']}" in str(err.value)


@pytest.mark.parametrize("fx", SHAPES)
def test_the_job_graph_form_picks_a_chained_operator_of_a_shared_name(fx: Fixture) -> None:
    """``Map#VVVVVVVV.P`` (the job vertex id's first eight digits, the chain position) gives one of six ``Map``
    nodes its uid in a job-graph plan; it binds to Flink's id for it (ids.json)."""
    from spillway.api import read_plan

    ids = json.loads((fx.root / "ids.json").read_text())
    (parse,) = [n for n in ids["stream_nodes"] if n["uid"] == "parse-events"]
    (vertex,) = [v for v in ids["vertices"] if parse["operator_id"] in v["operator_ids"]]
    position = list(reversed(vertex["operator_ids"])).index(parse["operator_id"])  # head first
    assert position > 0 and parse["name"] == "Map"
    key = f"Map#{vertex['id'][:8]}.{position}"
    topology = read_plan(fx.root / "jobgraph.json", uids={key: "parse-events"})
    assert topology is not None
    binding = operator_binding(topology, load_checkpoint(fx.checkpoint_dir).checkpoint)
    assert binding is not None
    (picked,) = [b for b in binding.operators if b.vertex_id == vertex["id"] and b.position == position]
    assert (picked.name, picked.method, picked.operator_id, picked.exact) == (
        "Map",
        "uid-hash",
        parse["operator_id"],
        True,
    )
