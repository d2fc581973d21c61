"""Flink's operator-chaining rules per release line, as data, and the chains they produce.

Two uses: ``StreamGraphHasherV2`` feeds "is this out-edge chainable?" into every generated operator id, and
``StreamingJobGraphGenerator`` builds job vertices (chains) from the same predicate. Facts and sources:
``docs/format/operator-ids.md``.
"""

from __future__ import annotations

from collections.abc import Callable, Collection
from dataclasses import dataclass

from spillway.flink.features import NEWEST_RELEASE, Release, dialects, parse_release
from spillway.flink.stream_graph import StreamEdge, StreamGraph, StreamNode

__all__ = [
    "RELEASE_RULES",
    "ChainRules",
    "chain_predicate",
    "edge_chainable",
    "hasher_rules",
    "infer_chains",
    "parse_release",
    "release_for_format_version",
    "vertex_operator_order",
]


@dataclass(frozen=True, slots=True)
class ChainRules:
    """What one release line does. Read from the release jars (``javap``) of every line listed in
    :data:`RELEASE_RULES`; see ``docs/format/operator-ids.md`` for the source of each field."""

    #: Release line, e.g. ``"1.12-1.14"``; ``first``/``last`` inclusive.
    line: str
    first: Release
    last: Release
    #: ``"own-copy"``: StreamGraphHasherV2 has its own frozen chainability test (1.10 and before);
    #: ``"job-graph-generator"``: it calls ``StreamingJobGraphGenerator.isChainable(edge, graph)`` (1.11+).
    hasher_predicate: str
    #: Chaining strategies an upstream (chain-side) operator may have.
    upstream_strategies: frozenset[str]
    #: Chaining strategies a downstream operator may have to be chained to its input.
    downstream_strategies: frozenset[str]
    #: A downstream ``HEAD_WITH_SOURCES`` operator chains behind a FLIP-27 source (1.12+).
    head_with_sources: bool
    #: The exchange mode is tested (``BATCH`` edges are never chained).
    checks_exchange_mode: bool
    #: A yielding operator (async I/O) is not chained into a chain headed by a legacy source (1.11+).
    yielding_rule: bool
    #: ``pipeline.operator-chaining.chain-operators-with-different-max-parallelism`` exists (1.18+; when set
    #: to false, max parallelism must be equal too).
    max_parallelism_option: bool
    #: Default chaining strategy of an ``AbstractStreamOperator`` subclass that sets none (``transform()`` with
    #: a custom operator): HEAD in 1.x, ALWAYS in 2.x (the strategy lives in the factory). Built-in
    #: DataStream operators (map, filter, process, window, sinks …) are ALWAYS in every release.
    custom_operator_default: str
    #: How sink operators are named (and their uids derived): ``"sink-function"`` (only ``Sink: NAME``),
    #: ``"sink-v1-1.12"``, ``"sink-v1-1.14"``, ``"sink-v2"``; see :func:`spillway.flink.operator_ids.uid_candidates`.
    sink_naming: str
    #: Job-graph plan ``description``: ``"cascading"`` (``a -> b``) or ``"tree"`` (``a<br/>+- b``, 1.15+ default).
    description_style: str
    #: Checkpoint metadata versions written by the line.
    metadata_versions: tuple[int, ...]
    #: StreamGraphHasherV2 also has ``generateHashesByStreamNodeId`` (incremental hashing for adaptive batch
    #: job graphs, 2.x); streaming jobs still hash the whole graph at once.
    incremental_hashing: bool


_ALL = frozenset({"ALWAYS", "HEAD", "HEAD_WITH_SOURCES"})

