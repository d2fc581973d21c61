"""A generated id whose breadth-first position depends on an output order a plan does not show is taken only when
every order was tried: past the limit of orders, it is no proof.

The job (ids: StreamGraphHasherV2's rule applied to Flink's order, checked against Flink's own ids in
test_operator_ids.py): ``Source: s`` feeds ``a1 -> a2`` (chained) and ``b1``; ``Source: c -> c2`` (chained). From
its job-graph plan the source's two outputs can come in either order (2 orders) and the sources in either order (2
candidate graphs): a2's position depends on the output order, c2's does not."""

from __future__ import annotations

import pytest

from spillway.flink import operator_ids
from spillway.flink.operator_ids import DETERMINISTIC_HASH, bind, deterministic_ids
from spillway.flink.stream_graph import StreamEdge, StreamGraph, StreamNode, parse_job_graph_plan


def _job() -> tuple[dict[int, str], operator_ids.JobGraphPlan]:
    nodes = tuple(
        StreamNode(i, name, 2)
        for i, name in [(1, "Source: s"), (2, "a1"), (3, "a2"), (4, "b1"), (5, "Source: c"), (6, "c2")]
    )
    edges = (
        StreamEdge(1, 2, "HASH"),
        StreamEdge(1, 4, "HASH"),
        StreamEdge(2, 3, "FORWARD"),
        StreamEdge(5, 6, "FORWARD"),
    )
    ids = deterministic_ids(StreamGraph(nodes, edges), "1.20")
    vertices = [
        (ids[1], ["Source: s"], []),
        (ids[2], ["a1", "a2"], [ids[1]]),
        (ids[4], ["b1"], [ids[1]]),
        (ids[5], ["Source: c", "c2"], []),
    ]
    plan = {
        "nodes": [
            {
                "id": vid,
                "parallelism": 2,
                "description": "<br/>+- ".join(ops) + "<br/>",
                "inputs": [{"id": up, "num": i, "ship_strategy": "HASH"} for i, up in enumerate(ups)],
            }
            for vid, ops, ups in vertices
        ]
    }
    return ids, parse_job_graph_plan({"plan": plan})


@pytest.mark.parametrize(("most", "every_order"), [(4, True), (3, False), (2, False)])
def test_an_order_sensitive_id_is_taken_only_when_every_order_was_tried(
    monkeypatch: pytest.MonkeyPatch, most: int, every_order: bool
) -> None:
    """The limit is shared by the candidate graphs: 4 allows both output orders for each of the 2 source orders,
    and a2's id is taken from Flink's traversal because every order gives it; 3 or 2 allow one order per
    candidate, so the traversal's a2 is no proof, and a2 is bound only by the search over every position (whose
    hit is unique, whatever the order); c2 is the traversal's either way."""
    ids, job = _job()
    monkeypatch.setattr(operator_ids, "_MAX_ORDERS", most)
    binding = bind(job, list(ids.values()), release="1.20")
    generated = {b.name: b for b in binding.operators if b.method == DETERMINISTIC_HASH}
    assert {n: b.operator_id for n, b in generated.items()} == {"a2": ids[3], "c2": ids[6]}
    assert generated["c2"].reason.startswith("StreamGraphHasherV2 gives this id (no uid, breadth-first position ")
    traversal = "every one that reproduces the ids known gives it" in generated["a2"].reason
    searched = generated["a2"].reason.startswith("StreamGraphHasherV2 gives this id (no uid; position ")
    assert (traversal, searched) == (every_order, not every_order), generated["a2"].reason
