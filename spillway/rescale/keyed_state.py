"""Keyed state to a new parallelism: new subtask i owns key groups ``key_group_range(maxP, newP, i)``.

* Full snapshots (KeyGroupsStateHandle, codes 12/3/7): a stream = header (the keyed backend's serialization
  proxy) followed by one section per key group at the handle's offsets, in key-group order. A new range inside
  one old handle is that handle with its offsets cut (metadata only, the bytes stay where they are). A range
  spanning several handles becomes one new file: the header once (all headers must be byte-identical), then
  every key group's section, with recomputed offsets.
  Offset 0 marks an empty key group in savepoints/full RocksDB snapshots (Flink skips it on restore); it is
  kept as 0. Section k = [offset[k], the next key group's non-zero offset, or the end of the stream).
* RocksDB/ForSt incremental handles: every old handle whose range overlaps the new subtask's goes to it whole,
  as Flink's own assignment does (StateAssignmentOperation hands a new subtask each overlapping handle;
  IncrementalRemoteKeyedStateHandle.getIntersection returns the handle itself), and the backend's restore clips
  key groups outside its range. One handle is stored as it is. ``_metadata`` holds one keyed handle per
  subtask (Flink serializes ``extractSingleton``), so several are stored as the materialized part of one
  ChangelogStateBackendHandle (code 14) with no changelog part: from Flink 1.16 on a job without the changelog
  backend restores it through DeactivatedChangelogStateBackend, which passes all materialized handles to the
  base backend (ChangelogBackendRestoreOperation.extractBaseState), i.e. the same list Flink's assignment gives.
  Older formats (Flink 1.15 and earlier) have no such wrapper: refused. Shared files stay where they are and
  are named by the same handles; Flink's shared-state registry accepts an equal handle registered twice.
* Changelog handles without a changelog (non-materialized) part, as spillway writes them: their materialized
  handles are redistributed as above. With changelog parts: ``changelog_state``. Anything else: refused.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, cast

from spillway.flink.features import FormatFeatures, Release
from spillway.flink.keygroups import key_group_range
from spillway.formats.errors import CheckpointFormatError
from spillway.model.checkpoint import (
    ChangelogByteIncrementHandle,
    ChangelogFileIncrementHandle,
    ChangelogHandle,
    IncrementalHandle,
    KeyedHandle,
    KeyGroupRange,
    KeyGroupsHandle,
)
from spillway.rescale.changelog_state import has_changelog_part, rescale_changelog
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


@dataclass
class KeyedRescale:
    handles: list[KeyedHandle | None]  # one per new subtask
    files: list[NewStateFile] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)


@dataclass
class _Sections:
    """Where each key group of one full-snapshot handle lies in its stream."""

    handle: KeyGroupsHandle
    header_end: int | None  # None: every key group is empty (no offset), header length unknown
    extents: dict[int, tuple[int, int]]  # key group -> (offset, length); absent = empty (offset 0)


def _overlap(r: KeyGroupRange, first: int, last: int) -> tuple[int, int] | None:
    lo, hi = max(r.start, first), min(r.last, last)
    return (lo, hi) if lo <= hi and r.count > 0 else None


# The first release whose format carries ChangelogStateBackendHandle V2 and that restores it without the
# changelog backend (DeactivatedChangelogStateBackend): checked in the 1.15.4, 1.16.3, 1.20.3 and 2.3.0 jars.
WRAPPED_SNAPSHOTS_FROM = Release(1, 16)


def can_wrap_snapshots(features: FormatFeatures | None) -> bool:
    """Whether every release that writes this format restores several snapshots wrapped in one handle."""
    first = features.first_release if features is not None else None
    return first is not None and first >= WRAPPED_SNAPSHOTS_FROM


def _unwrap(handle: KeyedHandle | None) -> list[KeyedHandle]:
    """A changelog handle without changelog part stands for its materialized snapshots (several after an
    offline rescale); any other handle for itself."""
    if handle is None:
        return []
    if isinstance(handle, ChangelogHandle) and not handle.non_materialized and handle.materialized:
        return list(handle.materialized)
    return [handle]


def _refuse_kind(handle: KeyedHandle, where: str) -> None:
    if isinstance(handle, ChangelogHandle | ChangelogByteIncrementHandle | ChangelogFileIncrementHandle):
        raise RescaleRefused(
            f"{where} is changelog state (state changelog enabled), which spillway cannot redistribute offline; "
            "rescale in Flink, or take a canonical savepoint and rescale that"
        )
    if not isinstance(handle, KeyGroupsHandle | IncrementalHandle):
        raise RescaleRefused(
            f"{where} is a {type(handle).__name__}, which spillway cannot redistribute offline; rescale in Flink"
        )


def _sections(blobs: DelegateBlobs, h: KeyGroupsHandle, where: str) -> _Sections:
    """Key-group extents of a full-snapshot stream, every offset checked against the stream's bounds."""
    if len(h.offsets) != h.key_groups.count:
        raise CheckpointFormatError(
            describe(blobs, h.delegate),
            None,
            where,
            f"{len(h.offsets)} offsets for {h.key_groups.count} key groups",
        )
    blob = open_stream(blobs, h.delegate, where)
    present = [(h.key_groups.start + i, off) for i, off in enumerate(h.offsets) if off != 0]
    if not present:
        return _Sections(h, None, {})
    header_end = present[0][1]
    extents: dict[int, tuple[int, int]] = {}
    for n, (kg, off) in enumerate(present):
        end = present[n + 1][1] if n + 1 < len(present) else blob.size
        if off < header_end or off > end or end > blob.size:
            raise CheckpointFormatError(
                describe(blobs, h.delegate),
                off,
                f"{where} key group {kg}",
                f"offset {off} is not in ascending key-group order inside the {blob.size}-byte stream",
            )
        extents[kg] = (off, end - off)
    return _Sections(h, header_end, extents)


