"""Job topology from Flink's plan JSON, bound to the operators of a checkpoint (docs/format/job-plans.md).

Two plan flavours exist. The job-graph plan (REST ``/jobs/:id/plan``, possibly wrapped in
``{"plan": …}``) has one node per job vertex (= chain) whose ``id`` is the head operator's id and
whose ``inputs[].num`` is the input gate. The stream-graph plan (``env.getExecutionPlan()``) has one
node per operator and no chaining; chains are inferred the way Flink chains by default (forward
edge, same parallelism, the downstream's only input; an operator may chain several outputs). Its
operators are bound to checkpoint operators by the ids Flink itself computes
(``spillway.flink.operator_ids``: the uid hash, or the deterministic stream-graph hash), so binding is
exact on every release where Flink's rule gives an id present in the checkpoint; on V5+ metadata also
by the stored names. See docs/format/operator-ids.md.
"""

from __future__ import annotations

import copy
import dataclasses
import json
import re
from collections.abc import Mapping
from dataclasses import dataclass, field, fields
from pathlib import Path
from types import MappingProxyType
from typing import Any

from spillway.errors import UsageError
from spillway.flink import operator_ids
from spillway.flink.stream_graph import (
    JobGraphPlan,
    JobVertexPlan,
    StreamGraph,
    parse_job_graph_plan,
    parse_stream_plan,
)
from spillway.model.checkpoint import (
    Checkpoint,
    InputChannelHandle,
    OperatorState,
    ResultSubpartitionHandle,
    channel_handles,
)

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
    # The plan is of the job that wrote the checkpoint (validate, analyze, rescale, repair). False for a new job's
    # plan (preflight): then only Flink's own ids bind, and its chains are its own, not the checkpoint's evidence.
    describes_checkpoint: bool = True

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

    def unbound_copy(self) -> Topology:
        """The plan as read, for another checkpoint: a binding rewrites a plan's chains from its checkpoint
        (see :func:`bind_job`), so each checkpoint binds a copy of its own — made here, not read again."""
        fresh = copy.deepcopy({f.name: getattr(self, f.name) for f in fields(self)})  # not the bound checkpoints
        if self.source_doc is not None and self.stream_graph is not None and self.describes_checkpoint:
            fresh["vertices"] = _stream_graph(list(self.source_doc["nodes"])).vertices  # chains as first read
        return Topology(**fresh)

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
    return {name: uid for name, uid in doc.items() if uid}  # the template's entries left empty say nothing


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


def chained_plan(doc: dict[str, Any], chained: set[tuple[int, int]], source: str = "plan") -> Topology:
    """A stream-graph plan whose chains are known rather than derived (the job's own graph, from its jar):
    ``chained`` holds the (source, target) node id pairs Flink chained."""
    topology = parse_plan(doc, source)
    topology.vertices = _stream_graph(list(doc["nodes"]), chained).vertices
    return topology


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


def _stream_graph(nodes: list[dict[str, Any]], chained: set[tuple[int, int]] | None = None) -> Topology:
    """Vertices of a stream-graph plan: chains by Flink's default rule as far as a plan shows it (a node with one
    input, FORWARD, from a node of equal parallelism — however many outputs that node has, as Flink's chaining
    does not count them), or exactly the edges ``chained`` (node id pairs) when the checkpoint's evidence says
    which edges Flink chained."""
    by_id = {n["id"]: n for n in nodes}

    def chains_to_pred(node: dict[str, Any]) -> bool:
        preds = node.get("predecessors") or []
        if chained is not None:
            return len(preds) == 1 and (int(preds[0]["id"]), int(node["id"])) in chained
        if len(preds) != 1 or preds[0].get("ship_strategy") != "FORWARD":
            return False
        return bool(by_id[preds[0]["id"]]["parallelism"] == node["parallelism"])

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
    """One vertex (chain) of the plan and its operators as the checkpoint has them."""

    vertex: Vertex
    head: OperatorState | None  # holds the vertex's input channel state
    tail: OperatorState | None  # holds its output channel state
    problem: str | None = None
    members: list[OperatorState] = field(default_factory=list)  # chain operators bound exactly, in the checkpoint
    #: Every chain member, head first: its checkpoint operator, or None when it is certainly not in the checkpoint
    #: (no state: Flink counts it running); only meaningful when ``complete``.
    operators: list[OperatorState | None] = field(default_factory=list)
    #: Per member: bound (or certainly absent) — False where ``operators`` holds None only for want of a binding.
    known: list[bool] = field(default_factory=list)
    #: Every member is bound (or certainly absent); whether the chain's edges are known is ``uncertain_edges``.
    complete: bool = False
    #: Edges inside this chain that Flink may have cut (the plan does not show it and no evidence decides).
    uncertain_edges: list[str] = field(default_factory=list)


