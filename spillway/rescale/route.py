"""Route one old logical channel's elements to their new channels (runs a planned ``SourceChannel``).

Reads the channel's chunks in replay order (input part, then output part), frames the stream into
elements and emits *runs*: consecutive elements bound for the same new channel, already framed
(4-byte length + element) so a writer only concatenates them. Memory is one chunk plus one run.

Records go where the edge's rule says. Watermarks and watermark statuses are kept only on new
channels this source alone feeds (elsewhere a watermark could overtake a record of another source
that the old channel delivered before it); latency markers and other events are dropped. Everything
dropped is counted.
"""

from __future__ import annotations

import functools
import importlib
import itertools
import zlib
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field

import numpy as np

from spillway.errors import SpillwayError
from spillway.flink.keygroups import key_group_for_hash, operator_index
from spillway.formats.channel_file import FileBlob, InlineBlob, read_chunk_header
from spillway.formats.stream_elements import (
    TAG_NAMES,
    TAG_RECORD,
    TAG_RECORD_WITH_TIMESTAMP,
    TAG_WATERMARK,
    TAG_WATERMARK_STATUS,
)
from spillway.rescale.plan import BALANCED, BROADCAST, CUSTOM, GLOBAL, HASH, EdgePlan, PartRef, SourceChannel

RUN_LIMIT = 256 * 1024  # bytes per emitted run (bounds memory and row size)
BLOCK = 1024 * 1024  # chunks are gathered into blocks of about this size before framing (fewer numpy calls)
FAST_MIN = 32  # uniform records needed before the vectorized path pays off
MAX_ELEMENT = 256 * 1024 * 1024  # a length field above this is corruption, not a record


class RouteError(SpillwayError):
    """The old channel cannot be read or framed (names the channel and position)."""


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


def _open(part: PartRef) -> FileBlob | InlineBlob:
    if part.data is not None:
        return InlineBlob("inline", part.data)
    assert part.path is not None
    from pathlib import Path

    return FileBlob(Path(part.path), part.base, part.size)


def iter_channel_bytes(src: SourceChannel) -> Iterator[bytes]:
    """The old logical channel's payload, chunk by chunk, in replay order."""
    for part in src.parts:
        blob = _open(part)
        try:
            for off in part.offsets:
                chunk = read_chunk_header(blob, off)
                yield blob.read_at(off + 4, chunk.length)
        finally:
            blob.close()


def iter_channel_blocks(src: SourceChannel, size: int | None = None) -> Iterator[bytes]:
    """The same payload in blocks of at least ``size`` (default BLOCK) bytes (the last one shorter)."""
    size = size or BLOCK
    parts: list[bytes] = []
    held = 0
    for data in iter_channel_bytes(src):
        parts.append(data)
        held += len(data)
        if held >= size:
            yield b"".join(parts)
            parts, held = [], 0
    if parts:
        yield b"".join(parts)


def load_key_fn(spec: str) -> Callable[..., object]:
    module, _, name = spec.partition(":")
    if not module or not name:
        raise RouteError(f"--key-fn {spec!r}: expected module:function")
    try:
        fn = getattr(importlib.import_module(module), name)
    except (ImportError, AttributeError) as exc:
        raise RouteError(f"--key-fn {spec!r}: {exc}") from None
    if not callable(fn):
        raise RouteError(f"--key-fn {spec!r} is not callable")
    return fn  # type: ignore[no-any-return]


def java_hash_of(key: object) -> int:
    """Java hashCode of a key a --key-fn returned: int -> taken as the hash code itself, str -> String."""
    from spillway.flink.keygroups import java_string_hash

    if isinstance(key, bool):
        return 1231 if key else 1237
    if isinstance(key, int):
        return key
    if isinstance(key, str):
        return java_string_hash(key)
    raise RouteError(f"--key-fn returned {type(key).__name__}; return the key's Java hashCode (int) or a str")


