"""Will Flink restore this checkpoint into this job? Flink's restore-time checks, answered offline.

Each check is one Flink refuses a restore on (docs/format/restore-checks.md, per release line): state of an
operator the new job lacks (``Checkpoints.loadAndValidateCheckpoint``), max parallelism changed or below the new
parallelism (``Checkpoints`` / ``StateAssignmentOperation``), channel state of an exchange that is now chained or
pointwise and rescaled (``StateAssignmentOperation``, FLINK-38267), and the FLIP-147 finished-state rules
(``VertexFinishedStateChecker``, :mod:`spillway.inspect.finished`). Where the plan cannot tell which checkpoint
operator a plan operator is, the checks that depend on it answer "unknown", never "restorable".

Everything this module needs from the plan-to-checkpoint binding comes through :func:`place_operators`, the one
adapter over :mod:`spillway.inspect.topology` (so the binding can be replaced in one place).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from spillway.inspect import finished
from spillway.inspect.topology import Topology, operator_binding
from spillway.model.checkpoint import Checkpoint, OperatorState, channel_handles
from spillway.storage.load import LoadedCheckpoint

SCHEMA = "spillway.preflight/1"

# verdicts of one reason
OK = "ok"
REFUSED = "refused"
UNKNOWN = "unknown"
WARNING = "warning"  # Flink restores, but something named may go wrong afterwards (a known bug)
NOTE = "note"  # an assumption preflight made; says what would change the answer

UPPER_BOUND_MAX_PARALLELISM = 32768
POINTWISE_MAPPERS = {"FORWARD", "RESCALE", "BROADCAST"}  # UNSUPPORTED both ways (docs/format/rescaling.md)

# Flink's messages (the same text in 1.15.4, 1.20.3, 2.0.0 and 2.3.0; docs/format/restore-checks.md)
MSG_NOT_MAPPED = (
    "Failed to rollback to checkpoint/savepoint {path}. Cannot map checkpoint/savepoint state for operator {op} "
    "to the new program, because the operator is not available in the new program. If you want to allow to skip "
    "this, you can set the --allowNonRestoredState option on the CLI."
)
MSG_MAX_MISMATCH = (
    "Failed to rollback to checkpoint/savepoint {path}. Max parallelism mismatch between checkpoint/savepoint state "
    "and new program. Cannot map operator {op} with max parallelism {old} to new program with max parallelism {new}. "
    "This indicates that the program has been changed in a non-compatible way after the checkpoint/savepoint."
)
MSG_ABOVE_MAX = (
    "The state for task {vertex} can not be restored. The maximum parallelism ({old}) of the restored state is lower "
    "than the configured parallelism ({new}). Please reduce the parallelism of the task to be lower or equal to the "
    "maximum parallelism."
)
MSG_CHAINED = (
    "Cannot recover from unaligned checkpoint when topology changes, such that data exchanges with persisted data "
    "are now chained.\nThe following operators contain channel state: [{ops}]"
)
MSG_POINTWISE = (
    "Cannot rescale the given pointwise partitioner.\nDid you change the partitioner to forward or rescale?\n"
    "It may also help to add an explicit shuffle()."
)
MSG_PARALLELISM_ABOVE_CONFIGURED_MAX = (
    "Vertex {name}'s parallelism ({p}) is higher than the max parallelism ({m}). Please lower the parallelism or "
    "increase the max parallelism."
)


@dataclass
class Reason:
    check: str
    verdict: str
    message: str
    flink_message: str | None = None
    operator: str | None = None
    flink_issue: str | None = None

    def to_doc(self) -> dict[str, Any]:
        doc: dict[str, Any] = {"check": self.check, "verdict": self.verdict, "message": self.message}
        for key in ("flink_message", "operator", "flink_issue"):
            value = getattr(self, key)
            if value is not None:
                doc[key] = value
        return doc


@dataclass
class Settings:
    """What the plan does not show about the new job, as the user gives it."""

    allow_non_restored_state: bool = False
    # explicit max parallelism: job-wide (None key) and per vertex key; absent = not set in the job
    max_parallelism: dict[str | None, int] = field(default_factory=dict)
    flink_version: tuple[int, int, int] | None = None  # the release that restores
    checkpoint_path: str = "<checkpoint>"


@dataclass
class Result:
    reasons: list[Reason]
    vertices: list[dict[str, Any]]  # the new job's vertices and what of the checkpoint each gets

    @property
    def restorable(self) -> bool | None:
        verdicts = {r.verdict for r in self.reasons}
        if REFUSED in verdicts:
            return False
        return None if UNKNOWN in verdicts else True


# ------------------------------------------------------------------------------------------------- the adapter


@dataclass
class NewVertex:
    key: str
    label: str
    parallelism: int
    chain_length: int
    inputs: list[tuple[str, int, str]]  # (upstream vertex key, gate, ship strategy)
    outputs: list[tuple[str, int, str]]  # (downstream vertex key, output index, ship strategy)
    # chain positions without a chained successor; None: the plan does not show the chain's shape
    leaves: list[int] | None = None


@dataclass
class Placement:
    vertices: dict[str, NewVertex]
    where: dict[str, tuple[str, int]]  # checkpoint operator id -> (vertex key, position in chain, head = 0)
    unknown: list[str]  # plan operators whose Flink operator id is not known, each with why
    guessed: list[str]  # plan operators bound by a structural guess, not Flink's rule
    old_parallelism: dict[str, int] = field(default_factory=dict)  # vertex key -> its operators' parallelism


def place_operators(topology: Topology, checkpoint: Checkpoint) -> Placement:
    """Where each checkpoint operator sits in the new job, as far as Flink's own ids tell.

    The only use of the plan-to-checkpoint binding (:func:`spillway.inspect.topology.operator_binding`): a plan
    operator whose Flink id is computed (uid hash, generated hash, vertex id, stored name) is placed, or known
    to be absent from the checkpoint; any other is listed in ``unknown`` (or ``guessed``)."""
    vertices: dict[str, NewVertex] = {}
    node_vertex: dict[int, tuple[str, int]] = {}
    for key, v in topology.vertices.items():
        vertices[key] = NewVertex(
            key,
            v.label(),
            v.parallelism,
            max(len(v.names), len(v.node_ids), 1),
            [(e.upstream, e.gate, e.ship_strategy) for e in v.inputs],
            [(e.downstream, i, e.ship_strategy) for i, e in enumerate(v.outputs)],
        )
        for pos, node in enumerate(v.node_ids):
            node_vertex[node] = (key, pos)
        vertices[key].leaves = _chain_leaves(topology, key)
    where: dict[str, tuple[str, int]] = {}
    unknown: list[str] = []
    guessed: list[str] = []
    binding = operator_binding(topology, checkpoint)
    for b in binding.operators if binding is not None else ():
        if b.node_id is not None and b.node_id in node_vertex:
            spot: tuple[str, int] | None = node_vertex[b.node_id]
        elif b.vertex_id is not None and b.position is not None and b.vertex_id.lower() in vertices:
            spot = (b.vertex_id.lower(), b.position)
        else:
            spot = None
        if b.operator_id is None or spot is None:
            unknown.append(f"{b.name!r}: {b.reason}")
        elif b.method == "elimination":
            guessed.append(f"{b.name!r}: {b.reason}")
        elif b.in_checkpoint:
            where[b.operator_id] = spot
    if binding is None:
        unknown.append("the plan could not be bound to the checkpoint at all")
    old = {key: op.parallelism for op in checkpoint.operators for key, _ in [where.get(op.operator_id, ("", 0))] if key}
    return Placement(vertices, where, unknown, guessed, old)


def _chain_leaves(topology: Topology, key: str) -> list[int] | None:
    """Positions (head = 0, plan order) of the chain's operators that chain to nothing further."""
    v = topology.vertices[key]
    if topology.job_graph is not None and v.vertex_id is not None:
        try:
            parents = topology.job_graph.vertex(v.vertex_id).parents
        except (KeyError, LookupError, ValueError):
            return None
        return [i for i in range(len(parents)) if i not in set(parents)]
    if topology.stream_graph is not None and v.node_ids:
        inside = set(v.node_ids)
        feeding = {e.source for e in topology.stream_graph.edges if e.source in inside and e.target in inside}
        return [i for i, n in enumerate(v.node_ids) if n not in feeding]
    return None


