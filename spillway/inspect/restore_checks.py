"""Flink's restore-time checks, each answered from a checkpoint and the new job's operator placement.

One function per check (docs/format/restore-checks.md says what Flink does, per release line, and quotes the
messages below); :mod:`spillway.inspect.preflight` places the operators and runs them all.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from enum import Enum
from typing import Any

from spillway.flink.partitioners import Partitioner
from spillway.inspect import finished
from spillway.inspect.topology import JobBinding, Topology
from spillway.model.checkpoint import (
    CheckpointMetadata,
    InputChannelHandle,
    OperatorState,
    ResultSubpartitionHandle,
    channel_handles,
)
from spillway.storage.load import LoadedCheckpoint


class Verdict(str, Enum):
    """What one check found."""

    OK = "ok"
    REFUSED = "refused"  # Flink refuses the restore (the job does not start)
    FAILS = "fails"  # Flink accepts the restore and the job fails after it starts
    LOSS = "loss"  # Flink restores and silently drops data (state or records in flight): the loss section
    UNKNOWN = "unknown"
    WARNING = "warning"  # Flink restores, but something named may go wrong afterwards (a known bug)
    NOTE = "note"  # an assumption preflight made; says what would change the answer


class FlinkDoes(str, Enum):
    """What Flink does on the restoring release, for a reason that is not ok."""

    REFUSES = "refuses"
    FAILS_AFTER_START = "fails after start"
    RESTORES_AND_DROPS = "restores and drops"


OK = Verdict.OK
REFUSED = Verdict.REFUSED
FAILS = Verdict.FAILS
LOSS = Verdict.LOSS
UNKNOWN = Verdict.UNKNOWN
WARNING = Verdict.WARNING
NOTE = Verdict.NOTE

_DOES = {REFUSED: FlinkDoes.REFUSES, FAILS: FlinkDoes.FAILS_AFTER_START, LOSS: FlinkDoes.RESTORES_AND_DROPS}


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
    verdict: Verdict
    message: str
    flink_message: str | None = None
    operator: str | None = None
    flink_issue: str | None = None
    # what Flink does (refused, fails, loss: from the verdict; unknown: what it does if the doubt goes the bad way)
    flink_does: FlinkDoes | None = None

    def __post_init__(self) -> None:
        if self.flink_does is None:
            self.flink_does = _DOES.get(self.verdict)

    def to_doc(self) -> dict[str, Any]:
        doc: dict[str, Any] = {"check": self.check, "verdict": self.verdict.value, "message": self.message}
        for key in ("flink_message", "operator", "flink_issue"):
            value = getattr(self, key)
            if value is not None:
                doc[key] = value
        if self.flink_does is not None:
            doc["flink_does"] = self.flink_does.value
        return doc


@dataclass(frozen=True)
class LostState:
    """State of a checkpoint operator that Flink drops on this restore (``--allow-non-restored-state``)."""

    operator: str  # Flink's operator id
    label: str  # uid or name, and the id
    kinds: tuple[str, ...]  # keyed, raw keyed, operator, raw operator, coordinator, input channel, output channel
    bytes: int

    def to_doc(self) -> dict[str, Any]:
        return {"operator": self.operator, "label": self.label, "state_kinds": list(self.kinds), "bytes": self.bytes}


@dataclass(frozen=True)
class LostInFlight:
    """Channel state (records in flight) that Flink drops on this restore without a word."""

    operator: str
    label: str
    side: str  # "input" or "output"
    bytes: int
    records: int | None  # None: not countable (output-side state read alone, or unreadable)
    why: str

    def to_doc(self) -> dict[str, Any]:
        return {
            "operator": self.operator,
            "label": self.label,
            "side": self.side,
            "bytes": self.bytes,
            "records": self.records,
            "why": self.why,
        }


@dataclass
class PreflightLoss:
    """Everything the restore drops: the ``loss`` section of the answer."""

    state: list[LostState] = field(default_factory=list)
    in_flight: list[LostInFlight] = field(default_factory=list)

    def __bool__(self) -> bool:
        return bool(self.state or self.in_flight)

    def to_doc(self) -> dict[str, Any]:
        records = [x.records for x in self.in_flight]
        return {
            "state": [x.to_doc() for x in self.state],
            "in_flight": [x.to_doc() for x in self.in_flight],
            "state_bytes": sum(x.bytes for x in self.state),
            "in_flight_bytes": sum(x.bytes for x in self.in_flight),
            "in_flight_records": None if None in records else sum(r for r in records if r is not None),
        }


@dataclass
class Settings:
    """What the plan does not show about the new job, as the user gives it."""

    allow_non_restored_state: bool = False
    # explicit max parallelism: job-wide (None key) and per vertex key; absent = not set in the job
    max_parallelism: dict[str | None, int] = field(default_factory=dict)
    flink_version: tuple[int, int, int] | None = None  # the release that restores
    checkpoint_path: str = "<checkpoint>"
    # the user says the new job sets no max parallelism (``--max-parallelism none``): Flink adopts the checkpoint's
    no_max_parallelism: bool = False


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
    # the max parallelism the job sets for the vertex (None: sets none), when the plan knows (the job's own graph)
    max_parallelism: int | None = None
    max_parallelism_known: bool = False


@dataclass
class Placement:
    vertices: dict[str, NewVertex]
    where: dict[str, tuple[str, int]]  # checkpoint operator id -> (vertex key, position in chain, head = 0)
    unknown: list[str]  # plan operators whose Flink operator id is not known, each with why
    guessed: list[str]  # plan operators bound by a structural guess, not Flink's rule
    old_parallelism: dict[str, int] = field(default_factory=dict)  # vertex key -> its operators' parallelism
    # checkpoint operator id -> plan operator name, for operators placed by a name match only (the checkpoint's
    # stored name, or a uid guessed from the name): right only if the new job keeps the operator's id
    assumed: dict[str, str] = field(default_factory=dict)


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
            if h.offsets and isinstance(h, InputChannelHandle):  # input state holds input handles only
                g, c = h.gate_index, h.input_channel_index
                gates[g] = max(gates.get(g, 0), c)
        for h in channel_handles(s.result_subpartition_state):
            if h.offsets and isinstance(h, ResultSubpartitionHandle):
                p, c = h.partition_index, h.subpartition_index
                partitions[p] = max(partitions.get(p, 0), c)
    return gates, partitions


def pointwise_channels(senders: int, receivers: int) -> tuple[int, int]:
    """(input channels of a receiving subtask, subpartitions of a sending subtask) at most, on a pointwise
    (FORWARD / RESCALE) exchange: each side connects to ceil(other / this) of the other side, at least one."""
    return max(1, -(-senders // receivers)), max(1, -(-receivers // senders))


def _mapper_unsupported(strategy: str) -> bool:
    return Partitioner.of(strategy).downstream_mapper == "UNSUPPORTED"


def flink_38267_fixed(version: tuple[int, int, int] | None) -> bool | None:
    """Whether the restoring release asks the channel-state mapper only of exchanges that hold channel state
    (FLINK-38267, backported to 1.20, 2.0, 2.1): None when not known."""
    if version is None:
        return None
    line, patch = version[:2], version[2]
    if line >= (2, 2):
        return True
    return {(1, 20): patch >= 3, (2, 0): patch >= 1, (2, 1): patch >= 1}.get(line, False)


PASSED = {
    "operator-mapping": "every operator of the checkpoint is in the new job",
    "max-parallelism": "every new parallelism fits the checkpoint's max parallelism",
    "channel-state": "channel state stays at chain ends; no rescaled exchange with it is pointwise",
    "keyed-exchange": "every operator with keyed state gets its records by key (keyBy)",
    "finished-state": "no finished operators in the checkpoint (FLIP-147 rules do not apply)",
    "files": "every file the restored state needs exists, and its channel state is sound (spillway validate)",
}

# validate rules whose errors make Flink's read of the state fail for certain: the bytes are not there
UNREADABLE = {"file-exists", "file-size", "path-escape", "bad-path"}  # a NUL: Java refuses the path too


def binding_notes(place: Placement) -> list[Reason]:
    out = [
        Reason("binding", NOTE, f"plan operator bound by a structural guess, not Flink's rule: {g}")
        for g in place.guessed
    ]
    out += [Reason("binding", NOTE, f"plan operator without a known Flink id: {u}") for u in place.unknown]
    return out


def _label(op: OperatorState) -> str:
    named = op.uid or op.name
    return f"{named} ({op.operator_id})" if named else op.operator_id


def mapping(
    place: Placement, cp: CheckpointMetadata, settings: Settings, facts: ChannelFacts | None, loss: PreflightLoss
) -> list[Reason]:
    """``Checkpoints.loadAndValidateCheckpoint``: every operator of the checkpoint must be in the new job, unless
    its state is empty or non-restored state is allowed (then Flink drops it without a word: ``loss``)."""
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
                    "Flink id (see the binding notes), so it may be one of them. Give their uids (--uid NAME=UID), "
                    "the job-graph plan or the job's jar (--job) to be sure",
                    operator=op.operator_id,
                )
            )
        elif settings.allow_non_restored_state:
            out += _dropped(op, place, cp, facts, loss)
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
    assumed = [op for op in cp.operators if op.operator_id in place.assumed and has_state(op)]
    if assumed:
        named = ", ".join(f"{place.assumed[op.operator_id]!r} = {_label(op)}" for op in assumed)
        out.append(
            Reason(
                "operator-mapping",
                UNKNOWN,
                f"placed by name only: {named}. This assumes uids unchanged: each keeps its Flink id in the new job "
                "(the same uid; without uids, a graph that generates the same ids). If an id changed, Flink refuses "
                "the restore (or, with --allow-non-restored-state, drops that state). Give the uids (--uid "
                "NAME=UID), the job-graph plan or the job's jar (--job) to map by ids",
                flink_does=FlinkDoes.REFUSES,
            )
        )
    return out


def state_kinds(op: OperatorState) -> tuple[str, ...]:
    """The kinds of state the operator holds, in Flink's words."""
    kinds = {
        "keyed": any(s.managed_keyed_state for s in op.subtasks),
        "raw keyed": any(s.raw_keyed_state for s in op.subtasks),
        "operator": any(s.managed_operator_state for s in op.subtasks),
        "raw operator": any(s.raw_operator_state for s in op.subtasks),
        "coordinator": op.coordinator_state is not None,
        "input channel": any(s.input_channel_state for s in op.subtasks),
        "output channel": any(s.result_subpartition_state for s in op.subtasks),
    }
    return tuple(k for k, held in kinds.items() if held)


