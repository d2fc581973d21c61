"""Job topology from Flink's plan JSON, bound to the operators of a checkpoint (docs/format/job-plans.md).

Two plan flavours exist. The job-graph plan (REST ``/jobs/:id/plan``, possibly wrapped in
``{"plan": …}``) has one node per job vertex (= chain) whose ``id`` is the head operator's id and
whose ``inputs[].num`` is the input gate. The stream-graph plan (``env.getExecutionPlan()``) has one
node per operator and no chaining; chains are inferred the way Flink chains by default (forward
edge, same parallelism, one input, one output). Its operators are bound to checkpoint operators by
the ids Flink itself computes (``spillway.flink.operator_ids``: the uid hash, or the deterministic
stream-graph hash), so binding is exact on every release where Flink's rule gives an id present in the
checkpoint; on V5+ metadata also by the stored names. See docs/format/operator-ids.md.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from spillway.errors import UsageError
from spillway.flink import operator_ids
from spillway.flink.stream_graph import JobGraphPlan, StreamGraph, parse_job_graph_plan, parse_stream_plan
from spillway.model.checkpoint import Checkpoint, OperatorState

ALL_TO_ALL = {"HASH", "REBALANCE", "SHUFFLE", "BROADCAST", "GLOBAL", "CUSTOM"}


class PlanError(UsageError):
    """The plan file cannot be read or understood (a usage error)."""


@dataclass
class Edge:
    upstream: str  # vertex key
    downstream: str
    gate: int
    ship_strategy: str

    @property
    def all_to_all(self) -> bool:
        return self.ship_strategy.upper() in ALL_TO_ALL or self.ship_strategy.upper().startswith("HASH")


@dataclass
class Vertex:
    key: str
    names: list[str]  # chain operators, head first
    parallelism: int
    vertex_id: str | None = None  # job-vertex id = head operator id (job-graph plans only)
    node_ids: list[int] = field(default_factory=list)  # stream-graph node ids, head first (stream-graph plans)
    inputs: list[Edge] = field(default_factory=list)
    outputs: list[Edge] = field(default_factory=list)

    def label(self) -> str:
        return " -> ".join(self.names) or self.key


@dataclass
class Topology:
    vertices: dict[str, Vertex]
    flavour: str  # "job-graph" or "stream-graph"
    stream_graph: StreamGraph | None = None  # the parsed stream-graph plan, for Flink's operator ids
    job_graph: JobGraphPlan | None = None  # the parsed job-graph plan, likewise
    # operator name -> uid, given by the user (--uid NAME=UID, --uid-map): a plan does not show uids
    uids: dict[str, str] = field(default_factory=dict)
    source_doc: Any = None  # the plan JSON as read (unwrapped), to write a changed copy of it

    def with_parallelism(self, new_p: dict[str, int]) -> dict[str, Any]:
        """The plan JSON as read, with the parallelism of vertices ``new_p`` (vertex key -> N) changed:
        the plan of the rescaled job, in the same flavour."""
        doc = json.loads(json.dumps(self.source_doc))
        for node in doc["nodes"]:
            for key, n in new_p.items():
                v = self.vertices[key]
                if str(node["id"]).lower() == key or (v.node_ids and node["id"] in v.node_ids):
                    node["parallelism"] = n
        return doc

    def edges(self) -> list[Edge]:
        return [e for v in self.vertices.values() for e in v.inputs]


def load_plan(path: str | Path, uids: dict[str, str] | None = None) -> Topology:
    """Read a plan of either flavour; ``uids`` (operator name -> uid) are what the plan cannot show."""
    try:
        doc = json.loads(Path(path).read_text())
    except FileNotFoundError:
        raise PlanError(f"{path}: no such plan file") from None
    except (OSError, ValueError) as exc:
        raise PlanError(f"{path}: not a readable JSON plan ({exc})") from None
    topology = parse_plan(doc, str(path))
    topology.uids = dict(uids or {})
    return topology


PlanRef = str | Path | Topology


def as_topology(plan: PlanRef | None) -> Topology | None:
    """A plan given as a path (loaded here) or already as a ``Topology``."""
    if plan is None or isinstance(plan, Topology):
        return plan
    return load_plan(plan)


def load_uid_map(path: str | Path) -> dict[str, str]:
    """A uid-map file: JSON ``{"operator name": "uid", …}``."""
    try:
        doc = json.loads(Path(path).read_text())
    except FileNotFoundError:
        raise PlanError(f"{path}: no such uid-map file") from None
    except (OSError, ValueError) as exc:
        raise PlanError(f"{path}: not a readable JSON uid map ({exc})") from None
    if not isinstance(doc, dict) or not all(isinstance(k, str) and isinstance(v, str) for k, v in doc.items()):
        raise PlanError(f'{path}: a uid map is a JSON object {{"operator name": "uid", …}}')
    return doc


def parse_plan(doc: Any, source: str = "plan") -> Topology:
    if isinstance(doc, dict) and isinstance(doc.get("plan"), dict):
        doc = doc["plan"]
    nodes = doc.get("nodes") if isinstance(doc, dict) else None
    if not isinstance(nodes, list) or not nodes:
        raise PlanError(f"{source}: no 'nodes' list: not a Flink plan")
    for i, node in enumerate(nodes):
        if not isinstance(node, dict):
            raise PlanError(
                f"{source}: malformed plan node (nodes[{i}] is {type(node).__name__} {node!r:.40}, not an object)"
            )
    try:
        if any("predecessors" in n or isinstance(n.get("id"), int) for n in nodes):
            topology = _stream_graph(nodes)
            topology.stream_graph = parse_stream_plan(doc)
            topology.source_doc = doc
            return topology
        topology = _job_graph(nodes)
        topology.job_graph = parse_job_graph_plan(doc)
        topology.source_doc = doc
        return topology
    except (KeyError, TypeError, ValueError) as exc:
        raise PlanError(f"{source}: malformed plan node ({exc})") from None


# 1.14+ write "A<br/>+- B<br/>"; 1.10-1.13 write "A -&gt; B".
_BR = re.compile(r"<br\s*/?>|\s+-&gt;\s+|\s+->\s+", re.I)


def _chain_names(description: str) -> list[str]:
    names = []
    for part in _BR.split(description or ""):
        name = part.replace("&nbsp;", " ").strip()
        name = re.sub(r"^([+:|]-?\s*)+", "", name).strip()  # branch markers "+- ", ":- ", "| "
        if name:
            names.append(name)
    return names


def _text(node: dict[str, Any], key: str) -> str:
    """A node's text field (absent: ""); anything but a string is a malformed plan."""
    value = node.get(key) or ""
    if not isinstance(value, str):
        raise ValueError(f"node {node.get('id')!r}: {key!r} is {type(value).__name__} {value!r}, not a string")
    return value