#: Edge states of a stream-graph plan as the evidence leaves them.
CHAINED, CUT, UNKNOWN = "chained", "cut", "unknown"


@dataclass(frozen=True)
class JobBinding:
    """The one binding of a plan to a checkpoint: every operator's id with its evidence, the chains, and each
    vertex's operators. A value (:func:`bind_job`): binding the same plan and checkpoint again gives an equal one."""

    operators: operator_ids.Binding | None
    vertices: dict[str, BoundVertex]
    #: (source node, target node) -> CHAINED / CUT / UNKNOWN for edges Flink's defaults would chain.
    edges: dict[tuple[int, int], str] = field(default_factory=dict)
    #: Why each edge got its state.
    edge_reasons: dict[tuple[int, int], str] = field(default_factory=dict)
    #: What the checkpoint says of each operator id (the evidence the binding used).
    facts: dict[str, operator_ids.OperatorFacts] = field(default_factory=dict)
    #: The plan with the chains this binding found (a copy when they differ from the plan's as read); the keys of
    #: ``vertices`` are its vertex keys.
    view: Topology | None = None
    #: Operator id -> the plan's name, for the operators bound exactly that the checkpoint stores no name for
    #: (before metadata V5): the names to show (see ``OperatorState.label``).
    names: Mapping[str, str] = field(default_factory=dict)

    def uncertain_edges(self) -> list[tuple[int, int]]:
        return [e for e, state in self.edges.items() if state == UNKNOWN]


def operator_facts(checkpoint: Checkpoint) -> list[operator_ids.OperatorFacts]:
    """What binding can use of each checkpoint operator."""
    out = []
    for o in checkpoint.operators:
        gates: set[int] = set()
        parts: set[int] = set()
        max_ch = max_sub = -1
        keyed = reader = False
        for s in o.subtasks:
            keyed = keyed or bool(s.managed_keyed_state or s.raw_keyed_state)
            for ops in (s.managed_operator_state, s.raw_operator_state):
                if ops is not None and any(e.name == "SourceReaderState" for e in ops.states):
                    reader = True
            for h in channel_handles(s.input_channel_state):
                if isinstance(h, InputChannelHandle):
                    gates.add(h.gate_index)
                    max_ch = max(max_ch, h.input_channel_index)
            for r in channel_handles(s.result_subpartition_state):
                if isinstance(r, ResultSubpartitionHandle):
                    parts.add(r.partition_index)
                    max_sub = max(max_sub, r.subpartition_index)
        finished = tuple(s.finished for s in sorted(o.subtasks, key=lambda s: s.index))
        stateless = (
            not any(s.has_state() for s in o.subtasks) and o.coordinator_state is None and not any(finished)
        ) and not o.fully_finished
        out.append(
            operator_ids.OperatorFacts(
                o.operator_id,
                o.parallelism,
                keyed=keyed,
                source_reader=reader,
                input_gates=tuple(sorted(gates)),
                max_input_channel=max_ch,
                output_partitions=tuple(sorted(parts)),
                max_subpartition=max_sub,
                stateless=stateless,
                holds_state=any(s.has_state() for s in o.subtasks) or o.coordinator_state is not None,
                finished=(True,) * o.parallelism if o.fully_finished else finished,
                name=o.name,
                uid=o.uid,
            )
        )
    return out


def stores_stateless(checkpoint: Checkpoint) -> bool:
    """Whether this checkpoint keeps operators without state (1.11, 1.13+ do; 1.10 and 1.12 leave them out).
    Only certain when one is seen: a job whose every operator has state looks the same either way."""
    return any(not any(s.has_state() for s in o.subtasks) and o.coordinator_state is None for o in checkpoint.operators)


