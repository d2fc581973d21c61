"""Flink's restore-time checks, each answered from a checkpoint and the new job's operator placement.

One function per check (docs/format/restore-checks.md says what Flink does, per release line, and quotes the
messages below); :mod:`spillway.inspect.preflight` places the operators and runs them all.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from spillway.flink.partitioners import Partitioner
from spillway.inspect import finished
from spillway.inspect.topology import Topology
from spillway.model.checkpoint import (
    Checkpoint,
    InputChannelHandle,
    OperatorState,
    ResultSubpartitionHandle,
    channel_handles,
)
from spillway.storage.load import LoadedCheckpoint

# verdicts of one reason
OK = "ok"
REFUSED = "refused"
UNKNOWN = "unknown"
WARNING = "warning"  # Flink restores, but something named may go wrong afterwards (a known bug)
NOTE = "note"  # an assumption preflight made; says what would change the answer


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


def mapping(place: Placement, cp: Checkpoint, settings: Settings, cuts: dict[str, list[str]] | None) -> list[Reason]:
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


def dropped_state_cuts(loaded: LoadedCheckpoint) -> dict[str, list[str]]:
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


def max_parallelism(place: Placement, cp: Checkpoint, settings: Settings) -> list[Reason]:
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


def channel_state(place: Placement, cp: Checkpoint, settings: Settings) -> list[Reason]:
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


def finished_state(topology: Topology, cp: Checkpoint) -> list[Reason]:
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


def known_bugs(cp: Checkpoint, settings: Settings) -> list[Reason]:
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


def vertex_table(place: Placement, cp: Checkpoint) -> list[dict[str, Any]]:
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
