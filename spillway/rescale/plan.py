"""Plan an offline rescale: which vertices change parallelism, and for every edge touching one of them
the rule that sends each in-flight record of an old logical channel to its new channel.

Pure Python, no Spark: the plan is a list of small, picklable descriptors (``SourceChannel`` and
``EdgePlan``) that a backend (``spillway.rescale.spark_job`` or ``spillway.rescale.execute``) executes with
``spillway.rescale.router``. Every new logical channel is written entirely as input state of the new
downstream subtask, so Flink restores it at the new parallelism with nothing left to filter (docs/format/rescaling.md).
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass, field

from spillway.errors import Message, Named, SpillwayError, UsageError
from spillway.flink.operator_ids import Binding, uid_hash
from spillway.flink.partitioners import Partitioner
from spillway.formats.channel_file import LENGTH_SIZE
from spillway.inspect.channels import ChannelKey, LogicalChannel, channel_key, logical_channels
from spillway.inspect.topology import BoundVertex, Edge, JobBinding, Topology, Vertex, bind_job
from spillway.model.checkpoint import ByteStreamHandle, ChannelHandle, CheckpointMetadata, OperatorState, is_file_backed
from spillway.rescale.rescale_options import DEFAULT_BUFFER_SIZE, check_buffers
from spillway.storage import remote_copies
from spillway.storage.locate import FileResolver

HASH, BALANCED, KEEP, GLOBAL, BROADCAST, CUSTOM = "hash", "balanced", "keep", "global", "broadcast", "custom"


class RescaleRefused(SpillwayError):
    """The rescale cannot be done offline as asked; the message says why and what to do instead."""


@dataclass(frozen=True)
class PartRef:
    """Where one part (input or output side) of an old logical channel lives, readable on any worker."""

    path: str | None  # local file (None: inline bytes)
    base: int  # segment start inside a shared physical file
    size: int
    offsets: tuple[int, ...]  # chunk length fields, relative to base
    data: bytes | None = None  # inline delegate
    side: str = "input"  # "input" (the downstream's input state) or "output" (the upstream's output state)


@dataclass(frozen=True)
class SourceChannel:
    sid: int  # global replay order of old channels: new channels concatenate their sources by sid
    edge: int
    up: int  # old upstream subtask
    down: int  # old downstream subtask
    parts: tuple[PartRef, ...]
    payload_bytes: int
    label: str
    # (exclusive payload-byte limit, new downstream subtask) segments for byte-balanced edges
    segments: tuple[tuple[int, int], ...] = ()
    # new (up, down) channels on which this source's watermarks/status may be kept: it is their only source
    watermark_targets: frozenset[tuple[int, int]] = frozenset()


@dataclass(frozen=True)
class EdgePlan:
    index: int
    label: str
    strategy: str  # Flink ship strategy as in the plan
    rule: str  # HASH, BALANCED, KEEP, GLOBAL, BROADCAST, CUSTOM
    gate: int
    partition: int  # index of the edge among the upstream vertex's outputs
    old_up_p: int
    new_up_p: int
    old_down_p: int
    new_down_p: int
    max_parallelism: int  # of the downstream head (key groups)
    down_head: str  # operator id that receives the new input state
    up_tail: str | None  # operator id whose output state for this edge is dropped (moved into input state)
    key: str | None = None  # built-in extractor spec (spillway.formats.values)
    key_fn: str | None = None  # module:function

    def new_up(self, old_up: int) -> int:
        # Records of one old upstream subtask stay together, in order, on one new upstream channel.
        return old_up % self.new_up_p


@dataclass
class VertexPlan:
    key: str
    label: str
    old_p: int
    new_p: int
    operators: list[OperatorState]
    head: OperatorState | None
    tail: OperatorState | None

    @property
    def rescaled(self) -> bool:
        return self.old_p != self.new_p


@dataclass
class LostChannel:
    """An old logical channel left out of the rescale (``force=True`` on a damaged source): its in-flight
    records are not in the output, so the restored job never sees them."""

    channel: str
    edge: str
    upstream_subtask: int
    downstream_subtask: int
    stated_bytes: int  # payload as its handles state it (the bytes themselves are not trusted)
    reasons: list[str]  # the validate errors that make it untrustworthy
    records: int | None = None  # its records, where validate framed every byte of it cleanly; None: unknown


@dataclass
class RescalePlan:
    vertices: dict[str, VertexPlan]
    edges: list[EdgePlan]
    sources: list[SourceChannel]
    buffer_size: int
    notes: list[str] = field(default_factory=list)
    lost: list[LostChannel] = field(default_factory=list)
    lost_keys: set[ChannelKey] = field(default_factory=set)  # the handles of the lost channels
    #: The plan with the chains the binding found (its vertex keys are ``vertices``' keys).
    view: Topology | None = None
    #: Operator id -> the plan's name, for operators the checkpoint stores by id only (``JobBinding.names``).
    plan_names: Mapping[str, str] = field(default_factory=dict)

    def rescaled(self) -> list[VertexPlan]:
        return [v for v in self.vertices.values() if v.rescaled]


# --------------------------------------------------------------------------------------------------
# resolving what the user named


def resolve_vertex(topology: Topology, bound: dict[str, BoundVertex], name: str) -> str:
    """A vertex by job-vertex id, or by uid (also through Flink's uid hash) or name of any operator in its chain."""
    from spillway.inspect.plan_names import vertex_nodes

    hits: list[str] = []
    hashed = uid_hash(name)  # a uid names its operator by Flink's hash on every release
    for key, b in bound.items():
        v = b.vertex
        ops = [o for o in (b.head, b.tail, *b.members) if o is not None]
        ids = {v.key, v.vertex_id or ""} | {o.operator_id for o in ops}
        uids = {o.uid for o in ops if o.uid}
        names = set(v.names) | {o.name for o in ops if o.name}
        if name in ids or name in uids or name in names or hashed in ids:
            hits.append(key)
    by_name = vertex_nodes(topology, name)  # any name the plan shows (Kind[N], a description, NAME#NODE)
    if by_name is not None:
        hits = sorted(set(hits) | (by_name & set(bound)))
    if len(hits) == 1:
        return hits[0]
    known = ", ".join(sorted(b.vertex.label() for b in bound.values()))
    if not hits:  # a mistaken argument, as an unknown --operator is for repair: exit 2
        raise UsageError(
            f"no vertex {name!r} in the plan (vertex id, operator uid or name, NAME#NODE); vertices: {known}"
        )
    raise UsageError(f"{name!r} names {len(hits)} vertices; use a vertex id or NAME#NODE")


def _chain_operators(cp: CheckpointMetadata, b: BoundVertex) -> list[OperatorState]:
    """The vertex's operators in the checkpoint, as the one binding has them."""
    ops: dict[str, OperatorState] = {o.operator_id: o for o in b.members}
    for o in (b.head, b.tail):
        if o is not None:
            ops[o.operator_id] = o
    return list(ops.values())


def _who_could(binding: Binding | None, ids: list[str]) -> str:
    """Which plan operators the binding leaves each of ``ids`` to (its candidates), for the refusal."""
    if binding is None:
        return ""
    could = sorted({b.name for b in binding.operators if any(i in b.candidates for i in ids)})
    if not could:
        return ": no plan operator's id, as Flink computes it, matches them"
    return ": the checkpoint's evidence fits more than one way, with " + ", ".join(repr(n) for n in could)


# --------------------------------------------------------------------------------------------------
# building the plan


def build_plan(
    cp: CheckpointMetadata,
    topology: Topology,
    resolver: FileResolver,
    parallelism: dict[str, int],
    keys: dict[str, str] | None = None,
    key_fns: dict[str, str] | None = None,
    buffer_size: int = DEFAULT_BUFFER_SIZE,
    damaged: dict[ChannelKey, list[str]] | None = None,
    counted: dict[tuple[ChannelKey, ...], int] | None = None,
    job: JobBinding | None = None,
) -> RescalePlan:
    """``parallelism``/``keys``/``key_fns`` map user vertex names (id, uid or name) to values.
    ``damaged``: channel handles that cannot be trusted (``force=True``), with why; every old logical
    channel to be moved that touches one is left out and listed in ``RescalePlan.lost``, with its records
    where ``counted`` (validate's ``Report.counted``: records of each logical channel framed cleanly) has them.
    ``job``: ``topology`` bound to ``cp``, when the caller holds it."""
    check_buffers(buffer_size, 0, 0)
    job = job or bind_job(topology, cp)
    bound, names = job.vertices, job.names
    view = job.view or topology  # the plan with the chains the binding found: its vertices are bound's keys
    new_p = {resolve_vertex(view, bound, k): n for k, n in parallelism.items()}
    key_of = {resolve_vertex(view, bound, k): s for k, s in (keys or {}).items()}
    fn_of = {resolve_vertex(view, bound, k): s for k, s in (key_fns or {}).items()}

    vertices: dict[str, VertexPlan] = {}
    claimed: dict[str, str] = {}
    for key, b in bound.items():
        ops = _chain_operators(cp, b)
        for o in ops:
            claimed[o.operator_id] = key
        old = b.vertex.parallelism
        vp = VertexPlan(key, b.vertex.label(), old, new_p.get(key, old), ops, b.head, b.tail)
        for o in ops:
            if o.parallelism != old:
                raise RescaleRefused(
                    f"operator {o.label(names)} has parallelism {o.parallelism} in the checkpoint but the plan "
                    f"gives its vertex {vp.label!r} parallelism {old}: the plan does not describe this checkpoint"
                )
        vertices[key] = vp

    for vp in vertices.values():
        if not vp.rescaled:
            continue
        if vp.new_p < 1:
            raise RescaleRefused(f"{vp.label}: parallelism must be at least 1, not {vp.new_p}")
        for o in vp.operators:
            if vp.new_p > o.max_parallelism:
                raise RescaleRefused(
                    f"{vp.label}: new parallelism {vp.new_p} exceeds operator {o.label(names)}'s max parallelism "
                    f"{o.max_parallelism} (it is fixed by the key groups of the checkpoint)"
                )
            finished = [s.index for s in o.subtasks if s.finished]
            if finished and not o.fully_finished:
                raise RescaleRefused(
                    f"{vp.label}: operator {o.label(names)} is partially finished (subtasks {finished}); "
                    "rescale it in Flink or clear the flags first (spillway repair clear-finished)"
                )
    unplaced = [
        o.label(names)
        for o in cp.operators
        if o.operator_id not in claimed and (any(s.has_state() for s in o.subtasks) or o.coordinator_state)
    ]
    rescaled_keys = {k for k, v in vertices.items() if v.rescaled}
    if unplaced and rescaled_keys:
        raise RescaleRefused(
            f"cannot tell which vertex operator(s) {', '.join(unplaced)} belong to"
            + _who_could(job.operators, [o.operator_id for o in cp.operators if o.label(names) in unplaced])
            + Message(
                ". Give the uid of one of them (",
                Named("uids", pair=("NAME", "UID")),
                " or ",
                Named("uid_map", placeholder="FILE"),
                "), or pass the job-graph plan (REST /jobs/<job-id>/plan)",
            )
        )

    _refuse_an_open_output_order(view, bound, rescaled_keys)
    cmap = logical_channels(view, bound, cp, plan_names=names)
    edges: list[EdgePlan] = []
    edge_index: dict[int, EdgePlan] = {}
    notes: list[str] = []
    for e in view.edges():
        up, down = vertices[e.upstream], vertices[e.downstream]
        if not (up.rescaled or down.rescaled):
            continue
        ep = _edge_plan(len(edges), e, up, down, bound, key_of.get(down.key), fn_of.get(down.key))
        edges.append(ep)
        edge_index[id(e)] = ep

    sources: list[SourceChannel] = []
    lost: list[LostChannel] = []
    lost_keys: set[ChannelKey] = set()
    carrying: set[int] = set()
    for lc in cmap.channels:
        carrier = edge_index.get(id(lc.edge)) if lc.edge is not None else None
        if carrier is None:
            continue
        payload = sum(p.handle.state_size - LENGTH_SIZE * len(p.handle.offsets) for p in lc.parts)
        part_keys = [channel_key(p.operator, p.handle) for p in lc.parts]
        reasons = [r for k in part_keys for r in (damaged or {}).get(k, [])]
        if reasons:
            lost.append(
                LostChannel(
                    lc.label(),
                    carrier.label,
                    lc.upstream_subtask,
                    lc.downstream_subtask,
                    payload,
                    list(dict.fromkeys(reasons)),
                    (counted or {}).get(tuple(part_keys)),
                )
            )
            lost_keys.update(part_keys)
            continue
        parts = tuple(_part_ref(resolver, p.handle, lc) for p in lc.parts)
        if payload > 0:
            carrying.add(carrier.index)
        sources.append(
            SourceChannel(
                len(sources), carrier.index, lc.upstream_subtask, lc.downstream_subtask, parts, payload, lc.label()
            )
        )
    if cmap.skipped and edges:
        for s in cmap.skipped:
            notes.append(s)
    for ep in edges:
        if ep.index not in carrying:
            continue
        # A missing extractor is a missing argument (exit 2), not a refusal: the rescale can be done.
        if ep.rule == HASH and not (ep.key or ep.key_fn):
            raise UsageError(
                Message(
                    f"edge {ep.label} is a keyBy (HASH) edge with records in flight and its downstream is rescaled: "
                    "give ",
                    Named("keys", pair=("VERTEX", "EXTRACTOR")),
                    " (e.g. long, string, tuple:0:long, row(long,string):1) or ",
                    Named("key_fns", pair=("VERTEX", "module:function")),
                    " for the downstream vertex, so each record's key group can be computed",
                )
            )
        if ep.rule == CUSTOM and not ep.key_fn:
            raise UsageError(
                Message(
                    f"edge {ep.label} uses a custom partitioner with records in flight: give ",
                    Named("key_fns", pair=("VERTEX", "module:function(payload, parallelism) -> target subtask")),
                )
            )
        if Partitioner.of(ep.strategy).is_pointwise:
            raise RescaleRefused(f"edge {ep.label} is pointwise ({ep.strategy}) yet carries channel state")
        if ep.down_head == NO_HEAD:
            raise RescaleRefused(
                f"edge {ep.label} carries records that move into its downstream head's input state, and that head "
                "holds no state in this checkpoint, so its operator id is not there to write them to"
            )
    sources = _with_segments_and_watermarks(sources, edges)
    return RescalePlan(vertices, edges, sources, buffer_size, notes, lost, lost_keys, view, dict(names))


def _edge_plan(
    index: int,
    e: Edge,
    up: VertexPlan,
    down: VertexPlan,
    bound: dict[str, BoundVertex],
    key: str | None,
    key_fn: str | None,
) -> EdgePlan:
    kind = e.partitioner
    label = f"{up.label} -> {down.label} ({e.ship_strategy})"
    if kind.is_pointwise:
        if kind.is_forward and up.new_p != down.new_p:
            raise RescaleRefused(
                f"edge {label}: a FORWARD edge needs equal parallelism on both sides, got {up.new_p} -> {down.new_p}; "
                "rescale both vertices together"
            )
        rule = KEEP
    elif kind is Partitioner.HASH:
        rule = HASH if down.rescaled else KEEP
    elif kind in (Partitioner.REBALANCE, Partitioner.SHUFFLE):
        rule = BALANCED if down.rescaled else KEEP
    elif kind is Partitioner.GLOBAL:
        rule = GLOBAL
    elif kind is Partitioner.BROADCAST:
        rule = BROADCAST
    elif kind is Partitioner.CUSTOM:
        rule = CUSTOM if down.rescaled else KEEP
    else:
        raise RescaleRefused(f"edge {label}: ship strategy {e.ship_strategy!r} is not supported by rescale")
    head = bound[down.key].head
    if head is None and not (bound[down.key].known and bound[down.key].known[0]):
        raise RescaleRefused(
            f"vertex {down.label}: which checkpoint operator is its head {bound[down.key].vertex.names[0]!r} is not "
            "known (the checkpoint's evidence fits more than one); give its uid (--uid NAME=UID), or pass the "
            "job-graph plan"
        )
    # A head known to hold no state (left out of this checkpoint, or indistinct among stateless operators): no
    # channel state is on its side; an edge into it is planned, and refused below only if records must move
    # into its input state (NO_HEAD).
    max_parallelism = head.max_parallelism if head is not None else _vertex_max_parallelism(bound[down.key])
    tail = bound[up.key].tail
    partition = up_outputs_index(bound[up.key].vertex, e)
    return EdgePlan(
        index,
        label,
        e.ship_strategy,
        rule,
        e.gate,
        partition,
        up.old_p,
        up.new_p,
        down.old_p,
        down.new_p,
        max_parallelism,
        head.operator_id if head is not None else NO_HEAD,
        tail.operator_id if tail is not None else None,
        key,
        key_fn,
    )


#: ``EdgePlan.down_head`` of a vertex whose head holds no state in the checkpoint (its id is not there).
NO_HEAD = ""


def _vertex_max_parallelism(b: BoundVertex) -> int:
    """Max parallelism of a vertex whose head is not in the checkpoint: its operators' in the checkpoint share it
    (one per vertex); 0 when none is there (then no key group is ever computed for it)."""
    return next((o.max_parallelism for o in b.members), 0)


def _refuse_an_open_output_order(topology: Topology, bound: dict[str, BoundVertex], rescaled: set[str]) -> None:
    """Output channel state is stored per result partition; a job-graph plan does not say which of a vertex's
    outputs is which partition (nor a stream-graph plan, next to a Sink V2 writer). Moving that state to the wrong
    consumer would corrupt it, so a rescale that touches such a vertex's outputs is refused unless the stored
    state allows one order only."""
    from spillway.inspect.output_order import candidate_orders, known_order

    for key, b in bound.items():
        v = b.vertex
        if known_order(topology, v) or not ({key} | {e.downstream for e in v.outputs}) & rescaled:
            continue
        if len(candidate_orders(topology, b)) > 1 and any(
            s.result_subpartition_state for s in (b.tail.subtasks if b.tail is not None else [])
        ):
            raise RescaleRefused(
                f"vertex {v.label()!r}: the plan does not give the order of its {len(v.outputs)} outputs, and its "
                "output channel state is stored by that order; pass the stream-graph plan (env.getExecutionPlan()) "
                "or the job's jar (--job) instead"
            )


def up_outputs_index(v: Vertex, e: Edge) -> int:
    return v.outputs.index(e) if e in v.outputs else 0


def _part_ref(resolver: FileResolver, h: ChannelHandle, lc: LogicalChannel) -> PartRef:
    d = h.delegate
    if isinstance(d, ByteStreamHandle):
        return PartRef(None, 0, len(d.data), tuple(h.offsets), d.data, h.side)
    if is_file_backed(d):
        resolved = resolver.resolve(d)
        if resolved is None or resolved.local_text is None:
            raise RescaleRefused(f"channel state of {lc.label()} is not readable: {d if d.relative else d.file_name}")
        remote_copies.ensure_local(resolved.local_text)  # a remote checkpoint's file: fetched for the workers
        # Absolute: Spark workers do not share the driver's working directory.
        return PartRef(os.path.abspath(resolved.local_text), d.start_pos, d.state_size, tuple(h.offsets), side=h.side)
    raise RescaleRefused(f"channel state of {lc.label()} has an unsupported delegate {type(d).__name__}")


def _with_segments_and_watermarks(sources: list[SourceChannel], edges: list[EdgePlan]) -> list[SourceChannel]:
    """Byte-balanced segments for BALANCED edges; then which targets each source alone feeds."""
    by_edge: dict[int, list[SourceChannel]] = {}
    for s in sources:
        by_edge.setdefault(s.edge, []).append(s)
    segments: dict[int, tuple[tuple[int, int], ...]] = {}
    for ep in edges:
        if ep.rule != BALANCED:
            continue
        chans = by_edge.get(ep.index, [])
        total = sum(s.payload_bytes for s in chans)
        share = max(1, -(-total // ep.new_down_p))
        filled, target = 0, 0
        for s in chans:
            segs: list[tuple[int, int]] = []
            pos = 0
            while pos < s.payload_bytes:
                room = share - filled
                take = min(room, s.payload_bytes - pos)
                pos += take
                filled += take
                segs.append((pos, target))
                if filled >= share and target < ep.new_down_p - 1:
                    target, filled = target + 1, 0
            segments[s.sid] = tuple(segs) or ((0, target),)
    possible: dict[int, set[tuple[int, int]]] = {}
    for s in sources:
        possible[s.sid] = _possible_targets(s, edges[s.edge], segments.get(s.sid, ()))
    feeders: dict[tuple[int, tuple[int, int]], int] = {}
    for s in sources:
        for t in possible[s.sid]:
            feeders[(s.edge, t)] = feeders.get((s.edge, t), 0) + 1
    out = []
    for s in sources:
        alone = frozenset(t for t in possible[s.sid] if feeders[(s.edge, t)] == 1)
        out.append(
            SourceChannel(
                s.sid, s.edge, s.up, s.down, s.parts, s.payload_bytes, s.label, segments.get(s.sid, ()), alone
            )
        )
    return out


def _possible_targets(s: SourceChannel, ep: EdgePlan, segs: tuple[tuple[int, int], ...]) -> set[tuple[int, int]]:
    u = ep.new_up(s.up)
    if ep.rule in (HASH, CUSTOM):
        return {(u, d) for d in range(ep.new_down_p)}
    if ep.rule == BALANCED:
        return {(u, d) for _, d in segs}
    if ep.rule == GLOBAL:
        return {(u, 0)}
    if ep.rule == BROADCAST:
        return {(u, d) for d in range(ep.new_down_p)}
    return {(u, s.down)}