def _parallelism(node: dict[str, Any]) -> int:
    value = node["parallelism"]
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise ValueError(f"node {node.get('id')!r}: 'parallelism' is {value!r}, not a positive integer")
    return value


def _job_graph(nodes: list[dict[str, Any]]) -> Topology:
    vertices: dict[str, Vertex] = {}
    for n in nodes:
        vid = str(n["id"]).lower()
        names = _chain_names(_text(n, "description"))
        if not names:  # Flink describes every job vertex by its chain; without it no operator can be bound
            raise ValueError(f"node {n['id']!r}: 'description' names no operator")
        vertices[vid] = Vertex(vid, names, _parallelism(n), vertex_id=vid)
    for n in nodes:
        down = vertices[str(n["id"]).lower()]
        for i, inp in enumerate(n.get("inputs") or []):
            up = str(inp["id"]).lower()
            if up not in vertices:
                raise ValueError(f"input {up} of {down.key} is not a node")
            edge = Edge(up, down.key, int(inp.get("num", i)), str(inp.get("ship_strategy", "")))
            down.inputs.append(edge)
            vertices[up].outputs.append(edge)
    return Topology(vertices, "job-graph")


def _stream_graph(nodes: list[dict[str, Any]]) -> Topology:
    by_id = {n["id"]: n for n in nodes}
    succ: dict[Any, list[tuple[Any, str]]] = {n["id"]: [] for n in nodes}
    for n in nodes:
        for p in n.get("predecessors") or []:
            succ[p["id"]].append((n["id"], p.get("ship_strategy", "")))

    def chains_to_pred(node: dict[str, Any]) -> bool:
        preds = node.get("predecessors") or []
        if len(preds) != 1 or preds[0].get("ship_strategy") != "FORWARD":
            return False
        pred = by_id[preds[0]["id"]]
        return len(succ[pred["id"]]) == 1 and pred["parallelism"] == node["parallelism"]

    head_of: dict[Any, Any] = {}
    for n in nodes:  # plans list nodes in topological order
        head_of[n["id"]] = head_of[n["predecessors"][0]["id"]] if chains_to_pred(n) else n["id"]
    vertices: dict[str, Vertex] = {}
    for n in nodes:
        head = str(head_of[n["id"]])
        name = _text(n, "contents") or _text(n, "type") or str(n["id"])
        if head not in vertices:
            vertices[head] = Vertex(head, [], _parallelism(n))
        vertices[head].names.append(name)
        vertices[head].node_ids.append(int(n["id"]))
    for n in nodes:
        down = vertices[str(head_of[n["id"]])]
        if head_of[n["id"]] != n["id"]:
            continue
        ups: list[str] = []
        for p in n.get("predecessors") or []:
            up = str(head_of[p["id"]])
            if up not in ups:
                ups.append(up)
            edge = Edge(up, down.key, ups.index(up), str(p.get("ship_strategy", "")))
            down.inputs.append(edge)
            vertices[up].outputs.append(edge)
    return Topology(vertices, "stream-graph")