def target_function(ep: EdgePlan) -> Callable[[memoryview], int] | None:
    """payload (the serialized value, after tag and timestamp) -> new downstream subtask; None if per-source."""
    if ep.rule == HASH:
        if ep.key_fn:
            fn = load_key_fn(ep.key_fn)

            def by_fn(payload: memoryview) -> int:
                kg = key_group_for_hash(java_hash_of(fn(bytes(payload))), ep.max_parallelism)
                return operator_index(ep.max_parallelism, ep.new_down_p, kg)

            return by_fn
        from spillway.formats.values import parse_key_extractor

        extract = parse_key_extractor(ep.key or "")

        def by_key(payload: memoryview) -> int:
            kg = key_group_for_hash(extract(payload)[1], ep.max_parallelism)
            return operator_index(ep.max_parallelism, ep.new_down_p, kg)

        return by_key
    if ep.rule == CUSTOM:
        fn = load_key_fn(ep.key_fn or "")

        def custom(payload: memoryview) -> int:
            t = fn(bytes(payload), ep.new_down_p)
            if not isinstance(t, int) or not 0 <= t < ep.new_down_p:
                raise RouteError(f"--key-fn {ep.key_fn} returned {t!r}, not a subtask in [0, {ep.new_down_p})")
            return t

        return custom
    return None