def bind_job(topology: Topology, checkpoint: Checkpoint) -> JobBinding:
    """The binding of ``topology`` to ``checkpoint``: a value; compute it once per command and pass it on
    (``spillway.api.Checkpoint.job_binding`` does).

    Neither argument is changed. For a stream-graph plan the chains are re-derived from the evidence (see
    :func:`_chain_edges`); :attr:`JobBinding.view` is the plan with those chains, and its vertices are the keys of
    :attr:`JobBinding.vertices` — use it, not ``topology.vertices``, wherever the job's chains matter."""
    facts = operator_facts(checkpoint)
    binding = _operator_binding(topology, checkpoint, facts if topology.describes_checkpoint else None)
    edges: dict[tuple[int, int], str] = {}
    reasons: dict[tuple[int, int], str] = {}
    view = topology
    if (
        topology.describes_checkpoint
        and topology.stream_graph is not None
        and binding is not None
        and topology.source_doc is not None
    ):
        edges, reasons = _chain_edges(topology.stream_graph, binding, facts, checkpoint.format_version)
        chained = {e for e, state in edges.items() if state != CUT}
        view = dataclasses.replace(
            topology, vertices=_stream_graph(list(topology.source_doc["nodes"]), chained).vertices
        )
    vertices = _bound_vertices(view, checkpoint, binding, edges)
    facts_by_id = {f.operator_id: f for f in facts}
    names = MappingProxyType(plan_names_of(binding, checkpoint))
    return JobBinding(binding, vertices, edges, reasons, facts_by_id, view, names)


def plan_names_of(binding: operator_ids.Binding | None, checkpoint: Checkpoint) -> dict[str, str]:
    """Operator id -> the plan's name, for the checkpoint's operators the binding binds exactly that store no name
    (before metadata V5): the names to show."""
    out: dict[str, str] = {}
    for b in binding.operators if binding else ():
        op = checkpoint.operator(b.operator_id) if b.exact and b.operator_id else None
        if op is not None and op.name is None:
            out[op.operator_id] = b.name
    return out


def _operator_binding(
    topology: Topology, checkpoint: Checkpoint, facts: list[operator_ids.OperatorFacts] | None
) -> operator_ids.Binding | None:
    plan: StreamGraph | JobGraphPlan | None = topology.stream_graph or topology.job_graph
    if plan is None:
        return None
    stored = {o.operator_id: (o.name, o.uid) for o in checkpoint.operators if o.name or o.uid}
    return operator_ids.bind(
        plan,
        [o.operator_id for o in checkpoint.operators],
        stored=stored or None,
        uid_overrides=_uids_by_node(topology) or None,
        format_version=checkpoint.format_version,
        checkpoint_parallelism={o.operator_id: o.parallelism for o in checkpoint.operators},
        facts=facts,
        absent_allowed=not stores_stateless(checkpoint),
    )


def _uids_by_node(topology: Topology) -> dict[str, str]:
    """The user's uids keyed by the plan node each names (``#7``) where it names exactly one — by any name the
    plan shows for it, or ``NAME#REF`` — else by the name as given."""
    from spillway.inspect.plan_names import plan_nodes, resolve_node

    nodes = plan_nodes(topology) if topology.uids else []
    out: dict[str, str] = {}
    for key, uid in topology.uids.items():
        hits = resolve_node(topology, key, nodes)
        out[hits[0].ref if len(hits) == 1 else key] = uid
    return out


def _chain_edges(
    graph: StreamGraph, binding: operator_ids.Binding, facts: list[operator_ids.OperatorFacts], format_version: int
) -> tuple[dict[tuple[int, int], str], dict[tuple[int, int], str]]:
    """Which edges Flink chained, from evidence. An edge the release's rules would not chain is cut (what a plan
    hides — chaining strategies, slot sharing groups, disabled chaining — can only prevent chaining). Of the
    others, an edge is cut when its target holds input channel state (only chain heads do), when its source holds
    output channel state (a chain's tail has no chained output), when the two operators' subtasks finished
    differently (a task finishes with all its operators), or when the source's generated id says it has no
    chained output; it is chained when the generated id counts as many chained outputs as are left; otherwise
    unknown (Flink's default, chained, is assumed for the vertex, and the doubt is reported)."""
    from spillway.flink.chaining import edge_chainable, hasher_rules, release_for_format_version

    rules = hasher_rules(release_for_format_version(format_version))
    by_id = {f.operator_id: f for f in facts}
    fact_of: dict[int, operator_ids.OperatorFacts] = {}
    index_of: dict[int, int] = {}
    for i, b in enumerate(binding.operators):
        if b.node_id is None:
            continue
        index_of[b.node_id] = i
        if b.exact and b.operator_id in by_id:
            fact_of[b.node_id] = by_id[b.operator_id]
    states: dict[tuple[int, int], str] = {}
    why: dict[tuple[int, int], str] = {}
    for e in graph.edges:
        key = (e.source, e.target)
        if not edge_chainable(graph, e, rules):
            continue
        fu, fv = fact_of.get(e.source), fact_of.get(e.target)
        if fv is not None and fv.input_gates:
            states[key], why[key] = CUT, "the downstream operator holds input channel state"
        elif fu is not None and fu.output_partitions:
            states[key], why[key] = CUT, "the upstream operator holds output channel state"
        elif fu is not None and fv is not None and _flags(fu) != _flags(fv) and (any(fu.finished) or any(fv.finished)):
            states[key], why[key] = CUT, "their subtasks finished differently"
        elif binding.chained_outputs.get(index_of.get(e.source, -1)) == 0:
            states[key], why[key] = CUT, "the upstream operator's generated id counts no chained output"
        else:
            states[key] = UNKNOWN
    for nid, i in index_of.items():
        c = binding.chained_outputs.get(i)
        if c is None:
            continue
        mine = [k for k in states if k[0] == nid]
        cut = [k for k in mine if states[k] == CUT]
        open_ = [k for k in mine if states[k] == UNKNOWN]
        if open_ and len(mine) - len(cut) == c:
            for k in open_:
                states[k], why[k] = CHAINED, "the upstream operator's generated id counts this many chained outputs"
    for k, state in states.items():
        if state == UNKNOWN:
            why[k] = "the plan does not show whether Flink chained it, and nothing in the checkpoint decides"
    return states, why


