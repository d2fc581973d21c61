"""What the binding says when names or given uids clash with each other or with Flink's own ids.

Real checkpoint of Flink 1.20.3 (tests/fixtures/1.20.3-prod: every operator's uid, id and vertex in ids.json, written
by Flink while the job was built), with the plan edited the way real jobs name operators."""

from __future__ import annotations

import json
from typing import Any

from support.fixtures import fixture_named

from spillway.flink.deduction import DEDUCED
from spillway.flink.operator_ids import DETERMINISTIC_HASH, UID_HASH, UNBOUND, VERTEX_ID, bind, uid_hash
from spillway.flink.stream_graph import parse_job_graph_plan, parse_stream_plan
from spillway.inspect.topology import operator_binding, parse_plan
from spillway.storage.load import load_checkpoint

FX = fixture_named("1.20.3-prod")


def _flink() -> dict[str, dict[str, Any]]:
    return {n["name"]: n for n in json.loads((FX.root / "ids.json").read_text())["stream_nodes"]}


def _plan_naming(renames: dict[str, str]) -> dict[str, Any]:
    doc = json.loads((FX.root / "plan.json").read_text())
    for node in doc["nodes"]:
        for key in ("type", "contents"):
            if node.get(key) in renames:
                node[key] = renames[node[key]]
    return doc


def _checkpoint() -> Any:
    return load_checkpoint(FX.checkpoint_dir).checkpoint


def _checkpoint_ids() -> list[str]:
    return [o.operator_id for o in _checkpoint().operators]


def test_a_name_two_operators_carry_guesses_an_id_for_neither() -> None:
    """ "slow" is slow-count's uid (ids.json). Two other operators named "slow" both guess it: without the
    checkpoint's facts (a new job's plan) neither is bound by it, each says why, and slow-count's id stays
    unclaimed; the source without uid is still bound by its generated id."""
    flink = _flink()
    assert uid_hash(flink["slow-count"]["uid"]) == flink["slow-count"]["operator_id"]
    assert flink["slow-count"]["uid"] == "slow"
    doc = _plan_naming({"enrich": "slow", "length": "slow"})
    binding = bind(parse_stream_plan(doc), _checkpoint_ids())
    slow_count_id = flink["slow-count"]["operator_id"]
    [enrich, length] = binding.by_name("slow")
    for b, node in ((enrich, flink["enrich"]), (length, flink["length"])):
        assert (b.method, b.operator_id, b.exact) == (UNBOUND, None, False)
        assert b.node_id == node["id"]
        assert b.reason == (
            f"id {slow_count_id} fits more than one operator by uid guess; no id computed by Flink's rules for "
            f"'slow' is in the checkpoint (uids tried: 'slow'; generated id tried). If it has state there, give its "
            f"uid: --uid 'slow#{node['id']}'=UID"
        )
    assert slow_count_id in binding.unclaimed
    [src] = binding.by_name("Source: rules")
    assert flink["Source: rules"]["uid"] is None
    assert (src.method, src.operator_id, src.exact) == (DETERMINISTIC_HASH, flink["Source: rules"]["operator_id"], True)


def test_with_the_checkpoints_facts_the_two_operators_named_like_a_uid_are_told_apart() -> None:
    """The same plan against the checkpoint: the evidence Flink stored (parallelism, keyed state, channel state)
    gives each "slow" its own id, and slow-count its own."""
    flink = _flink()
    binding = operator_binding(parse_plan(_plan_naming({"enrich": "slow", "length": "slow"})), _checkpoint())
    assert binding is not None
    got = {b.node_id: (b.operator_id, b.exact) for b in binding.operators if b.name in ("slow", "slow-count")}
    assert got == {flink[name]["id"]: (flink[name]["operator_id"], True) for name in ("enrich", "length", "slow-count")}
    assert {b.method for b in binding.operators if b.name == "slow"} == {DEDUCED}


def test_a_given_uid_that_is_not_the_job_graphs_vertex_id_is_noted() -> None:
    """enrich heads its own job vertex (ids.json: vertex id = its operator id). Given another uid for it, the given
    uid wins (it is the user's word) but its hash is not in the checkpoint, and the binding notes that the operator
    heads a vertex whose id differs; the other heads are bound to their vertex ids."""
    flink = _flink()
    enrich = flink["enrich"]
    assert enrich["vertex_id"] == enrich["operator_id"]
    job = parse_job_graph_plan(json.loads((FX.root / "jobgraph.json").read_text()))
    binding = bind(
        parse_stream_plan(json.loads((FX.root / "plan.json").read_text())),
        _checkpoint_ids(),
        job_graph=job,
        uid_overrides={f"#{enrich['id']}": "enrich-v2"},
    )
    wrong = uid_hash("enrich-v2")
    assert binding.notes == (f"'enrich': bound to {wrong} but heads vertex {enrich['vertex_id']}",)
    [b] = binding.by_name("enrich")
    assert (b.method, b.operator_id, b.in_checkpoint, b.exact, b.uid) == (UID_HASH, wrong, False, False, "enrich-v2")
    assert b.vertex_id == enrich["vertex_id"] and b.position == 0
    assert b.reason == (
        f"given uid 'enrich-v2' hashes to {wrong}, which is not in the checkpoint (no state for this operator there, "
        "or the uid is wrong)"
    )
    heads = {n["name"] for n in flink.values() if n["vertex_id"] == n["operator_id"]} - {"enrich"}
    for name in heads:
        [h] = binding.by_name(name)
        assert (h.method, h.operator_id, h.exact) == (VERTEX_ID, flink[name]["vertex_id"], True)
