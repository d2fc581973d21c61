"""Binding by the names Flink stores (metadata V5+, 2.x) when the job's names repeat: the shapes job on 2.2.1.

Flink 2.2.1 stores each operator's name and uid in ``_metadata`` (oracle.json, Flink's own loader). The shapes
job leaves most names at Flink's defaults (six ``Map``, five ``Sink: Unnamed``, three ``KeyedProcess``): a stored
name binds only an operator whose name is unique in the plan and in the checkpoint; the others are left to the
generated ids, and what is left says why. Expected ids: ids.json (Flink's own hasher); the plan's nodes are paired
with the job's by node id (a Sink V2 writer by its name, docs/format/job-shapes.md)."""

from __future__ import annotations

import json
from collections import Counter
from typing import Any

import pytest
from support.fixtures import Fixture, fixture_named

from spillway.flink.operator_ids import (
    DETERMINISTIC_HASH,
    STORED_NAME,
    UID_HASH,
    UNBOUND,
    bind,
    node_ref,
    uid_candidates,
    uid_hash,
)
from spillway.flink.stream_graph import StreamGraph, parse_job_graph_plan, parse_stream_plan

FIXTURES = [fixture_named("2.2.1-shapes"), fixture_named("2.2.1-shapes-no-uid")]


def _flink_nodes(fx: Fixture, graph: StreamGraph) -> dict[int, dict[str, Any]]:
    nodes = json.loads((fx.root / "ids.json").read_text())["stream_nodes"]
    by_id = {n["id"]: n for n in nodes}
    out = {n.id: by_id[n.id] for n in graph.nodes if n.id in by_id}
    for n in graph.nodes:
        if n.id not in by_id:
            (twin,) = [m for m in nodes if m["name"] == n.name and m["id"] not in {x.id for x in graph.nodes}]
            out[n.id] = twin
    return out


def _stored(fx: Fixture) -> dict[str, tuple[str | None, str | None]]:
    return {o["operator_id"]: (o["name"], o["uid"]) for o in json.loads(fx.oracle.read_text())["operators"]}


@pytest.mark.parametrize("fx", [pytest.param(f, id=f.name) for f in FIXTURES])
def test_stored_names_bind_only_the_names_that_are_unique(fx: Fixture) -> None:
    stored = _stored(fx)
    graph = parse_stream_plan(json.loads((fx.root / "plan.json").read_text()))
    flink = _flink_nodes(fx, graph)
    plan_names = Counter(n.name for n in graph.nodes)
    stored_names = Counter(name for name, _ in stored.values())
    assert {n for n, c in plan_names.items() if c > 1} == {"Map", "Filter", "KeyedProcess", "Sink: Unnamed"}
    binding = bind(graph, list(stored), stored=stored, release=fx.release)
    for b in binding.operators:
        node = flink[b.node_id]
        unique = plan_names[b.name] == 1 and stored_names[b.name] == 1
        if unique:
            assert (b.method, b.operator_id, b.exact, b.uid, b.reason) == (
                STORED_NAME,
                node["operator_id"],
                True,
                node["uid"],
                "the checkpoint stores this name for the id",
            )
        else:
            assert b.method in (DETERMINISTIC_HASH, UNBOUND), (b.name, b.method)
        if b.method == DETERMINISTIC_HASH:
            assert (b.operator_id, b.exact, b.uid) == (node["operator_id"], True, None)
            assert node["uid"] is None  # a generated id is only ever an operator's without uid
            assert b.reason.startswith("StreamGraphHasherV2 gives this id (no uid")
        if b.method == UNBOUND:
            tried = ", ".join(repr(u) for u, _ in uid_candidates(b.name))
            # a name several plan operators carry is given as the form that picks this one (NAME#NODE)
            if plan_names[b.name] > 1:
                quoted = f"'{b.name}#{b.node_id}'"
            else:
                quoted = b.name if " " not in b.name else f"'{b.name}'"
            assert b.reason == (
                f"name {b.name!r} occurs more than once; stored names cannot tell them apart; no id computed by "
                f"Flink's rules for {b.name!r} is in the checkpoint (uids tried: {tried}; generated id tried). If it "
                f"has state there, give its uid: --uid {quoted}=UID"
            )
            assert b.operator_id is None and not b.exact
    # what is left unbound is exactly what no step could tell apart: the ids of those operators
    left = {flink[b.node_id]["operator_id"] for b in binding.operators if b.method == UNBOUND}
    assert set(binding.unclaimed) == left and left
    # a name guess plays no part: every stored name that is unique decides first
    assert not any(b.method == UID_HASH for b in binding.operators)


