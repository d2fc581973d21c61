"""Which element's length field broke a channel's framing, and what Flink's reader does with it.

A damaged length field is seldom where the framing visibly breaks: a length that is too large sends a reader
past the next elements, into their bytes, and the fault shows where that parse lands. ``locate`` walks the
channel's elements up to the first fault, then asks of each element start before it (and of the faulty one):
which length makes this element well formed and lets everything after it frame cleanly to the channel's end?
Each such correction frames the whole channel; one at the wrong element makes an element swallow bytes that
frame as elements of their own, so it yields fewer elements. The damaged field is the one whose correction
frames the channel into the most elements. A tie (typical of a too-small length whose parse lands near the
next element) or no correction at all is reported as such, never as the damaged field.

``flink_reading`` applies the facts of docs/format/damaged-records.md: Flink's
``SpillingAdaptiveSpanningRecordDeserializer`` trusts a length field only to decide whether the element is
whole in the current network buffer; a whole one is read by the element serializer, which ignores the length.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass, replace

from spillway.formats.stream_elements import ALL_TAGS, ELEMENTS, LENGTH_FIELD, element_fault, length_fault

# Flink's default network buffer (``taskmanager.memory.segment-size``): recovered channel state is handed to
# the reader in buffers of this size, each cut from one chunk.
FLINK_SEGMENT_SIZE = 32 * 1024
# Above this length Flink's SpanningWrapper spills the partial element to a temporary file.
FLINK_SPILL_THRESHOLD = 5 * 1024 * 1024
# How many element starts before the fault are tried, and how many positions after one, at most.
WINDOW_ELEMENTS = 64
SCAN_LIMIT = 1 << 20
# Positions tried in all, so a channel of garbage cannot hold validate up for minutes.
SEARCH_BUDGET = 1 << 22

_INT = struct.Struct(">i")


@dataclass(frozen=True, slots=True)
class Damage:
    position: int  # of the damaged length field in the channel's bytes
    index: int  # of the element on the channel, from 0
    read: int  # the length field's value
    fits: int  # the length that lets the rest of the channel frame cleanly
    broke_at: int  # where the framing first faulted (the damaged field itself, or where the parse landed)
    # Elements after it up to where its length says it ends (or the channel's end): what a reader that trusts
    # the length passes over.
    passed_over: int = 0


@dataclass(frozen=True, slots=True)
class Location:
    """``damage``: the one element that explains the fault; else ``candidates`` (none, or several)."""

    broke_at: int
    damage: Damage | None
    candidates: tuple[Damage, ...]
    searched: bool = True  # False: the search gave up (``SEARCH_BUDGET``) before trying every element start


def _walk(data: bytes | bytearray, tags: frozenset[int]) -> tuple[list[tuple[int, int]], int | None]:
    """(position, length) of each element start up to and including the first faulty one, and the position
    of that fault (None: the channel frames cleanly)."""
    end, p, starts = len(data), 0, []
    while p < end:
        if end - p < LENGTH_FIELD:
            starts.append((p, -1))
            return starts, p
        (length,) = _INT.unpack_from(data, p)
        starts.append((p, length))
        if length_fault(length, end - p - LENGTH_FIELD) is not None:
            return starts, p
        if element_fault(data[p + LENGTH_FIELD], length, tags) is not None:
            return starts, p
        p += LENGTH_FIELD + length
    return starts, None


class _GaveUp(Exception):
    pass


class _Tail:
    """How many elements frame cleanly from a position to the channel's end; -1 if they do not (memoised)."""

    def __init__(self, data: bytes | bytearray, tags: frozenset[int]) -> None:
        self.data, self.tags, self.end = data, tags, len(data)
        self.known: dict[int, int] = {self.end: 0}
        self.budget = SEARCH_BUDGET

    def elements(self, q: int) -> int:
        data, end, path = self.data, self.end, []
        while q not in self.known:
            path.append(q)
            if end - q < LENGTH_FIELD:
                q = -1
                break
            (length,) = _INT.unpack_from(data, q)
            if length_fault(length, end - q - LENGTH_FIELD) is not None or element_fault(
                data[q + LENGTH_FIELD], length, self.tags
            ):
                q = -1
                break
            q += LENGTH_FIELD + length
        count = -1 if q == -1 else self.known[q]
        for p in reversed(path):
            count = -1 if count < 0 else count + 1
            self.known[p] = count
        return count


def _fitting_length(tail: _Tail, start: int, read: int, stop: int) -> tuple[int, int] | None:
    """The shortest length for the element at ``start`` after which the channel frames cleanly, ending no
    later than ``stop``, and how many elements then follow it; None if there is none."""
    data = tail.data
    if start + LENGTH_FIELD >= tail.end:
        return None
    kind = ELEMENTS.get(data[start + LENGTH_FIELD])
    if kind is None or kind.tag not in tail.tags:
        return None
    first = start + LENGTH_FIELD + kind.min_length
    last = start + LENGTH_FIELD + kind.max_length if not kind.carries_value else stop
    last = min(last, stop, first + SCAN_LIMIT)
    for q in range(first, last + 1):
        if q - start - LENGTH_FIELD != read:
            following = tail.elements(q)
            if following >= 0:
                tail.budget -= q - first
                return q - start - LENGTH_FIELD, following
    tail.budget -= last + 1 - first
    if tail.budget < 0:
        raise _GaveUp
    return None


