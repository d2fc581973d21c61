"""A uid guessed from a name is a hypothesis, and a job-graph plan's ids outrank it.

Real checkpoints of Flink 1.20.3 (tests/fixtures/1.20.3-prod), with their plans edited the way real jobs name
operators: an operator's name is another operator's uid (``dedup`` named so, with uid ``dedup-v2``, next to
``legacy-dedup`` with uid ``dedup``). Expected ids are Flink's (ids.json, written by Flink's own hasher)."""

from __future__ import annotations

import json
from typing import Any

import pytest
from support.fixtures import Fixture, all_fixtures

from spillway.flink.deduction import OperatorFacts
from spillway.flink.operator_ids import UID_HASH, VERTEX_ID, bind, deterministic_ids
from spillway.flink.stream_graph import StreamEdge, StreamGraph, StreamNode, parse_stream_plan
from spillway.inspect.topology import operator_binding, parse_plan
from spillway.storage.load import load_checkpoint

FX = next(f for f in all_fixtures() if f.name == "1.20.3-prod")


def _flink_ids(fx: Fixture) -> dict[str, str]:
    return {n["name"]: n["operator_id"] for n in json.loads((fx.root / "ids.json").read_text())["stream_nodes"]}


def _renamed(doc: Any, renames: dict[str, str]) -> Any:
    """The plan with operators renamed (both flavours: stream nodes' names, job vertices' descriptions)."""
    doc = json.loads(json.dumps(doc))
    for node in doc.get("plan", doc)["nodes"]:
        for key in ("type", "contents"):
            if node.get(key) in renames:
                node[key] = renames[node[key]]
        if "description" in node:
            for old, new in renames.items():
                node["description"] = node["description"].replace(f"{old}<br/>", f"{new}<br/>")
    return doc


def _bind(flavour: str, renames: dict[str, str]) -> tuple[dict[str, Any], dict[str, str]]:
    doc = _renamed(json.loads((FX.root / flavour).read_text()), renames)
    checkpoint = load_checkpoint(FX.checkpoint_dir).checkpoint
    binding = operator_binding(parse_plan(doc), checkpoint)
    assert binding is not None
    truth = {renames.get(name, name): h for name, h in _flink_ids(FX).items()}
    return {b.name: b for b in binding.operators}, truth


# slow-count has uid "slow", format-out has uid "fmt" (ids.json)
NAME_IS_ANOTHER_UID = {"format-out": "slow", "slow-count": "legacy-slow"}
NAMES_SWAPPED_WITH_UIDS = {"format-out": "slow", "slow-count": "fmt"}


@pytest.mark.parametrize("renames", [NAME_IS_ANOTHER_UID, NAMES_SWAPPED_WITH_UIDS], ids=["another-uid", "swapped"])
def test_a_name_that_is_another_operators_uid_binds_nothing_wrong(renames: dict[str, str]) -> None:
    ops, truth = _bind("plan.json", renames)
    assert _flink_ids(FX)["slow-count"] != truth["slow"]  # the name "slow" hashes to the wrong operator's id
    for name, b in ops.items():
        if b.exact:
            assert b.operator_id == truth[name], (name, b.method, b.reason)
    # The checkpoint's own evidence (keyed state, channel state) decides both, once the guess is set aside.
    assert ops["slow"].exact and ops["slow"].operator_id == truth["slow"] and ops["slow"].method != UID_HASH
    assert "a guess the other evidence does not confirm" in ops["slow"].reason
    assert all(b.exact for b in ops.values())


def test_a_confirmed_name_guess_stays_exact() -> None:
    """Unedited, the names slow-count and format-out are no uids; nothing is set aside and every operator is
    bound to Flink's id (the guard against dropping what the evidence confirms)."""
    ops, truth = _bind("plan.json", {})
    assert {n: b.operator_id for n, b in ops.items()} == truth
    assert all(b.exact for b in ops.values())
    assert not any("does not confirm" in b.reason for b in ops.values())


def test_a_job_graph_vertex_id_outranks_a_name_guess() -> None:
    """format-out heads job vertex 36597482…; renamed "slow" (slow-count's uid) it keeps its vertex id."""
    ops, truth = _bind("jobgraph.json", NAME_IS_ANOTHER_UID)
    assert (ops["slow"].method, ops["slow"].operator_id) == (VERTEX_ID, truth["slow"])
    assert (ops["legacy-slow"].method, ops["legacy-slow"].operator_id) == (VERTEX_ID, truth["legacy-slow"])


