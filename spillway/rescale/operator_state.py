"""Operator (list) state to a new parallelism, as Flink's RoundRobinOperatorStateRepartitioner does it.

An OperatorStreamHandle's stream = header (OperatorBackendSerializationProxy: every registered state's meta
data) followed by the states' elements; each state entry lists the offsets of its elements. An element runs
from its offset to the next offset of any state in the same stream, or to the end of the stream.

Distribution over the new subtasks:
* SPLIT_DISTRIBUTE: per state name (in Java HashMap order, which Flink iterates), the elements of all old
  subtasks in old subtask order are dealt out in contiguous runs: ``total // newP`` each, the first
  ``total % newP`` subtasks (counted from a start index carried over from the previous name) one more.
* BROADCAST: new subtask i gets the copy of the i-th old subtask holding it, modulo their number.
* UNION: Flink hands every subtask ALL union elements of ALL subtasks on every restore, also when the
  parallelism is unchanged (StateAssignmentOperation always runs the repartitioner, which unions). A checkpoint
  written at the new parallelism must therefore hold each union element exactly once across its subtasks, or
  every restore would multiply them: old subtask j's union elements go to new subtask ``j % newP``.

One new subtask has exactly one handle per kind (managed/raw). When it draws from a single old stream the new
handle points at that stream (metadata only); when it draws from several, their headers must be byte-identical
and one new file is written: header once, then the elements, with new offsets.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from spillway.flink.keygroups import java_string_hash
from spillway.formats.errors import CheckpointFormatError
from spillway.model.checkpoint import DistributionMode, OperatorStateEntry, OperatorStreamHandle
from spillway.rescale.state_files import (
    NewStateFile,
    RescaleRefused,
    describe,
    named_by_flink,
    open_stream,
    same_bytes,
    stable_uuid,
)
from spillway.storage.blobs import DelegateBlobs

SPLIT = DistributionMode.SPLIT_DISTRIBUTE.value
UNION = DistributionMode.UNION.value
BROADCAST = DistributionMode.BROADCAST.value


@dataclass
class OperatorStateRescale:
    handles: list[OperatorStreamHandle | None]  # one per new subtask
    files: list[NewStateFile] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)


@dataclass
class _Part:
    """Elements of one state of one old subtask assigned to one new subtask."""

    old: int
    name: str
    mode: int
    offsets: list[int]


def java_hashmap_order(keys: list[str]) -> list[str]:
    """Iteration order of a ``new HashMap<>()`` after putting String ``keys`` in this order.

    Buckets are ``spread(hashCode) & (capacity - 1)`` with capacity 16, doubled whenever the size exceeds 3/4
    of it; a resize keeps the relative order inside a bucket, so the order is (bucket, insertion order).
    (Bins of 8+ colliding keys become trees in Java; not modelled — irrelevant for a handful of state names.)
    """
    unique = list(dict.fromkeys(keys))
    capacity = 16
    while len(unique) > capacity * 3 // 4:
        capacity *= 2

    def bucket(name: str) -> int:
        h = java_string_hash(name) & 0xFFFFFFFF
        return (h ^ (h >> 16)) & (capacity - 1)

    return sorted(unique, key=lambda k: (bucket(k), unique.index(k)))


def _split(parts_by_old: list[tuple[int, list[int]]], new_parallelism: int, start: int) -> tuple[dict[int, Any], int]:
    """RoundRobinOperatorStateRepartitioner's split of one state name: new subtask -> [(old, offsets)]."""
    total = sum(len(offsets) for _, offsets in parts_by_old)
    base, remainder = divmod(total, new_parallelism)
    assigned: dict[int, list[tuple[int, list[int]]]] = {}
    list_idx = offset_idx = 0
    new_start = start
    for i in range(new_parallelism):
        target = (i + start) % new_parallelism
        count = base
        if remainder > 0:
            count += 1
            remainder -= 1
        elif remainder == 0:
            new_start = target
            remainder -= 1
        while count > 0:
            old, offsets = parts_by_old[list_idx]
            remaining = len(offsets) - offset_idx
            if remaining > count:
                chunk = offsets[offset_idx : offset_idx + count]
                offset_idx += count
            else:
                chunk = offsets[offset_idx:]
                offset_idx = 0
                list_idx += 1
            count -= remaining
            assigned.setdefault(target, []).append((old, chunk))
    return assigned, new_start


def _modes(handles: list[tuple[int, OperatorStreamHandle]], where: str) -> dict[str, int]:
    modes: dict[str, int] = {}
    for j, h in handles:
        for e in h.states:
            if e.mode not in (SPLIT, UNION, BROADCAST):
                raise RescaleRefused(
                    f"{where}: state '{e.name}' of old subtask {j} has unknown distribution mode {e.mode}; "
                    "rescale in Flink"
                )
            if modes.setdefault(e.name, e.mode) != e.mode:
                raise RescaleRefused(
                    f"{where}: state '{e.name}' is {e.mode_name} in old subtask {j} but "
                    f"{DistributionMode(modes[e.name]).name} elsewhere; rescale in Flink"
                )
    return modes