#: Release lines, oldest first. Each line's behaviour was read from that line's ``flink-dist`` jar; lines
#: with the same behaviour are merged. Releases before 1.10 were not read and use the 1.10 rules.
RELEASE_RULES: tuple[ChainRules, ...] = (
    ChainRules(
        "1.10",
        Release(1, 0),
        Release(1, 10),
        "own-copy",
        frozenset({"ALWAYS", "HEAD"}),
        frozenset({"ALWAYS"}),
        False,
        False,
        False,
        False,
        "HEAD",
        "sink-function",
        "cascading",
        (1, 2),
        False,
    ),
    ChainRules(
        "1.11",
        Release(1, 11),
        Release(1, 11),
        "job-graph-generator",
        _ALL,
        frozenset({"ALWAYS"}),
        False,
        True,
        True,
        False,
        "HEAD",
        "sink-function",
        "cascading",
        (3,),
        False,
    ),
    ChainRules(
        "1.12-1.13",
        Release(1, 12),
        Release(1, 13),
        "job-graph-generator",
        _ALL,
        frozenset({"ALWAYS"}),
        True,
        True,
        True,
        False,
        "HEAD",
        "sink-v1-1.12",
        "cascading",
        (3,),
        False,
    ),
    ChainRules(
        "1.14",
        Release(1, 14),
        Release(1, 14),
        "job-graph-generator",
        _ALL,
        frozenset({"ALWAYS"}),
        True,
        True,
        True,
        False,
        "HEAD",
        "sink-v1-1.14",
        "cascading",
        (3,),
        False,
    ),
    ChainRules(
        "1.15-1.17",
        Release(1, 15),
        Release(1, 17),
        "job-graph-generator",
        _ALL,
        frozenset({"ALWAYS"}),
        True,
        True,
        True,
        False,
        "HEAD",
        "sink-v2",
        "tree",
        (3, 4),
        False,
    ),
    ChainRules(
        "1.18-1.20",
        Release(1, 18),
        Release(1, 20),
        "job-graph-generator",
        _ALL,
        frozenset({"ALWAYS"}),
        True,
        True,
        True,
        True,
        "HEAD",
        "sink-v2",
        "tree",
        (4,),
        False,
    ),
    ChainRules(
        "2.0-2.3",
        Release(2, 0),
        Release(2, 99),
        "job-graph-generator",
        _ALL,
        frozenset({"ALWAYS"}),
        True,
        True,
        True,
        True,
        "ALWAYS",
        "sink-v2",
        "tree",
        (5, 6),
        True,
    ),
)


def release_for_format_version(version: int) -> Release:
    """The newest release line that writes checkpoint metadata version ``version`` (for when only the
    ``_metadata`` is known). For plans with Flink's default chaining settings every line gives the same ids."""
    if version == 1:
        version = 2  # Flink 1.0-1.2 savepoints: the oldest rules known here
    try:
        features = dialects(version)[0]  # the format-features table (spillway.flink.features)
    except ValueError:
        raise ValueError(f"unknown checkpoint metadata version {version}") from None
    return features.last_release or NEWEST_RELEASE


def hasher_rules(release: str | Release) -> ChainRules:
    """The rules that apply to ``release`` (``"1.20.3"``, ``"2.0"`` …). Newer than the table: the newest line."""
    mm = parse_release(release)
    for rules in RELEASE_RULES:
        if rules.first <= mm <= rules.last:
            return rules
    if mm > RELEASE_RULES[-1].last:
        return RELEASE_RULES[-1]
    return RELEASE_RULES[0]


def _strategy(node: StreamNode, graph: StreamGraph) -> str:
    if node.chaining_strategy is not None:
        return node.chaining_strategy.upper()
    # Defaults: sources are HEAD (StreamSource, SourceOperatorFactory); every built-in DataStream operator ALWAYS.
    return "HEAD" if node.id in graph.source_ids() or not graph.in_edges(node.id) else "ALWAYS"


def _is_flip27_source(node: StreamNode, graph: StreamGraph) -> bool:
    if node.source_kind is not None:
        return node.source_kind == "flip27"
    return node.id in graph.source_ids() or not graph.in_edges(node.id)


def _chain_head(node: StreamNode, graph: StreamGraph, rules: ChainRules, seen: set[int]) -> StreamNode:
    """``StreamingJobGraphGenerator.getHeadOperator``: walk up through chainable single inputs."""
    ins = graph.in_edges(node.id)
    if len(ins) != 1 or node.id in seen:
        return node
    seen.add(node.id)
    if edge_chainable(graph, ins[0], rules):
        return _chain_head(graph.node(ins[0].source), graph, rules, seen)
    return node


