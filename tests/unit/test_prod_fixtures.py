"""The production-shaped fixtures are what they claim to be, judged from their own files only.

Scenarios ``prod``, ``prod-no-uid``, ``prod-finished``, ``prod-counted`` and ``prod-counted-no-uid``
(tests/fixtures/generator/java/.../Prod.java and Counted.buildProd): uids that differ from the operators' names,
operators with and without uids, chains cut by ``startNewChain()`` / ``disableChaining()``, a two-input keyed
operator with channel state on its second gate. Everything asserted here comes from what Flink wrote: ``ids.json``
(Flink's stream graph, its operator ids and job vertices), ``jobgraph.json`` (Flink's job-graph plan) and
``oracle.json`` (Flink's own decode of ``_metadata``). The expected uids, names and cuts are the job's own source.
These fixtures are the oracle for the operator binding (issue 20), so nothing of spillway is used here.
"""

from __future__ import annotations

import json
from functools import cache
from pathlib import Path
from typing import Any

import pytest
from support.fixtures import Fixture, all_fixtures

# What the jobs declare (Prod.java, Counted.buildProd, FixtureJob "prod-finished"): uid -> operator name, and
# the operators heading a chain the default chaining would not cut: name -> Flink's chaining strategy there.
PROD_UIDS = {
    "events-src": "events",
    "parse-events": "parse",
    "rules-tag": "tag-rules",
    "slow": "slow-count",
    "fmt": "format-out",
    "discard-sink": "discard",
}
PROD_CUTS = {"enrich": "HEAD", "format-out": "NEVER"}
FINISHED_UIDS = {"bounded-src": "bounded", "bounded-sink": "bounded-discard", "partial-map": "finish-on-0"}
FINISHED_CUTS = {"bounded-map": "NEVER", "bounded-discard": "NEVER"}
COUNTED_UIDS = {"numbers": "seq", "counter": "count-per-key", "checker": "check-totals", "out": "discard"}
COUNTED_CUTS = {"forward-values": "HEAD", "discard": "NEVER"}

EXPECTED = {
    "prod": (PROD_UIDS, PROD_CUTS),
    "prod-no-uid": ({}, PROD_CUTS),
    "prod-finished": ({**PROD_UIDS, **FINISHED_UIDS}, {**PROD_CUTS, **FINISHED_CUTS}),
    "prod-counted": (COUNTED_UIDS, COUNTED_CUTS),
    "prod-counted-no-uid": ({}, COUNTED_CUTS),
}
OPERATORS = {"prod": 11, "prod-no-uid": 11, "prod-finished": 17, "prod-counted": 6, "prod-counted-no-uid": 6}

# The fixtures issue 20 asks for (more releases may exist).
PROD_RELEASES = ("1.12.5", "1.14.6", "1.16.3", "1.17.2", "1.19.3", "1.20.3", "2.3.0")
REQUIRED = {
    **{f"{r}-{s}": s for r in PROD_RELEASES for s in ("prod", "prod-no-uid")},
    **{f"{r}-prod-finished": "prod-finished" for r in ("1.14.6", "1.20.3", "2.3.0")},
    **{f"{r}-{s}": s for r in ("1.15.4", "1.20.3") for s in ("prod-counted", "prod-counted-no-uid")},
}


def prod_fixtures() -> list[Fixture]:
    return [f for f in all_fixtures() if f.info["scenario"] in EXPECTED]


def params(*scenarios: str) -> list[Any]:
    return [pytest.param(f, id=f.name) for f in prod_fixtures() if not scenarios or f.info["scenario"] in scenarios]


def load(fx: Fixture, name: str) -> Any:
    return _read(fx.root / name)


@cache
def _read(path: Path) -> Any:
    return json.loads(path.read_text())


def plain(name: str) -> str:
    """The name given in the job: Flink prefixes sources with "Source: ", legacy sinks with "Sink: " and
    suffixes Sink V2 writers with ": Writer"."""
    for prefix in ("Source: ", "Sink: "):
        name = name.removeprefix(prefix)
    return name.removesuffix(": Writer")