def test_a_chained_operator_named_as_another_chains_uid_is_not_bound_by_it() -> None:
    """parse (chained behind Source: events, uid parse-events) renamed "rules-tag" — tag-rules' uid; tag-rules
    renamed. The guess would give parse tag-rules' id; parallelism 3 vs 2 refutes it, and parse is bound to its
    own id by the evidence."""
    ops, truth = _bind("jobgraph.json", {"parse": "rules-tag", "tag-rules": "tagging"})
    for name, b in ops.items():
        if b.exact:
            assert b.operator_id == truth[name], (name, b.method, b.reason)
    assert ops["rules-tag"].operator_id == truth["rules-tag"] and ops["rules-tag"].exact
    assert ops["tagging"].operator_id == truth["tagging"] and ops["tagging"].exact


# ------------------------------------------------------------------------------------------ output order


def _fan_out_plan() -> tuple[dict[str, Any], dict[int, str]]:
    """Source -> prep (no uid) -> {sink: Writer (chained), count (keyBy)}, where Flink created prep's edge to
    count before its edge to the writer, as a Sink V2 writer's translation can: the plan lists the writer first
    (lower node id), so the order a plan implies swaps the two breadth-first positions, hence the two ids.
    Internal consistency: the ids are StreamGraphHasherV2's rule applied to Flink's order (the real shape is in
    the <release>-shapes-no-uid fixtures)."""
    nodes = tuple(
        StreamNode(i, name, 2, is_source=i == 1)
        for i, name in [(1, "Source: in"), (2, "prep"), (3, "sink: Writer"), (4, "count")]
    )
    flinks_order = (StreamEdge(1, 2, "FORWARD"), StreamEdge(2, 4, "HASH"), StreamEdge(2, 3, "FORWARD"))
    ids = deterministic_ids(StreamGraph(nodes, flinks_order), "1.20")
    plan = {
        "nodes": [
            {"id": 1, "type": "Source: in", "pact": "Data Source", "contents": "Source: in", "parallelism": 2},
            {
                "id": 2,
                "type": "prep",
                "pact": "Operator",
                "contents": "prep",
                "parallelism": 2,
                "predecessors": [{"id": 1, "ship_strategy": "FORWARD"}],
            },
            {
                "id": 3,
                "type": "sink: Writer",
                "pact": "Operator",
                "contents": "sink: Writer",
                "parallelism": 2,
                "predecessors": [{"id": 2, "ship_strategy": "FORWARD"}],
            },
            {
                "id": 4,
                "type": "count",
                "pact": "Operator",
                "contents": "count",
                "parallelism": 2,
                "predecessors": [{"id": 2, "ship_strategy": "HASH"}],
            },
        ]
    }
    return plan, ids


def test_a_generated_id_that_depends_on_an_unknown_output_order_is_no_proof() -> None:
    plan, ids = _fan_out_plan()
    graph = parse_stream_plan(plan)
    # the order a plan implies gives the writer the count's id and the other way round
    implied = deterministic_ids(graph, "1.20")
    assert (implied[3], implied[4]) == (ids[4], ids[3])
    binding = bind(graph, list(ids.values()), release="1.20")
    by_name = {b.name: b for b in binding.operators}
    for b in binding.operators:
        if b.exact:
            assert b.operator_id == ids[b.node_id], (b.name, b.method, b.reason)
    assert not by_name["sink: Writer"].exact and not by_name["count"].exact
    assert by_name["prep"].exact and by_name["prep"].operator_id == ids[2]


def test_the_checkpoint_decides_what_the_output_order_does_not() -> None:
    """With what the checkpoint says (keyed state on the count's id), both are bound, to Flink's ids."""
    plan, ids = _fan_out_plan()
    facts = [OperatorFacts(h, 2, keyed=nid == 4, stateless=nid != 4, holds_state=nid == 4) for nid, h in ids.items()]
    binding = bind(parse_stream_plan(plan), list(ids.values()), release="1.20", facts=facts, absent_allowed=False)
    assert {b.name: (b.operator_id, b.exact) for b in binding.operators} == {
        "Source: in": (ids[1], True),
        "prep": (ids[2], True),
        "sink: Writer": (ids[3], True),
        "count": (ids[4], True),
    }
