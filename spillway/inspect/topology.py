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

import dataclasses
import json
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from pathlib import Path
from types import MappingProxyType
from typing import Any

from spillway.flink import operator_ids
from spillway.flink.outputs import transitive_out_edges
from spillway.flink.partitioners import Partitioner
from spillway.flink.stream_graph import (
    JobGraphPlan,
    JobVertexPlan,
    PlanError,
    StreamEdge,
    StreamGraph,
    is_stream_plan,
    parse_job_graph_plan,
    parse_stream_plan,
)
from spillway.inspect.plan_refs import nodes_of, resolve
from spillway.model.checkpoint import (
    CheckpointMetadata,
    InputChannelHandle,
    OperatorState,
    ResultSubpartitionHandle,
    channel_handles,
)

__all__ = ["Edge", "PlanError", "Topology", "Vertex", "load_plan", "parse_plan"]


@dataclass(frozen=True)
class Edge:
    upstream: str  # vertex key
    downstream: str
    gate: int
    #: The partitioner as the plan prints it; :attr:`partitioner` is what it means.
    ship_strategy: str

    @property
    def partitioner(self) -> Partitioner:
        return Partitioner.of(self.ship_strategy)

    @property
    def all_to_all(self) -> bool:
        return self.partitioner.is_all_to_all


@dataclass(frozen=True)
class Vertex:
    key: str
    names: tuple[str, ...]  # chain operators, head first
    parallelism: int
    vertex_id: str | None = None  # job-vertex id = head operator id (job-graph plans only)
    node_ids: tuple[int, ...] = ()  # stream-graph node ids, head first (stream-graph plans)
    inputs: tuple[Edge, ...] = ()
    outputs: tuple[Edge, ...] = ()
    # The max parallelism the job sets for this vertex (None: it sets none); only meaningful when the topology's
    # ``max_parallelism_known`` says the source shows it (the job's own graph, from its jar; a plan JSON does not).
    max_parallelism: int | None = None

    def label(self) -> str:
        return " -> ".join(self.names) or self.key


@dataclass(frozen=True)
class Topology:
    """A plan's vertices (chains) and the edges between them, with the parsed plan they come from. Built whole
    by :func:`parse_plan`; the ``with_*`` methods return new values."""

    vertices: Mapping[str, Vertex]
    flavour: str  # "job-graph" or "stream-graph"
    stream_graph: StreamGraph | None = None  # the parsed stream-graph plan, for Flink's operator ids
    job_graph: JobGraphPlan | None = None  # the parsed job-graph plan, likewise
    # operator name -> uid, given by the user (--uid NAME=UID, --uid-map): a plan does not show uids
    uids: Mapping[str, str] = field(default_factory=dict)
    source_doc: Any = None  # the plan JSON as read (unwrapped), to write a changed copy of it
    # The plan is of the job that wrote the checkpoint (validate, analyze, rescale, repair). False for a new job's
    # plan (preflight): then only Flink's own ids bind, and its chains are its own, not the checkpoint's evidence.
    describes_checkpoint: bool = True
    # The chains are Flink's own (the job's graph, from its jar): the checkpoint's evidence is not asked for them.
    chains_from_job: bool = False
    # Whether each vertex's ``max_parallelism`` is the job's own setting (the job's graph) rather than unknown.
    max_parallelism_known: bool = False

    def with_parallelism(self, new_p: Mapping[str, int]) -> dict[str, Any]:
        """The plan JSON as read, with the parallelism of vertices ``new_p`` (vertex key -> N) changed:
        the plan of the rescaled job, in the same flavour."""
        doc: dict[str, Any] = json.loads(json.dumps(self.source_doc))
        for node in doc["nodes"]:
            for key, n in new_p.items():
                v = self.vertices[key]
                if str(node["id"]).lower() == key or (v.node_ids and node["id"] in v.node_ids):
                    node["parallelism"] = n
        return doc

    def rescaled(self, new_p: Mapping[str, int], source: str = "rescaled plan") -> Topology:
        """The plan of this job with vertices ``new_p`` (vertex key -> N) at a new parallelism: same flavour,
        same uids, read afresh."""
        return parse_plan(self.with_parallelism(new_p), source, uids=self.uids)

    def with_uids(self, uids: Mapping[str, str]) -> Topology:
        """The same plan with these uids (operator name -> uid) given."""
        return self._replaced(uids=dict(uids))

    def as_new_job(self) -> Topology:
        """The same plan taken as a new job's (preflight): it is not evidence of the checkpoint's chains."""
        return self._replaced(describes_checkpoint=False)

    def unbound_copy(self) -> Topology:
        """The plan as read, for another checkpoint: a binding rewrites a plan's chains from its checkpoint
        (see :func:`bind_job`), so each checkpoint binds a copy of its own — made here, not read again."""
        if self.stream_graph is not None and self.describes_checkpoint and not self.chains_from_job:
            return self._replaced(vertices=stream_topology(self.stream_graph).vertices)  # chains as first read
        return self._replaced()

    def _replaced(self, **changes: Any) -> Topology:
        """A new topology (no binding of this one carried over) with ``changes``."""
        fields: dict[str, Any] = {"uids": dict(self.uids), "vertices": dict(self.vertices)}
        return replace(self, **(fields | changes))

    def edges(self) -> list[Edge]:
        return [e for v in self.vertices.values() for e in v.inputs]