def _flags(f: operator_ids.OperatorFacts) -> tuple[bool, ...]:
    """Per-subtask finished flags; an operator with no subtask state recorded has running subtasks."""
    return f.finished or (False,) * f.parallelism


def _tail_position(v: JobVertexPlan) -> int:
    """``JobVertex#getOperatorIDs()[0]``: the first operator without chained outputs, depth first."""
    has_kids = {p for p in v.parents if p is not None}
    for i in range(len(v.operators)):
        if i not in has_kids:
            return i
    return len(v.operators) - 1


def bind_variant(
    topology: Topology,
    checkpoint: Checkpoint,
    binding: operator_ids.Binding,
    chained: set[tuple[int, int]] | None = None,
) -> tuple[Topology, dict[str, BoundVertex], dict[tuple[int, int], str]]:
    """The plan's vertices under ``binding`` (e.g. one assignment of the operators a binding leaves open): the
    chains its evidence gives (for a stream-graph plan of the checkpoint's job) or exactly the edges ``chained``
    ((source, target) node pairs), each vertex's operators and the chain edges' states. The topology returned is a
    copy when its chains differ; ``topology`` is not changed."""
    edges: dict[tuple[int, int], str] = {}
    view = topology
    if topology.stream_graph is not None and topology.source_doc is not None:
        if chained is None and topology.describes_checkpoint:
            facts = operator_facts(checkpoint)
            edges, _ = _chain_edges(topology.stream_graph, binding, facts, checkpoint.format_version)
            chained = {e for e, state in edges.items() if state != CUT}
        if chained is not None:
            rebuilt = _stream_graph(list(topology.source_doc["nodes"]), chained)
            view = dataclasses.replace(topology, vertices=rebuilt.vertices)
    return view, _bound_vertices(view, checkpoint, binding, edges), edges


