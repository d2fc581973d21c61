"""Plain models of Flink's job plans, and parsers for the two JSON flavours Flink prints.

* :class:`StreamGraph` — the graph *before* chaining (``env.getExecutionPlan()``, ``flink info``): one node per
  physical operator (``StreamNode``), edges carrying the partitioner. This is what Flink hashes into operator ids.
* :class:`JobGraphPlan` — the graph *after* chaining (``JsonPlanGenerator`` / REST ``GET /jobs/:id/plan``): one
  vertex per operator chain; a vertex id is the chain head's operator id.

Plain data in, plain data out: nothing here touches a checkpoint. See ``docs/format/operator-ids.md``.
"""

from __future__ import annotations

import html
import json
import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

from spillway.errors import UsageError
from spillway.flink.partitioners import Partitioner

__all__ = [
    "CHAINING_STRATEGIES",
    "JobGraphPlan",
    "JobInput",
    "JobVertexPlan",
    "PlanError",
    "StreamEdge",
    "StreamGraph",
    "StreamNode",
    "is_stream_plan",
    "parse_job_graph_plan",
    "parse_stream_plan",
    "split_description",
]


class PlanError(UsageError):
    """The plan cannot be read or understood (a usage error): the message names the node and the field."""


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

    @property
    def kind(self) -> Partitioner:
        """What the partitioner is (:class:`~spillway.flink.partitioners.Partitioner`); ``partitioner`` keeps
        the text as printed."""
        return Partitioner.of(self.partitioner)


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


def _unwrap(obj: Any) -> Mapping[str, Any]:
    """The plan object: parsed from JSON text if need be, unwrapped from REST's ``{"plan": …}``."""
    if isinstance(obj, (str, bytes)):
        try:
            obj = json.loads(obj)
        except ValueError as exc:
            raise PlanError(f"not a readable JSON plan ({exc})") from None
    if isinstance(obj, Mapping) and "nodes" not in obj and isinstance(obj.get("plan"), Mapping):
        obj = obj["plan"]
    if not isinstance(obj, Mapping) or not isinstance(obj.get("nodes"), list) or not obj["nodes"]:
        raise PlanError("no 'nodes' list: not a Flink plan")
    for i, node in enumerate(obj["nodes"]):
        if not isinstance(node, Mapping):
            raise PlanError(f"malformed plan node (nodes[{i}] is {type(node).__name__} {node!r:.40}, not an object)")
    return obj


def is_stream_plan(obj: Any) -> bool:
    """Whether a plan is the stream-graph flavour (integer node ids, ``predecessors``) rather than the job-graph
    one (hex vertex ids, ``inputs``)."""
    nodes = _unwrap(obj)["nodes"]
    return any(
        "predecessors" in n or (isinstance(n.get("id"), int) and not isinstance(n.get("id"), bool)) for n in nodes
    )


def _malformed(detail: str) -> PlanError:
    return PlanError(f"malformed plan node ({detail})")


def _where(node: Mapping[str, Any], index: int) -> str:
    """A node by its id, or by its place in the list when the id is no usable one."""
    nid = node.get("id")
    usable = (isinstance(nid, int) and not isinstance(nid, bool)) or (isinstance(nid, str) and nid != "")
    return f"node {nid!r}" if usable else f"nodes[{index}]"


#: What an integer field must be, by its least value (None: any integer).
_INTEGERS = {None: "an integer", 0: "a non-negative integer", 1: "a positive integer"}


def _int_field(node: Mapping[str, Any], key: str, where: str, *, minimum: int | None) -> int:
    value = node.get(key)
    if isinstance(value, bool) or not isinstance(value, int) or (minimum is not None and value < minimum):
        raise _malformed(f"{where}: {key!r} is {value!r}, not {_INTEGERS[minimum]}")
    return value


def _text_field(node: Mapping[str, Any], key: str, where: str) -> str | None:
    """A text field (absent or null: None); anything but a string is a malformed plan."""
    value = node.get(key)
    if value is None:
        return None
    if not isinstance(value, str):
        raise _malformed(f"{where}: {key!r} is {type(value).__name__} {value!r:.40}, not a string")
    return value


