"""Keyed-state rules: ``key-group-tiling``, ``key-group-gap``, ``key-group-range``, ``key-group-clipped``."""

from __future__ import annotations

from collections.abc import Iterator

from spillway.flink.keygroups import key_group_range
from spillway.inspect.findings import Finding
from spillway.model.checkpoint import IncrementalHandle, KeyedHandle, KeyGroupsHandle, OperatorState

KINDS = ("managed_keyed_state", "raw_keyed_state")


def key_group_findings(op: OperatorState, label: str | None = None) -> Iterator[Finding]:
    """Each kind of keyed state of one operator: every subtask's range on its own, then how they tile.
    ``label``: how the operator is shown (default ``op.label()``)."""
    label = label or op.label()
    for kind in KINDS:
        ranges: list[tuple[int, int, int]] = []  # (first, last, subtask) of the key groups each subtask restores
        for sub in op.subtasks:
            h = getattr(sub, kind)
            if h is not None:
                yield from _range_findings(op, label, kind, sub.index, h, ranges)
        if ranges:
            yield from _tiling_findings(op, label, kind, ranges)


def _range_findings(
    op: OperatorState, label: str, kind: str, index: int, h: KeyedHandle, ranges: list[tuple[int, int, int]]
) -> Iterator[Finding]:
    kg = h.key_groups
    if isinstance(h, IncrementalHandle) and 0 < op.parallelism <= op.max_parallelism:
        # A whole RocksDB instance handed to a subtask whose range it contains (offline rescale):
        # Flink deletes the key groups outside the range on restore, so only the range counts.
        lo, hi = key_group_range(op.max_parallelism, op.parallelism, index)
        if kg.start <= lo and hi <= kg.last and (kg.start, kg.last) != (lo, hi):
            message = f"{kind} covers [{kg.start}, {kg.last}]; Flink restores only [{lo}, {hi}] of it"
            yield Finding("key-group-clipped", message, operator=label, subtask=index)
            ranges.append((lo, hi, index))
            return
    ranges.append((kg.start, kg.last, index))
    if kg.count and (kg.start < 0 or kg.last >= op.max_parallelism):
        message = f"{kind} key groups [{kg.start}, {kg.last}] outside [0, {op.max_parallelism})"
        yield Finding("key-group-tiling", message, operator=label, subtask=index)
    if isinstance(h, KeyGroupsHandle) and len(h.offsets) != kg.count:
        message = f"{len(h.offsets)} offsets for {kg.count} key groups"
        yield Finding("key-group-tiling", message, operator=label, subtask=index)
    if 0 < op.parallelism <= op.max_parallelism and 0 <= index < op.parallelism:
        expected = key_group_range(op.max_parallelism, op.parallelism, index)
        if kg.count and (kg.start, kg.last) != expected:
            message = f"{kind} covers [{kg.start}, {kg.last}], Flink assigns [{expected[0]}, {expected[1]}]"
            yield Finding("key-group-range", message, operator=label, subtask=index)


def _tiling_findings(op: OperatorState, label: str, kind: str, ranges: list[tuple[int, int, int]]) -> Iterator[Finding]:
    """Overlaps and gaps between the subtasks' ranges, in key-group order."""
    covered = 0
    for first, last, index in sorted(ranges):
        start = max(first, 0)  # key groups below 0 are outside, said by _range_findings; no subtask holds them too
        if start > last:
            continue
        if start < covered:
            message = f"{kind} key groups [{start}, {min(last, covered - 1)}] also held by another subtask"
            yield Finding("key-group-tiling", message, operator=label, subtask=index)
        elif start > covered:
            message = f"{kind}: no subtask holds key groups [{covered}, {start - 1}]"
            yield Finding("key-group-gap", message, operator=label)
        covered = max(covered, last + 1)
    if covered < op.max_parallelism:
        message = f"{kind}: no subtask holds key groups [{covered}, {op.max_parallelism - 1}]"
        yield Finding("key-group-gap", message, operator=label)
