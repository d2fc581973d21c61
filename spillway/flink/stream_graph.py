"""Plain models of Flink's job plans, and parsers for the two JSON flavours Flink prints.

* :class:`StreamGraph` — the graph *before* chaining (``env.getExecutionPlan()``, ``flink info``): one node per
  physical operator (``StreamNode``), edges carrying the partitioner. This is what Flink hashes into operator ids.
* :class:`JobGraphPlan` — the graph *after* chaining (``JsonPlanGenerator`` / REST ``GET /jobs/:id/plan``): one
  vertex per operator chain; a vertex id is the chain head's operator id.

Plain data in, plain data out: nothing here touches a checkpoint. See ``docs/format/operator-ids.md``.
"""

from __future__ import annotations

import html
import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

__all__ = [
    "CHAINING_STRATEGIES",
    "JobGraphPlan",
    "JobInput",
    "JobVertexPlan",
    "StreamEdge",
    "StreamGraph",
    "StreamNode",
    "is_forward",
    "parse_job_graph_plan",
    "parse_stream_plan",
    "split_description",
]

#: Flink's ``ChainingStrategy`` values (HEAD_WITH_SOURCES exists from 1.12 on).
CHAINING_STRATEGIES = ("ALWAYS", "NEVER", "HEAD", "HEAD_WITH_SOURCES")


@dataclass(frozen=True, slots=True)
class StreamNode:
    """One ``StreamNode``. ``None`` in an optional field means "not known": the rules then assume Flink's default
    (see :mod:`spillway.flink.chaining`)."""

    id: int
    name: str
    parallelism: int
    uid: str | None = None
    #: ``Transformation#getDescription`` (1.15+; the plan's ``contents``); equals the name unless set.
    description: str | None = None
    max_parallelism: int | None = None
    #: ``ALWAYS`` / ``NEVER`` / ``HEAD`` / ``HEAD_WITH_SOURCES``; ``None`` = assume the default.
    chaining_strategy: str | None = None
    #: ``None`` = the default group (``"default"``).
    slot_sharing_group: str | None = None
    #: Registered as a source (``StreamGraph#getSourceIDs``); ``None`` = "a node without inputs is a source".
    is_source: bool | None = None
    #: ``"legacy"`` (SourceFunction / StreamSource) or ``"flip27"`` (SourceOperatorFactory); ``None`` = unknown.
    source_kind: str | None = None
    #: A ``YieldingOperatorFactory`` (e.g. async I/O): never chained behind a legacy source (1.11+).
    yielding: bool = False
    #: Flink's own operator id (``StreamGraphHasherV2``), known only from the job's own graph (the job's jar).
    operator_id: str | None = None
    #: The id given with ``setUidHash`` (Flink restores state stored under it), from the job's own graph.
    user_hash: str | None = None
    #: The job vertex (chain) holding the operator, from the job's own graph.
    vertex_id: str | None = None


@dataclass(frozen=True, slots=True)
class StreamEdge:
    """One ``StreamEdge``. The order of :attr:`StreamGraph.edges` is Flink's edge-creation order: it gives each
    node's out-edge order and in-edge order (Flink appends an edge to both lists at once)."""

    source: int
    target: int
    #: ``StreamPartitioner#toString()`` (``FORWARD``, ``HASH``, ``REBALANCE`` …) or the partitioner class name.
    partitioner: str
    #: Input index of the target: 0 for one-input operators, 1/2 for two-input ones, 1..n for multi-input.
    type_number: int = 0
    #: ``StreamExchangeMode`` (``UNDEFINED``, ``PIPELINED``, ``BATCH``, ``HYBRID_*``); ``BATCH`` is never chained.
    exchange_mode: str = "UNDEFINED"