def test_a_uid_given_for_a_repeated_name_picks_the_node() -> None:
    """A uid given for one plan node (``#N``) binds that node by the uid's hash, though its name repeats; a uid
    given for a node whose stored name is unique is checked instead of the stored name: a wrong one is said to be
    not in the checkpoint, and the node is not bound by its stored name."""
    fx = fixture_named("2.2.1-shapes")
    stored = _stored(fx)
    graph = parse_stream_plan(json.loads((fx.root / "plan.json").read_text()))
    flink = _flink_nodes(fx, graph)
    target = next(n for n in graph.nodes if n.name == "KeyedProcess" and flink[n.id]["uid"] is not None)
    joiner = next(n for n in graph.nodes if n.name == "Co-Keyed-Process")
    uid = flink[target.id]["uid"]
    overrides = {f"#{target.id}": uid, "Co-Keyed-Process": "no-such-uid"}
    binding = bind(graph, list(stored), stored=stored, release=fx.release, uid_overrides=overrides)
    [b] = [b for b in binding.operators if b.node_id == target.id]
    assert (b.method, b.operator_id, b.exact, b.uid, b.reason) == (
        UID_HASH,
        flink[target.id]["operator_id"],
        True,
        uid,
        f"given uid {uid!r} hashes to this id",
    )
    [j] = [b for b in binding.operators if b.node_id == joiner.id]
    wrong = uid_hash("no-such-uid")
    assert (j.method, j.operator_id, j.in_checkpoint, j.exact, j.uid, j.reason) == (
        UID_HASH,
        wrong,
        False,
        False,
        "no-such-uid",
        f"given uid 'no-such-uid' hashes to {wrong}, which is not in the checkpoint (no state for this operator "
        "there, or the uid is wrong)",
    )
    assert flink[joiner.id]["operator_id"] in binding.unclaimed
    # every other operator whose name is unique in plan and checkpoint is still bound by its stored name, wherever
    # it sits in the plan relative to the nodes a uid was given for
    plan_names = Counter(n.name for n in graph.nodes)
    stored_names = Counter(name for name, _ in stored.values())
    rest = [
        b
        for b in binding.operators
        if b.node_id not in (target.id, joiner.id) and plan_names[b.name] == 1 and stored_names[b.name] == 1
    ]
    assert any(b.node_id is not None and b.node_id > target.id for b in rest)
    for b in rest:
        assert (b.method, b.operator_id, b.exact) == (STORED_NAME, flink[b.node_id]["operator_id"], True), b.name


def test_a_uid_given_for_a_chained_operator_of_a_job_graph_plan_by_its_place() -> None:
    """A job-graph plan names no stream node: a chained operator is picked as ``#VERTEX8.POS`` (the vertex id's
    first eight digits, its place in the chain). 1.20.3-shapes' first ``Map`` (uid parse-events, ids.json) is
    position 1 of the events chain; given its uid that way it is bound to Flink's id, and no other ``Map`` is."""
    fx = fixture_named("1.20.3-shapes")
    flink = json.loads((fx.root / "ids.json").read_text())
    parse = next(n for n in flink["stream_nodes"] if n["uid"] == "parse-events")
    vertex = parse["vertex_id"]
    job = parse_job_graph_plan(json.loads((fx.root / "jobgraph.json").read_text()))
    [shown] = [v for v in job.vertices if v.id == vertex]
    assert shown.operators[1] == "Map"
    ref = node_ref(None, vertex, 1)
    assert ref == f"#{vertex[:8]}.1"
    assert node_ref(None, vertex, None) is None and node_ref(None, None, 1) is None and node_ref(7, vertex, 1) == "#7"
    stored = [o["operator_id"] for o in json.loads(fx.oracle.read_text())["operators"]]
    binding = bind(job, stored, release=fx.release, uid_overrides={ref: "parse-events"})
    by_uid = [b for b in binding.operators if b.method == UID_HASH]
    assert [(b.vertex_id, b.position, b.operator_id, b.exact) for b in by_uid] == [
        (vertex, 1, parse["operator_id"], True)
    ]