def load_plan(path: str | Path, uids: Mapping[str, str] | None = None) -> Topology:
    """Read a plan of either flavour; ``uids`` (operator name -> uid) are what the plan cannot show."""
    try:
        doc = json.loads(Path(path).read_text())
    except FileNotFoundError:
        raise PlanError(f"{path}: no such plan file") from None
    except (OSError, ValueError) as exc:
        raise PlanError(f"{path}: not a readable JSON plan ({exc})") from None
    return parse_plan(doc, str(path), uids=uids)


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


def parse_plan(doc: Any, source: str = "plan", *, uids: Mapping[str, str] | None = None) -> Topology:
    """A plan of either flavour (the JSON object, bare or in REST's ``{"plan": …}``), parsed once into its model
    (:mod:`spillway.flink.stream_graph`) and the topology built from that model. A malformed plan is a
    :class:`PlanError` naming ``source``, the node and the field."""
    if isinstance(doc, dict) and "nodes" not in doc and isinstance(doc.get("plan"), dict):
        doc = doc["plan"]
    try:
        if is_stream_plan(doc):
            topology = stream_topology(parse_stream_plan(doc))
        else:
            topology = job_topology(parse_job_graph_plan(doc))
    except PlanError as exc:
        raise PlanError(f"{source}: {exc}") from None
    return replace(topology, uids=dict(uids or {}), source_doc=doc)


def chained_plan(
    doc: dict[str, Any], chained: set[tuple[int, int]], source: str = "plan", graph: StreamGraph | None = None
) -> Topology:
    """A stream-graph plan whose chains are known rather than derived (the job's own graph, from its jar):
    ``chained`` holds the (source, target) node id pairs Flink chained; ``graph``, when given, is Flink's own
    stream graph (its edges in Flink's order), which then stands for the one parsed from ``doc``."""
    topology = parse_plan(doc, source)
    graph = graph if graph is not None else topology.stream_graph
    assert graph is not None  # a stream-graph plan
    return replace(
        topology, stream_graph=graph, vertices=stream_topology(graph, chained).vertices, chains_from_job=True
    )


def job_topology(plan: JobGraphPlan) -> Topology:
    """The vertices of a job-graph plan: Flink's own chains, keyed by job-vertex id."""
    inputs: dict[str, list[Edge]] = {v.id: [] for v in plan.vertices}
    outputs: dict[str, list[Edge]] = {v.id: [] for v in plan.vertices}
    for v in plan.vertices:
        for inp in v.inputs:
            edge = Edge(inp.source, v.id, inp.num, inp.ship_strategy)
            inputs[v.id].append(edge)
            outputs[inp.source].append(edge)
    vertices = {
        v.id: Vertex(
            v.id, v.operators, v.parallelism, vertex_id=v.id, inputs=tuple(inputs[v.id]), outputs=tuple(outputs[v.id])
        )
        for v in plan.vertices
    }
    return Topology(vertices, "job-graph", job_graph=plan)


