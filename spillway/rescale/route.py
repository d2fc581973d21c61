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

import importlib
import zlib
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field

from spillway.formats.channel_file import FileBlob, InlineBlob, read_chunk_header
from spillway.formats.record_framing import (
    TAG_NAMES,
    TAG_RECORD,
    TAG_RECORD_WITH_TIMESTAMP,
    TAG_WATERMARK,
    TAG_WATERMARK_STATUS,
)
from spillway.inspect.keygroups import key_group_for_hash, operator_index
from spillway.rescale.plan import BALANCED, BROADCAST, CUSTOM, GLOBAL, HASH, EdgePlan, PartRef, SourceChannel

RUN_LIMIT = 256 * 1024  # bytes per emitted run (bounds memory and row size)
MAX_ELEMENT = 256 * 1024 * 1024  # a length field above this is corruption, not a record


class RouteError(Exception):
    """The old channel cannot be read or framed (names the channel and position)."""


@dataclass(slots=True)
class Run:
    up: int  # new upstream subtask (= input channel index on the new downstream)
    down: int  # new downstream subtask
    sid: int
    seq: int  # order of runs of one source
    data: bytes  # framed elements
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
    from spillway.inspect.keygroups import java_string_hash

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
    seg_i = 0
    runs: dict[int, tuple[bytearray, list[int]]] = {}  # target -> (framed bytes, [records, crc])
    seq = 0
    consumed = 0  # payload bytes of the old channel consumed so far (for BALANCED segments)

    def flush(target: int) -> Iterator[Run]:
        nonlocal seq
        buf, counts = runs.pop(target)
        if buf:
            yield Run(up, target, src.sid, seq, bytes(buf), counts[0], counts[1])
            seq += 1

    def add(targets: list[int], element: memoryview, is_record: bool, crc: int) -> Iterator[Run]:
        # One buffer per target: runs of one target leave in source order, whatever the interleaving.
        for t in targets:
            entry = runs.get(t)
            if entry is None:
                entry = runs[t] = (bytearray(), [0, 0])
            buf, counts = entry
            buf += len(element).to_bytes(4, "big", signed=True)
            buf += element
            if is_record:
                counts[0] += 1
                counts[1] += crc
            if len(buf) >= RUN_LIMIT:
                yield from flush(t)

    pending = bytearray()
    pos_base = 0
    for data in iter_channel_bytes(src):
        if pending:
            pending += data
            view = memoryview(pending)
        else:
            view = memoryview(data)
        n = len(view)
        p = 0
        while n - p >= 4:
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