# ------------------------------------------------------------------------------------------------- the checks


def default_max_parallelism(parallelism: int) -> int:
    """Flink's derived max parallelism (``KeyGroupRangeAssignment.computeDefaultMaxParallelism``): 1.5 x the
    parallelism rounded up to a power of two, at least 128, at most 32768."""
    n = parallelism + parallelism // 2
    power = 1
    while power < n:
        power *= 2
    return min(max(power, 128), UPPER_BOUND_MAX_PARALLELISM)


def has_state(op: OperatorState) -> bool:
    """Flink's ``OperatorSubtaskState.hasState`` on any subtask, or coordinator state."""
    return op.coordinator_state is not None or any(s.has_state() for s in op.subtasks)


def _channel_parts(op: OperatorState) -> tuple[dict[int, int], dict[int, int]]:
    """In-flight data of the operator: input gate -> highest channel index, output partition -> highest
    subpartition index, over the channel handles with at least one chunk (Flink's test for channel state)."""
    gates: dict[int, int] = {}
    partitions: dict[int, int] = {}
    for s in op.subtasks:
        for h in channel_handles(s.input_channel_state):
            if h.offsets:
                g, c = h.gate_index, h.input_channel_index  # type: ignore[union-attr]
                gates[g] = max(gates.get(g, 0), c)
        for h in channel_handles(s.result_subpartition_state):
            if h.offsets:
                p, c = h.partition_index, h.subpartition_index  # type: ignore[union-attr]
                partitions[p] = max(partitions.get(p, 0), c)
    return gates, partitions


