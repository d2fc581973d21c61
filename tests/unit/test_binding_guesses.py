"""A uid guessed from a name is a hypothesis: kept when nothing else decides against it, dropped when it is.

Small stream graphs whose ids are Flink's rules applied to them (``uid_hash`` is Flink's murmur3 of the uid,
checked against Flink's own ids in test_operator_ids.py; the generated ids StreamGraphHasherV2's traversal). The
checkpoint's facts are those such a job writes: operators without state, at the plan's parallelism. And real
checkpoints of 1.12.5 with their plans edited, expected ids from ids.json (Flink's own hasher)."""

from __future__ import annotations

import json
from typing import Any

from support.fixtures import Fixture, fixture_named

from spillway.flink.deduction import DEDUCED, INDISTINCT, OperatorFacts
from spillway.flink.operator_ids import UID_HASH, UNBOUND, bind, deterministic_ids, uid_hash
from spillway.flink.stream_graph import StreamEdge, StreamGraph, StreamNode
from spillway.inspect.topology import operator_binding, parse_plan
from spillway.storage.load import load_checkpoint


def _chain_of_two_named_by_their_uids() -> tuple[StreamGraph, dict[int, str]]:
    """Source: in (no uid) -> a (uid "a") -> b (uid "b"), over the network, all stateless at parallelism 2."""
    nodes = (
        StreamNode(1, "Source: in", 2, is_source=True),
        StreamNode(2, "a", 2, uid="a"),
        StreamNode(3, "b", 2, uid="b"),
    )
    edges = (StreamEdge(1, 2, "REBALANCE"), StreamEdge(2, 3, "REBALANCE"))
    ids = deterministic_ids(StreamGraph(nodes, edges), "1.20")
    assert (ids[2], ids[3]) == (uid_hash("a"), uid_hash("b"))
    plan = StreamGraph(tuple(StreamNode(n.id, n.name, n.parallelism, is_source=n.is_source) for n in nodes), edges)
    return plan, ids


def test_two_name_guesses_nothing_contradicts_stay_exact() -> None:
    """Without either guess the two stateless operators cannot be told apart (one of two ids each); without one
    of them the other's guess decides both the same way. Nothing contradicts them: both stay bound by their uid."""
    plan, ids = _chain_of_two_named_by_their_uids()
    facts = [OperatorFacts(h, 2) for h in ids.values()]
    binding = bind(plan, list(ids.values()), release="1.20", facts=facts, absent_allowed=False)
    got = {b.name: (b.method, b.operator_id, b.exact, b.uid) for b in binding.operators}
    assert got["a"] == (UID_HASH, ids[2], True, "a")
    assert got["b"] == (UID_HASH, ids[3], True, "b")
    assert got["Source: in"][1:3] == (ids[1], True)
    assert not any("not used" in b.reason for b in binding.operators)

    # the same checkpoint bound without names that are uids: the two are indistinct, which is what the guesses
    # were checked against
    renamed = StreamGraph(
        tuple(StreamNode(n.id, {"a": "x", "b": "y"}.get(n.name, n.name), 2, is_source=n.is_source) for n in plan.nodes),
        plan.edges,
    )
    plain = bind(renamed, list(ids.values()), release="1.20", facts=facts, absent_allowed=False)
    open_ops = {b.name: b for b in plain.operators if b.name in ("x", "y")}
    assert {b.method for b in open_ops.values()} == {INDISTINCT}
    assert all(set(b.candidates) == {ids[2], ids[3]} and not b.exact for b in open_ops.values())
    first, second = sorted((ids[2], ids[3]))
    assert {b.reason for b in open_ops.values()} == {
        f"one of {first}, {second}: they hold no state and finished alike, so they cannot be told apart and "
        "nothing depends on which"
    }


def test_a_guess_the_evidence_leaves_indistinct_stays_exact() -> None:
    """a (uid "a") and x (uid "hidden", a name that is no uid): without a's guess the two stateless operators
    take either id, alike; with it each has one. A guess the evidence leaves open (not contradicted) stands."""
    nodes = (
        StreamNode(1, "Source: in", 2, is_source=True),
        StreamNode(2, "a", 2, uid="a"),
        StreamNode(3, "other", 2, uid="hidden"),
    )
    edges = (StreamEdge(1, 2, "REBALANCE"), StreamEdge(2, 3, "REBALANCE"))
    ids = deterministic_ids(StreamGraph(nodes, edges), "1.20")
    plan = StreamGraph(tuple(StreamNode(n.id, n.name, 2, is_source=n.is_source) for n in nodes), edges)
    facts = [OperatorFacts(h, 2) for h in ids.values()]
    binding = bind(plan, list(ids.values()), release="1.20", facts=facts, absent_allowed=False)
    got = {b.name: (b.method, b.operator_id, b.exact) for b in binding.operators}
    assert got["a"] == (UID_HASH, uid_hash("a"), True)
    assert got["other"] == (DEDUCED, uid_hash("hidden"), True)
    assert not any("not used" in b.reason for b in binding.operators)


def _fixture_plan(name: str) -> tuple[Fixture, dict[str, Any], dict[str, dict[str, Any]]]:
    fx = fixture_named(name)
    flink = {n["name"]: n for n in json.loads((fx.root / "ids.json").read_text())["stream_nodes"]}
    return fx, json.loads((fx.root / "plan.json").read_text()), flink