def nodes(fx: Fixture) -> dict[str, dict]:
    """Plain name -> ids.json stream node."""
    found = {plain(n["name"]): n for n in load(fx, "ids.json")["stream_nodes"]}
    assert len(found) == len(load(fx, "ids.json")["stream_nodes"]), f"{fx.name}: operator names not unique"
    return found


def oracle_op(fx: Fixture, name: str) -> dict | None:
    op_id = nodes(fx)[name]["operator_id"]
    return next((op for op in load(fx, "oracle.json")["operators"] if op["operator_id"] == op_id), None)


def input_channels(subtask: dict) -> list[dict]:
    """The subtask's input channel handles; 2.1+ merges a subtask's channels into one handle ("channels")."""
    return [c for h in subtask["input_channel_state"] for c in h.get("channels", [h])]


def has_output_state(op: dict | None) -> bool:
    return op is not None and any(s["result_subpartition_state"] for s in op["subtasks"])


def release(fx: Fixture) -> tuple[int, int]:
    major, minor = fx.release.split(".")[:2]
    return int(major), int(minor)


def test_the_fixtures_issue_20_asks_for_exist() -> None:
    have = {f.name: f.info["scenario"] for f in prod_fixtures()}
    missing = sorted(set(REQUIRED) - set(have))
    assert not missing, f"missing production-shaped fixtures: {missing}"
    assert all(have[name] == scenario for name, scenario in REQUIRED.items())


@pytest.mark.parametrize("fx", params())
def test_uids_are_the_jobs_and_none_equals_its_name(fx: Fixture) -> None:
    uids, _ = EXPECTED[fx.info["scenario"]]
    by_name = nodes(fx)
    assert len(by_name) == OPERATORS[fx.info["scenario"]]
    given = {n["uid"]: plain(n["name"]) for n in by_name.values() if n["uid"] is not None}
    assert given == uids
    for node in by_name.values():
        assert node["uid"] not in (node["name"], plain(node["name"])), node
    if uids:  # mixed: some operators have a uid, some have none
        assert 0 < len(given) < len(by_name)


@pytest.mark.parametrize("fx", params())
def test_chain_cuts_show_in_the_job_graph(fx: Fixture) -> None:
    """Flink's vertices differ from the default chaining exactly at the cuts the job makes: a FORWARD edge
    between operators of equal parallelism into a one-input operator, yet the two are in different vertices."""
    _, cuts = EXPECTED[fx.info["scenario"]]
    ids = load(fx, "ids.json")
    by_id = {n["id"]: n for n in ids["stream_nodes"]}
    in_degree: dict[int, int] = {}
    for e in ids["stream_edges"]:
        in_degree[e["target"]] = in_degree.get(e["target"], 0) + 1
    found = {}
    for e in ids["stream_edges"]:
        src, dst = by_id[e["source"]], by_id[e["target"]]
        if (
            e["partitioner"] == "FORWARD"
            and src["parallelism"] == dst["parallelism"]
            and in_degree[dst["id"]] == 1
            and src["slot_sharing_group"] == dst["slot_sharing_group"]
            and src["vertex_id"] != dst["vertex_id"]
        ):
            found[plain(dst["name"])] = dst["chaining_strategy"]
    assert found == cuts
    # jobgraph.json (Flink's REST plan) has the cut-off operator as its own node, fed FORWARD by its predecessor
    plan = load(fx, "jobgraph.json")
    plan_nodes = {n["id"]: n for n in plan.get("plan", plan)["nodes"]}
    vertex_ops = {v["id"]: v["operator_ids"] for v in ids["vertices"]}
    assert set(plan_nodes) == set(vertex_ops)
    by_name = nodes(fx)
    for name in cuts:
        head = by_name[name]
        assert vertex_ops[head["vertex_id"]][-1] == head["operator_id"], f"{name} heads its vertex"
        (edge,) = [e for e in ids["stream_edges"] if e["target"] == head["id"]]
        upstream = by_id[edge["source"]]["vertex_id"]
        inputs = plan_nodes[head["vertex_id"]]["inputs"]
        assert [(i["id"], i["ship_strategy"]) for i in inputs] == [(upstream, "FORWARD")]


