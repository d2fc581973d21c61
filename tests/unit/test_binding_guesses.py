"""A uid guessed from a name is a hypothesis: kept when nothing else decides against it, dropped when it is.

Small stream graphs whose ids are Flink's rules applied to them (``uid_hash`` is Flink's murmur3 of the uid,
checked against Flink's own ids in test_operator_ids.py; the generated ids StreamGraphHasherV2's traversal). The
checkpoint's facts are those such a job writes: operators without state, at the plan's parallelism."""

from __future__ import annotations

from spillway.flink.deduction import INDISTINCT, OperatorFacts
from spillway.flink.operator_ids import UID_HASH, bind, deterministic_ids, uid_hash
from spillway.flink.stream_graph import StreamEdge, StreamGraph, StreamNode


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