def route_source(src: SourceChannel, ep: EdgePlan, stats: RouteStats) -> Iterator[Run]:
    """All runs of one old channel, in order. Fills ``stats``."""
    up = ep.new_up(src.up)
    per_record = target_function(ep)
    vector_targets = vector_target_function(ep)
    if ep.rule == GLOBAL:
        fixed: list[int] | None = [0]
    elif ep.rule == BROADCAST:
        fixed = list(range(ep.new_down_p))
    elif ep.rule in (HASH, CUSTOM, BALANCED):
        fixed = None
    else:
        fixed = [src.down]
    keep_marks = sorted(d for u, d in src.watermark_targets if u == up)
    segments = list(src.segments)
    seg_limits = np.array([lim for lim, _ in segments], dtype=np.int64)
    seg_targets = np.array([t for _, t in segments], dtype=np.int64)
    seg_i = 0
    runs: dict[int, tuple[bytearray, list[int]]] = {}  # target -> (framed bytes, [records, crc])
    seq = 0
    consumed = 0  # payload bytes of the old channel consumed so far (for BALANCED segments)

    def flush(target: int) -> Iterator[Run]:
        nonlocal seq
        buf, counts = runs.pop(target)
        if buf:
            yield Run(up, target, src.sid, seq, buf, counts[0], counts[1])  # handed over, not copied
            seq += 1

    def add_framed(t: int, framed: bytes | memoryview, records: int, crc: int) -> Iterator[Run]:
        # One buffer per target: runs of one target leave in source order, whatever the interleaving.
        entry = runs.get(t)
        if entry is None:
            entry = runs[t] = (bytearray(), [0, 0])
        buf, counts = entry
        buf += framed
        counts[0] += records
        counts[1] += crc
        if len(buf) >= RUN_LIMIT:
            yield from flush(t)

    def add(targets: list[int], element: memoryview, is_record: bool, crc: int) -> Iterator[Run]:
        framed = len(element).to_bytes(4, "big", signed=True) + element
        for t in targets:
            yield from add_framed(t, framed, 1 if is_record else 0, crc)

    def route_uniform(view: memoryview, p: int, n: int) -> int:
        """Vectorized routing of the longest run of same-length, same-tag records at ``p`` (if long
        enough): returns the bytes consumed (0: use the per-element path). Emits into ``pieces``."""
        nonlocal seg_i
        rows = uniform_records(view, p, n)
        if rows is None:
            return 0
        k, stride = rows.shape
        length = stride - 4
        tag = int(rows[0, 4])
        crcs = crc32_rows(rows[:, 4:])
        total = k * stride
        stats.records += k
        stats.record_bytes += k * length
        if fixed is not None:
            crc = int(crcs.sum(dtype=np.uint64))
            stats.crc += crc * len(fixed)
            for t in fixed:
                pieces.append((t, view[p : p + total], k, crc))
        elif per_record is None:  # BALANCED: segments are contiguous byte ranges of the old channel
            before = consumed + np.arange(k, dtype=np.int64) * stride
            idx = np.minimum(np.searchsorted(seg_limits, before, side="right"), len(segments) - 1)
            idx = np.maximum(idx, seg_i)
            cuts = [0, *(np.flatnonzero(np.diff(idx)) + 1).tolist(), k]
            for a, b in itertools.pairwise(cuts):
                crc = int(crcs[a:b].sum(dtype=np.uint64))
                stats.crc += crc
                pieces.append((int(seg_targets[idx[a]]), view[p + a * stride : p + b * stride], b - a, crc))
            seg_i = int(idx[-1])
        else:
            at = 9 if tag == TAG_RECORD_WITH_TIMESTAMP else 1
            targets = vector_targets(rows[:, 4:], at) if vector_targets is not None else None
            if targets is None:
                base = p + 4 + at
                targets = np.array(
                    [per_record(view[base + i * stride : base + i * stride + length - at]) for i in range(k)],
                    dtype=np.int64,
                )
            stats.crc += int(crcs.sum(dtype=np.uint64))
            for t in np.unique(targets).tolist():
                mask = targets == t
                pieces.append((t, rows[mask].tobytes(), int(mask.sum()), int(crcs[mask].sum(dtype=np.uint64))))
        return total

    pieces: list[tuple[int, bytes | memoryview, int, int]] = []
    pending = bytearray()
    pos_base = 0
    slow_until = 0  # per-element framing up to this payload position before trying the vector path again
    for data, last in _with_last(iter_channel_blocks(src)):
        if pending:
            pending += data
            view = memoryview(pending)
        else:
            view = memoryview(data)
        n = len(view)
        p = 0
        while n - p >= 4:
            if pos_base + p >= slow_until:
                took = route_uniform(view, p, n)
                if took:
                    for t, framed, records, crc in pieces:
                        yield from add_framed(t, framed, records, crc)
                    pieces.clear()
                    consumed += took
                    p += took
                    continue
                if not last and _too_short_for_a_run(view, p, n):
                    break  # the block ends, not the run: carry the tail into the next block
                slow_until = pos_base + p + SLOW_STRETCH
            length = int.from_bytes(view[p : p + 4], "big", signed=True)
            if length <= 0 or length > MAX_ELEMENT:
                raise RouteError(
                    f"{src.label}: element length {length} at payload byte {pos_base + p} (corrupt framing; "
                    "run spillway validate)"
                )
            end = p + 4 + length
            if end > n:
                break
            element = view[p + 4 : end]
            tag = element[0]
            if tag in (TAG_RECORD, TAG_RECORD_WITH_TIMESTAMP):
                stats.records += 1
                stats.record_bytes += length
                if fixed is not None:
                    targets = fixed
                elif per_record is not None:
                    value = element[9:] if tag == TAG_RECORD_WITH_TIMESTAMP else element[1:]
                    targets = [per_record(value)]
                else:  # BALANCED: the segment holding this record's first byte
                    while seg_i < len(segments) - 1 and consumed >= segments[seg_i][0]:
                        seg_i += 1
                    targets = [segments[seg_i][1]]
                crc = zlib.crc32(element)
                stats.crc += crc * len(targets)
                yield from add(targets, element, True, crc)
            elif (tag in (TAG_WATERMARK, TAG_WATERMARK_STATUS)) and keep_marks:
                stats.kept_markers += 1
                yield from add(keep_marks, element, False, 0)
            else:
                kind = TAG_NAMES.get(tag, f"tag {tag}")
                stats.dropped[kind] = stats.dropped.get(kind, 0) + 1
            consumed += 4 + length
            p = end
        pos_base += p
        pending = bytearray(view[p:])
        view.release()
    stats.leftover = len(pending)
    for t in list(runs):
        yield from flush(t)


# --------------------------------------------------------------------------------------------------
# vectorized helpers (numpy): same results as the per-record code, many records per call

SLOW_STRETCH = 4096  # payload bytes framed one by one after the vector path declined
CRC_TABLE_LIMIT = 512  # record elements up to this length get per-position CRC tables (length x 1 KiB)