@pytest.mark.parametrize("fx", params())
def test_every_operator_flink_wrote_is_a_stream_node(fx: Fixture) -> None:
    ids = load(fx, "ids.json")
    node_ids = {n["operator_id"] for n in ids["stream_nodes"]}
    written = {op["operator_id"] for op in load(fx, "oracle.json")["operators"]}
    assert written <= node_ids
    stateful = {"slow-count", "count-per-key", "check-totals", "parse", "tag-rules"} & set(nodes(fx))
    for name in stateful - ({"parse"} if fx.info["scenario"].startswith("prod-counted") else set()):
        assert nodes(fx)[name]["operator_id"] in written, name
    if release(fx) >= (1, 13):  # 1.12 leaves operators without any state out of _metadata (1.11 does not)
        assert written == node_ids


@pytest.mark.parametrize("fx", params("prod", "prod-no-uid", "prod-finished"))
def test_two_input_operator_has_channel_state_on_both_gates(fx: Fixture) -> None:
    slow = nodes(fx)["slow-count"]
    types = sorted(e["type_number"] for e in load(fx, "ids.json")["stream_edges"] if e["target"] == slow["id"])
    assert types == [1, 2]
    op = oracle_op(fx, "slow-count")
    assert op is not None
    gates = {c["gate_index"] for s in op["subtasks"] for c in input_channels(s)}
    assert gates == {0, 1}
    assert all(input_channels(s) for s in op["subtasks"]), "input channel state on every subtask"
    assert all(s["managed_keyed_state"] for s in op["subtasks"]), "keyed state (count, timers) on every subtask"


@pytest.mark.parametrize("fx", params("prod", "prod-no-uid", "prod-finished"))
def test_forward_edge_carries_channel_state_only_before_1_13(fx: Fixture) -> None:
    """From 1.13 on Flink takes every input of an operator with a pointwise input aligned, so the
    startNewChain() FORWARD edge timestamps -> enrich holds no channel state; 1.11 and 1.12 do hold some."""
    enrich, stamps = oracle_op(fx, "enrich"), oracle_op(fx, "timestamps")
    enrich_in = enrich is not None and any(input_channels(s) for s in enrich["subtasks"])
    if release(fx) < (1, 13):
        assert enrich_in and has_output_state(stamps)
    else:
        assert not enrich_in and not has_output_state(stamps)
    # the two keyBy edges into slow-count always do, on the upstream side too
    assert has_output_state(oracle_op(fx, "enrich")) and has_output_state(oracle_op(fx, "rules-timestamps"))


@pytest.mark.parametrize("fx", params("prod", "prod-no-uid", "prod-finished"))
def test_one_vertex_runs_at_another_parallelism(fx: Fixture) -> None:
    parallelism = {v["parallelism"] for v in load(fx, "ids.json")["vertices"]}
    assert parallelism == {fx.info["parallelism"], fx.info["parallelism"] + 1}


@pytest.mark.parametrize("fx", params("prod-finished"))
def test_bounded_branch_finished_and_partial_branch_half_finished(fx: Fixture) -> None:
    for name in ("bounded", "bounded-map", "bounded-discard"):
        op = oracle_op(fx, name)
        assert op is not None and op["fully_finished"], name
    for name in ("partial", "finish-on-0", "partial-discard"):
        op = oracle_op(fx, name)
        assert op is not None and not op["fully_finished"], name
        assert sorted(s["finished"] for s in op["subtasks"]) == [False, True], name
    for name in ("slow-count", "events", "rules"):
        op = oracle_op(fx, name)
        assert op is not None and not op["fully_finished"] and not any(s["finished"] for s in op["subtasks"])


@pytest.mark.parametrize("fx", params("prod-counted", "prod-counted-no-uid"))
def test_counted_job_has_channel_state_on_parse_and_count_inputs(fx: Fixture) -> None:
    for name in ("parse", "count-per-key"):
        op = oracle_op(fx, name)
        assert op is not None and all(input_channels(s) for s in op["subtasks"]), name
    count = oracle_op(fx, "count-per-key")
    assert count is not None and all(s["managed_keyed_state"] for s in count["subtasks"])
    check = oracle_op(fx, "check-totals")
    assert check is not None and all(s["managed_operator_state"] for s in check["subtasks"])