def _list_field(node: Mapping[str, Any], key: str, where: str) -> list[Mapping[str, Any]]:
    """A list of objects (absent or null: empty)."""
    value = node.get(key)
    if value is None:
        return []
    if not isinstance(value, list):
        raise _malformed(f"{where}: {key!r} is {type(value).__name__} {value!r:.40}, not a list")
    for i, item in enumerate(value):
        if not isinstance(item, Mapping):
            raise _malformed(f"{where}: {key}[{i}] is {type(item).__name__} {item!r:.40}, not an object")
    return value


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

    A malformed plan is a :class:`PlanError` naming the node and the field.
    """
    plan = _unwrap(obj)
    nodes: list[StreamNode] = []
    edges: dict[tuple[int, int], StreamEdge] = {}  # (target id, predecessor index) -> edge
    seen: set[int] = set()
    for i, raw in enumerate(plan["nodes"]):
        where = _where(raw, i)
        nid = _int_field(raw, "id", where, minimum=None)
        if nid in seen:
            raise _malformed(f"{where}: id {nid} occurs twice")
        seen.add(nid)
        name = _text_field(raw, "type", where)
        contents = _text_field(raw, "contents", where)
        pact = _text_field(raw, "pact", where)
        nodes.append(
            StreamNode(
                id=nid,
                name=name if name is not None else contents or "",
                parallelism=_int_field(raw, "parallelism", where, minimum=1),
                description=contents,
                is_source=(pact == "Data Source") if pact is not None else None,
            )
        )
        for idx, pred in enumerate(_list_field(raw, "predecessors", where)):
            up = _int_field(pred, "id", f"{where}: predecessors[{idx}]", minimum=None)
            partitioner = _text_field(pred, "ship_strategy", f"{where}: predecessors[{idx}]") or ""
            edges[(nid, idx)] = StreamEdge(source=up, target=nid, partitioner=partitioner)
    for (target, idx), e in edges.items():
        if e.source not in seen:
            raise _malformed(f"node {target}: predecessors[{idx}] names node {e.source}, which is not in the plan")
    ordered = tuple(edges[k] for k in sorted(edges))
    return StreamGraph(tuple(nodes), ordered, chaining_enabled=chaining_enabled, inferred_edge_order=True)


@dataclass(frozen=True, slots=True)
class JobInput:
    source: str  # upstream job vertex id
    num: int  # input gate index of the consuming vertex
    ship_strategy: str
    exchange: str | None = None

    @property
    def kind(self) -> Partitioner:
        return Partitioner.of(self.ship_strategy)


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


#: One line of a TREE description: indentation (three characters per level: ``"   "`` under a last child, ``":  "``
#: under another), the branch marker (``+- `` last child, ``:- `` others), the label. A non-breaking space (what
#: ``&nbsp;`` unescapes to) counts as a space in the indentation only.
_TREE_LINE = re.compile(r"^((?:[ \xa0]{3}|:[ \xa0]{2})*)([+:]- )(.*)$")


def _split_tree(lines: Sequence[str]) -> tuple[list[str], list[int | None]]:
    """The first line is the head; a line without a branch marker continues the label before it (Flink turns a
    newline in a name into ``<br/>`` too)."""
    labels: list[str] = [lines[0].strip()]
    parents: list[int | None] = [None]
    stack: list[int] = [0]  # stack[d] = index of the last label at depth d
    for line in lines[1:]:
        m = _TREE_LINE.match(line)
        if m is None:
            labels[-1] = f"{labels[-1]}\n{line.strip()}"
            continue
        depth = min(len(m.group(1)) // 3 + 1, len(stack))
        del stack[depth:]
        parents.append(stack[-1])
        labels.append(m.group(3).strip())
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
    """``a -> b -> (c -> d, e)`` (names before 1.15, and the CASCADING description mode). The arrow is looked for
    outside brackets, so a SQL description's ``select=[a -> b]`` stays one label."""
    head, *rest_parts = _split_top(text, " -> ")
    labels.append(head.strip())
    parents.append(parent)
    me = len(labels) - 1
    if not rest_parts:
        return
    rest = " -> ".join(rest_parts).strip()
    outputs = _fan_out(rest)
    if outputs:
        for part in outputs:
            _split_cascading(part.strip(), me, labels, parents)
    else:
        _split_cascading(rest, me, labels, parents)