@dataclass
class BoundVertex:
    vertex: Vertex
    head: OperatorState | None
    tail: OperatorState | None
    problem: str | None = None
    members: list[OperatorState] = field(default_factory=list)  # chain operators bound exactly by id


def bind(topology: Topology, checkpoint: Checkpoint) -> dict[str, BoundVertex]:
    """Find each vertex's head (input-state holder) and tail (output-state holder) operator."""
    by_name: dict[str, list[OperatorState]] = {}
    for op in checkpoint.operators:
        if op.name:
            by_name.setdefault(op.name, []).append(op)

    def named(name: str) -> OperatorState | None:
        hits = by_name.get(name, [])
        return hits[0] if len(hits) == 1 else None

    exact = _exact_stream_binding(topology, checkpoint)

    def by_node(node_id: int) -> OperatorState | None:
        op_id = exact.get(node_id)
        return checkpoint.operator(op_id) if op_id else None

    bound: dict[str, BoundVertex] = {}
    heads: set[str] = set()
    for v in topology.vertices.values():
        head = checkpoint.operator(v.vertex_id) if v.vertex_id else None
        if head is None and v.node_ids:
            head = by_node(v.node_ids[0])
        if head is None and v.names:
            head = named(v.names[0])
        if head is not None:
            heads.add(head.operator_id)
        members = [op for op in (by_node(n) for n in v.node_ids) if op is not None]
        bound[v.key] = BoundVertex(v, head, None, members=members)
    claimed = set(heads)
    pending = []
    for b in bound.values():
        v = b.vertex
        if len(v.names) <= 1 and b.head is not None:
            b.tail = b.head
        elif v.node_ids and by_node(v.node_ids[-1]) is not None:
            b.tail = by_node(v.node_ids[-1])
        elif v.names and named(v.names[-1]) is not None:
            b.tail = named(v.names[-1])
        else:
            pending.append(b)
        if b.tail is not None:
            claimed.add(b.tail.operator_id)
    # Without names: the tail is the one unclaimed operator of the vertex's parallelism that holds
    # output channel state (only tails ever do).
    for b in pending:
        if not b.vertex.outputs:
            continue
        cands = [
            o
            for o in checkpoint.operators
            if o.operator_id not in claimed
            and o.parallelism == b.vertex.parallelism
            and any(s.result_subpartition_state for s in o.subtasks)
        ]
        if len(cands) == 1:
            b.tail = cands[0]
            claimed.add(cands[0].operator_id)
        elif len(cands) > 1:
            b.problem = (
                f"cannot tell which operator of chain {b.vertex.label()!r} holds its output state "
                f"({len(cands)} candidates; metadata before V5 stores no operator names)"
            )
    for b in bound.values():
        # A job-graph vertex id names the head operator exactly; if the checkpoint lacks it, the head
        # had no state at all (V2/V3 omit stateless operators), so its input state is simply empty.
        # Likewise when Flink's own rule gives the head's id (stream-graph plans) and the checkpoint lacks it.
        known_head = bool(b.vertex.node_ids) and b.vertex.node_ids[0] in exact
        if b.head is None and b.problem is None and b.vertex.vertex_id is None and not known_head:
            b.problem = f"no operator in the checkpoint matches vertex {b.vertex.label()!r}"
    return bound