def state_bytes(op: OperatorState) -> int:
    """Bytes of every state handle of the operator (what ``--allow-non-restored-state`` throws away)."""
    total = op.coordinator_state.state_size if op.coordinator_state is not None else 0
    for s in op.subtasks:
        for h in (s.managed_operator_state, s.raw_operator_state, s.managed_keyed_state, s.raw_keyed_state):
            total += h.state_size if h is not None else 0
        total += sum(h.state_size for h in channel_handles(s.input_channel_state))
        total += sum(h.state_size for h in channel_handles(s.result_subpartition_state))
    return total


def files(
    loaded: LoadedCheckpoint, place: Placement, settings: Settings, plan_names: Mapping[str, str] | None = None
) -> list[Reason]:
    """``spillway validate`` (without the old job's plan) on the state the new job restores: a missing or short
    file fails the task that reads it; other damage (framing, chunk chains) may or may not be read. ``plan_names``:
    the names the new job's plan gives the checkpoint's operators (``JobBinding.names``)."""
    from spillway.inspect.validate import validate

    dropped = set()
    if settings.allow_non_restored_state:
        dropped = {o.label(plan_names) for o in loaded.checkpoint.operators if o.operator_id not in place.where}
    out = []
    for f in validate(loaded, plan_names=plan_names).errors:
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