def _fan_out(rest: str) -> list[str]:
    """The names of several chained outputs, when ``rest`` is ``(a,b,…)``: one pair of parentheses around it all
    (not ``(a),(b)``) holding two or more names Flink joined with a bare comma; else none."""
    if not rest.startswith("("):
        return []
    depth = 0
    for i, c in enumerate(rest):
        if c in "([{":
            depth += 1
        elif c in ")]}":
            depth -= 1
        if depth == 0 and i < len(rest) - 1:
            return []  # the first group closes before the end
    parts = _split_top(rest[1:-1], ",")
    return parts if depth == 0 and len(parts) > 1 else []


def split_description(description: str) -> tuple[list[str], list[int | None]]:
    """Chained operator labels (head first) and their chain parents from a job-graph plan ``description``.

    1.15+ (TREE mode, default): one line per operator, ``<br/>``-separated, children prefixed ``+- `` (last) or
    ``:- `` (others), indented by three characters per level. Before 1.15 (and CASCADING mode): ``a -> b``,
    fan-out as ``a -> (b, c)``. The JSON text is HTML-escaped (``StringEscapeUtils.escapeHtml4``, then a
    backslash as ``&#92;``); labels come back unescaped.
    """
    if "<br/>" in description:
        lines = [html.unescape(s) for s in description.split("<br/>") if s.strip()]
        return _split_tree(lines) if lines else ([], [])
    labels: list[str] = []
    parents: list[int | None] = []
    text = html.unescape(description).strip()
    if text:
        _split_cascading(text, None, labels, parents)
    return labels, parents


def _job_input(raw: Mapping[str, Any], index: int, where: str) -> JobInput:
    at = f"{where}: inputs[{index}]"
    source = _text_field(raw, "id", at)
    if not source:
        raise _malformed(f"{at}: 'id' names no vertex")
    # Flink always writes "num": the input's position among the vertex's inputs
    num = _int_field(raw, "num", at, minimum=0) if "num" in raw else index
    return JobInput(
        source=source.lower(),
        num=num,
        ship_strategy=_text_field(raw, "ship_strategy", at) or "",
        exchange=_text_field(raw, "exchange", at),
    )


def parse_job_graph_plan(obj: Any) -> JobGraphPlan:
    """Parse ``JsonPlanGenerator.generatePlan(jobGraph)`` JSON — what REST ``GET /jobs/:id/plan`` returns,
    with or without its ``{"plan": …}`` wrapper. A malformed plan is a :class:`PlanError` naming the node and
    the field."""
    plan = _unwrap(obj)
    vertices: list[JobVertexPlan] = []
    seen: set[str] = set()
    for i, raw in enumerate(plan["nodes"]):
        where = _where(raw, i)
        vid = _text_field(raw, "id", where)
        if not vid:
            raise _malformed(f"{where}: 'id' is {raw.get('id')!r}, not a job vertex id")
        vid = vid.lower()
        if vid in seen:
            raise _malformed(f"{where}: id {vid} occurs twice")
        seen.add(vid)
        description = _text_field(raw, "description", where) or ""
        labels, parents = split_description(description)
        if not labels:  # Flink describes every job vertex by its chain; without it no operator can be named
            raise _malformed(f"{where}: 'description' names no operator")
        vertices.append(
            JobVertexPlan(
                id=vid,
                parallelism=_int_field(raw, "parallelism", where, minimum=1),
                description=description,
                operators=tuple(labels),
                parents=tuple(parents),
                inputs=tuple(_job_input(inp, j, where) for j, inp in enumerate(_list_field(raw, "inputs", where))),
            )
        )
    for v in vertices:
        for inp in v.inputs:
            if inp.source not in seen:
                raise _malformed(f"input {inp.source} of {v.id} is not a node")
    jid, name = plan.get("jid"), plan.get("name")
    return JobGraphPlan(tuple(vertices), str(jid) if jid else None, str(name) if name else None)


def labels_of(node: StreamNode) -> Iterable[str]:
    """The strings a job-graph plan may use for this node (name, description)."""
    yield node.name
    if node.description and node.description != node.name:
        yield node.description