def _topological(graph: StreamGraph) -> list[int]:
    """Node ids, every node after its inputs (a plan lists sinks last, not always after all their inputs)."""
    order: list[int] = []
    state: dict[int, int] = {}  # 1 = on the path, 2 = placed
    for start in (n.id for n in graph.nodes):
        stack: list[tuple[int, bool]] = [(start, False)]
        while stack:
            nid, done = stack.pop()
            if done:
                state[nid] = 2
                order.append(nid)
                continue
            if state.get(nid) == 2:
                continue
            if state.get(nid) == 1:
                raise PlanError(f"malformed plan node (node {nid}: its predecessors lead back to it)")
            state[nid] = 1
            stack.append((nid, True))
            stack.extend((e.source, False) for e in reversed(graph.in_edges(nid)))  # placed ones are skipped
    return order


def stream_topology(graph: StreamGraph, chained: set[tuple[int, int]] | None = None) -> Topology:
    """Vertices of a stream-graph plan: chains by Flink's default rule as far as a plan shows it (a node with one
    input, FORWARD, from a node of equal parallelism — however many outputs that node has, as Flink's chaining
    does not count them), or exactly the edges ``chained`` (node id pairs) when the checkpoint's evidence says
    which edges Flink chained. A vertex is keyed by its head's node id and names its operators by description."""

    def chains_to_pred(nid: int) -> bool:
        ins = graph.in_edges(nid)
        if len(ins) != 1:
            return False
        if chained is not None:
            return (ins[0].source, nid) in chained
        return ins[0].kind.is_forward and graph.node(ins[0].source).parallelism == graph.node(nid).parallelism

    head_of: dict[int, int] = {}
    members: dict[int, list[int]] = {}
    for nid in _topological(graph):  # so a chain's members come head first
        head_of[nid] = head_of[graph.in_edges(nid)[0].source] if chains_to_pred(nid) else nid
        members.setdefault(head_of[nid], []).append(nid)
    inputs: dict[int, list[Edge]] = {h: [] for h in members}
    ups: dict[int, list[int]] = {h: [] for h in members}  # a vertex's upstream vertices, by gate
    made: dict[int, Edge] = {}  # id() of a stream edge leaving a chain -> its edge between vertices
    # Input gates in the order Flink connects chains (what jobgraph.json's inputs[].num shows) ...
    for e in _connect_order(graph, head_of):
        up, down = head_of[e.source], e.target
        if up not in ups[down]:
            ups[down].append(up)
        edge = Edge(str(up), str(down), ups[down].index(up), e.partitioner)
        inputs[down].append(edge)
        made[id(e)] = edge
    # ... and a vertex's outputs in the order Flink numbers its result partitions (not the order of its consumers).
    outputs = {
        h: [made[id(e)] for e in transitive_out_edges(graph, h, lambda e: head_of[e.target] != e.target)]
        for h in members
    }
    vertices = {}
    for head, ids in members.items():
        names = tuple(graph.node(i).description or graph.node(i).name or str(i) for i in ids)
        vertices[str(head)] = Vertex(
            str(head),
            names,
            graph.node(head).parallelism,
            node_ids=tuple(ids),
            inputs=tuple(inputs[head]),
            outputs=tuple(outputs[head]),
        )
    return Topology(vertices, "stream-graph", stream_graph=graph)


def _connect_order(graph: StreamGraph, head_of: Mapping[int, int]) -> list[StreamEdge]:
    """The edges between chains in the order Flink's ``StreamingJobGraphGenerator`` connects them, which numbers a
    vertex's input gates and its outputs: chains are built depth first from the sources (by id); a chain follows
    its chained outputs before its own network outputs, builds each downstream chain as it meets it, and connects
    its own out-edges after all that. (Matches every fixture's job-graph plan; the order of a node's predecessors
    does not: a Sink V2 writer fed by two branches.)"""
    order: list[StreamEdge] = []
    built: set[int] = set()

    def out_edges(nid: int) -> list[StreamEdge]:
        outs = graph.out_edges(nid)
        chained = [e for e in outs if head_of[e.target] != e.target]
        return [edge for e in chained for edge in out_edges(e.target)] + [e for e in outs if e not in chained]

    def build(head: int) -> None:
        if head in built:
            return
        built.add(head)
        own = out_edges(head)
        for e in own:
            build(e.target)
        order.extend(own)

    try:
        for nid in (*graph.source_ids(), *sorted(head_of)):
            build(head_of[nid])
    except RecursionError:
        raise PlanError("malformed plan node (the plan is nested too deeply to follow)") from None
    return order