@dataclass
class ChannelFacts:
    """What the channel-state files say, per (operator id, side): bytes and records (None: not countable, as
    output-side state read alone may start inside a record); and per operator, its input channels whose data ends
    inside a record (the record's rest is the first thing in the upstream's output state of the same channel)."""

    bytes: dict[tuple[str, str], int] = field(default_factory=dict)
    records: dict[tuple[str, str], int | None] = field(default_factory=dict)
    cut: dict[str, list[str]] = field(default_factory=dict)

    def in_flight(self, operator: str, side: str) -> tuple[int, int | None]:
        return self.bytes.get((operator, side), 0), self.records.get((operator, side), 0)


def channel_facts(loaded: LoadedCheckpoint) -> ChannelFacts:
    """Reads every channel (docs/format/record-framing.md)."""
    from spillway.formats.stream_elements import RECORD_TAGS
    from spillway.inspect.analyze import Position, analyze

    facts = ChannelFacts()

    def count(ca: Any, rec: Any, pos: Position) -> None:
        end = ca.downstream if pos.side == "input" else ca.upstream
        if rec.tag in RECORD_TAGS and end.get("operator_id") is not None:
            key = (end["operator_id"], pos.side)
            known = facts.records.get(key, 0)
            facts.records[key] = None if known is None else known + 1

    for ca in analyze(loaded, on_record=count).channels:
        for op, side in {(k[0], k[1]) for k in ca.part_keys}:
            facts.bytes[(op, side)] = facts.bytes.get((op, side), 0) + (
                ca.input_bytes if side == "input" else ca.output_bytes
            )
            if ca.records is None:
                facts.records[(op, side)] = None
            if side == "input" and ca.junction_record is not None:
                facts.cut.setdefault(op, []).append(f"{ca.label} ({ca.junction_record['input_bytes']} bytes)")
    return facts


