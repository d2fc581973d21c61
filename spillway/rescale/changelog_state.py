"""Keyed state of the changelog state backend (``state.changelog.enabled``) to a new parallelism.

A subtask's ChangelogStateBackendHandle holds a materialized part (the base backend's snapshots: RocksDB
incremental or full key-group handles) and a changelog part (DSTL increments: state changes since the last
materialization). Flink's assignment hands a new subtask the intersection of every old handle with its range
(ChangelogStateBackendHandleImpl.getIntersection: each materialized handle's own intersection, every changelog
increment whose range overlaps); its restore (ChangelogBackendRestoreOperation) gives all materialized handles
to the base backend and then applies each increment's changes, skipping data changes of key groups outside the
backend's range (ChangelogBackendLogApplier). ``_metadata`` holds one keyed handle per subtask, so the new
subtask gets one ChangelogStateBackendHandle with the same materialized handles and increments, in old subtask
order (each old writer's increments stay together, so its state-metadata records still precede its data).
Full key-group handles are cut to the new range (metadata only) as getIntersection cuts them; RocksDB
snapshots and increments are referenced whole, their files where they are.
"""

from __future__ import annotations

from typing import TypeVar

from spillway.model.checkpoint import (
    ChangelogByteIncrementHandle,
    ChangelogFileIncrementHandle,
    ChangelogHandle,
    IncrementalHandle,
    KeyedHandle,
    KeyGroupRange,
    KeyGroupsHandle,
)
from spillway.rescale.state_files import RescaleRefused, stable_uuid

Increment = ChangelogFileIncrementHandle | ChangelogByteIncrementHandle
T = TypeVar("T")


def has_changelog_part(handles: list[KeyedHandle | None]) -> bool:
    return any(isinstance(h, ChangelogHandle) and h.non_materialized for h in handles)


def rescale_changelog(
    handles: list[KeyedHandle | None],
    ranges: list[tuple[int, int]],
    *,
    where: str,
    wrap_snapshots: bool,
    notes: list[str],
) -> list[KeyedHandle | None]:
    """One handle per new subtask (``ranges``: its key groups) from the old subtasks' ``handles``."""
    if not wrap_snapshots:
        raise RescaleRefused(
            f"{where} is changelog state written by Flink 1.15 or earlier, whose format spillway cannot hand "
            "several snapshots per subtask; rescale in Flink"
        )
    snapshots: list[tuple[int, KeyedHandle]] = []
    increments: list[tuple[int, Increment]] = []
    olds: list[tuple[int, ChangelogHandle]] = []
    for j, h in enumerate(handles):
        if isinstance(h, ChangelogHandle):
            olds.append((j, h))
            _add_unique(snapshots, [(j, m) for m in h.materialized])
            _add_unique(increments, [(j, n) for n in _increments(h, f"{where} old subtask {j}")])
        elif h is not None:
            plain: list[tuple[int, KeyedHandle]] = [(j, h)]
            _add_unique(snapshots, plain)
    for j, s in snapshots:
        if not isinstance(s, KeyGroupsHandle | IncrementalHandle):
            raise RescaleRefused(
                f"{where} old subtask {j}: a materialized {type(s).__name__}, which spillway cannot redistribute "
                "offline; rescale in Flink"
            )
    out: list[KeyedHandle | None] = []
    for i, (first, last) in enumerate(ranges):
        mats = [_cut(s, first, last) for _, s in snapshots if _overlaps(s.key_groups, first, last)]
        logs = [n for _, n in increments if _overlaps(n.key_groups, first, last)]
        if not mats and not logs:
            out.append(None)
            continue
        sources = [h for _, h in olds if _overlaps(h.key_groups, first, last)] or [h for _, h in olds]
        notes.append(
            f"{where} new subtask {i} (key groups {first}-{last}): {len(mats)} materialized snapshots and "
            f"{len(logs)} changelog increments of the old subtasks overlapping it, as Flink's own assignment "
            "hands them; its restore keeps only these key groups"
        )
        out.append(
            ChangelogHandle(
                key_groups=KeyGroupRange(first, last - first + 1),
                checkpointed_size=sum(h.checkpointed_size for h in sources),
                materialized=mats,
                non_materialized=list(logs),
                materialization_id=max(h.materialization_id for h in sources),
                checkpoint_id=max(h.checkpoint_id or 0 for h in sources),
                state_handle_id=stable_uuid(where, i, *(h.state_handle_id for h in sources)),
            )
        )
    return out


def _increments(h: ChangelogHandle, where: str) -> list[Increment]:
    out: list[Increment] = []
    for n in h.non_materialized:
        if not isinstance(n, ChangelogFileIncrementHandle | ChangelogByteIncrementHandle):
            raise RescaleRefused(
                f"{where}: a changelog part of type {type(n).__name__}, which spillway cannot redistribute "
                "offline; rescale in Flink"
            )
        out.append(n)
    return out


def _add_unique(into: list[tuple[int, T]], items: list[tuple[int, T]]) -> None:
    """Append each item whose handle is not there yet (a snapshot two old subtasks share counts once)."""
    for j, h in items:
        if not any(h == seen for _, seen in into):
            into.append((j, h))


def _overlaps(r: KeyGroupRange, first: int, last: int) -> bool:
    return r.count > 0 and max(r.start, first) <= min(r.last, last)


def _cut(h: KeyedHandle, first: int, last: int) -> KeyedHandle:
    """A full key-group handle cut to ``first..last`` (offsets only); anything else whole."""
    if not isinstance(h, KeyGroupsHandle):
        return h
    lo, hi = max(h.key_groups.start, first), min(h.key_groups.last, last)
    if (lo, hi) == (h.key_groups.start, h.key_groups.last):
        return h
    skip = lo - h.key_groups.start
    return KeyGroupsHandle(
        KeyGroupRange(lo, hi - lo + 1),
        list(h.offsets[skip : skip + hi - lo + 1]),
        h.delegate,
        h.state_handle_id,
        h.code,
    )