@dataclass(frozen=True, slots=True)
class StreamGraph:
    nodes: tuple[StreamNode, ...]
    edges: tuple[StreamEdge, ...]
    chaining_enabled: bool = True
    #: ``pipeline.operator-chaining.chain-operators-with-different-max-parallelism`` (1.18+, default true).
    chain_different_max_parallelism: bool = True
    #: True when the out-edge order was not known and was inferred (by target node id); see
    #: :func:`parse_stream_plan`. Ids of nodes whose position depends on that order carry a caveat.
    inferred_edge_order: bool = False
    _by_id: dict[int, StreamNode] = field(init=False, repr=False, compare=False)
    _in: dict[int, tuple[StreamEdge, ...]] = field(init=False, repr=False, compare=False)
    _out: dict[int, tuple[StreamEdge, ...]] = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        by_id: dict[int, StreamNode] = {}
        for n in self.nodes:
            if n.id in by_id:
                raise ValueError(f"duplicate stream node id {n.id}")
            by_id[n.id] = n
        ins: dict[int, list[StreamEdge]] = {n.id: [] for n in self.nodes}
        outs: dict[int, list[StreamEdge]] = {n.id: [] for n in self.nodes}
        for e in self.edges:
            if e.source not in by_id or e.target not in by_id:
                raise ValueError(f"edge {e.source}->{e.target} names a node that is not in the graph")
            outs[e.source].append(e)
            ins[e.target].append(e)
        object.__setattr__(self, "_by_id", by_id)
        object.__setattr__(self, "_in", {k: tuple(v) for k, v in ins.items()})
        object.__setattr__(self, "_out", {k: tuple(v) for k, v in outs.items()})

    def node(self, node_id: int) -> StreamNode:
        return self._by_id[node_id]

    def in_edges(self, node_id: int) -> tuple[StreamEdge, ...]:
        return self._in[node_id]

    def out_edges(self, node_id: int) -> tuple[StreamEdge, ...]:
        return self._out[node_id]

    def source_ids(self) -> list[int]:
        """``StreamGraph#getSourceIDs`` sorted (as the hasher sorts them)."""
        return sorted(n.id for n in self.nodes if (n.is_source if n.is_source is not None else not self._in[n.id]))

    def by_name(self, name: str) -> list[StreamNode]:
        return [n for n in self.nodes if n.name == name]

    def with_nodes(self, overrides: Mapping[int, Mapping[str, Any]]) -> StreamGraph:
        """A copy with some node fields replaced, e.g. ``{4: {"chaining_strategy": "HEAD"}}``."""
        nodes = tuple(replace(n, **overrides[n.id]) if n.id in overrides else n for n in self.nodes)
        return StreamGraph(
            nodes, self.edges, self.chaining_enabled, self.chain_different_max_parallelism, self.inferred_edge_order
        )


def is_forward(partitioner: str) -> bool:
    """``ForwardPartitioner`` and its subclasses (ForwardForUnspecified, ForwardForConsecutiveHash — they print
    ``FORWARD`` too)."""
    return "FORWARD" in partitioner.upper()


def _unwrap(obj: Any) -> Mapping[str, Any]:
    if isinstance(obj, (str, bytes)):
        import json

        obj = json.loads(obj)
    if not isinstance(obj, Mapping):
        raise ValueError("a plan is a JSON object")
    if "nodes" not in obj and isinstance(obj.get("plan"), Mapping):
        obj = obj["plan"]
    if not isinstance(obj.get("nodes"), list):
        raise ValueError('a plan has a "nodes" list')
    return obj


def parse_stream_plan(obj: Any, *, chaining_enabled: bool = True) -> StreamGraph:
    """Parse ``StreamExecutionEnvironment#getExecutionPlan()`` JSON (a dict, or the JSON text).

    What the plan does not say, and what is assumed (override with :meth:`StreamGraph.with_nodes`):

    * chaining strategy, slot sharing group, max parallelism: not printed → Flink's defaults;
    * out-edge order: not printed. Flink's order is edge creation order, which for DataStream programs follows
      the creation order of the downstream operators; we take edges sorted by (target id, predecessor index)
      and mark the graph ``inferred_edge_order``. It only matters for fan-out without uids.
    * ``predecessors[].side`` carries no information (Flink 1.10–2.3 always print ``"second"``: the entry is
      appended before its index is tested) and is ignored; ``type_number`` is left 0.
    * sources: ``pact == "Data Source"``.
    """
    plan = _unwrap(obj)
    nodes: list[StreamNode] = []
    edges: list[tuple[int, int, StreamEdge]] = []
    for raw in plan["nodes"]:
        nid = int(raw["id"])
        name = str(raw.get("type", raw.get("contents", "")))
        contents = raw.get("contents")
        pact = raw.get("pact")
        nodes.append(
            StreamNode(
                id=nid,
                name=name,
                parallelism=int(raw.get("parallelism", -1)),
                description=str(contents) if contents is not None else None,
                is_source=(pact == "Data Source") if pact is not None else None,
            )
        )
        for idx, pred in enumerate(raw.get("predecessors") or ()):
            partitioner = str(pred.get("ship_strategy", ""))
            edges.append((nid, idx, StreamEdge(source=int(pred["id"]), target=nid, partitioner=partitioner)))
    edges.sort(key=lambda t: (t[0], t[1]))
    return StreamGraph(
        tuple(nodes), tuple(e for _, _, e in edges), chaining_enabled=chaining_enabled, inferred_edge_order=True
    )


@dataclass(frozen=True, slots=True)
class JobInput:
    source: str  # upstream job vertex id
    num: int  # input gate index of the consuming vertex
    ship_strategy: str
    exchange: str | None = None


@dataclass(frozen=True, slots=True)
class JobVertexPlan:
    """One job vertex (operator chain). ``operators`` are the chained operators' labels, head first, in the
    order Flink prints them (depth first); ``parents[i]`` is the index of operator i's chain predecessor
    (``None`` for the head). Labels are operator names before 1.15 and operator descriptions from 1.15 on
    (equal to the names unless a description was set, e.g. by the SQL planner)."""

    id: str
    parallelism: int
    description: str
    operators: tuple[str, ...]
    parents: tuple[int | None, ...]
    inputs: tuple[JobInput, ...]