def cut_partners(
    op: OperatorState, side: str, place: Placement, cp: CheckpointMetadata, facts: ChannelFacts
) -> list[str]:
    """Channels where a record is cut between ``op``'s channel state on ``side`` (dropped) and restored state on
    the other side. Read without the old job's plan, an input channel's data is known to end inside a record; the
    output half it lacks is some restored upstream's (when any restored operator holds output channel state)."""
    restored = [o for o in cp.operators if o.operator_id in place.where]
    if side == "input":
        return facts.cut.get(op.operator_id, []) if any(_channel_parts(o)[1] for o in restored) else []
    return [c for o in restored if _channel_parts(o)[0] for c in facts.cut.get(o.operator_id, [])]


def _dropped(
    op: OperatorState, place: Placement, cp: CheckpointMetadata, facts: ChannelFacts | None, loss: PreflightLoss
) -> list[Reason]:
    """An operator dropped with ``--allow-non-restored-state``: its state is lost, and so are its records in flight.
    Its partner on the other side of each channel may be restored into whatever is there now: where a record is
    cut between the two, the partner reads the record's other half as if a record started (or went on) there.
    Flink then fails the task (seen: "Corrupt stream, found tag: -128", EOFException, or a key group out of
    range when the misread bytes are a key) or misreads the bytes."""
    kinds = state_kinds(op)
    loss.state.append(LostState(op.operator_id, _label(op), kinds, state_bytes(op)))
    gates, partitions = _channel_parts(op)
    sides = [side for side, held in (("input", gates), ("output", partitions)) if held]
    if sides and facts is None:
        return [
            Reason(
                "operator-mapping",
                UNKNOWN,
                f"{_label(op)} is not in the new job: its state ({', '.join(kinds)}) is dropped "
                "(--allow-non-restored-state), with its channel state, while what the other side of those "
                "channels holds may be restored; whether a record is cut between the two needs the channel-state "
                "files read",
                operator=op.operator_id,
                flink_does=FlinkDoes.FAILS_AFTER_START,
            )
        ]
    cut: list[str] = []
    for side in sides:
        bytes_, records = facts.in_flight(op.operator_id, side) if facts is not None else (0, None)
        why = "dropped with its operator (--allow-non-restored-state)"
        loss.in_flight.append(LostInFlight(op.operator_id, _label(op), side, bytes_, records, why))
        if facts is not None:
            cut += cut_partners(op, side, place, cp, facts)
    if cut:
        return [
            Reason(
                "dropped-channel-state",
                UNKNOWN,
                f"{_label(op)} is dropped with its channel state, and a record is cut between it and restored "
                f"channel state on {len(cut)} channel(s) ({'; '.join(cut[:4])}{'; …' if len(cut) > 4 else ''}): "
                "the restored half reaches the new job as if it were whole. Flink then fails the task (seen: "
                '"Corrupt stream, found tag: -128", EOFException, "Key group N is not in KeyGroupRange") or '
                "misreads the bytes. Clear the in-flight data first (spillway repair strip-channel-state) to be "
                "sure",
                operator=op.operator_id,
                flink_does=FlinkDoes.FAILS_AFTER_START,
            )
        ]
    lost = f"its state ({', '.join(kinds)}, {state_bytes(op)} bytes)"
    return [
        Reason(
            "operator-mapping",
            LOSS,
            f"{_label(op)} is not in the new job: Flink restores without it and drops {lost} without a word "
            "(--allow-non-restored-state); see the loss section",
            operator=op.operator_id,
        )
    ]