def rescale_keyed(
    handles: list[KeyedHandle | None],
    max_parallelism: int,
    new_parallelism: int,
    blobs: DelegateBlobs,
    *,
    operator: str,
    kind: str,  # "managed" / "raw"
    wrap_snapshots: bool = False,
) -> KeyedRescale:
    """Redistribute one operator's managed or raw keyed state (``handles`` in old subtask order).
    ``wrap_snapshots``: the checkpoint's format can carry several incremental snapshots for one subtask
    (``can_wrap_snapshots``)."""
    ranges = [key_group_range(max_parallelism, new_parallelism, i) for i in range(new_parallelism)]
    if has_changelog_part(handles):
        where = f"{operator} {kind} keyed state"
        notes: list[str] = []
        new = rescale_changelog(handles, ranges, where=where, wrap_snapshots=wrap_snapshots, notes=notes)
        return KeyedRescale(new, notes=notes)
    present: list[tuple[int, KeyedHandle]] = []
    for j, h in enumerate(handles):
        for u in _unwrap(h):
            # A snapshot an earlier offline rescale handed to several subtasks is one snapshot: restored once.
            if not any(u == seen for _, seen in present):
                present.append((j, u))
    for j, h in present:
        _refuse_kind(h, f"{operator} subtask {j} {kind} keyed state")
    out = KeyedRescale([])
    for i in range(new_parallelism):
        first, last = key_group_range(max_parallelism, new_parallelism, i)
        hits = [(j, h) for j, h in present if _overlap(h.key_groups, first, last)]
        if not hits:
            out.handles.append(None)
            continue
        where = f"{operator} new subtask {i} {kind} keyed state (key groups {first}-{last})"
        kinds = {type(h) for _, h in hits}
        if len(kinds) > 1:
            raise RescaleRefused(
                f"{where} would mix {' and '.join(sorted(k.__name__ for k in kinds))} handles; rescale in Flink"
            )
        if isinstance(hits[0][1], IncrementalHandle):
            out.handles.append(_incremental(hits, first, last, where, out, wrap_snapshots))
        else:
            out.handles.append(_full(hits, first, last, where, blobs, out, operator, kind, new_parallelism, i))
    return out


def _incremental(
    hits: list[Any], first: int, last: int, where: str, out: KeyedRescale, wrap_snapshots: bool
) -> KeyedHandle:
    olds = ", ".join(f"#{j} [{h.key_groups.start}-{h.key_groups.last}]" for j, h in hits)
    if len(hits) == 1:
        j, h = hits[0]
        out.notes.append(
            f"{where}: RocksDB incremental state of old subtask {j} (key groups {h.key_groups.start}-"
            f"{h.key_groups.last}) kept whole; Flink drops the key groups outside {first}-{last} on restore"
        )
        return cast(KeyedHandle, h)
    if not wrap_snapshots:
        raise RescaleRefused(
            f"{where} needs the RocksDB incremental snapshots of old subtasks {olds}; this checkpoint's format "
            "(Flink 1.15 or earlier) stores one keyed handle per subtask and its Flink cannot restore several "
            "wrapped in one; rescale in Flink or take a canonical savepoint and rescale that"
        )
    snapshots = [cast(IncrementalHandle, h) for _, h in hits]
    out.notes.append(
        f"{where}: RocksDB incremental snapshots of old subtasks {olds} handed over whole, as Flink's own "
        f"assignment does; its restore keeps only key groups {first}-{last}"
    )
    return ChangelogHandle(
        key_groups=KeyGroupRange(first, last - first + 1),
        checkpointed_size=sum(s.checkpointed_size or 0 for s in snapshots),
        materialized=list(snapshots),
        non_materialized=[],
        materialization_id=max(s.checkpoint_id for s in snapshots),
        checkpoint_id=max(s.checkpoint_id for s in snapshots),
        state_handle_id=stable_uuid(where, *(s.state_handle_id or s.backend_identifier for s in snapshots)),
    )


