"""Route one old logical channel's elements to their new channels (runs a planned ``SourceChannel``).

Reads the channel's chunks in replay order (``channel_reader``), frames the stream into elements
(``stream_elements``) and emits *runs*: consecutive elements bound for the same new channel, already
framed (4-byte length + element) so a writer only concatenates them. Memory is one block plus one run.

Records go where the edge's rule says. Watermarks and watermark statuses are kept only on new channels
this source alone feeds (elsewhere a watermark could overtake a record of another source that the old
channel delivered before it); latency markers and the other known events are dropped and counted. A
framing fault — a bad length field, an unknown tag, an element of the wrong size for its tag — is
refused (``RouteError``): nothing is guessed.

Uniform runs of equal records go through numpy (``uniform_runs``, ``crc``, ``key_extract``); everything
else element by element. Both paths give the same runs (tests compare them).
"""

from __future__ import annotations

import itertools
import zlib
from collections.abc import Callable, Generator, Iterator, Sequence
from dataclasses import dataclass, field

import numpy as np

from spillway.formats.stream_elements import (
    ELEMENTS,
    LENGTH_FIELD,
    MAX_ELEMENT,
    TAG_WATERMARK,
    TAG_WATERMARK_STATUS,
    ElementKind,
    LengthFault,
    element_fault,
    length_fault,
    split_elements,
)
from spillway.formats.uniform_runs import MIN_RUN, RETRY_AFTER, uniform_records
from spillway.rescale.channel_reader import BLOCK, iter_channel_blocks, with_last
from spillway.rescale.crc import crc32_rows
from spillway.rescale.key_extract import VectorTargets, target_function, vector_target_function
from spillway.rescale.plan import BALANCED, BROADCAST, CUSTOM, GLOBAL, HASH, EdgePlan, SourceChannel
from spillway.rescale.route_error import RouteError

RUN_LIMIT = 256 * 1024  # bytes per emitted run (bounds memory and row size)
KEPT_MARKS = frozenset({TAG_WATERMARK, TAG_WATERMARK_STATUS})  # kept where this source alone feeds a channel

__all__ = ["RUN_LIMIT", "RouteError", "RouteStats", "Run", "route_source"]


@dataclass(slots=True)
class Run:
    up: int  # new upstream subtask (= input channel index on the new downstream)
    down: int  # new downstream subtask
    sid: int
    seq: int  # order of runs of one source
    data: bytes | bytearray  # framed elements
    records: int
    crc: int  # sum of crc32 of each record's element bytes (order-free fingerprint)


@dataclass
class RouteStats:
    records: int = 0
    record_bytes: int = 0
    crc: int = 0
    kept_markers: int = 0
    dropped: dict[str, int] = field(default_factory=dict)  # element kind -> count
    leftover: int = 0  # bytes of an unfinished record at the end (refused by the caller)


def route_source(
    src: SourceChannel,
    ep: EdgePlan,
    stats: RouteStats,
    *,
    block: int | None = None,
    min_run: int = MIN_RUN,
    vectorize: Callable[[EdgePlan], VectorTargets | None] | None = None,
) -> Iterator[Run]:
    """All runs of one old channel, in order. Fills ``stats``. ``block``, ``min_run`` and ``vectorize`` tune
    the numpy path (defaults: ``BLOCK``, ``MIN_RUN``, ``vector_target_function``); the runs do not depend
    on them."""
    block = block or BLOCK
    vector_targets = (vectorize or vector_target_function)(ep)
    router = _Router(src, ep, stats, vector_targets, min_run, block)
    yield from router.route(iter_channel_blocks(src, block))


# A run still being filled: (framed bytes, [records, crc sum]).
_Piece = tuple[int, "bytes | memoryview", int, int]  # (target, framed elements, records, crc sum)


class _Runs:
    """One growing buffer per new channel; it leaves as a ``Run`` when it reaches RUN_LIMIT, or at the end.
    Runs of one target leave in source order, however the targets interleave."""

    def __init__(self, up: int, sid: int) -> None:
        self.up, self.sid = up, sid
        self.seq = 0
        self.open: dict[int, tuple[bytearray, list[int]]] = {}

    def add(self, target: int, framed: bytes | memoryview, records: int, crc: int) -> Run | None:
        entry = self.open.get(target)
        if entry is None:
            entry = self.open[target] = (bytearray(), [0, 0])
        buf, counts = entry
        buf += framed
        counts[0] += records
        counts[1] += crc
        return self.take(target) if len(buf) >= RUN_LIMIT else None

    def take(self, target: int) -> Run | None:
        buf, counts = self.open.pop(target)
        if not buf:
            return None
        run = Run(self.up, target, self.sid, self.seq, buf, counts[0], counts[1])  # handed over, not copied
        self.seq += 1
        return run

    def drain(self) -> Iterator[Run]:
        for target in list(self.open):
            run = self.take(target)
            if run is not None:
                yield run


