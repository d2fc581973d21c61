"""Flink's own graph of a job, as spillway's Java helper writes it after running the job's ``main()`` in Flink's
plan-only environment (``spillway ids``, ``--job JOB.jar``): every stream node with Flink's operator id, uid,
``setUidHash`` id, job vertex and chain position, the edges with their partitioners, and the job vertices.

Pure: a JSON document in, :class:`JobIds` out. The document has the shape of the test fixtures' ``ids.json``
(plus ``user_hash``, ``description``, ``chain_position`` and max parallelism), so both read the same way.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from spillway.flink.stream_graph import JobGraphPlan, JobInput, JobVertexPlan, StreamEdge, StreamGraph, StreamNode

__all__ = ["JobIds", "JobNode", "JobVertexIds", "parse_job_ids"]

_HEX32 = re.compile(r"^[0-9a-f]{32}$")


@dataclass(frozen=True, slots=True)
class JobNode:
    """One stream node as Flink built it. ``max_parallelism`` None: not set on the operator (the job's, or
    Flink's default derived from the parallelism, applies)."""

    node_id: int
    name: str
    uid: str | None
    user_hash: str | None
    operator_id: str
    vertex_id: str
    chain_position: int | None
    parallelism: int
    max_parallelism: int | None


@dataclass(frozen=True, slots=True)
class JobVertexIds:
    """One job vertex (operator chain): ``operator_ids`` head first (Flink lists them tail first)."""

    id: str
    name: str
    parallelism: int
    max_parallelism: int | None
    operator_ids: tuple[str, ...]
    user_defined_operator_ids: tuple[str | None, ...]


@dataclass(frozen=True, slots=True)
class JobIds:
    release: str
    entry_class: str | None
    job_name: str | None
    #: The job's max parallelism (``env.setMaxParallelism``); None: not set.
    max_parallelism: int | None
    nodes: tuple[JobNode, ...]
    vertices: tuple[JobVertexIds, ...]
    #: The stream graph with Flink's ids on every node (``StreamNode.operator_id`` / ``user_hash`` / ``vertex_id``).
    graph: StreamGraph

    def node(self, node_id: int) -> JobNode:
        return next(n for n in self.nodes if n.node_id == node_id)

    def job_graph(self) -> JobGraphPlan:
        """The job vertices as a job-graph plan (vertex id = head operator id; chained operators head first)."""
        node_of = {n.operator_id: n for n in self.nodes}
        vertex_of = {n.node_id: n.vertex_id for n in self.nodes}
        out = []
        for v in self.vertices:
            members = [node_of[o] for o in v.operator_ids if o in node_of]
            index = {m.node_id: i for i, m in enumerate(members)}
            parents: list[int | None] = []
            inputs: list[JobInput] = []
            for m in members:
                ins = self.graph.in_edges(m.node_id)
                chained = [e for e in ins if vertex_of[e.source] == v.id]
                parents.append(index[chained[0].source] if chained else None)
                for e in ins:
                    if vertex_of[e.source] != v.id and all(i.source != vertex_of[e.source] for i in inputs):
                        inputs.append(JobInput(vertex_of[e.source], len(inputs), e.partitioner))
            out.append(
                JobVertexPlan(
                    id=v.id,
                    parallelism=v.parallelism,
                    description=v.name,
                    operators=tuple(m.name for m in members),
                    parents=tuple(parents),
                    inputs=tuple(inputs),
                )
            )
        return JobGraphPlan(tuple(out), None, self.job_name)

    def stream_plan(self) -> dict[str, Any]:
        """The job as ``env.getExecutionPlan()`` prints it (nodes in topological order, predecessors with their
        partitioners), for code that reads a stream-graph plan."""
        order = _topological(self.graph)
        nodes = []
        for nid in order:
            n = self.graph.node(nid)
            nodes.append(
                {
                    "id": nid,
                    "type": n.name,
                    "pact": "Data Source" if n.is_source else "Operator",
                    "contents": n.description or n.name,
                    "parallelism": n.parallelism,
                    "predecessors": [
                        {"id": e.source, "ship_strategy": e.partitioner, "side": "second"}
                        for e in self.graph.in_edges(nid)
                    ],
                }
            )
        return {"nodes": nodes}


def _topological(graph: StreamGraph) -> list[int]:
    done: list[int] = []
    seen: set[int] = set()
    pending = sorted(n.id for n in graph.nodes)
    while pending:
        ready = [nid for nid in pending if all(e.source in seen for e in graph.in_edges(nid))]
        if not ready:
            raise ValueError(f"stream_edges: a cycle through stream nodes {pending}")
        for nid in ready:
            done.append(nid)
            seen.add(nid)
        pending = [nid for nid in pending if nid not in seen]
    return done


def _field(obj: Mapping[str, Any], key: str, kind: type | tuple[type, ...], where: str) -> Any:
    if not isinstance(obj, Mapping) or key not in obj:
        raise ValueError(f"{where}: no field {key!r}")
    value = obj[key]
    if not isinstance(value, kind) or (isinstance(value, bool) and kind is int):
        raise ValueError(f"{where}.{key}: {value!r} is not a {getattr(kind, '__name__', kind)}")
    return value


def _opt_str(obj: Mapping[str, Any], key: str, where: str) -> str | None:
    value = obj.get(key)
    if value is not None and not isinstance(value, str):
        raise ValueError(f"{where}.{key}: {value!r} is not a string")
    return value


def _op_id(value: Any, where: str) -> str:
    if not isinstance(value, str) or not _HEX32.match(value.lower()):
        raise ValueError(f"{where}: {value!r} is not an operator id (32 hex digits)")
    return value.lower()


def _max_p(value: Any) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) and value > 0 else None