def edge_chainable(graph: StreamGraph, edge: StreamEdge, rules: ChainRules) -> bool:
    """The hasher's "is this out-edge chainable?" for ``rules``' release line."""
    up = graph.node(edge.source)
    down = graph.node(edge.target)
    if len(graph.in_edges(down.id)) != 1 or not graph.chaining_enabled:
        return False
    if (up.slot_sharing_group or "default") != (down.slot_sharing_group or "default"):
        return False
    up_s, down_s = _strategy(up, graph), _strategy(down, graph)
    if up_s not in rules.upstream_strategies:
        return False
    if down_s not in rules.downstream_strategies and not (
        rules.head_with_sources and down_s == "HEAD_WITH_SOURCES" and _is_flip27_source(up, graph)
    ):
        return False
    if rules.yielding_rule and down.yielding:
        head = _chain_head(up, graph, rules, set())
        if head.source_kind == "legacy":
            return False
    if not edge.kind.is_forward:
        return False
    if rules.checks_exchange_mode and edge.exchange_mode.upper() == "BATCH":
        return False
    if up.parallelism != down.parallelism:
        return False
    return not (
        rules.max_parallelism_option
        and not graph.chain_different_max_parallelism
        and up.max_parallelism != down.max_parallelism
    )


def chain_predicate(
    graph: StreamGraph, rules: ChainRules, chained_edges: Collection[tuple[int, int]] | None = None
) -> Callable[[StreamEdge], bool]:
    """The chainability test to use: the release rules, or — when the actual chains are known (e.g. from a
    job-graph plan, see :func:`spillway.flink.operator_ids.chained_edges_from_job_graph`) — membership in
    ``chained_edges`` ((source, target) pairs)."""
    if chained_edges is not None:
        known = set(chained_edges)
        return lambda e: (e.source, e.target) in known
    cache: dict[tuple[int, int, int], bool] = {}

    def test(e: StreamEdge) -> bool:
        key = (e.source, e.target, e.type_number)
        if key not in cache:
            cache[key] = edge_chainable(graph, e, rules)
        return cache[key]

    return test


def infer_chains(
    graph: StreamGraph, release: str, *, chained_edges: Collection[tuple[int, int]] | None = None
) -> list[list[int]]:
    """Operator chains (= job vertices) as node-id lists, head first, members depth first in out-edge order
    (the order of a job-graph plan ``description``); chains ordered by head id.

    A plan carries no chaining strategies / slot sharing groups: Flink's defaults are assumed unless the nodes
    say otherwise (:meth:`StreamGraph.with_nodes`). Sources chained into a multi-input operator
    (``HEAD_WITH_SOURCES`` + MultipleInputTransformation, 1.12+) are not modelled.
    """
    chainable = chain_predicate(graph, hasher_rules(release), chained_edges)
    chained_in = {e.target for e in graph.edges if chainable(e)}
    chains: list[list[int]] = []
    for node in sorted(graph.nodes, key=lambda n: n.id):
        if node.id in chained_in:
            continue
        chain: list[int] = []
        stack = [node.id]
        while stack:
            cur = stack.pop()
            chain.append(cur)
            stack.extend(reversed([e.target for e in graph.out_edges(cur) if chainable(e)]))
        chains.append(chain)
    return chains


def vertex_operator_order(
    graph: StreamGraph, head: int, release: str, *, chained_edges: Collection[tuple[int, int]] | None = None
) -> list[int]:
    """The chain of ``head`` in ``JobVertex#getOperatorIDs`` order: post-order over chainable outputs, so the
    tail comes first and the head last (``createChain`` records an operator after its chained outputs)."""
    chainable = chain_predicate(graph, hasher_rules(release), chained_edges)
    order: list[int] = []

    def visit(n: int) -> None:
        for e in graph.out_edges(n):
            if chainable(e):
                visit(e.target)
        order.append(n)

    visit(head)
    return order
