"""Rescale planning in pure Python on the real 2.3.0 "counted" checkpoint (no Spark, no writing): edge rules,
byte-balanced segments, refusals, and which watermarks a re-routed channel keeps. Moved here from
tests/integration/test_rescale.py so the fast loop (and mutation runs) see them."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from spillway.errors import ArgumentError, UsageError
from spillway.inspect.topology import load_plan
from spillway.rescale.plan import BALANCED, KEEP, RescaleRefused, build_plan
from spillway.storage.load import load_checkpoint

FIXTURE = Path(__file__).parents[1] / "fixtures" / "2.3.0-counted"
PLAN = FIXTURE / "jobgraph.json"


def loaded():  # type: ignore[no-untyped-def]
    ld = load_checkpoint(next(FIXTURE.glob("checkpoints/*/chk-*")))
    ld.resolve_files()
    return ld


def _bytes_per_target(plan: Any, edge: Any) -> dict[int, int]:
    """Bytes each new subtask gets on ``edge``, summed over the sources' segments (read off the plan's segments,
    as the router will cut them)."""
    per_target: dict[int, int] = {}
    for s in plan.sources:
        if s.edge != edge.index:
            continue
        start = 0
        for limit, target in s.segments:
            per_target[target] = per_target.get(target, 0) + limit - start
            start = limit
    return per_target


def test_plan_rules_and_balanced_segments() -> None:
    ld = loaded()
    plan = build_plan(ld.checkpoint, load_plan(PLAN), ld.resolver, {"parse": 3})
    rules = {e.label: e.rule for e in plan.edges}
    assert rules == {"parse -> count (HASH)": KEEP, "Source: seq -> parse (REBALANCE)": BALANCED}
    # byte-balanced: each new parse subtask gets a third of the rebalance edge's bytes (± one source cut)
    edge = next(e for e in plan.edges if e.rule == BALANCED)
    per_target = _bytes_per_target(plan, edge)
    total = sum(per_target.values())
    assert sorted(per_target) == [0, 1, 2]
    assert max(per_target.values()) - min(per_target.values()) <= total // 3 // 10 + 8


def test_hash_edge_without_key_is_a_usage_error() -> None:
    ld = loaded()  # the missing key extractor is a missing argument (exit 2), not a refusal of the checkpoint
    with pytest.raises(UsageError, match=r"give keys=\{VERTEX: EXTRACTOR\}"):
        build_plan(ld.checkpoint, load_plan(PLAN), ld.resolver, {"count": 3})


def test_plan_refusals() -> None:
    ld = loaded()
    with pytest.raises(RescaleRefused, match="max parallelism 128"):
        build_plan(ld.checkpoint, load_plan(PLAN), ld.resolver, {"parse": 129})
    with pytest.raises(UsageError, match="no vertex"):  # a mistaken argument: exit 2, like repair's
        build_plan(ld.checkpoint, load_plan(PLAN), ld.resolver, {"nope": 2})
    with pytest.raises(RescaleRefused, match="at least 1"):
        build_plan(ld.checkpoint, load_plan(PLAN), ld.resolver, {"parse": 0})


def _element_stream(elements: list[bytes]) -> bytes:
    return b"".join(len(e).to_bytes(4, "big") + e for e in elements)


def _inline_source(sid: int, up: int, down: int, elements: list[bytes], chunk: int = 7):  # type: ignore[no-untyped-def]
    from spillway.formats.channel_file import build_channel_file
    from spillway.rescale.plan import PartRef, SourceChannel

    stream = _element_stream(elements)
    data, offsets = build_channel_file([stream[i : i + chunk] for i in range(0, len(stream), chunk)])
    return SourceChannel(sid, 0, up, down, (PartRef(None, 0, len(data), tuple(offsets), data),), len(stream), "t")


def _edge(rule: str, new_up: int, new_down: int):  # type: ignore[no-untyped-def]
    from spillway.rescale.plan import EdgePlan

    return EdgePlan(0, "a -> b", "REBALANCE", rule, 0, 0, 2, new_up, 2, new_down, 128, "b" * 32, "a" * 32)


def test_watermarks_kept_only_where_one_old_channel_feeds_the_new_one() -> None:
    from spillway.rescale.plan import _with_segments_and_watermarks
    from spillway.rescale.router import RouteStats, route_source

    record = lambda v: b"\x01" + v.to_bytes(8, "big")  # noqa: E731
    watermark = lambda t: b"\x02" + t.to_bytes(8, "big")  # noqa: E731
    latency = b"\x03" + bytes(28)
    elements = [record(1), watermark(10), record(2), latency, watermark(20), record(3)]
    # Upstream 2 -> 4 (each old upstream alone on its new channel), downstream kept: watermarks survive.
    edge = _edge(KEEP, 4, 2)
    sources = _with_segments_and_watermarks(
        [_inline_source(0, 0, 0, elements), _inline_source(1, 1, 0, elements)], [edge]
    )
    stats = RouteStats()
    runs = list(route_source(sources[0], edge, stats))
    framed = b"".join(r.data for r in runs)
    assert framed == _element_stream([record(1), watermark(10), record(2), watermark(20), record(3)])
    assert stats.records == 3 and stats.kept_markers == 2 and stats.dropped == {"latency marker": 1}
    # Upstream 2 -> 1: both old channels share the new one, so a watermark could overtake the other's records.
    edge = _edge(KEEP, 1, 2)
    sources = _with_segments_and_watermarks(
        [_inline_source(0, 0, 0, elements), _inline_source(1, 1, 0, elements)], [edge]
    )
    stats = RouteStats()
    framed = b"".join(r.data for r in route_source(sources[1], edge, stats))
    assert framed == _element_stream([record(1), record(2), record(3)])
    assert stats.dropped == {"watermark": 2, "latency marker": 1}


# ------------------------------------------------------------------ boundaries (issue 21: mutation survivors)
def _oracle_operator(name: str) -> dict:
    import json

    doc = json.loads((FIXTURE / "oracle.json").read_text())
    return next(o for o in doc["operators"] if o["name"] == name)


def _rebalance_payload() -> int:
    """Payload bytes of the Source -> parse (REBALANCE) edge as Flink stored them: parse's input side plus the
    source's output side (each handle's state size less one 4-byte length per chunk)."""
    total = 0
    for name, kind in (("parse", "input_channel_state"), ("Source: seq", "result_subpartition_state")):
        for sub in _oracle_operator(name)["subtasks"]:
            for h in sub[kind]:
                for ch in h.get("channels", [h]):
                    total += ch["state_size"] - 4 * len(ch["offsets"])
    return total


def test_balanced_segments_fill_each_new_subtask_to_exactly_its_share() -> None:
    """Byte-balanced: new subtask t gets exactly ceil(total / 3) bytes, the last one the rest — a subtask whose
    share is reached moves on at once (a share filled to the byte is full)."""
    ld = loaded()
    plan = build_plan(ld.checkpoint, load_plan(PLAN), ld.resolver, {"parse": 3})
    edge = next(e for e in plan.edges if e.rule == BALANCED)
    per_target = _bytes_per_target(plan, edge)
    total = _rebalance_payload()
    share = -(-total // 3)
    assert per_target == {0: share, 1: share, 2: total - 2 * share}


def test_the_max_parallelism_itself_is_a_valid_new_parallelism() -> None:
    ld = loaded()
    max_p = _oracle_operator("parse")["max_parallelism"]
    plan = build_plan(ld.checkpoint, load_plan(PLAN), ld.resolver, {"parse": max_p})
    assert [v.new_p for v in plan.rescaled()] == [max_p]
    with pytest.raises(RescaleRefused, match=f"max parallelism {max_p}"):
        build_plan(ld.checkpoint, load_plan(PLAN), ld.resolver, {"parse": max_p + 1})
    assert [v.new_p for v in build_plan(ld.checkpoint, load_plan(PLAN), ld.resolver, {"parse": 1}).rescaled()] == [1]


def test_buffer_size_bounds_are_inclusive() -> None:
    ld = loaded()
    for ok in (64, 64 * 1024 * 1024):
        assert build_plan(ld.checkpoint, load_plan(PLAN), ld.resolver, {"parse": 3}, buffer_size=ok).buffer_size == ok
    for bad in (63, 64 * 1024 * 1024 + 1):
        with pytest.raises(ArgumentError, match=rf"^buffer_size={bad}: at (least|most) "):  # Python's words
            build_plan(ld.checkpoint, load_plan(PLAN), ld.resolver, {"parse": 3}, buffer_size=bad)


def test_the_last_new_subtask_takes_the_rest_even_an_empty_channel_after_its_share() -> None:
    """6 bytes over 3 new subtasks: 2 each, the last share filled to the byte by the end of the first channel;
    an empty channel after it still goes to the last subtask, never to a subtask past the new parallelism."""
    from spillway.rescale.plan import _with_segments_and_watermarks

    record = b"\x01\x00"  # a record without timestamp (tag 1, 1 value byte): 6 bytes with its length
    edge = _edge(BALANCED, 2, 3)
    full = _inline_source(0, 0, 0, [record])
    empty = _inline_source(1, 1, 0, [])
    assert (full.payload_bytes, empty.payload_bytes) == (6, 0)
    sources = _with_segments_and_watermarks([full, empty], [edge])
    assert sources[0].segments == ((2, 0), (4, 1), (6, 2))
    assert sources[1].segments == ((0, 2),)