def operator_binding(topology: Topology, checkpoint: Checkpoint) -> operator_ids.Binding | None:
    """How each operator of the plan binds to the checkpoint (method, id, certainty)."""
    plan: StreamGraph | JobGraphPlan | None = topology.stream_graph or topology.job_graph
    if plan is None:
        return None
    stored = {o.operator_id: (o.name, o.uid) for o in checkpoint.operators if o.name or o.uid}
    return operator_ids.bind(
        plan,
        [o.operator_id for o in checkpoint.operators],
        stored=stored or None,
        uid_overrides=topology.uids or None,
        format_version=checkpoint.format_version,
        checkpoint_parallelism={o.operator_id: o.parallelism for o in checkpoint.operators},
    )


def exact_chains(topology: Topology, checkpoint: Checkpoint) -> dict[str, list[str]]:
    """Vertex key -> the operator id of every chain member, head first, for the vertices whose every
    member is bound exactly (Flink's own id, or stored by Flink). An id may be absent from the
    checkpoint: Flink counts such an operator as running with empty state."""
    binding = operator_binding(topology, checkpoint)
    if binding is None:
        return {}
    by_node: dict[int, str] = {}
    by_position: dict[tuple[str, int], str] = {}
    for b in binding.operators:
        if not b.exact or b.operator_id is None:
            continue
        if b.node_id is not None:
            by_node[b.node_id] = b.operator_id
        if b.vertex_id is not None and b.position is not None:
            by_position[(b.vertex_id, b.position)] = b.operator_id
    chains: dict[str, list[str]] = {}
    for key, v in topology.vertices.items():
        if v.node_ids:
            ids = [by_node.get(n) for n in v.node_ids]
        elif v.vertex_id is not None:
            ids = [by_position.get((v.vertex_id, i)) for i in range(len(v.names))]
        else:
            continue
        if ids and all(i is not None for i in ids):
            chains[key] = [i for i in ids if i is not None]
    return chains


def _exact_stream_binding(topology: Topology, checkpoint: Checkpoint) -> dict[int, str]:
    """Stream node id -> operator id, only where the binding is exact (Flink's own id); the id may be
    absent from old metadata, which leaves stateless operators out."""
    if topology.stream_graph is None:
        return {}
    binding = operator_binding(topology, checkpoint)
    if binding is None:
        return {}
    return {
        b.node_id: b.operator_id
        for b in binding.operators
        if b.exact and b.node_id is not None and b.operator_id is not None
    }