def parse_job_ids(doc: Any) -> JobIds:
    """:class:`JobIds` of the helper's (or a fixture's ``ids.json``) document; ``ValueError`` naming the field
    when it is not one."""
    if not isinstance(doc, Mapping):
        raise ValueError("the job's ids: not a JSON object")
    raw_vertices = _field(doc, "vertices", list, "ids")
    vertices = []
    vertex_of: dict[str, str] = {}
    for i, rv in enumerate(raw_vertices):
        where = f"vertices[{i}]"
        vid = _op_id(_field(rv, "id", str, where), f"{where}.id")
        ops = [_op_id(o, f"{where}.operator_ids") for o in _field(rv, "operator_ids", list, where)]
        users = list(rv.get("user_defined_operator_ids") or [None] * len(ops))
        ops.reverse()  # Flink lists a vertex's operators tail first
        users.reverse()
        for o in ops:
            vertex_of[o] = vid
        vertices.append(
            JobVertexIds(
                id=vid,
                name=str(rv.get("name", "")),
                parallelism=_field(rv, "parallelism", int, where),
                max_parallelism=_max_p(rv.get("max_parallelism")),
                operator_ids=tuple(ops),
                user_defined_operator_ids=tuple(None if u is None else _op_id(u, where) for u in users),
            )
        )
    nodes = []
    stream_nodes = []
    for i, rn in enumerate(_field(doc, "stream_nodes", list, "ids")):
        where = f"stream_nodes[{i}]"
        nid = _field(rn, "id", int, where)
        op_id = _op_id(rn.get("operator_id"), f"{where}.operator_id")
        user = rn.get("user_hash")
        user_id = _op_id(user, f"{where}.user_hash") if user else None
        vertex = rn.get("vertex_id") or vertex_of.get(op_id)
        if not isinstance(vertex, str):
            raise ValueError(f"{where}: operator {op_id} is in no job vertex")
        name = _field(rn, "name", str, where)
        uid = _opt_str(rn, "uid", where)
        parallelism = _field(rn, "parallelism", int, where)
        max_p = _max_p(rn.get("max_parallelism"))
        position = rn.get("chain_position")
        nodes.append(JobNode(nid, name, uid, user_id, op_id, vertex.lower(), position, parallelism, max_p))
        stream_nodes.append(
            StreamNode(
                id=nid,
                name=name,
                parallelism=parallelism,
                uid=uid,
                description=_opt_str(rn, "description", where),
                max_parallelism=max_p,
                chaining_strategy=_opt_str(rn, "chaining_strategy", where),
                slot_sharing_group=_opt_str(rn, "slot_sharing_group", where),
                operator_id=op_id,
                user_hash=user_id,
                vertex_id=vertex.lower(),
            )
        )
    edges = []
    for i, re_ in enumerate(_field(doc, "stream_edges", list, "ids")):
        where = f"stream_edges[{i}]"
        edges.append(
            StreamEdge(
                source=_field(re_, "source", int, where),
                target=_field(re_, "target", int, where),
                partitioner=_field(re_, "partitioner", str, where),
                type_number=int(re_.get("type_number") or 0),
                exchange_mode=str(re_.get("exchange_mode") or "UNDEFINED"),
            )
        )
    targets = {e.target for e in edges}
    stream_nodes = [
        StreamNode(**{**{f: getattr(n, f) for f in StreamNode.__slots__}, "is_source": n.id not in targets})
        for n in stream_nodes
    ]
    try:
        graph = StreamGraph(tuple(stream_nodes), tuple(edges), chaining_enabled=bool(doc.get("chaining_enabled", True)))
    except ValueError as exc:
        raise ValueError(f"stream_edges: {exc}") from None
    return JobIds(
        release=str(doc.get("release", "")),
        entry_class=_opt_str(doc, "entry_class", "ids"),
        job_name=_opt_str(doc, "job_name", "ids"),
        max_parallelism=_max_p(doc.get("max_parallelism")),
        nodes=tuple(nodes),
        vertices=tuple(vertices),
        graph=graph,
    )