def _stream_graph(nodes: list[dict[str, Any]], chained: set[tuple[int, int]] | None = None) -> Topology:
    """:func:`stream_topology` of a plan's raw nodes (kept for the binding, which rebuilds chains from them)."""
    return stream_topology(parse_stream_plan({"nodes": nodes}), chained)


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


def operator_facts(checkpoint: CheckpointMetadata) -> list[operator_ids.OperatorFacts]:
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


def stores_stateless(checkpoint: CheckpointMetadata) -> bool:
    """Whether this checkpoint keeps operators without state (1.11, 1.13+ do; 1.10 and 1.12 leave them out).
    Only certain when one is seen: a job whose every operator has state looks the same either way."""
    return any(not any(s.has_state() for s in o.subtasks) and o.coordinator_state is None for o in checkpoint.operators)


def bind_job(topology: Topology, checkpoint: CheckpointMetadata) -> JobBinding:
    """The binding of ``topology`` to ``checkpoint``: a value; compute it once per command and pass it on
    (``spillway.api.CheckpointMetadata.job_binding`` does).

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
        and not topology.chains_from_job
        and topology.stream_graph is not None
        and binding is not None
        and topology.source_doc is not None
    ):
        edges, reasons = _chain_edges(topology.stream_graph, binding, facts, checkpoint.format_version)
        chained = {e for e, state in edges.items() if state != CUT}
        view = dataclasses.replace(topology, vertices=stream_topology(topology.stream_graph, chained).vertices)
    vertices = _bound_vertices(view, checkpoint, binding, edges)
    facts_by_id = {f.operator_id: f for f in facts}
    names = MappingProxyType(plan_names_of(binding, checkpoint))
    return JobBinding(binding, vertices, edges, reasons, facts_by_id, view, names)


def plan_names_of(binding: operator_ids.Binding | None, checkpoint: CheckpointMetadata) -> dict[str, str]:
    """Operator id -> the plan's name, for the checkpoint's operators the binding binds exactly that store no name
    (before metadata V5): the names to show."""
    out: dict[str, str] = {}
    for b in binding.operators if binding else ():
        op = checkpoint.operator(b.operator_id) if b.exact and b.operator_id else None
        if op is not None and op.name is None:
            out[op.operator_id] = b.name
    return out


def _operator_binding(
    topology: Topology, checkpoint: CheckpointMetadata, facts: list[operator_ids.OperatorFacts] | None
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
    nodes = nodes_of(topology.stream_graph, topology.job_graph, topology.vertices) if topology.uids else []
    out: dict[str, str] = {}
    for key, uid in topology.uids.items():
        hits = resolve(nodes, key)
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
    checkpoint: CheckpointMetadata,
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
        if chained is None and topology.describes_checkpoint and not topology.chains_from_job:
            facts = operator_facts(checkpoint)
            edges, _ = _chain_edges(topology.stream_graph, binding, facts, checkpoint.format_version)
            chained = {e for e, state in edges.items() if state != CUT}
        if chained is not None:
            view = dataclasses.replace(topology, vertices=stream_topology(topology.stream_graph, chained).vertices)
    return view, _bound_vertices(view, checkpoint, binding, edges), edges


def _bound_vertices(
    topology: Topology,
    checkpoint: CheckpointMetadata,
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
                if topology.chains_from_job:  # Flink's own chains: every edge inside the vertex is chained
                    inside = set(v.node_ids)
                    chained = {
                        (e.source, e.target)
                        for e in topology.stream_graph.edges
                        if e.source in inside and e.target in inside
                    }
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


def _side_empty(b: operator_ids.BoundOperator | None, checkpoint: CheckpointMetadata, side: str) -> bool:
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


def bind(topology: Topology, checkpoint: CheckpointMetadata) -> dict[str, BoundVertex]:
    """Each vertex's head (input-state holder), tail (output-state holder) and operators (:func:`bind_job`)."""
    return bind_job(topology, checkpoint).vertices


def operator_binding(topology: Topology, checkpoint: CheckpointMetadata) -> operator_ids.Binding | None:
    """How each operator of the plan binds to the checkpoint (method, id, evidence) (:func:`bind_job`)."""
    return bind_job(topology, checkpoint).operators