def _full(
    hits: list[Any],
    first: int,
    last: int,
    where: str,
    blobs: DelegateBlobs,
    out: KeyedRescale,
    operator: str,
    kind: str,
    new_parallelism: int,
    index: int,
) -> KeyGroupsHandle:
    codes = {h.code for _, h in hits}
    if len(codes) > 1:
        raise RescaleRefused(f"{where} would mix key-group handle kinds {sorted(codes)}; rescale in Flink")
    covered = sorted(
        kg for _, h in hits for kg in range(max(first, h.key_groups.start), min(last, h.key_groups.last) + 1)
    )
    if covered != list(range(covered[0], covered[-1] + 1)):
        raise RescaleRefused(f"{where}: the old handles leave gaps or overlap in key groups; rescale in Flink")
    new_range = KeyGroupRange(covered[0], len(covered))
    if len(hits) == 1:
        j, h = hits[0]
        lo = new_range.start - h.key_groups.start
        out.notes.append(
            f"{where}: cut from old subtask {j}'s key groups {h.key_groups.start}-{h.key_groups.last} (metadata only)"
        )
        return KeyGroupsHandle(
            new_range,
            list(h.offsets[lo : lo + new_range.count]),
            h.delegate,
            h.state_handle_id,
            h.code,
        )
    return _merge(hits, new_range, where, blobs, out, operator, kind, new_parallelism, index)


def _merge(
    hits: list[Any],
    new_range: KeyGroupRange,
    where: str,
    blobs: DelegateBlobs,
    out: KeyedRescale,
    operator: str,
    kind: str,
    new_parallelism: int,
    index: int,
) -> KeyGroupsHandle:
    sections = [(j, _sections(blobs, h, f"{operator} old subtask {j} {kind} keyed state")) for j, h in hits]
    with_header = [(j, s) for j, s in sections if s.header_end is not None]
    code = hits[0][1].code
    if not with_header:
        # Only empty key groups: the first handle's stream (header only) serves, no new file needed.
        j, h = hits[0]
        out.notes.append(f"{where}: all key groups empty; old subtask {j}'s stream reused (metadata only)")
        return KeyGroupsHandle(new_range, [0] * new_range.count, h.delegate, h.state_handle_id, code)
    j0, s0 = with_header[0]
    h0, header_end = s0.handle, s0.header_end
    assert header_end is not None  # with_header holds only sections with a header
    blob0 = open_stream(blobs, h0.delegate, where)
    for j, s in with_header[1:]:
        blob = open_stream(blobs, s.handle.delegate, where)
        if s.header_end != header_end or not same_bytes(
            blobs, h0.delegate, blob0, s.handle.delegate, blob, header_end, f"{where} header"
        ):
            raise RescaleRefused(
                f"{where} needs key groups of old subtasks {j0} and {j}, whose snapshot headers (registered "
                "states and serializers) differ, so they cannot be merged into one file; rescale in Flink"
            )
    name = stable_uuid(operator, kind, "keyed", new_parallelism, index, *(named_by_flink(h.delegate) for _, h in hits))
    file = NewStateFile(name)
    file.add_range(h0.delegate, 0, header_end)
    by_kg = {kg: (s.handle.delegate, ext) for _, s in sections for kg, ext in s.extents.items()}
    offsets: list[int] = []
    for kg in range(new_range.start, new_range.last + 1):
        hit = by_kg.get(kg)
        if hit is None:
            offsets.append(0)  # empty key group (only full RocksDB snapshots / savepoints write 0)
            continue
        delegate, (off, length) = hit
        offsets.append(file.add_range(delegate, off, length))
    out.files.append(file)
    olds = ", ".join(f"{j} [{h.key_groups.start}-{h.key_groups.last}]" for j, h in hits)
    out.notes.append(
        f"{where}: merged from old subtasks {olds} into new file {name} ({file.size} bytes, header "
        f"{header_end} bytes once)"
    )
    state_id = stable_uuid(name, "handle") if code == 12 else None
    return KeyGroupsHandle(new_range, offsets, file.handle(), state_id, code)