@functools.cache
def _crc_position_tables(length: int) -> tuple[int, np.ndarray]:
    """CRC-32 is affine over GF(2) for a fixed message length: crc(x) = crc(0^n) ^ XOR_j T[j][x_j],
    where T[j][b] = crc(b at position j, zeros elsewhere) ^ crc(0^n). Returns (crc(0^n), T)."""
    zero = zlib.crc32(bytes(length))
    tables = np.empty((length, 256), dtype=np.uint32)
    msg = bytearray(length)
    for j in range(length):
        for b in range(256):
            msg[j] = b
            tables[j, b] = zlib.crc32(msg) ^ zero
        msg[j] = 0
    return zero, tables


def crc32_rows(rows: np.ndarray) -> np.ndarray:
    """``zlib.crc32`` of every row of a 2-D uint8 array (rows may be a strided view): in C when the
    native helper is built, else one numpy table lookup and xor per column."""
    k, length = rows.shape
    lib = _native()
    if lib is not None and rows.strides[1] == 1:
        out = np.empty(k, dtype=np.uint32)
        lib.spw_crc_rows(rows.__array_interface__["data"][0], k, rows.strides[0], length, out.ctypes.data)
        return out
    return crc32_rows_numpy(rows)


def crc32_rows_numpy(rows: np.ndarray) -> np.ndarray:
    length = rows.shape[1]
    if length > CRC_TABLE_LIMIT:  # tables would cost more than they save: per row with zlib
        return np.fromiter((zlib.crc32(r) for r in rows), dtype=np.uint32, count=rows.shape[0])
    zero, tables = _crc_position_tables(length)
    crc = np.full(rows.shape[0], zero, dtype=np.uint32)
    for j in range(length):
        crc ^= tables[j][rows[:, j]]
    return crc


def _native():  # type: ignore[no-untyped-def]
    from spillway.formats.native import library

    return library()


def _with_last(blocks: Iterator[bytes]) -> Iterator[tuple[bytes, bool]]:
    """Each block with whether it is the last one."""
    held: bytes | None = None
    for block in blocks:
        if held is not None:
            yield held, False
        held = block
    if held is not None:
        yield held, True


def _too_short_for_a_run(view: memoryview, p: int, n: int) -> bool:
    """Whether the vector path may have declined only because ``view`` ends: fewer than FAST_MIN elements
    of the length at ``p`` fit, and that many fit in a block (so carrying them over stays bounded)."""
    length = int.from_bytes(view[p : p + 4], "big", signed=True)
    if length <= 0 or length > MAX_ELEMENT:
        return False
    stride = 4 + length
    return (n - p) // stride < FAST_MIN and FAST_MIN * stride <= BLOCK


def uniform_records(view: memoryview, p: int, n: int) -> np.ndarray | None:
    """The longest run (at least FAST_MIN) of framed records of one length and one record tag starting
    at ``p`` in ``view[:n]``, as uint8 rows (length field + element), or None. The framing is proven
    element by element: while every length field equals the first, the next element starts exactly one
    stride further, so the run stops at the first different length or tag. The rows export ``view``:
    drop them before releasing it."""
    length = int.from_bytes(view[p : p + 4], "big", signed=True)
    if length <= 0 or length > MAX_ELEMENT:
        return None
    stride = 4 + length
    count = (n - p) // stride
    if count < FAST_MIN:
        return None
    tag = view[p + 4]
    if tag != TAG_RECORD and tag != TAG_RECORD_WITH_TIMESTAMP:
        return None
    rows = np.frombuffer(view, dtype=np.uint8, count=count * stride, offset=p).reshape(count, stride)
    same = rows[:, 4] == tag
    for j in range(4):
        same &= rows[:, j] == view[p + j]
    first_bad = int(np.argmin(same))
    k = first_bad if not same[first_bad] else count
    return rows[:k] if k >= FAST_MIN else None