def _passed_over(data: bytes | bytearray, position: int, read: int, fits: int) -> int:
    claimed_end = position + LENGTH_FIELD + read
    stop = claimed_end if read > 0 and claimed_end <= len(data) else len(data)
    q, count = position + LENGTH_FIELD + fits, 0
    while q < stop:
        (length,) = _INT.unpack_from(data, q)
        q += LENGTH_FIELD + length
        count += 1
    return count


def locate(data: bytes | bytearray, tags: frozenset[int] = ALL_TAGS) -> Location | None:
    """Where the damaged length field of a whole logical channel is; None if the channel frames cleanly."""
    starts, broke_at = _walk(data, tags)
    if broke_at is None:
        return None
    tail = _Tail(data, tags)
    found: list[tuple[int, Damage]] = []  # (elements the channel frames into with the correction, damage)
    first = max(0, len(starts) - WINDOW_ELEMENTS)
    for index in range(len(starts) - 1, first - 1, -1):
        position, read = starts[index]
        following = starts[index + 1][0] if index + 1 < len(starts) else None
        if following is None and len(data) - position < LENGTH_FIELD:
            continue  # a length field cut short by the channel's end: no length to correct
        try:
            fitting = _fitting_length(tail, position, read, len(data))
        except _GaveUp:
            return Location(broke_at, None, (), searched=False)
        if fitting is None:
            continue
        fits, after = fitting
        found.append((index + 1 + after, Damage(position, index, read, fits, broke_at, 0)))
    # Each correction frames the whole channel; one that makes an element swallow bytes that frame as elements
    # of their own yields fewer elements. The damaged field is the one whose correction keeps the most.
    most = max((count for count, _ in found), default=0)
    best = [d for count, d in found if count == most]
    if len(best) == 1:
        d = best[0]
        return Location(broke_at, replace(d, passed_over=_passed_over(data, d.position, d.read, d.fits)), ())
    return Location(broke_at, None, tuple(best))


# ---------------------------------------------------------------------------------------------------
# What Flink's reader does with the damaged element (docs/format/damaged-records.md).


@dataclass(frozen=True, slots=True)
class FlinkReading:
    outcome: str  # "reads", "fails", "drops", "swallows"
    text: str


def recovered_buffers(chunks: list[tuple[int, int]], buffer_size: int) -> list[tuple[int, int]]:
    """The network buffers Flink hands its reader on recovery, as (start, end) in the channel's bytes: each
    chunk (start, length) cut into pieces of ``buffer_size`` from its start."""
    out = []
    for start, length in chunks:
        at, end = start, start + length
        while at < end:
            out.append((at, min(at + buffer_size, end)))
            at += buffer_size
    return out


def flink_reading(damage: Damage, buffers: list[tuple[int, int]], channel_end: int) -> FlinkReading:
    """What Flink's deserializer does on restore with the damaged element, given the recovered buffers."""
    p, read, fits, dropped = damage.position, damage.read, damage.fits, damage.passed_over
    buffer_end = next((end for start, end in buffers if start <= p < end), channel_end)
    if p + LENGTH_FIELD <= buffer_end:
        room = buffer_end - p - LENGTH_FIELD
        if read <= room:
            if fits <= room:
                return FlinkReading(
                    "reads",
                    "Flink would read this element anyway: it is whole in its network buffer, where Flink's reader"
                    " does not check the length field",
                )
            return FlinkReading(
                "fails",
                "Flink would fail reading it: the element runs past its network buffer while the length says it"
                ' does not ("Serializer consumed more bytes than the record had")',
            )
    elif read == 0:
        return FlinkReading("fails", "Flink would fail reading it: the length prefix spans two buffers and says 0")
    if read < 0:
        return _swallows(dropped, "its length prefix spans two buffers and a negative length never completes")
    if p + LENGTH_FIELD + read <= channel_end:
        return FlinkReading(
            "drops",
            f"Flink would read this element from its first {fits} bytes, silently drop the {dropped} element(s)"
            f" in the rest of the claimed {read} bytes, then read on from inside an element, where it fails, reads"
            " garbage or waits for bytes that never come",
        )
    return _swallows(dropped, f"it waits for {read} bytes and the channel ends first")


def _swallows(dropped: int, why: str) -> FlinkReading:
    return FlinkReading(
        "swallows",
        f"Flink would silently swallow the rest of this channel ({why}): this element, the {dropped} after it and"
        " whatever the upstream sends on the channel after the restore are never processed; at the end of input"
        " Flink discards the partial element without an error, so the job can finish successfully without them",
    )