def _vertex_id(place: Placement, v: NewVertex) -> str:
    """Flink's job-vertex id: its head operator's id (the plan's key for job-graph plans)."""
    heads = [op_id for op_id, (key, pos) in place.where.items() if key == v.key and pos == 0]
    return heads[0] if heads else v.key


def _configured_max(settings: Settings, vertex: NewVertex) -> int | None:
    """The max parallelism the new job sets for the vertex: the user's word first, else the job's own graph."""
    given = settings.max_parallelism.get(vertex.key, settings.max_parallelism.get(None))
    if given is not None or settings.no_max_parallelism:
        return given
    return vertex.max_parallelism if vertex.max_parallelism_known else None


def _max_parallelism_known(settings: Settings, vertex: NewVertex) -> bool:
    return bool(settings.max_parallelism) or settings.no_max_parallelism or vertex.max_parallelism_known


def max_parallelism(place: Placement, cp: CheckpointMetadata, settings: Settings) -> list[Reason]:
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
    unseen = sorted(
        {
            place.vertices[place.where[op.operator_id][0]].label
            for op in cp.operators
            if op.operator_id in place.where
            and has_state(op)
            and not _max_parallelism_known(settings, place.vertices[place.where[op.operator_id][0]])
        }
    )
    if unseen:
        olds = sorted({op.max_parallelism for op in cp.operators if has_state(op)})
        out.append(
            Reason(
                "max-parallelism",
                UNKNOWN,
                "a plan does not show the max parallelism the new job sets (vertices with restored state: "
                f"{', '.join(unseen)}). If it sets one other than the checkpoint's "
                f"({', '.join(map(str, olds))}; setMaxParallelism, pipeline.max-parallelism), Flink refuses the "
                "restore; if it sets none, Flink takes the checkpoint's. Give --max-parallelism N (or VERTEX=N), "
                "--max-parallelism none, or the job's jar (--job)",
                MSG_MAX_MISMATCH.format(path=settings.checkpoint_path, op="<id>", old=olds[0], new="<N>"),
                flink_does=FlinkDoes.REFUSES,
            )
        )
    return out