def _bound_vertices(
    topology: Topology,
    checkpoint: Checkpoint,
    binding: operator_ids.Binding | None,
    edges: dict[tuple[int, int], str],
) -> dict[str, BoundVertex]:
    by_node: dict[int, operator_ids.BoundOperator] = {}
    by_position: dict[tuple[str, int], operator_ids.BoundOperator] = {}
    for b in binding.operators if binding else ():
        if b.node_id is not None:
            by_node[b.node_id] = b
        if b.vertex_id is not None and b.position is not None:
            by_position[(b.vertex_id, b.position)] = b

    def resolved(b: operator_ids.BoundOperator | None) -> tuple[bool, OperatorState | None]:
        """(known, operator): known when bound exactly (in the checkpoint or not) or certainly absent."""
        if b is None:
            return False, None
        if b.exact and b.operator_id is not None:
            return True, checkpoint.operator(b.operator_id)
        if b.operator_id is not None and not b.in_checkpoint and b.method in operator_ids.EXACT_METHODS:
            return True, None  # Flink's id for it is not in the checkpoint: no state
        if b.method == operator_ids.DEDUCED and b.operator_id is None:
            return True, None
        if b.method == operator_ids.INDISTINCT:
            return True, None  # no state whichever it is (its finished flags: see stand_in)
        return False, None

    def stand_in(b: operator_ids.BoundOperator | None, op: OperatorState | None) -> OperatorState | None:
        """For the finished-state classes only: an indistinct operator's candidates finished alike, so any of
        them shows its flags (never used as its identity: head, tail and members stay unknown)."""
        if op is None and b is not None and b.method == operator_ids.INDISTINCT:
            first = next((h for h in b.candidates if h != "-"), None)
            return checkpoint.operator(first) if first else None
        return op

    by_name: dict[str, list[OperatorState]] = {}
    for op in checkpoint.operators:
        if op.name:
            by_name.setdefault(op.name, []).append(op)
    out: dict[str, BoundVertex] = {}
    for key, v in topology.vertices.items():
        if v.node_ids:
            members_b = [by_node.get(n) for n in v.node_ids]
            tail_i = len(v.node_ids) - 1
            if topology.stream_graph is not None:
                from spillway.flink.chaining import vertex_operator_order

                chained = {k for k, state in edges.items() if state != CUT}
                order = vertex_operator_order(topology.stream_graph, v.node_ids[0], "2.0", chained_edges=chained)
                tail_i = v.node_ids.index(order[0]) if order and order[0] in v.node_ids else tail_i
            uncertain = [
                f"{topology.stream_graph.node(a).name} -> {topology.stream_graph.node(b).name}"
                for (a, b), state in edges.items()
                if state == UNKNOWN and a in v.node_ids and b in v.node_ids and topology.stream_graph is not None
            ]
        elif v.vertex_id is not None and topology.job_graph is not None:
            jv = topology.job_graph.vertex(v.vertex_id)
            members_b = [by_position.get((v.vertex_id, i)) for i in range(len(v.names))]
            tail_i = _tail_position(jv)
            uncertain = []
        else:  # a plan without Flink's ids: names only (stored from V5 on)
            members_b = [None] * len(v.names)
            tail_i = len(v.names) - 1
            uncertain = []
        found = [resolved(b) for b in members_b]
        ops: list[OperatorState | None] = [o for _, o in found]
        if not any(k for k, _ in found) and binding is None:
            for i, name in enumerate(v.names):
                hits = by_name.get(name, [])
                if len(hits) == 1:
                    found[i] = (True, hits[0])
                    ops[i] = hits[0]
        head = ops[0] if ops else None
        if head is None and v.vertex_id is not None:
            head = checkpoint.operator(v.vertex_id)
        tail = ops[tail_i] if ops else None
        members = [o for o in ops if o is not None]
        ops = [stand_in(b, o) for b, o in zip(members_b, ops, strict=False)] if members_b else ops
        complete = all(k for k, _ in found)
        problem = None
        if not found or not (found[0][0] or _side_empty(members_b[0], checkpoint, "input")):
            problem = f"the head of {v.label()!r} is not bound to a checkpoint operator"
        elif not (found[tail_i][0] or _side_empty(members_b[tail_i], checkpoint, "output")):
            problem = f"the end of chain {v.label()!r} is not bound to a checkpoint operator"
        out[key] = BoundVertex(
            v,
            head,
            tail,
            problem,
            members=members,
            operators=ops,
            known=[k for k, _ in found],
            complete=complete,
            uncertain_edges=uncertain,
        )
    return out


def _side_empty(b: operator_ids.BoundOperator | None, checkpoint: Checkpoint, side: str) -> bool:
    """Whichever id an unbound operator is, it holds no channel state on ``side``: then its channels' halves on
    that side are empty under every consistent assignment, and nothing is lost by not knowing which it is."""
    if b is None or not b.candidates:
        return False
    for h in b.candidates:
        op = checkpoint.operator(h) if h != "-" else None
        if op is None:
            continue
        if any(s.input_channel_state if side == "input" else s.result_subpartition_state for s in op.subtasks):
            return False
    return True


def bind(topology: Topology, checkpoint: Checkpoint) -> dict[str, BoundVertex]:
    """Each vertex's head (input-state holder), tail (output-state holder) and operators (:func:`bind_job`)."""
    return bind_job(topology, checkpoint).vertices


def operator_binding(topology: Topology, checkpoint: Checkpoint) -> operator_ids.Binding | None:
    """How each operator of the plan binds to the checkpoint (method, id, evidence) (:func:`bind_job`)."""
    return bind_job(topology, checkpoint).operators