class _Segments:
    """BALANCED edges: contiguous byte ranges of the old channel, each for one new subtask. A record goes
    to the segment that holds its first byte."""

    def __init__(self, segments: Sequence[tuple[int, int]]) -> None:
        self.segments = list(segments)
        self.limits = np.array([lim for lim, _ in segments], dtype=np.int64)
        self.targets = np.array([t for _, t in segments], dtype=np.int64)
        self.i = 0  # segments only move forward

    def target_at(self, position: int) -> int:
        while self.i < len(self.segments) - 1 and position >= self.segments[self.i][0]:
            self.i += 1
        return self.segments[self.i][1]

    def split(self, position: int, rows: int, stride: int) -> list[tuple[int, int, int]]:
        """(first row, end row, target) for ``rows`` records of ``stride`` bytes starting at ``position``."""
        starts = position + np.arange(rows, dtype=np.int64) * stride
        idx = np.minimum(np.searchsorted(self.limits, starts, side="right"), len(self.segments) - 1)
        idx = np.maximum(idx, self.i)
        cuts = [0, *(np.flatnonzero(np.diff(idx)) + 1).tolist(), rows]
        self.i = int(idx[-1])
        return [(a, b, int(self.targets[idx[a]])) for a, b in itertools.pairwise(cuts)]


def _fixed_targets(ep: EdgePlan, src: SourceChannel) -> list[int] | None:
    """The new subtasks every record of this source goes to, or None when each record has its own."""
    if ep.rule == GLOBAL:
        return [0]
    if ep.rule == BROADCAST:
        return list(range(ep.new_down_p))
    if ep.rule in (HASH, CUSTOM, BALANCED):
        return None
    return [src.down]