def keyed_exchange(place: Placement, cp: CheckpointMetadata) -> list[Reason]:
    """Keyed state is restored per key group (each subtask gets a range); a keyed operator whose vertex is fed
    by an exchange that does not route by key gets records of other subtasks' key groups, and the first one
    fails the task: Flink accepts the restore, then fails ("Key group N is not in KeyGroupRange")."""
    out: list[Reason] = []
    for op in cp.operators:
        spot = place.where.get(op.operator_id)
        if spot is None or not any(s.managed_keyed_state or s.raw_keyed_state for s in op.subtasks):
            continue
        v = place.vertices[spot[0]]
        for _up, gate, strategy in v.inputs:
            kind = strategy.upper()
            if kind in ("HASH", "BROADCAST"):  # routed by key; a broadcast side reads no key's state
                continue
            what = f"{_label(op)} holds keyed state, and its vertex {v.label} gets input {gate} {strategy}"
            if "FORWARD" in kind:
                out.append(
                    Reason(
                        "keyed-exchange",
                        UNKNOWN,
                        f"{what} (pointwise): right only if the upstream is keyed the same way and has the same "
                        "parallelism (reinterpretAsKeyedStream); otherwise the task fails on the first record of "
                        "another subtask's key group",
                        "Key group N is not in KeyGroupRange",
                        operator=op.operator_id,
                        flink_does=FlinkDoes.FAILS_AFTER_START,
                    )
                )
            else:
                out.append(
                    Reason(
                        "keyed-exchange",
                        FAILS,
                        f"{what}, not a key hash (was keyBy replaced?): records reach subtasks that do not hold "
                        "their key group, and the first one fails the task",
                        "Key group N is not in KeyGroupRange",
                        operator=op.operator_id,
                    )
                )
    return out


def flink_31963_fixed(version: tuple[int, int, int] | None) -> bool | None:
    """Whether the restoring release checks output channel state off a chain's end also when the chain's end
    holds none but a downstream holds input channel state (FLINK-31963: seen in 1.16.3 and 1.17.2, not in
    1.15.4; released in 1.16.2 and 1.17.1). None when not known."""
    if version is None:
        return None
    line, patch = version[:2], version[2]
    if line >= (1, 18):
        return True
    return {(1, 17): patch >= 1, (1, 16): patch >= 2}.get(line, False)


def _output_state_off_end(
    op: OperatorState,
    v: NewVertex,
    place: Placement,
    cp: CheckpointMetadata,
    settings: Settings,
    facts: ChannelFacts | None,
    loss: PreflightLoss,
) -> tuple[bool, list[Reason]]:
    """Output channel state of an operator a new job chains something after. Flink restores only the chain end's
    output state and checks the others only when that end holds some, or (FLINK-31963) a downstream holds input
    state; unchecked, the operator's in-flight data is dropped without a word. (refused?, other reasons)"""
    ends = set(v.leaves if v.leaves is not None else [v.chain_length - 1])
    placed = [(o, place.where[o.operator_id]) for o in cp.operators if o.operator_id in place.where]
    end_has_state = any(key == v.key and pos in ends and _channel_parts(o)[1] for o, (key, pos) in placed)
    downstream = {down for down, _, _ in v.outputs}
    downstream_input = any(key in downstream and pos == 0 and _channel_parts(o)[0] for o, (key, pos) in placed)
    if end_has_state:
        return True, []
    fixed = flink_31963_fixed(settings.flink_version)
    if downstream_input and fixed:
        return True, []
    bytes_, records = facts.in_flight(op.operator_id, "output") if facts is not None else (0, None)
    why = f"output channel state of an operator that no longer ends its chain (vertex {v.label})"
    if downstream_input and fixed is None:
        return False, [
            Reason(
                "channel-state-chained",
                UNKNOWN,
                f"{_label(op)} holds output channel state and the new job chains an operator after it; a "
                "downstream holds input channel state. Flink from 1.16.2 / 1.17.1 on refuses this (FLINK-31963); "
                "earlier releases restore and drop that in-flight data; give --flink-version",
                MSG_CHAINED.format(ops=op.operator_id),
                operator=op.operator_id,
                flink_issue="FLINK-31963",
            )
        ]
    loss.in_flight.append(LostInFlight(op.operator_id, _label(op), "output", bytes_, records, why))
    cut = cut_partners(op, "output", place, cp, facts) if facts is not None else []
    if facts is None or cut:
        return False, [
            Reason(
                "channel-state-chained",
                UNKNOWN,
                f"{_label(op)}: {why}; this release restores without it and drops it "
                + (
                    "(whether a record is cut between it and the restored input state downstream needs the "
                    "channel-state files read)"
                    if facts is None
                    else "and a record is cut between it and the restored input state downstream "
                    f"({'; '.join(cut[:4])}): the task then fails (seen on 1.15.4: EOFException) or misreads the bytes"
                ),
                operator=op.operator_id,
                flink_does=FlinkDoes.FAILS_AFTER_START,
            )
        ]
    return False, [
        Reason(
            "channel-state-chained",
            LOSS,
            f"{_label(op)}: {why}: this release restores without it and drops those records in flight without a "
            "word; see the loss section",
            operator=op.operator_id,
        )
    ]