def pointwise_channels(senders: int, receivers: int) -> tuple[int, int]:
    """(input channels of a receiving subtask, subpartitions of a sending subtask) at most, on a pointwise
    (FORWARD / RESCALE) exchange: each side connects to ceil(other / this) of the other side, at least one."""
    return max(1, -(-senders // receivers)), max(1, -(-receivers // senders))


def _mapper_unsupported(strategy: str) -> bool:
    s = strategy.upper()
    return "FORWARD" in s or s in ("RESCALE", "BROADCAST")


def flink_38267_fixed(version: tuple[int, int, int] | None) -> bool | None:
    """Whether the restoring release asks the channel-state mapper only of exchanges that hold channel state
    (FLINK-38267, backported to 1.20, 2.0, 2.1): None when not known."""
    if version is None:
        return None
    line, patch = version[:2], version[2]
    if line >= (2, 2):
        return True
    return {(1, 20): patch >= 3, (2, 0): patch >= 1, (2, 1): patch >= 1}.get(line, False)


def check(
    topology: Topology, checkpoint: Checkpoint, settings: Settings | None = None, loaded: LoadedCheckpoint | None = None
) -> Result:
    """``loaded`` (the same checkpoint with its files) lets the checks that depend on channel-state bytes read them
    (where a dropped operator's in-flight data cuts a record); without it they answer unknown."""
    settings = settings or Settings()
    place = place_operators(topology, checkpoint)
    cuts = _record_cuts(loaded) if loaded is not None else None
    reasons: list[Reason] = _binding(place)
    for name, found in (
        ("operator-mapping", _mapping(place, checkpoint, settings, cuts)),
        ("max-parallelism", _max_parallelism(place, checkpoint, settings)),
        ("channel-state", _channel_state(place, checkpoint, settings)),
        ("finished-state", _finished(topology, checkpoint)),
    ):
        reasons += found or [Reason(name, OK, PASSED[name])]
    if loaded is not None:
        reasons += _files(loaded, place, settings) or [Reason("files", OK, PASSED["files"])]
    reasons += _known_bugs(checkpoint, settings)
    return Result(reasons, _vertex_table(place, checkpoint))


PASSED = {
    "operator-mapping": "every operator of the checkpoint is in the new job",
    "max-parallelism": "every new parallelism fits the checkpoint's max parallelism",
    "channel-state": "channel state stays at chain ends; no rescaled exchange with it is pointwise",
    "finished-state": "no finished operators in the checkpoint (FLIP-147 rules do not apply)",
    "files": "every file the restored state needs exists, and its channel state is sound (spillway validate)",
}

# validate rules whose errors make Flink's read of the state fail for certain: the bytes are not there
UNREADABLE = {"file-exists", "file-size", "path-escape"}


def _binding(place: Placement) -> list[Reason]:
    out = [
        Reason("binding", NOTE, f"plan operator bound by a structural guess, not Flink's rule: {g}")
        for g in place.guessed
    ]
    out += [Reason("binding", NOTE, f"plan operator without a known Flink id: {u}") for u in place.unknown]
    return out


def _label(op: OperatorState) -> str:
    named = op.uid or op.name
    return f"{named} ({op.operator_id})" if named else op.operator_id


def _mapping(place: Placement, cp: Checkpoint, settings: Settings, cuts: dict[str, list[str]] | None) -> list[Reason]:
    """``Checkpoints.loadAndValidateCheckpoint``: every operator of the checkpoint must be in the new job, unless
    its state is empty or non-restored state is allowed."""
    out: list[Reason] = []
    uncertain = bool(place.unknown or place.guessed)
    for op in cp.operators:
        if op.operator_id in place.where:
            continue
        if not has_state(op):
            out.append(
                Reason(
                    "operator-mapping",
                    OK,
                    f"{_label(op)} is not in the new job but holds no state: Flink skips it",
                    operator=op.operator_id,
                )
            )
        elif uncertain:
            out.append(
                Reason(
                    "operator-mapping",
                    UNKNOWN,
                    f"{_label(op)} holds state and no plan operator is bound to it; some plan operators have no known "
                    "Flink id (see the binding notes), so it may be one of them. Give their uids (--uid NAME=UID) or "
                    "the job-graph plan to be sure",
                    operator=op.operator_id,
                )
            )
        elif settings.allow_non_restored_state:
            out.append(
                Reason(
                    "operator-mapping",
                    OK,
                    f"{_label(op)} is not in the new job: its state is dropped (--allow-non-restored-state)",
                    operator=op.operator_id,
                )
            )
            out += _dropped_channel_state(op, place, cp, cuts)
        else:
            out.append(
                Reason(
                    "operator-mapping",
                    REFUSED,
                    f"{_label(op)} holds state and is not in the new job (allow it with --allow-non-restored-state: "
                    "its state is then dropped)",
                    MSG_NOT_MAPPED.format(path=settings.checkpoint_path, op=op.operator_id),
                    operator=op.operator_id,
                )
            )
    return out


def _files(loaded: LoadedCheckpoint, place: Placement, settings: Settings) -> list[Reason]:
    """``spillway validate`` (without the old job's plan) on the state the new job restores: a missing or short
    file fails the task that reads it; other damage (framing, chunk chains) may or may not be read."""
    from spillway.inspect.validate import validate

    dropped = set()
    if settings.allow_non_restored_state:
        dropped = {o.label() for o in loaded.checkpoint.operators if o.operator_id not in place.where}
    out = []
    for f in validate(loaded).errors:
        holder = (f.operator or "").split("#", 1)[0]
        if holder and holder in dropped:
            continue  # state Flink skips
        where = ", ".join(str(x) for x in (f.operator, f.file, f.offset) if x is not None)
        certain = f.rule in UNREADABLE
        out.append(
            Reason(
                "files",
                REFUSED if certain else UNKNOWN,
                f"{f.rule}: {f.message}"
                + (f" ({where})" if where else "")
                + ("" if certain else ": Flink fails where it reads these bytes, if it does"),
                operator=f.operator,
            )
        )
    return out


def _record_cuts(loaded: LoadedCheckpoint) -> dict[str, list[str]]:
    """Operator id -> its input channels whose in-flight data ends inside a record (the rest of that record is
    the first thing in the upstream's output state of the same channel: docs/format/record-framing.md)."""
    from spillway.inspect.analyze import analyze

    cuts: dict[str, list[str]] = {}
    for c in analyze(loaded).channels:
        if c.junction_record is None:
            continue
        for key in c.part_keys:
            if key[1] == "input":
                cuts.setdefault(key[0], []).append(f"{c.label} ({c.junction_record['input_bytes']} bytes)")
    return cuts


def _dropped_channel_state(
    op: OperatorState, place: Placement, cp: Checkpoint, cuts: dict[str, list[str]] | None
) -> list[Reason]:
    """A dropped operator's input channel state goes, while its upstream's output state of the same exchange is
    restored into whatever consumes it now. Where a record is cut between the two, the new consumer reads the
    record's rest as if a record started there: Flink fails the task ("Corrupt stream, found tag: …") or misreads
    it. Where no record is cut, only the dropped records are lost."""
    gates, _ = _channel_parts(op)
    senders = [o for o in cp.operators if o.operator_id in place.where and _channel_parts(o)[1]]
    if not gates or not senders:
        return []
    restored = ", ".join(_label(o) for o in senders)
    if cuts is None:
        return [
            Reason(
                "dropped-channel-state",
                UNKNOWN,
                f"{_label(op)} is dropped with its input channel state while output channel state of {restored} is "
                "restored; whether a record is cut between the two needs the channel-state files read",
                operator=op.operator_id,
            )
        ]
    cut = cuts.get(op.operator_id, [])
    if cut:
        return [
            Reason(
                "dropped-channel-state",
                UNKNOWN,
                f"{_label(op)} is dropped with its input channel state, and its in-flight data ends inside a record "
                f"on {len(cut)} channel(s) ({'; '.join(cut[:4])}{'; …' if len(cut) > 4 else ''}): the rest of each "
                f"such record is in the restored output channel state of {restored} and reaches the new consumer as "
                'if a record started there. Flink then fails the task (seen: "Corrupt stream, found tag: -128") '
                "or misreads the bytes. Clear the in-flight data first (spillway repair strip-channel-state) to be "
                "sure",
                operator=op.operator_id,
            )
        ]
    return [
        Reason(
            "dropped-channel-state",
            WARNING,
            f"{_label(op)} is dropped with its input channel state: its records in flight are lost (no record is "
            f"cut between them and the restored output state of {restored})",
            operator=op.operator_id,
        )
    ]


def _vertex_id(place: Placement, v: NewVertex) -> str:
    """Flink's job-vertex id: its head operator's id (the plan's key for job-graph plans)."""
    heads = [op_id for op_id, (key, pos) in place.where.items() if key == v.key and pos == 0]
    return heads[0] if heads else v.key


def _configured_max(settings: Settings, vertex: NewVertex) -> int | None:
    return settings.max_parallelism.get(vertex.key, settings.max_parallelism.get(None))


def _max_parallelism(place: Placement, cp: Checkpoint, settings: Settings) -> list[Reason]:
    """``Checkpoints.loadAndValidateCheckpoint`` (a max parallelism set in the job must equal the checkpoint's)
    and ``StateAssignmentOperation`` (the new parallelism must not exceed the checkpoint's max parallelism)."""
    out: list[Reason] = []
    with_state: set[str] = set()
    for op in cp.operators:
        if op.operator_id in place.where and has_state(op):
            key = place.where[op.operator_id][0]
            with_state.add(key)
            # A stateless vertex next to channel state gets an (empty) assignment too, to filter what its
            # neighbour re-sends (seen on 2.0.0: Flink names the stateless "len -> sink" vertex).
            gates, partitions = _channel_parts(op)
            v = place.vertices[key]
            with_state |= {down for down, i, _ in v.outputs if i in partitions}
            with_state |= {up for up, g, _ in v.inputs if g in gates}
    for v in place.vertices.values():
        configured = _configured_max(settings, v)
        if configured is not None and v.parallelism > configured:
            out.append(
                Reason(
                    "parallelism",
                    REFUSED,
                    f"vertex {v.label}: parallelism {v.parallelism} above the max parallelism {configured} the job "
                    "sets (Flink rejects the job itself, before any restore)",
                    MSG_PARALLELISM_ABOVE_CONFIGURED_MAX.format(name=v.label, p=v.parallelism, m=configured),
                )
            )
    for op in cp.operators:
        spot = place.where.get(op.operator_id)
        if spot is None:
            continue
        v = place.vertices[spot[0]]
        configured = _configured_max(settings, v)
        if configured is not None and configured != op.max_parallelism:
            out.append(
                Reason(
                    "max-parallelism",
                    REFUSED,
                    f"{_label(op)}: the new job sets max parallelism {configured}, the checkpoint has "
                    f"{op.max_parallelism}; Flink adopts the checkpoint's only where the job sets none",
                    MSG_MAX_MISMATCH.format(
                        path=settings.checkpoint_path, op=op.operator_id, old=op.max_parallelism, new=configured
                    ),
                    operator=op.operator_id,
                )
            )
        elif op.max_parallelism < v.parallelism and v.key in with_state:
            out.append(
                Reason(
                    "max-parallelism",
                    REFUSED,
                    f"{_label(op)}: new parallelism {v.parallelism} of vertex {v.label} is above the checkpoint's max "
                    f"parallelism {op.max_parallelism} (the number of key groups)",
                    MSG_ABOVE_MAX.format(vertex=_vertex_id(place, v), old=op.max_parallelism, new=v.parallelism),
                    operator=op.operator_id,
                )
            )
    if not settings.max_parallelism:
        out.append(
            Reason(
                "max-parallelism",
                NOTE,
                "a plan does not show max parallelism: assumed the new job sets none (Flink then takes the "
                "checkpoint's). If the job sets one (setMaxParallelism, pipeline.max-parallelism), give it with "
                "--max-parallelism N (or VERTEX=N): a value other than the checkpoint's makes Flink refuse",
            )
        )
    return out


def _channel_state(place: Placement, cp: Checkpoint, settings: Settings) -> list[Reason]:
    """``StateAssignmentOperation``: channel state must stay at a chain's ends, and a rescaled exchange with it
    needs a partitioner Flink can map (not FORWARD, RESCALE or BROADCAST)."""
    out: list[Reason] = []
    chained: list[OperatorState] = []
    branching: list[OperatorState] = []
    fixed = flink_38267_fixed(settings.flink_version)
    for op in cp.operators:
        spot = place.where.get(op.operator_id)
        if spot is None:
            continue
        gates, partitions = _channel_parts(op)
        if not gates and not partitions:
            continue
        v = place.vertices[spot[0]]
        position = spot[1]
        if gates and position != 0:
            chained.append(op)
            continue
        if partitions:
            # Flink's output operator is the first leaf of the chain in depth-first order (its operator list is
            # built post-order): certain for a chain with one leaf; with several, the plan's order may not be
            # Flink's, so only a non-leaf is certainly wrong.
            leaves = v.leaves if v.leaves is not None else [v.chain_length - 1]
            if position not in leaves:
                chained.append(op)
                continue
            if len(leaves) > 1:
                branching.append(op)
        if op.parallelism == v.parallelism:
            out += _pointwise_channel_counts(op, place, v, gates, partitions)
            continue
        sides = []
        if gates:
            sides += [("input", g, s, g in gates) for _, g, s in v.inputs]
        if partitions:
            sides += [("output", i, s, i in partitions) for _, i, s in v.outputs]
        for side, index, strategy, with_state in sides:
            if not _mapper_unsupported(strategy):
                continue
            what = (
                f"{_label(op)}: vertex {v.label} rescaled {op.parallelism} -> {v.parallelism}, "
                f"its {side} {index} is {strategy}"
            )
            if with_state:
                out.append(
                    Reason(
                        "channel-state-rescale",
                        REFUSED,
                        f"{what} (pointwise) and holds channel state: Flink cannot map pointwise channels to new "
                        "subtasks",
                        MSG_POINTWISE,
                        operator=op.operator_id,
                    )
                )
            elif fixed is False:
                out.append(
                    Reason(
                        "channel-state-rescale",
                        REFUSED,
                        f"{what} (pointwise) without channel state, next to {side}s that hold some: this release "
                        "asks every exchange of the vertex for its mapping and fails (fixed from 1.20.3, 2.0.1, "
                        "2.1.1, 2.2.0)",
                        MSG_POINTWISE,
                        operator=op.operator_id,
                        flink_issue="FLINK-38267",
                    )
                )
            elif fixed is None:
                out.append(
                    Reason(
                        "channel-state-rescale",
                        UNKNOWN,
                        f"{what} (pointwise) without channel state, next to {side}s that hold some: Flink before "
                        "1.20.3, 2.0.1, 2.1.1 and 2.2.0 refuses this, later releases restore it; give --flink-version",
                        MSG_POINTWISE,
                        operator=op.operator_id,
                        flink_issue="FLINK-38267",
                    )
                )
    if branching:
        out.append(
            Reason(
                "channel-state-chained",
                UNKNOWN,
                "output channel state of "
                + ", ".join(_label(o) for o in branching)
                + " ends a branch of a chain with several ends: Flink restores it only if that branch is the first "
                "in its own order of the chain's outputs, which the plan does not show for sure",
            )
        )
    if chained:
        out.append(
            Reason(
                "channel-state-chained",
                REFUSED,
                "channel state of "
                + ", ".join(_label(o) for o in chained)
                + " belongs to an exchange that the new job chains (input state off a chain's head, or output state "
                "off its tail)",
                MSG_CHAINED.format(ops=", ".join(o.operator_id for o in chained)),
            )
        )
    return out


def _pointwise_channel_counts(
    op: OperatorState, place: Placement, v: NewVertex, gates: dict[int, int], partitions: dict[int, int]
) -> list[Reason]:
    """Without rescaling Flink hands each subtask its channel state as stored: an exchange that is pointwise now
    has fewer channels than one that was all-to-all, and a stored channel index past them fails the task
    (seen as "Index 1 out of bounds for length 1")."""
    out: list[Reason] = []
    sides = [("input", g, up, s, gates[g]) for up, g, s in v.inputs if g in gates]
    sides += [("output", i, down, s, partitions[i]) for down, i, s in v.outputs if i in partitions]
    for side, index, other_key, strategy, highest in sides:
        other = place.vertices[other_key]
        if not _mapper_unsupported(strategy) or strategy.upper() == "BROADCAST":
            continue
        if other.parallelism != other_parallelism_in_checkpoint(place, other_key, other.parallelism):
            continue  # the other side is rescaled: Flink builds virtual channels, checked elsewhere
        ins, outs = pointwise_channels(
            *((other.parallelism, v.parallelism) if side == "input" else (v.parallelism, other.parallelism))
        )
        have = ins if side == "input" else outs
        if highest >= have:
            out.append(
                Reason(
                    "channel-state-channels",
                    REFUSED,
                    f"{_label(op)}: its {side} {index} is {strategy} (pointwise) in the new job, with at most {have} "
                    f"channel(s) per subtask, but the checkpoint holds channel state for channel index {highest}: "
                    "the exchange was not pointwise when checkpointed. Flink accepts the restore and the task then "
                    "fails",
                    f"Index {highest} out of bounds for length {have}",
                    operator=op.operator_id,
                )
            )
    return out


def other_parallelism_in_checkpoint(place: Placement, key: str, default: int) -> int:
    return place.old_parallelism.get(key, default)


def _finished(topology: Topology, cp: Checkpoint) -> list[Reason]:
    """FLIP-147 (``VertexFinishedStateChecker``), from :func:`spillway.inspect.finished.check`."""
    if not any(o.fully_finished or any(s.finished for s in o.subtasks) for o in cp.operators):
        return []
    verdict = finished.check(topology, cp)
    out = [Reason("finished-state", REFUSED, v.message, operator=v.vertex) for v in verdict.violations]
    if not verdict.certain:
        out.append(Reason("finished-state", UNKNOWN, "; ".join(verdict.notes)))
    elif not out:
        out.append(Reason("finished-state", OK, "finished operators: every FLIP-147 rule holds"))
    return out


def _known_bugs(cp: Checkpoint, settings: Settings) -> list[Reason]:
    from spillway.model.checkpoint import SegmentFileHandle

    merged = any(
        isinstance(h.delegate, SegmentFileHandle)
        for o in cp.operators
        for s in o.subtasks
        for h in [*s.input_channel_state, *s.result_subpartition_state]
    )
    if not merged:
        return []
    return [
        Reason(
            "known-bug",
            WARNING,
            "channel state stored with file merging (SegmentFileStateHandle): releases without FLINK-39977's fix "
            "do not register these files with the file-merging manager on recovery (cleanup of the merged files "
            "after the restore)",
            flink_issue="FLINK-39977",
        )
    ]


def _vertex_table(place: Placement, cp: Checkpoint) -> list[dict[str, Any]]:
    """Per new vertex: its parallelism, the checkpoint's, and the channel state it gets to replay."""
    rows = []
    for v in place.vertices.values():
        ops = [o for o in cp.operators if place.where.get(o.operator_id, ("",))[0] == v.key]
        old = sorted({o.parallelism for o in ops})
        in_bytes = sum(h.state_size for o in ops for s in o.subtasks for h in channel_handles(s.input_channel_state))
        out_bytes = sum(
            h.state_size for o in ops for s in o.subtasks for h in channel_handles(s.result_subpartition_state)
        )
        rows.append(
            {
                "vertex": v.label,
                "key": v.key,
                "parallelism": v.parallelism,
                "checkpoint_parallelism": old[0] if len(old) == 1 else None,
                "operators": [o.operator_id for o in ops],
                "input_channel_bytes": in_bytes,
                "output_channel_bytes": out_bytes,
            }
        )
    return rows


def to_doc(result: Result, extra: dict[str, Any] | None = None) -> dict[str, Any]:
    doc: dict[str, Any] = {
        "schema": SCHEMA,
        "restorable": result.restorable,
        "reasons": [r.to_doc() for r in result.reasons],
        "vertices": result.vertices,
    }
    doc |= extra or {}
    return doc


# ------------------------------------------------------------------------------------------------- plan changes


def find_vertex(topology: Topology, name: str) -> str:
    """A vertex of the plan by key (job-vertex id / stream node id of the head), operator name or given uid."""
    from spillway.inspect.topology import PlanError

    uid_names = {uid: n for n, uid in topology.uids.items()}
    hits = [
        key
        for key, v in topology.vertices.items()
        if name in (key, v.vertex_id) or name in v.names or uid_names.get(name) in v.names
    ]
    if len(hits) == 1:
        return hits[0]
    known = ", ".join(sorted(v.label() for v in topology.vertices.values()))
    if not hits:
        raise PlanError(f"no vertex {name!r} in the plan (vertex id, operator name or --uid); vertices: {known}")
    raise PlanError(f"{name!r} names {len(hits)} vertices of the plan; use a vertex id")


def with_parallelism(topology: Topology, parallelism: dict[str, int]) -> Topology:
    """The plan with the named vertices' parallelism changed (``-p VERTEX=N``), same flavour and uids."""
    from spillway.inspect.topology import parse_plan

    changed = topology.with_parallelism({find_vertex(topology, k): n for k, n in parallelism.items()})
    out = parse_plan(changed)
    out.uids = dict(topology.uids)
    return out


def checkpoint_parallelism_plan(topology: Topology, result: Result) -> tuple[Topology, dict[str, int]] | None:
    """The plan at the checkpoint's parallelism and the new parallelism per vertex key, when the new job is the
    checkpoint's job rescaled (every vertex with operators in the checkpoint has one old parallelism); else None."""
    from spillway.inspect.topology import parse_plan

    old: dict[str, int] = {}
    new: dict[str, int] = {}
    for row in result.vertices:
        if row["checkpoint_parallelism"] is None:
            if row["operators"]:
                return None
            continue
        if row["checkpoint_parallelism"] != row["parallelism"]:
            old[row["key"]] = row["checkpoint_parallelism"]
            new[row["key"]] = row["parallelism"]
    if not new:
        return None
    plan = parse_plan(topology.with_parallelism(old))
    plan.uids = dict(topology.uids)
    return plan, new


def forecast_reasons(forecast: dict[str, Any]) -> list[Reason]:
    """What the restore forecast (``spillway.rescale.forecast``) says the recovery will need, as reasons: gates
    recovering more buffers than they get (the stalls of FLINK-22946 / FLINK-39519), and the bytes Flink's
    restore-time filtering reads, which an offline ``spillway rescale`` first avoids."""
    flink = forecast.get("flink", {})
    out: list[Reason] = []
    if flink.get("over_budget"):
        out.append(
            Reason(
                "recovery",
                WARNING,
                f"{flink['over_budget']} gate(s) recover more network buffers than the gate gets "
                "(see the forecast): risk of a stalled or spilling recovery",
                flink_issue="FLINK-22946",
            )
        )
    if flink.get("bytes_filtered"):
        out.append(
            Reason(
                "recovery",
                NOTE,
                f"Flink will read {flink['bytes_read']} bytes of channel state over {flink['virtual_channels']} "
                f"virtual channels and pass {flink['bytes_filtered']} of them through its record filter (records "
                "of old subtasks that now feed several new ones); a `spillway rescale` first writes the channel "
                "state at the new parallelism: Flink then restores it as-is, without virtual channels or filtering",
            )
        )
    return out