class _Router:
    def __init__(
        self,
        src: SourceChannel,
        ep: EdgePlan,
        stats: RouteStats,
        vector_targets: VectorTargets | None,
        min_run: int,
        block: int,
    ) -> None:
        self.src, self.stats = src, stats
        up = ep.new_up(src.up)
        self.per_record = target_function(ep)
        self.vector_targets = vector_targets
        self.fixed = _fixed_targets(ep, src)
        self.keep_marks = sorted(d for u, d in src.watermark_targets if u == up)
        self.segments = _Segments(src.segments)
        self.runs = _Runs(up, src.sid)
        self.min_run, self.block = min_run, block
        self.base = 0  # payload position of the current view's first byte (= payload routed before it)
        self.slow_until = 0  # element by element up to this payload position before trying numpy again

    def route(self, blocks: Iterator[bytes]) -> Iterator[Run]:
        pending = bytearray()  # the unfinished element at the end of the previous block
        for data, last in with_last(blocks):
            if pending:
                pending += data
                view = memoryview(pending)
            else:
                view = memoryview(data)
            p = yield from self._route_view(view, last)
            self.base += p
            pending = bytearray(view[p:])
            view.release()
        self.stats.leftover = len(pending)
        yield from self.runs.drain()

    def _route_view(self, view: memoryview, last: bool) -> Generator[Run, None, int]:
        """Routes the whole elements of ``view``; returns where the unfinished rest starts."""
        n = len(view)
        p = 0
        while n - p >= LENGTH_FIELD:
            if self.base + p >= self.slow_until:
                took = yield from self._route_uniform(view, p, n)
                if took:
                    p += took
                    continue
                if not last and self._too_short_for_a_run(view, p, n):
                    break  # the block ends, not the run: carry the tail into the next block
                self.slow_until = self.base + p + RETRY_AFTER
            p, more = yield from self._route_elements(view, p, n)
            if not more:
                break
        return p

    def _too_short_for_a_run(self, view: memoryview, p: int, n: int) -> bool:
        """Whether numpy may have declined only because ``view`` ends: fewer than ``min_run`` elements of the
        length at ``p`` fit, and that many fit in a block (so carrying them over stays bounded)."""
        length = int.from_bytes(view[p : p + LENGTH_FIELD], "big", signed=True)
        if length_fault(length, None, MAX_ELEMENT) is not None:
            return False
        stride = LENGTH_FIELD + length
        return (n - p) // stride < self.min_run and self.min_run * stride <= self.block

    # ---------------------------------------------------------------- element by element

    def _route_elements(self, view: memoryview, p: int, n: int) -> Generator[Run, None, tuple[int, bool]]:
        """Routes elements from ``p`` until the retry point is passed. Returns (where it stopped, whether
        there may be more: False when the next element does not fit in ``view``)."""
        stop_at = self.slow_until - self.base
        try:
            for at, length, tag in split_elements(view, p, n, limit=MAX_ELEMENT):
                yield from self._route_element(view, at, length, tag)
                p = at + LENGTH_FIELD + length
                if p >= stop_at:
                    return p, True
        except LengthFault as fault:
            raise RouteError(
                f"{self.src.label}: element length {fault.length} at payload byte {self.base + fault.position} "
                "(corrupt framing; run spillway validate)"
            ) from None
        return p, False

    def _route_element(self, view: memoryview, at: int, length: int, tag: int) -> Iterator[Run]:
        fault = element_fault(tag, length)
        if fault is not None:
            raise RouteError(
                f"{self.src.label}: {fault.message} at payload byte {self.base + at} "
                "(corrupt framing; run spillway validate)"
            )
        kind = ELEMENTS[tag]
        framed = view[at : at + LENGTH_FIELD + length]
        stats = self.stats
        if kind.carries_value:
            stats.records += 1
            stats.record_bytes += length
            element = framed[LENGTH_FIELD:]
            targets = self._record_targets(element, kind, self.base + at)
            crc = zlib.crc32(element)
            stats.crc += crc * len(targets)
            for t in targets:
                run = self.runs.add(t, framed, 1, crc)
                if run is not None:
                    yield run
        elif tag in KEPT_MARKS and self.keep_marks:
            stats.kept_markers += 1
            for t in self.keep_marks:
                run = self.runs.add(t, framed, 0, 0)
                if run is not None:
                    yield run
        else:
            stats.dropped[kind.name] = stats.dropped.get(kind.name, 0) + 1

    def _record_targets(self, element: memoryview, kind: ElementKind, position: int) -> list[int]:
        if self.fixed is not None:
            return self.fixed
        if self.per_record is not None:
            return [self.per_record(element[kind.value_offset :])]
        return [self.segments.target_at(position)]

    # ---------------------------------------------------------------- uniform runs with numpy

    def _route_uniform(self, view: memoryview, p: int, n: int) -> Generator[Run, None, int]:
        """Routes the longest run of same-length, same-tag records at ``p`` if it is long enough; returns
        the bytes consumed (0: not a run, go element by element)."""
        rows = uniform_records(view, p, n, self.min_run)
        if rows is None:
            return 0
        k, stride = rows.shape
        self.stats.records += k
        self.stats.record_bytes += k * (stride - LENGTH_FIELD)
        for target, framed, records, crc in self._uniform_pieces(view, p, rows):
            run = self.runs.add(target, framed, records, crc)
            if run is not None:
                yield run
        return k * stride

    def _uniform_pieces(self, view: memoryview, p: int, rows: np.ndarray) -> list[_Piece]:
        k, stride = rows.shape
        crcs = crc32_rows(rows[:, LENGTH_FIELD:])
        stats = self.stats
        if self.fixed is not None:
            crc = int(crcs.sum(dtype=np.uint64))
            stats.crc += crc * len(self.fixed)
            return [(t, view[p : p + k * stride], k, crc) for t in self.fixed]
        if self.per_record is None:  # BALANCED
            pieces: list[_Piece] = []
            for a, b, t in self.segments.split(self.base + p, k, stride):
                crc = int(crcs[a:b].sum(dtype=np.uint64))
                stats.crc += crc
                pieces.append((t, view[p + a * stride : p + b * stride], b - a, crc))
            return pieces
        targets = self._run_targets(view, p, rows)
        stats.crc += int(crcs.sum(dtype=np.uint64))
        pieces = []
        for t in np.unique(targets).tolist():
            mask = targets == t
            pieces.append((t, rows[mask].tobytes(), int(mask.sum()), int(crcs[mask].sum(dtype=np.uint64))))
        return pieces

    def _run_targets(self, view: memoryview, p: int, rows: np.ndarray) -> np.ndarray:
        """New subtask per record of a uniform run: numpy if the extractor allows, else record by record."""
        k, stride = rows.shape
        value_at = ELEMENTS[int(rows[0, LENGTH_FIELD])].value_offset
        assert value_at is not None and self.per_record is not None
        if self.vector_targets is not None:
            targets = self.vector_targets(rows[:, LENGTH_FIELD:], value_at)
            if targets is not None:
                return targets
        base = p + LENGTH_FIELD + value_at
        width = stride - LENGTH_FIELD - value_at
        per_record = self.per_record
        each = [per_record(view[base + i * stride : base + i * stride + width]) for i in range(k)]
        return np.array(each, dtype=np.int64)