def test_a_plan_no_assignment_fits_keeps_its_name_guesses() -> None:
    """1.12.5-rocksdb-incremental's plan with the source at parallelism 5 (Flink ran it at 2): no assignment fits
    the checkpoint, so the plan is not this checkpoint's job as given, and that is what the binding says; the name
    guesses (tostr, slow: names that are their uids, ids.json) are not what is wrong and stay, at Flink's ids."""
    fx, doc, flink = _fixture_plan("1.12.5-rocksdb-incremental")
    for node in doc["nodes"]:
        if node["type"].startswith("Source"):
            node["parallelism"] = 5
    binding = operator_binding(parse_plan(doc), load_checkpoint(str(fx.checkpoint_dir)).checkpoint)
    assert binding is not None and binding.solutions == 0
    for name in ("tostr", "slow"):
        assert flink[name]["uid"] == name
        [b] = binding.by_name(name)
        assert (b.method, b.operator_id, b.exact) == (UID_HASH, flink[name]["operator_id"], True)
    [src] = binding.by_name("Source: seq")
    assert (src.method, src.reason) == (UNBOUND, "no consistent assignment exists (see the notes)")
    # the plan's operators and the checkpoint's ids (Flink's loader) neither name guess took
    left_ops = len(doc["nodes"]) - 2
    left_ids = len(json.loads(fx.oracle.read_text())["operators"]) - 2
    assert binding.notes == (
        f"no assignment of the {left_ops} plan operator(s) not bound by id to the {left_ids} checkpoint operator(s) "
        "left fits the checkpoint (parallelism, keyed state, source state, channel state): the plan does not describe "
        "this checkpoint, or describes another version of the job",
    )


def test_keyed_state_behind_a_forward_edge_keeps_the_name_guess() -> None:
    """reinterpretAsKeyedStream: an operator inserted between the keyBy and slow feeds it over FORWARD. slow's id
    (its uid's hash, ids.json) holds keyed state; the structural step admits keyed state behind a FORWARD edge
    only when nothing else fits, so the binding without the guess is no fair test of it: the guess stays."""
    fx, doc, flink = _fixture_plan("1.12.5-rocksdb-incremental")
    nodes = {n["type"]: n for n in doc["nodes"]}
    slow = nodes["slow"]
    (pred,) = slow["predecessors"]
    assert pred["ship_strategy"] == "HASH"
    slow["predecessors"] = [{"id": 99, "ship_strategy": "FORWARD"}]
    inserted = {
        "id": 99,
        "type": "reinterpret",
        "contents": "reinterpret",
        "pact": "Operator",
        "parallelism": slow["parallelism"],
        "predecessors": [pred],
    }
    doc["nodes"].insert(doc["nodes"].index(slow), inserted)
    binding = operator_binding(parse_plan(doc), load_checkpoint(str(fx.checkpoint_dir)).checkpoint)
    assert binding is not None
    [b] = binding.by_name("slow")
    assert (b.method, b.operator_id, b.exact) == (UID_HASH, flink["slow"]["operator_id"], True)


def test_a_right_guess_the_evidence_cannot_confirm_is_not_exact() -> None:
    """1.10.3 leaves stateless operators out of ``_metadata``: tostr's name is its uid (ids.json), but without
    the guess tostr could be its id or absent, so the name proves nothing and tostr is not bound exactly; its id
    stays among its candidates (exact only if every consistent assignment agrees with the guess dropped)."""
    fx, doc, flink = _fixture_plan("1.10.3-aligned")
    assert flink["tostr"]["uid"] == "tostr"
    binding = operator_binding(parse_plan(doc), load_checkpoint(str(fx.checkpoint_dir)).checkpoint)
    assert binding is not None
    [b] = binding.by_name("tostr")
    assert (b.method, b.operator_id, b.exact) == (UNBOUND, None, False)
    assert flink["tostr"]["operator_id"] in b.candidates and len(b.candidates) > 1
    assert b.reason.startswith(f"its name as a uid ('tostr') hashes to {flink['tostr']['operator_id']}, but that is")


def _fan_out_of_two_finished(finished: tuple[bool, bool]) -> tuple[dict[str, Any], dict[int, str]]:
    """Source: in (finished) feeding x (uid "p") and y (uid "q") over the network; x's and y's ids finished as
    given (FLIP-147: a finished task's operators are restored as finished, so which is which matters)."""
    nodes = (
        StreamNode(1, "Source: in", 2, is_source=True),
        StreamNode(2, "x", 2, uid="p"),
        StreamNode(3, "y", 2, uid="q"),
    )
    edges = (StreamEdge(1, 2, "REBALANCE"), StreamEdge(1, 3, "REBALANCE"))
    ids = deterministic_ids(StreamGraph(nodes, edges), "1.20")
    plan = StreamGraph(tuple(StreamNode(n.id, n.name, 2, is_source=n.is_source) for n in nodes), edges)
    flags = {1: True, 2: finished[0], 3: finished[1]}
    facts = [OperatorFacts(h, 2, stateless=False, finished=(flags[n],) * 2) for n, h in ids.items()]
    binding = bind(plan, list(ids.values()), release="1.20", facts=facts, absent_allowed=False)
    return {b.name: b for b in binding.operators}, ids


def test_stateless_ids_finished_alike_are_indistinct_and_finished_differently_are_not() -> None:
    ops, ids = _fan_out_of_two_finished((True, True))
    assert {ops[n].method for n in ("x", "y")} == {INDISTINCT}
    ops, ids = _fan_out_of_two_finished((True, False))
    for n in ("x", "y"):
        assert (ops[n].method, ops[n].exact, set(ops[n].candidates)) == (UNBOUND, False, {ids[2], ids[3]})
        assert ops[n].reason.startswith(f"could be any of {', '.join(sorted((ids[2], ids[3])))} (2 consistent")