@dataclass(frozen=True, slots=True)
class JobGraphPlan:
    vertices: tuple[JobVertexPlan, ...]
    jid: str | None = None
    name: str | None = None

    def vertex(self, vertex_id: str) -> JobVertexPlan:
        for v in self.vertices:
            if v.id == vertex_id:
                return v
        raise KeyError(vertex_id)


_TREE_LINE = re.compile(r"^((?:   |:  |\|  )*)([+:]- )(.*)$")


def _split_tree(lines: Sequence[str]) -> tuple[list[str], list[int | None]]:
    labels: list[str] = []
    parents: list[int | None] = []
    stack: list[int] = []  # stack[d] = index of the last label at depth d
    for line in lines:
        m = _TREE_LINE.match(line)
        if m is None or not labels:
            depth, label = 0, line
        else:
            depth, label = len(m.group(1)) // 3 + 1, m.group(3)
        depth = min(depth, len(stack))
        del stack[depth:]
        parents.append(stack[-1] if stack else None)
        labels.append(label)
        stack.append(len(labels) - 1)
    return labels, parents


def _split_top(text: str, sep: str) -> list[str]:
    """Split on ``sep`` outside (), [] and {}."""
    out, depth, start, i = [], 0, 0, 0
    while i < len(text):
        c = text[i]
        if c in "([{":
            depth += 1
        elif c in ")]}":
            depth = max(0, depth - 1)
        elif depth == 0 and text.startswith(sep, i):
            out.append(text[start:i])
            i += len(sep)
            start = i
            continue
        i += 1
    out.append(text[start:])
    return out


def _split_cascading(text: str, parent: int | None, labels: list[str], parents: list[int | None]) -> None:
    """``a -> b -> (c -> d, e)`` (names before 1.15, and the CASCADING description mode)."""
    head, arrow, rest = text.partition(" -> ")
    labels.append(head.strip())
    parents.append(parent)
    me = len(labels) - 1
    if not arrow:
        return
    rest = rest.strip()
    if rest.startswith("(") and rest.endswith(")"):
        for part in _split_top(rest[1:-1], ","):
            if part.strip():
                _split_cascading(part.strip(), me, labels, parents)
    else:
        _split_cascading(rest, me, labels, parents)


def split_description(description: str) -> tuple[list[str], list[int | None]]:
    """Chained operator labels (head first) and their chain parents from a job-graph plan ``description``.

    1.15+ (TREE mode, default): one line per operator, ``<br/>``-separated, children prefixed ``+- `` (last) or
    ``:- `` (others), indented by three characters per level. Before 1.15 (and CASCADING mode): ``a -> b``,
    fan-out as ``a -> (b, c)``. The JSON text is HTML-escaped (``StringEscapeUtils.escapeHtml4``, backslash as
    ``&#92;``); labels come back unescaped.
    """
    if "<br/>" in description or "\n" in description:
        lines = [html.unescape(s) for s in re.split(r"<br/>|\n", description) if s.strip()]
        return _split_tree(lines)
    labels: list[str] = []
    parents: list[int | None] = []
    text = html.unescape(description).strip()
    if text:
        _split_cascading(text, None, labels, parents)
    return labels, parents


def parse_job_graph_plan(obj: Any) -> JobGraphPlan:
    """Parse ``JsonPlanGenerator.generatePlan(jobGraph)`` JSON — what REST ``GET /jobs/:id/plan`` returns,
    with or without its ``{"plan": …}`` wrapper."""
    raw_obj = obj
    if isinstance(raw_obj, (str, bytes)):
        import json

        raw_obj = json.loads(raw_obj)
    plan = _unwrap(raw_obj)
    vertices = []
    for raw in plan["nodes"]:
        description = str(raw.get("description", ""))
        labels, parents = split_description(description)
        inputs = tuple(
            JobInput(
                source=str(i["id"]).lower(),
                num=int(i.get("num", 0)),
                ship_strategy=str(i.get("ship_strategy", "")),
                exchange=str(i["exchange"]) if i.get("exchange") is not None else None,
            )
            for i in (raw.get("inputs") or ())
        )
        vertices.append(
            JobVertexPlan(
                id=str(raw["id"]).lower(),
                parallelism=int(raw.get("parallelism", -1)),
                description=description,
                operators=tuple(labels),
                parents=tuple(parents),
                inputs=inputs,
            )
        )
    jid = plan.get("jid")
    name = plan.get("name")
    return JobGraphPlan(tuple(vertices), str(jid) if jid else None, str(name) if name else None)


def labels_of(node: StreamNode) -> Iterable[str]:
    """The strings a job-graph plan may use for this node (name, description)."""
    yield node.name
    if node.description and node.description != node.name:
        yield node.description