@dataclass(slots=True)
class Scan:
    end: int  # bytes framed as whole elements
    records: int
    crc: int  # sum of crc32 of the record elements
    misplaced: int  # records a HASH/CUSTOM edge would route to another subtask than ``down``


def scan_elements(view: memoryview, ep: EdgePlan | None = None, down: int = 0) -> Scan:
    """Frame a whole written channel (the self-check's re-read): records, their crc32 sum, and with
    ``ep`` (a HASH or CUSTOM edge) how many records belong elsewhere than subtask ``down``. Stops at the
    first element that does not fit (``end`` then falls short of the length)."""
    place = target_function(ep) if ep is not None else None
    vplace = vector_target_function(ep) if ep is not None else None
    n = len(view)
    p = records = crc = misplaced = 0
    slow_until = 0
    while p + 4 <= n:
        if p >= slow_until:
            rows = uniform_records(view, p, n)
            if rows is not None:
                k, stride = rows.shape
                records += k
                crc += int(crc32_rows(rows[:, 4:]).sum(dtype=np.uint64))
                if place is not None:
                    at = 9 if rows[0, 4] == TAG_RECORD_WITH_TIMESTAMP else 1
                    targets = vplace(rows[:, 4:], at) if vplace is not None else None
                    if targets is not None:
                        misplaced += int((targets != down).sum())
                    else:
                        base = p + 4 + at
                        misplaced += sum(
                            place(view[base + i * stride : base + (i + 1) * stride - 4 - at]) != down for i in range(k)
                        )
                del rows
                p += k * stride
                continue
            slow_until = p + SLOW_STRETCH
        length = int.from_bytes(view[p : p + 4], "big", signed=True)
        if length <= 0 or p + 4 + length > n:
            break
        element = view[p + 4 : p + 4 + length]
        if element[0] == TAG_RECORD or element[0] == TAG_RECORD_WITH_TIMESTAMP:
            records += 1
            crc += zlib.crc32(element)
            if place is not None:
                value = element[9:] if element[0] == TAG_RECORD_WITH_TIMESTAMP else element[1:]
                if place(value) != down:
                    misplaced += 1
        p += 4 + length
    return Scan(p, records, crc, misplaced)


def murmur_hashes(codes: np.ndarray) -> np.ndarray:
    """``keygroups.murmur_hash`` of many Java hash codes (uint32 array) -> int64 array."""
    u = np.uint32
    k = codes.astype(u) * u(0xCC9E2D51)
    k = (k << u(15)) | (k >> u(17))
    k = k * u(0x1B873593)
    h = (k << u(13)) | (k >> u(19))
    h = h * u(5) + u(0xE6546B64)
    h ^= u(4)
    h ^= h >> u(16)
    h *= u(0x85EBCA6B)
    h ^= h >> u(13)
    h *= u(0xC2B2AE35)
    h ^= h >> u(16)
    s = h.view(np.int32).astype(np.int64)
    return np.where(s >= 0, s, np.where(s == -(1 << 31), 0, -s))


def vector_target_function(ep: EdgePlan) -> Callable[[np.ndarray, int], np.ndarray | None] | None:
    """(record elements as uint8 rows, value offset) -> new subtask per row, for the built-in extractors
    whose key is a Long at a fixed position (``long``, ``tuple:0:long``); None otherwise. The callable
    returns None when the rows do not have the shape the extractor needs (the caller then goes per record)."""
    if ep.rule != HASH or ep.key_fn or not ep.key:
        return None
    spec = "".join(ep.key.split()).lower()
    if spec not in ("long", "tuple:0:long"):
        return None
    whole = spec == "long"

    def targets(rows: np.ndarray, at: int) -> np.ndarray | None:
        width = rows.shape[1] - at
        if width < 8 or (whole and width != 8):
            return None
        v = np.ascontiguousarray(rows[:, at : at + 8]).view(">u8").ravel().astype(np.uint64)
        codes = (v ^ (v >> np.uint64(32))).astype(np.uint32)  # Long.hashCode
        return murmur_hashes(codes) % ep.max_parallelism * ep.new_down_p // ep.max_parallelism

    return targets