def assign(handles: list[OperatorStreamHandle | None], new_parallelism: int, where: str) -> list[list[_Part]]:
    """Which elements of which old subtask each new subtask gets (no bytes read)."""
    present = [(j, h) for j, h in enumerate(handles) if h is not None]
    modes = _modes(present, where)
    parts: list[list[_Part]] = [[] for _ in range(new_parallelism)]
    encounter = [e.name for _, h in present for e in h.states]
    start = 0
    for name in java_hashmap_order([n for n in encounter if modes[n] == SPLIT]):
        by_old = [(j, list(e.offsets)) for j, h in present for e in h.states if e.name == name]
        assigned, start = _split(by_old, new_parallelism, start)
        for target, chunks in assigned.items():
            parts[target].extend(_Part(old, name, SPLIT, offsets) for old, offsets in chunks)
    for name in dict.fromkeys(n for n in encounter if modes[n] == UNION):
        for j, h in present:
            for e in h.states:
                if e.name == name:
                    parts[j % new_parallelism].append(_Part(j, name, UNION, list(e.offsets)))
    for name in dict.fromkeys(n for n in encounter if modes[n] == BROADCAST):
        copies = [(j, e) for j, h in present for e in h.states if e.name == name]
        for i in range(new_parallelism):
            j, e = copies[i % len(copies)]
            parts[i].append(_Part(j, name, BROADCAST, list(e.offsets)))
    return parts


def _element_extents(blobs: DelegateBlobs, j: int, h: OperatorStreamHandle, where: str) -> tuple[int, dict[int, int]]:
    """(header length, element offset -> length) of one old stream, bounds-checked."""
    blob = open_stream(blobs, h.delegate, where)
    offsets = sorted(o for e in h.states for o in e.offsets)
    if len(set(offsets)) != len(offsets):
        raise CheckpointFormatError(describe(blobs, h.delegate), None, where, "two elements share one offset")
    if offsets and (offsets[0] < 0 or offsets[-1] >= blob.size):
        bad = offsets[0] if offsets[0] < 0 else offsets[-1]
        raise CheckpointFormatError(
            describe(blobs, h.delegate), bad, where, f"element offset {bad} is outside the {blob.size}-byte stream"
        )
    header = offsets[0] if offsets else blob.size
    lengths = {o: (offsets[n + 1] if n + 1 < len(offsets) else blob.size) - o for n, o in enumerate(offsets)}
    return header, lengths


def rescale_operator_state(
    handles: list[OperatorStreamHandle | None],
    new_parallelism: int,
    blobs: DelegateBlobs,
    *,
    operator: str,
    kind: str,  # "managed" / "raw"
) -> OperatorStateRescale:
    """Redistribute one operator's managed or raw operator state (``handles`` in old subtask order)."""
    where = f"{operator} {kind} operator state"
    parts = assign(handles, new_parallelism, where)
    present = {j: h for j, h in enumerate(handles) if h is not None}  # every part comes from one of these
    out = OperatorStateRescale([])
    for i, mine in enumerate(parts):
        # Entries without elements only register a state (the header does that too): they pick no stream.
        olds = list(dict.fromkeys(p.old for p in mine if p.offsets)) or list(dict.fromkeys(p.old for p in mine))[:1]
        if not olds:
            out.handles.append(None)
            continue
        if len(olds) == 1:
            out.handles.append(OperatorStreamHandle(_entries(mine), present[olds[0]].delegate))
            out.notes.append(f"{where} of new subtask {i}: {_summary(mine)} from old subtask {olds[0]} (metadata only)")
            continue
        out.handles.append(_merge(present, mine, olds, i, new_parallelism, blobs, where, operator, kind, out))
    return out


def _entries(mine: list[_Part]) -> list[OperatorStateEntry]:
    by_name: dict[str, OperatorStateEntry] = {}
    for p in mine:
        entry = by_name.setdefault(p.name, OperatorStateEntry(p.name, p.mode, []))
        entry.offsets.extend(p.offsets)
    return list(by_name.values())


def _summary(mine: list[_Part]) -> str:
    counts: dict[str, int] = {}
    for p in mine:
        counts[p.name] = counts.get(p.name, 0) + len(p.offsets)
    return ", ".join(f"'{name}' {n} element{'s' if n != 1 else ''}" for name, n in counts.items())


def _merge(
    handles: dict[int, OperatorStreamHandle],
    mine: list[_Part],
    olds: list[int],
    index: int,
    new_parallelism: int,
    blobs: DelegateBlobs,
    where: str,
    operator: str,
    kind: str,
    out: OperatorStateRescale,
) -> OperatorStreamHandle:
    extents = {j: _element_extents(blobs, j, handles[j], f"{where} of old subtask {j}") for j in olds}
    givers = olds
    j0 = givers[0]
    h0 = handles[j0]
    header = extents[j0][0]
    blob0 = open_stream(blobs, h0.delegate, where)
    for j in givers[1:]:
        h = handles[j]
        if extents[j][0] != header or not same_bytes(
            blobs, h0.delegate, blob0, h.delegate, open_stream(blobs, h.delegate, where), header, f"{where} header"
        ):
            raise RescaleRefused(
                f"{where}: new subtask {index} needs elements of old subtasks {j0} and {j}, whose state headers "
                "(registered states and serializers) differ, so they cannot be merged into one file; rescale in Flink"
            )
    name = stable_uuid(
        operator, kind, "operator", new_parallelism, index, *(named_by_flink(handles[j].delegate) for j in olds)
    )
    file = NewStateFile(name)
    file.add_range(h0.delegate, 0, header)
    moved: list[_Part] = []
    for p in mine:
        if not p.offsets:
            moved.append(p)
            continue
        lengths = extents[p.old][1]
        source = handles[p.old].delegate
        moved.append(_Part(p.old, p.name, p.mode, [file.add_range(source, o, lengths[o]) for o in p.offsets]))
    out.files.append(file)
    out.notes.append(
        f"{where} of new subtask {index}: {_summary(mine)} from old subtasks {', '.join(map(str, olds))} merged "
        f"into new file {name} ({file.size} bytes, header {header} bytes once)"
    )
    return OperatorStreamHandle(_entries(moved), file.handle())
