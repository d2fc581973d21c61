"""Flink's chaining rules that look past the edge itself (StreamingJobGraphGenerator.isChainable, 1.11+):

* a ``YieldingOperatorFactory`` (async I/O) is not chained when the head of its upstream's chain is a legacy
  source (``getHeadOperator`` walks up through single, chainable inputs);
* a ``HEAD_WITH_SOURCES`` operator is chained only behind a source operator (``SourceOperatorFactory``, 1.12+);
  a plan does not say which kind a source is, so a plan's source (a node without inputs) counts as one.

Expected values are those rules applied by hand to each small graph below (docs/format/operator-ids.md)."""

from __future__ import annotations

from typing import Any

import pytest

from spillway.flink.chaining import (
    RELEASE_RULES,
    edge_chainable,
    hasher_rules,
    infer_chains,
    release_for_format_version,
    vertex_operator_order,
)
from spillway.flink.features import Release
from spillway.flink.stream_graph import StreamEdge, StreamGraph, StreamNode


def _line(*nodes: dict[str, Any], partitioners: tuple[str, ...] | None = None) -> StreamGraph:
    """Nodes 1..n in a line, each feeding the next (FORWARD unless ``partitioners`` says otherwise)."""
    built = tuple(StreamNode(**{"id": i, "name": f"n{i}", "parallelism": 2, **n}) for i, n in enumerate(nodes, 1))
    kinds = partitioners or ("FORWARD",) * (len(nodes) - 1)
    return StreamGraph(built, tuple(StreamEdge(i, i + 1, k) for i, k in enumerate(kinds, 1)))


def _last_edge_chains(graph: StreamGraph, release: str) -> bool:
    return edge_chainable(graph, graph.edges[-1], hasher_rules(release))


def test_async_io_is_not_chained_into_a_chain_a_legacy_source_heads() -> None:
    for maps in (1, 2):  # the head is found through one and through two chained operators
        graph = _line({"source_kind": "legacy"}, *({} for _ in range(maps)), {"yielding": True})
        assert not _last_edge_chains(graph, "1.11.4") and not _last_edge_chains(graph, "2.3.0")
        assert _last_edge_chains(graph, "1.10.3")  # 1.10's hasher has no such rule
        # everything before the async operator chains to the source
        assert infer_chains(graph, "2.3.0") == [list(range(1, maps + 2)), [maps + 2]]


def test_async_io_behind_a_cut_chains_to_the_chain_it_follows() -> None:
    """legacy source -REBALANCE-> map -> async: the async operator's upstream chain is headed by the map."""
    graph = _line({"source_kind": "legacy"}, {}, {"yielding": True}, partitioners=("REBALANCE", "FORWARD"))
    assert _last_edge_chains(graph, "2.3.0")
    assert infer_chains(graph, "2.3.0") == [[1], [2, 3]]
    # behind a FLIP-27 source it chains all the way
    flip27 = _line({"source_kind": "flip27"}, {}, {"yielding": True})
    assert infer_chains(flip27, "2.3.0") == [[1, 2, 3]]


def test_head_with_sources_chains_behind_a_plans_source_only() -> None:
    behind_source = _line({}, {"chaining_strategy": "HEAD_WITH_SOURCES"})
    assert _last_edge_chains(behind_source, "1.12.5") and _last_edge_chains(behind_source, "2.3.0")
    behind_map = _line({}, {}, {"chaining_strategy": "HEAD_WITH_SOURCES"})
    assert not _last_edge_chains(behind_map, "2.3.0")
    assert infer_chains(behind_map, "2.3.0") == [[1, 2], [3]]


def test_known_chains_decide_over_the_rules() -> None:
    """Chains read off Flink's job graph (e.g. a job that called disableChaining) stand for the rules: the
    operator order of a vertex (``JobVertex#getOperatorIDs``: tail first, head last) follows them."""
    graph = _line({}, {}, {})
    assert vertex_operator_order(graph, 1, "2.3.0") == [3, 2, 1]
    assert vertex_operator_order(graph, 1, "2.3.0", chained_edges={(1, 2)}) == [2, 1]
    assert infer_chains(graph, "2.3.0", chained_edges={(1, 2)}) == [[1, 2], [3]]


def test_the_rules_for_a_format_version() -> None:
    """Flink 1.0-1.2 savepoints (version 1) take the oldest rules known, those of version 2's releases (1.3-1.10);
    version 3 is written by 1.11-1.15, 4 by 1.16-1.20."""
    assert release_for_format_version(1) == release_for_format_version(2) == Release(1, 10)
    assert release_for_format_version(3) == Release(1, 15) and release_for_format_version(4) == Release(1, 20)
    with pytest.raises(ValueError, match=r"^unknown checkpoint metadata version 99$"):
        release_for_format_version(99)


def test_releases_outside_the_table_take_its_nearest_line() -> None:
    """Releases after the newest line read take its rules; releases before 1.10 were not read and take 1.10's."""
    assert hasher_rules("3.0.0") is RELEASE_RULES[-1] and hasher_rules("2.3.0") is RELEASE_RULES[-1]
    assert hasher_rules("0.9") is RELEASE_RULES[0] and RELEASE_RULES[0].line == "1.10"