def channel_state(
    place: Placement,
    cp: CheckpointMetadata,
    settings: Settings,
    facts: ChannelFacts | None = None,
    loss: PreflightLoss | None = None,
) -> list[Reason]:
    """``StateAssignmentOperation``: channel state must stay at a chain's ends, and a rescaled exchange with it
    needs a partitioner Flink can map (not FORWARD, RESCALE or BROADCAST)."""
    loss = loss if loss is not None else PreflightLoss()
    out: list[Reason] = []
    chained: list[OperatorState] = []
    branching: list[OperatorState] = []
    unplaced: list[OperatorState] = []
    uncertain = bool(place.unknown or place.guessed)
    fixed = flink_38267_fixed(settings.flink_version)
    for op in cp.operators:
        spot = place.where.get(op.operator_id)
        gates, partitions = _channel_parts(op)
        if not gates and not partitions:
            continue
        if spot is None:
            if uncertain:  # it may be one of the plan operators without a known id: its place is not known
                unplaced.append(op)
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
                refused, found = _output_state_off_end(op, v, place, cp, settings, facts, loss)
                if refused:
                    chained.append(op)
                out += found
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
    if unplaced:
        out.append(
            Reason(
                "channel-state",
                UNKNOWN,
                "channel state of "
                + ", ".join(_label(o) for o in unplaced)
                + ": its operator's place in the new job is not known (see operator-mapping), so whether the state "
                "stays at a chain's end, and whether its exchange keeps as many channels, is not checked; Flink "
                "refuses the first, and a task given a channel index its exchange no longer has fails after start",
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
        if not Partitioner.of(strategy).is_pointwise:
            continue
        if other.parallelism != place.old_parallelism.get(other_key, other.parallelism):
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


def finished_state(topology: Topology, cp: CheckpointMetadata, job: JobBinding | None = None) -> list[Reason]:
    """FLIP-147 (``VertexFinishedStateChecker``), from :func:`spillway.inspect.finished.check` (``job``: the
    plan's binding to ``cp`` when the caller holds it)."""
    if not any(o.fully_finished or any(s.finished for s in o.subtasks) for o in cp.operators):
        return []
    verdict = finished.check(topology, cp, job)
    out = [Reason("finished-state", REFUSED, v.message, operator=v.vertex) for v in verdict.violations]
    if not verdict.certain:
        out.append(Reason("finished-state", UNKNOWN, "; ".join(verdict.notes)))
    elif not out:
        out.append(Reason("finished-state", OK, "finished operators: every FLIP-147 rule holds"))
    return out


def known_bugs(cp: CheckpointMetadata, settings: Settings) -> list[Reason]:
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


def vertex_table(place: Placement, cp: CheckpointMetadata) -> list[dict[str, Any]]:
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
