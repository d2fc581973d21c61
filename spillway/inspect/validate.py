"""``validate``: prove a checkpoint sound, or say exactly where it is not.

Four passes, each a set of named rules (``findings.RULES``): metadata-level consistency, every
referenced file, the chunk structure of every channel-state blob, and record framing along every
logical channel (with a plan) or every input-side handle (without one). Files are streamed: memory
stays bounded by the number of chunks, not their bytes.

The byte work — walking each file's chunk chain and framing each logical channel — is C code called
through ctypes, which releases the GIL, so it runs on a small thread pool (one thread per usable core)
ahead of the Python loop that turns results into findings. That loop consumes the results in the same
order as a serial run, so the findings and their order do not depend on the number of threads.
"""

from __future__ import annotations

import os
import threading
from collections import deque
from collections.abc import Callable, Hashable, Iterator
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

from spillway.flink.keygroups import key_group_range
from spillway.formats.channel_file import (
    HEADER_SIZE,
    LENGTH_SIZE,
    READ_BLOCK,
    SERIALIZATION_VERSION,
    Blob,
    BlobError,
    Chunk,
    FileBlob,
    Walked,
    chunk_map,
    iter_payload,
    read_chunk_header,
    read_version,
)
from spillway.formats.record_framing import make_framer
from spillway.formats.stream_elements import tags_for_format_version
from spillway.inspect.channels import ChannelKey, ChannelMap, channel_key, logical_channels
from spillway.inspect.findings import Finding, sort_findings
from spillway.inspect.plan_check import plan_mismatches, state_mismatches
from spillway.inspect.topology import BoundVertex, Topology, bind, operator_binding
from spillway.model.checkpoint import (
    ByteStreamHandle,
    ChannelHandle,
    Checkpoint,
    IncrementalHandle,
    KeyGroupsHandle,
    OperatorState,
    StreamHandle,
    channel_handles,
    is_byte_source,
    is_file_backed,
)
from spillway.model.walk import all_stream_handles
from spillway.safe_io import NotARegularFile, check_regular, open_regular
from spillway.storage.blobs import delegate_display, delegate_key, open_delegate
from spillway.storage.load import LoadedCheckpoint
from spillway.storage.locate import FileResolver

if TYPE_CHECKING:
    from spillway.formats.native import FrameBatch

# Said after a record-length fault of an input part framed alone: what the "bytes left" were.
_ALONE_CONTEXT = "; framed without its output side, the bytes left are this part's and all output-side state's"
Progress = Callable[[str, int], None]  # (what, units done) — total announced first with units=-total
AHEAD = 4  # framing batches in flight per worker thread: enough to keep them busy, few enough to stay small
# A batch of channels is framed in one C call: up to this many channels or (at least) this much payload, so
# tiny channels do not cost a Python round trip each, and big ones still spread over the threads.
BATCH_CHANNELS = 256
BATCH_BYTES = 8 << 20


@dataclass(frozen=True)
class Unchecked:
    """Part of the checkpoint validate could not check, and why: ``what`` is ``channel-handle`` (a handle whose
    records were not framed) or ``file`` (a file that was not read)."""

    what: str
    why: str
    operator: str | None = None
    subtask: int | None = None
    channel: str | None = None
    file: str | None = None

    def to_json(self) -> dict[str, object]:
        return {
            "what": self.what,
            "why": self.why,
            "operator": self.operator,
            "subtask": self.subtask,
            "channel": self.channel,
            "file": self.file,
        }


@dataclass
class Report:
    findings: list[Finding] = field(default_factory=list)
    files_checked: int = 0
    blobs_checked: int = 0
    chunks: int = 0
    channels_framed: int = 0
    handles_framed_alone: int = 0
    elements: int = 0  # stream elements framed: records, watermarks and other events
    records: int = 0  # of them, stream records
    bytes_read: int = 0
    # Channel handles whose bytes cannot be trusted, with the error findings that say so (for
    # ``rescale --force``, which drops exactly these logical channels and must name why).
    damage: dict[ChannelKey, list[Finding]] = field(default_factory=dict)
    # What was not checked (files not read, channel handles not framed), in the order found: a report
    # with no errors is "sound" only when this is empty.
    unchecked: list[Unchecked] = field(default_factory=list)
    # Records of each whole logical channel that framed without a fault, by the keys of its parts in stream
    # order: what ``rescale --force`` says it leaves out when such a channel is condemned for another reason.
    counted: dict[tuple[ChannelKey, ...], int] = field(default_factory=dict)

    @property
    def complete(self) -> bool:
        """Every byte validate checks was checked (nothing is in ``unchecked``)."""
        return not self.unchecked

    def unchecked_summary(self) -> list[tuple[str, str, int]]:
        """(what, why, how many) for each distinct reason something was left unchecked, in the order first
        seen."""
        counts: dict[tuple[str, str], int] = {}
        for u in self.unchecked:
            counts[u.what, u.why] = counts.get((u.what, u.why), 0) + 1
        return [(what, why, n) for (what, why), n in counts.items()]

    @property
    def errors(self) -> list[Finding]:
        return [f for f in self.findings if f.severity == "error"]

    def counts(self) -> dict[str, int]:
        out = {"error": 0, "warning": 0, "info": 0}
        for f in self.findings:
            out[f.severity] += 1
        return out


@dataclass
class _Located:
    """A channel handle with where it sits."""

    operator: OperatorState
    handle: ChannelHandle

    @property
    def key(self) -> ChannelKey:
        return channel_key(self.operator, self.handle)

    def label(self) -> str:
        return self.handle.label()


@dataclass
class _BlobInfo:
    blob: Blob | None
    chunks: dict[int, int]  # offset of each chunk's length field -> payload length
    complete: bool  # the chunk chain was walked to the end without a break
    display: str
    fault: Finding | None = None  # an error that makes every handle in this blob untrustworthy
    also: list[Finding] = field(default_factory=list)  # earlier such errors (a short file, then its broken chain)


def validate(
    loaded: LoadedCheckpoint,
    topology: Topology | None = None,
    progress: Progress | None = None,
    workers: int | None = None,
) -> Report:
    """``workers``: threads for the byte work (None: one per usable core; 1: all on the calling thread)."""
    if topology is not None:
        bind(topology, loaded.checkpoint)  # first, so every finding names a bound operator as the plan does
    v = _Validator(loaded, topology, progress or (lambda what, n: None), usable_cores() if workers is None else workers)
    try:
        v.run()
    finally:
        v.close()
    v.report.findings = sort_findings(v.report.findings)
    return v.report


def usable_cores() -> int:
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:  # not on Linux
        return os.cpu_count() or 1


_local = threading.local()


def _thread_buffer() -> bytearray:
    """One read buffer per worker thread, kept for the thread's life."""
    buffer: bytearray | None = getattr(_local, "buffer", None)
    if buffer is None:
        buffer = _local.buffer = bytearray(READ_BLOCK)
    return buffer


# (fd, blob base, chunk offsets, payload lengths) per part of a logical channel, in stream order
NativePlan = list[tuple[int, int, list[int], list[int]]]


def _short(info: _BlobInfo) -> bool:
    """The blob's file is shorter than its handles need (a file-size finding): chunks past its end are missing
    because of that, and are not reported one by one."""
    return any(f is not None and f.rule == "file-size" for f in (info.fault, *info.also))


def _frame_batch(batch: FrameBatch, tags: frozenset[int]) -> list[tuple[int, int] | None]:
    """(Stream elements, of them records) of each channel of the batch, None where it did not frame cleanly
    (runs on a worker thread:
    touches nothing shared but the batch, which the caller no longer changes)."""
    from spillway.formats.native import frame_batch, framer_rules

    return frame_batch(batch, framer_rules(tags, None), _thread_buffer())


class _Validator:
    def __init__(self, loaded: LoadedCheckpoint, topology: Topology | None, progress: Progress, workers: int = 1):
        self.cp: Checkpoint = loaded.checkpoint
        self.resolver: FileResolver = loaded.resolver
        self.topology = topology
        self.progress = progress
        self.report = Report()
        self.blobs: dict[Hashable, _BlobInfo] = {}
        self.tags = tags_for_format_version(self.cp.format_version)  # V4 (1.16-1.20) allows the 1.19 tags
        self.buffer = bytearray(READ_BLOCK)
        self.path_faults: dict[str, Finding] = {}  # local path or original name -> file-level error
        self.keys: dict[int, Hashable] = {}  # id(delegate) -> blob key; the checkpoint keeps every delegate alive
        self.workers = workers
        self.pool: ThreadPoolExecutor | None = None
        self.opened: dict[Hashable, Blob | None] = {}  # opened ahead of open_blob, for the walks on the pool
        self.walks: dict[Hashable, Future[Walked | None]] = {}

    def add(self, rule: str, message: str, **where: object) -> Finding:
        finding = Finding(rule, message, **where)  # type: ignore[arg-type]
        self.report.findings.append(finding)
        return finding

    def add_to(self, keys: tuple[ChannelKey, ...], rule: str, message: str, **where: object) -> None:
        """A finding about the channel handles ``keys``: an error marks them damaged."""
        self.damaged(self.add(rule, message, **where), *keys)

    def damaged(self, finding: Finding, *keys: ChannelKey) -> None:
        if finding.severity != "error":
            return
        for key in keys:
            self.report.damage.setdefault(key, []).append(finding)

    def close(self) -> None:
        if self.pool is not None:  # no worker may still read a descriptor that is about to be closed
            self.pool.shutdown(wait=True, cancel_futures=True)
        for info in self.blobs.values():
            if info.blob is not None:
                info.blob.close()
        for blob in self.opened.values():
            if blob is not None:
                blob.close()

    def start_pool(self) -> ThreadPoolExecutor | None:
        """The worker threads, if there is more than one core and the C helpers exist (else: serial)."""
        if self.pool is None and self.workers > 1:
            from spillway.formats.native import framer_rules, library

            if library() is not None:  # built and loaded here, once, not raced by the workers
                framer_rules(self.tags, None)
                self.pool = ThreadPoolExecutor(self.workers, thread_name_prefix="spillway-validate")
        return self.pool

    def run(self) -> None:
        self.check_structure()
        self.check_files()
        located = self.channel_state()
        self.progress("channel-state files", -len({self.blob_key(x.handle.delegate) for x in located}))
        self.check_blobs(located)
        self.check_framing(located)

    # ------------------------------------------------------------------ metadata-level rules
    def check_structure(self) -> None:
        for op in self.cp.operators:
            label = op.label()
            seen: set[int] = set()
            for sub in op.subtasks:
                if not 0 <= sub.index < op.parallelism:
                    self.add(
                        "subtask-index",
                        f"subtask index {sub.index} outside [0, {op.parallelism})",
                        operator=label,
                        subtask=sub.index,
                    )
                if sub.index in seen:
                    self.add("subtask-index", f"subtask {sub.index} appears twice", operator=label, subtask=sub.index)
                seen.add(sub.index)
                if sub.finished and sub.has_state():
                    self.add("finished-state", "finished subtask holds state", operator=label, subtask=sub.index)
                for side, handles in (("input", sub.input_channel_state), ("output", sub.result_subpartition_state)):
                    keys: set[tuple[int, int]] = set()
                    for h in channel_handles(handles):
                        if h.subtask_index != sub.index:
                            f = self.add(
                                "subtask-index",
                                f"{side} channel handle says subtask {h.subtask_index}",
                                operator=label,
                                subtask=sub.index,
                                channel=h.label(),
                            )
                            self.damaged(f, channel_key(op, h))
                        if h.info in keys:
                            f = self.add(
                                "duplicate-channel",
                                f"two {side} handles for channel {h.label()}",
                                operator=label,
                                subtask=sub.index,
                                channel=h.label(),
                            )
                            self.damaged(f, channel_key(op, h))
                        keys.add(h.info)
            if op.fully_finished and op.coordinator_state is not None:
                self.add("finished-state", "fully finished operator holds coordinator state", operator=label)
            self.check_key_groups(op)

    def check_key_groups(self, op: OperatorState) -> None:
        for kind in ("managed_keyed_state", "raw_keyed_state"):
            ranges = []
            for sub in op.subtasks:
                h = getattr(sub, kind)
                if h is None:
                    continue
                kg = h.key_groups
                start, last = kg.start, kg.last
                if isinstance(h, IncrementalHandle) and 0 < op.parallelism <= op.max_parallelism:
                    # A whole RocksDB instance handed to a subtask whose range it contains (offline rescale):
                    # Flink deletes the key groups outside the range on restore, so only the range counts.
                    lo, hi = key_group_range(op.max_parallelism, op.parallelism, sub.index)
                    if kg.start <= lo and hi <= kg.last and (kg.start, kg.last) != (lo, hi):
                        self.add(
                            "key-group-clipped",
                            f"{kind} covers [{kg.start}, {kg.last}]; Flink restores only [{lo}, {hi}] of it",
                            operator=op.label(),
                            subtask=sub.index,
                        )
                        ranges.append((lo, hi, sub.index))
                        continue
                ranges.append((start, last, sub.index))
                if kg.count and (kg.start < 0 or kg.last >= op.max_parallelism):
                    self.add(
                        "key-group-tiling",
                        f"{kind} key groups [{kg.start}, {kg.last}] outside [0, {op.max_parallelism})",
                        operator=op.label(),
                        subtask=sub.index,
                    )
                if isinstance(h, KeyGroupsHandle) and len(h.offsets) != kg.count:
                    self.add(
                        "key-group-tiling",
                        f"{len(h.offsets)} offsets for {kg.count} key groups",
                        operator=op.label(),
                        subtask=sub.index,
                    )
                if 0 < op.parallelism <= op.max_parallelism and 0 <= sub.index < op.parallelism:
                    expected = key_group_range(op.max_parallelism, op.parallelism, sub.index)
                    if kg.count and (kg.start, kg.last) != expected:
                        self.add(
                            "key-group-range",
                            f"{kind} covers [{kg.start}, {kg.last}], Flink assigns [{expected[0]}, {expected[1]}]",
                            operator=op.label(),
                            subtask=sub.index,
                        )
            if not ranges:
                continue
            ranges.sort()
            covered = 0
            for start, last, index in ranges:
                if start > last:
                    continue
                if start < covered:
                    self.add(
                        "key-group-tiling",
                        f"{kind} key groups [{start}, {min(last, covered - 1)}] also held by another subtask",
                        operator=op.label(),
                        subtask=index,
                    )
                elif start > covered:
                    self.add(
                        "key-group-gap",
                        f"{kind}: no subtask holds key groups [{covered}, {start - 1}]",
                        operator=op.label(),
                    )
                covered = max(covered, last + 1)
            if covered < op.max_parallelism:
                self.add(
                    "key-group-gap",
                    f"{kind}: no subtask holds key groups [{covered}, {op.max_parallelism - 1}]",
                    operator=op.label(),
                )

    # ------------------------------------------------------------------ every referenced file
    def check_files(self) -> None:
        needed: dict[str, tuple[int, bool, str]] = {}  # local path -> (bytes needed, a whole file?, where)
        for site, h in all_stream_handles(self.cp):
            if not is_file_backed(h):
                continue
            where = f"{site.operator.label()} {site.kind}"
            resolved = self.resolver.resolve(h)
            assert resolved is not None
            key = resolved.local_text
            if key is None:
                rule = "path-escape" if resolved.problem and "escape" in resolved.problem else "file-not-local"
                first = resolved.original not in self.path_faults
                self.path_faults[resolved.original] = self.add(
                    rule,
                    f"{resolved.original}: {resolved.problem}",
                    operator=site.operator.label(),
                    subtask=site.subtask.index if site.subtask else None,
                    file=resolved.original,
                )
                if rule == "file-not-local" and first:
                    self.report.unchecked.append(
                        Unchecked("file", "not local and not rebased: not read", file=resolved.original)
                    )
                continue
            end = h.start_pos + h.state_size
            prev = needed.get(key)
            if prev is None or end > prev[0]:
                needed[key] = (end, h.whole_file, where)
        for path, (end, whole_file, where) in sorted(needed.items()):
            self.report.files_checked += 1
            p = Path(path)
            try:
                size = check_regular(p).st_size
                with open_regular(p):
                    pass
            except FileNotFoundError:
                self.path_faults[path] = self.add("file-exists", f"missing file (referenced by {where})", file=path)
                continue
            except OSError as exc:
                self.path_faults[path] = self.add("file-exists", f"cannot read: {exc.strerror}", file=path)
                continue
            except NotARegularFile as exc:
                self.path_faults[path] = self.add("file-exists", str(exc), file=path)
                continue
            if size < end:
                self.path_faults[path] = self.add(
                    "file-size", f"file has {size} bytes, handles need {end} ({where})", file=path, offset=size
                )
            elif whole_file and size > end:
                self.add("file-size-extra", f"file has {size} bytes, handle says {end}", file=path)

    # ------------------------------------------------------------------ channel-state blobs
    def channel_state(self) -> list[_Located]:
        out = []
        for op in self.cp.operators:
            for sub in op.subtasks:
                for h in channel_handles(sub.input_channel_state) + channel_handles(sub.result_subpartition_state):
                    out.append(_Located(op, h))
        return out

    def blob_key(self, delegate: StreamHandle) -> Hashable:
        key = self.keys.get(id(delegate))
        if key is None:
            key = self.keys[id(delegate)] = delegate_key(self.resolver, delegate)
        return key

    def prefetch_walks(self, located: list[_Located]) -> None:
        """Open every file-backed blob now and walk its chunk chain on the pool; open_blob takes the results
        in its own order."""
        pool = self.start_pool()
        if pool is None:
            return
        from spillway.formats.native import walk_file

        for x in located:
            delegate = x.handle.delegate
            key = self.blob_key(delegate)
            if key in self.opened or not is_byte_source(delegate) or isinstance(delegate, ByteStreamHandle):
                continue
            blob = self.opened[key] = open_delegate(self.resolver, delegate)
            if isinstance(blob, FileBlob):
                self.walks[key] = pool.submit(walk_file, blob.fileno(), blob.base, blob.size)

    def open_blob(self, delegate: StreamHandle, who: _Located) -> _BlobInfo:
        key = self.blob_key(delegate)
        if key in self.blobs:
            return self.blobs[key]
        info = _BlobInfo(None, {}, False, "?")
        self.blobs[key] = info
        if not is_byte_source(delegate):
            kind = "null" if delegate is None else type(delegate).__name__
            info.fault = self.add(
                "chunk-offset",
                f"channel state with a {kind} delegate",
                operator=who.operator.label(),
                subtask=who.handle.subtask_index,
                channel=who.label(),
            )
            return info
        info.display = delegate_display(self.resolver, delegate)
        resolved = self.resolver.resolve(delegate) if is_file_backed(delegate) else None
        if resolved is not None:
            info.fault = self.path_faults.get(resolved.local_text or "") or self.path_faults.get(resolved.original)
        info.blob = self.opened.pop(key) if key in self.opened else open_delegate(self.resolver, delegate)
        if info.blob is None:
            return info  # a missing or unreadable file is reported by check_files
        blob = info.blob
        self.report.blobs_checked += 1
        try:
            version = read_version(blob)
        except BlobError as exc:
            info.fault = self.add(
                "channel-header", f"too short for a header: {exc}", file=info.display, offset=blob.physical(0)
            )
            return info
        if version != SERIALIZATION_VERSION:
            info.fault = self.add(
                "channel-header",
                f"serialization version {version}, expected {SERIALIZATION_VERSION}",
                file=info.display,
                offset=blob.physical(0),
            )
            return info
        walk = self.walks.pop(key, None)
        info.chunks, error = chunk_map(blob, walk.result() if walk is not None else None)
        if error is None:
            info.complete = True
        else:
            # Conservative: past a break nothing in the file can be trusted, so every handle in it is damaged.
            if info.fault is not None:  # the file is short: that error damages the handles too
                info.also.append(info.fault)
            info.fault = self.add(
                "chunk-chain", f"chunk chain breaks: {error}", file=info.display, offset=blob.physical(error.offset)
            )
        self.report.chunks += len(info.chunks)
        return info

    def check_blobs(self, located: list[_Located]) -> None:
        self.prefetch_walks(located)
        claimed: dict[Hashable, dict[int, _Located]] = {}  # blob key -> chunk offset -> the handle claiming it
        blob_keys: dict[Hashable, None] = {}  # in order of first use
        done = 0
        for x in located:
            key = self.blob_key(x.handle.delegate)
            if key not in self.blobs:
                done += 1
                self.progress("channel-state files", done)
            info = self.open_blob(x.handle.delegate, x)
            blob_keys.setdefault(key)
            for fault in (*info.also, info.fault):
                if fault is not None:
                    self.damaged(fault, x.key)
            if info.blob is None:
                continue
            self.check_handle_chunks(x, info, claimed.setdefault(key, {}))
        for key in blob_keys:
            info = self.blobs[key]
            if info.blob is None or not info.complete:
                continue
            mine = claimed.get(key, {})
            unclaimed = [off for off in info.chunks if off not in mine]
            if unclaimed:
                size = sum(LENGTH_SIZE + info.chunks[off] for off in unclaimed)
                self.add(
                    "unclaimed-chunks",
                    f"{len(unclaimed)} chunks ({size} bytes) belong to no handle",
                    file=info.display,
                    offset=info.blob.physical(unclaimed[0]),
                )

    def check_handle_chunks(self, x: _Located, info: _BlobInfo, claimed: dict[int, _Located]) -> None:
        h, blob = x.handle, info.blob
        assert blob is not None
        offsets = h.offsets
        wanted = set(offsets)
        if len(wanted) == len(offsets) and wanted <= info.chunks.keys() and claimed.keys().isdisjoint(wanted):
            # The usual case at C speed (set and dict operations): every offset starts a chunk nobody claimed.
            claimed.update(dict.fromkeys(offsets, x))
            footprint = sum(map(info.chunks.__getitem__, offsets)) + LENGTH_SIZE * len(offsets)
        else:
            footprint = self.check_offsets(x, info, claimed)
        inline = isinstance(h.delegate, ByteStreamHandle)
        expected = blob.size if inline else footprint
        if _short(info) and footprint < h.state_size:
            return  # its chunks past the end are missing: the file-size finding says so, once for the file
        if h.state_size != expected:
            what = "the inline blob's length" if inline else "the sum of its chunks"
            self.add_to(
                (x.key,),
                "inline-channel" if inline else "channel-size",
                f"handle size {h.state_size} != {what} ({expected})",
                offset=blob.physical(h.offsets[0]) if h.offsets else None,
                **self.where(x, info),
            )

    def where(self, x: _Located, info: _BlobInfo) -> dict[str, object]:
        return {
            "operator": x.operator.label(),
            "subtask": x.handle.subtask_index,
            "channel": x.label(),
            "file": info.display,
        }

    def check_offsets(self, x: _Located, info: _BlobInfo, claimed: dict[int, _Located]) -> int:
        """Each offset on its own, with a finding for every one that is out of bounds, not a chunk start, or
        claimed twice; returns the handle's footprint as far as it can be measured."""
        h, blob = x.handle, info.blob
        assert blob is not None
        where = self.where(x, info)
        damage = (x.key,)
        footprint = 0
        for off in h.offsets:
            length = info.chunks.get(off)
            if length is None:
                if off >= blob.size and _short(info):
                    continue  # past the end of a file cut short: the file-size finding says so, once
                if off < HEADER_SIZE or off >= blob.size:
                    self.add_to(
                        damage,
                        "chunk-offset",
                        f"offset {off} outside the {blob.size}-byte channel state",
                        offset=blob.physical(off) if off >= 0 else None,
                        **where,
                    )
                    continue
                if info.complete:
                    self.add_to(
                        damage,
                        "chunk-offset",
                        f"offset {off} is not the start of a chunk",
                        offset=blob.physical(off),
                        **where,
                    )
                try:  # still measure it, so the size check stays meaningful
                    length = read_chunk_header(blob, off).length
                except BlobError as exc:
                    if not _short(info):  # in a short file: the chunk the file was cut in (file-size says so)
                        self.add_to(damage, "chunk-offset", f"offset {off}: {exc}", offset=blob.physical(off), **where)
                    continue
            other = claimed.get(off)
            if other is not None:
                self.add_to(
                    (x.key, other.key),  # which of the two owns the chunk is unknown: both are suspect
                    "chunk-overlap",
                    f"chunk at {off} also claimed by {other.operator.label()}"
                    f"#{other.handle.subtask_index} {other.label()}",
                    offset=blob.physical(off),
                    **where,
                )
            claimed[off] = x
            footprint += LENGTH_SIZE + length
        return footprint

    # ------------------------------------------------------------------ record framing
    def check_framing(self, located: list[_Located]) -> None:
        cmap = ChannelMap([], [], set())
        if self.topology is not None:
            bound = bind(self.topology, self.cp)
            for rule, operator, message in plan_mismatches(bound, self.cp) + state_mismatches(self.topology, self.cp):
                self.add(rule, message, operator=operator)
            cmap = logical_channels(self.topology, bound, self.cp)
            for note in cmap.skipped:
                self.add("topology", note)
            self.check_topology(bound, located)
        else:
            outputs = sum(1 for x in located if x.handle.side == "output")
            if outputs:
                self.add(
                    "topology",
                    f"{outputs} output-side channel handles were not framed: output state may "
                    "start mid-record and only continues an input-side stream; pass --plan to check them",
                )
        # A record that starts in an input-side part framed alone may continue only in output-side state (the
        # rest of its logical channel): its length cannot exceed that part plus all output-side payload.
        output_payload = sum(self.payload(x.handle) for x in located if x.handle.side == "output")
        self.progress("logical channels", -(len(cmap.channels) + len(located)))
        jobs: list[tuple[str, list[tuple[OperatorState, ChannelHandle]], int | None]] = []
        framed: set[ChannelKey] = set()
        orphans: dict[ChannelKey, str] = {}  # readable parts whose logical channel cannot be framed whole
        for lc in cmap.channels:
            parts = [(p.operator, p.handle) for p in lc.parts]
            readable = [(o, h) for o, h in parts if self.unreadable(h) is None]
            if len(readable) == len(parts):
                jobs.append((lc.label(), parts, None))
                framed.update(channel_key(o, h) for o, h in parts)
                continue
            if readable and readable[0][1].side == "input":
                # The output part's file is broken: its input part still starts on a record boundary.
                o, h = readable[0]
                jobs.append((h.label(), [(o, h)], self.payload(h) + output_payload))
                framed.add(channel_key(o, h))
            for o, h in readable:
                orphans[channel_key(o, h)] = (
                    f"output side of {lc.label()}: its input side cannot be framed, and it may start mid-record"
                )
        for x in located:
            if x.key in cmap.used or x.handle.side != "input" or self.unreadable(x.handle) is not None:
                continue
            # Input state starts on a record boundary; alone it may end mid-record (the rest is upstream).
            jobs.append((x.label(), [(x.operator, x.handle)], self.payload(x.handle) + output_payload))
            framed.add(x.key)
        for x in located:
            if x.key not in framed:
                self.not_framed(x, orphans.get(x.key))
        for n, ((label, parts, bound_alone), fast) in enumerate(zip(jobs, self.run_ahead(jobs), strict=True), 1):
            self.frame(label, parts, bound_alone, fast)
            if bound_alone is None:
                self.report.channels_framed += 1
            else:
                self.report.handles_framed_alone += 1
            self.progress("logical channels", n)

    def payload(self, h: ChannelHandle) -> int:
        """A handle's payload bytes as measured from its file's chunks (its stated size where unknown: an upper
        bound, which is what the alone framing's record-length limit needs)."""
        info = self.blobs.get(self.blob_key(h.delegate))
        measured = self.measured(h) if info is not None and info.blob is not None else None
        return max(h.state_size, 0) if measured is None else measured

    def measured(self, h: ChannelHandle) -> int | None:
        """A handle's payload bytes if every one of its offsets starts a chunk of its file, else None."""
        info = self.blobs.get(self.blob_key(h.delegate))
        if info is None or not all(o in info.chunks for o in h.offsets):
            return None
        return sum(info.chunks[o] for o in h.offsets)

    def unreadable(self, h: ChannelHandle) -> str | None:
        """Why the records of a handle cannot be framed at all (its file was not read, or its header is not a
        channel-state header: any record fault found there would only restate that), or None."""
        info = self.blobs.get(self.blob_key(h.delegate))
        if info is None or info.blob is None:
            fault = info.fault if info is not None else None
            if fault is not None and fault.rule == "file-not-local":
                return "its file is not local and was not read (pass --rebase to a local copy)"
            return f"its file could not be read ({fault.rule})" if fault is not None else "its file could not be read"
        if info.fault is not None and info.fault.rule == "channel-header":
            return "its file has no valid channel-state header (channel-header)"
        if info.fault is not None and not info.complete and self.measured(h) is None:
            # Some of its chunks lie past the break: framing what is left would only restate the break.
            return f"some of its chunks lie past where its file's chunk chain breaks ({info.fault.rule})"
        return None

    def not_framed(self, x: _Located, orphaned: str | None) -> None:
        why = self.unreadable(x.handle) or orphaned
        if why is None:
            if self.topology is None:
                why = "output side: not framed without --plan (it may start mid-record)"
            else:
                why = "output side: in no logical channel of the plan (see the topology notes)"
        self.report.unchecked.append(
            Unchecked(
                "channel-handle",
                why,
                operator=x.operator.label(),
                subtask=x.handle.subtask_index,
                channel=x.label(),
                file=self.blobs[self.blob_key(x.handle.delegate)].display
                if self.blob_key(x.handle.delegate) in self.blobs
                else None,
            )
        )

    def run_ahead(
        self, jobs: list[tuple[str, list[tuple[OperatorState, ChannelHandle]], int | None]]
    ) -> Iterator[tuple[int, int, int] | None]:
        """The native framing result of each job, in job order — (elements, records, payload bytes), or None where the
        caller must frame it itself: computed in batches on the pool a few batches ahead of the caller, or
        here without one."""
        from spillway.formats.native import FrameBatch, library

        if library() is None:
            yield from (None for _ in jobs)
            return
        pool = self.start_pool()
        # per batch: its result, and per job (index in the batch or -1: not framed natively, payload bytes)
        groups: deque[tuple[Future[list[tuple[int, int] | None]] | None, list[tuple[int, int]]]] = deque()

        def submit(batch: FrameBatch) -> Future[list[tuple[int, int] | None]]:
            if pool is not None:
                return pool.submit(_frame_batch, batch, self.tags)
            done: Future[list[tuple[int, int] | None]] = Future()
            done.set_result(_frame_batch(batch, self.tags))
            return done

        def results(
            group: tuple[Future[list[tuple[int, int] | None]] | None, list[tuple[int, int]]],
        ) -> Iterator[tuple[int, int, int] | None]:
            future, entries = group
            counts = future.result() if future is not None else []
            for index, size in entries:
                found = counts[index] if index >= 0 else None
                yield None if found is None else (*found, size)

        batch, entries, size = FrameBatch(), [], 0
        for _, parts, bound_alone in jobs:
            plan = self.native_plan(parts)
            if plan is None:
                entries.append((-1, 0))
                continue
            chunks, total = plan
            entries.append((len(batch), total))
            batch.add(chunks, total if bound_alone is None else bound_alone, bound_alone is None)
            size += total
            if len(batch) >= BATCH_CHANNELS or size >= BATCH_BYTES:
                groups.append((submit(batch), entries))
                batch, entries, size = FrameBatch(), [], 0
                while len(groups) > AHEAD * self.workers:
                    yield from results(groups.popleft())
        if entries:
            groups.append((submit(batch) if len(batch) else None, entries))
        while groups:
            yield from results(groups.popleft())

    def native_plan(self, parts: list[tuple[OperatorState, ChannelHandle]]) -> tuple[NativePlan, int] | None:
        """What the C framer needs for a channel whose parts are all whole chunks of local files, and the
        channel's payload length; None for anything else (inline bytes, unknown offsets: the slow path)."""
        plan: NativePlan = []
        total = 0
        for _, h in parts:
            info = self.blobs.get(self.blob_key(h.delegate))
            if info is None or not isinstance(info.blob, FileBlob):
                return None
            chunks = info.chunks
            try:
                lengths = [chunks[o] for o in h.offsets]
            except KeyError:
                return None
            total += sum(lengths)
            plan.append((info.blob.fileno(), info.blob.base, h.offsets, lengths))
        return plan, total

    def pieces(self, parts: list[tuple[OperatorState, ChannelHandle]]) -> Iterator[tuple[str, Blob, int, int]]:
        """(part label, blob, blob position, bytes now in self.buffer) for each piece, in stream order."""
        for op, h in parts:
            info = self.blobs.get(self.blob_key(h.delegate))
            if info is None or info.blob is None:
                continue
            for off in h.offsets:
                length = info.chunks.get(off)
                if length is None:
                    try:
                        chunk = read_chunk_header(info.blob, off)
                    except BlobError:
                        continue
                else:
                    chunk = Chunk(off, length)
                label = f"{op.label()}#{h.subtask_index} {h.label()}"
                for pos, n in iter_payload(info.blob, chunk, self.buffer):
                    yield label, info.blob, pos, n

    def frame(
        self,
        label: str,
        parts: list[tuple[OperatorState, ChannelHandle]],
        bound_alone: int | None,
        fast: tuple[int, int, int] | None,
    ) -> None:
        """Count the channel's elements and records; ``fast``: the native result (elements, records, payload
        bytes), if it framed the channel cleanly. Else
        frame it again piece by piece, to say where each fault is. ``bound_alone``: None for a whole logical
        channel (it must end on a record boundary); for an input part framed alone, the most payload its
        logical channel can have (a record may run past the part, not past that)."""
        if any(self.blobs.get(self.blob_key(h.delegate)) is None for _, h in parts):
            return
        keys = tuple(channel_key(o, h) for o, h in parts)
        if fast is not None:
            self.report.elements += fast[0]
            self.report.records += fast[1]
            self.report.bytes_read += fast[2]
            if bound_alone is None:
                self.report.counted[keys] = fast[1]
            return
        total = 0
        for _, h in parts:
            info = self.blobs[self.blob_key(h.delegate)]
            total += sum(info.chunks[o] for o in h.offsets if o in info.chunks)
        complete = bound_alone is None
        if bound_alone is not None:
            total = bound_alone  # the stream continues upstream: a record may run past this part, not past that
        framer = make_framer(total, self.tags)
        where: list[tuple[str, Blob | None, int]] = []
        try:
            for part_label, blob, pos, n in self.pieces(parts):
                where.append((part_label, blob, pos))
                framer.feed(self.buffer, n)
                self.report.bytes_read += n
        except BlobError:
            return  # already reported by the chunk checks
        if complete:
            framer.finish()
        self.report.elements += framer.records
        self.report.records += framer.stream_records
        if complete and not framer.faults and all(self.payload(h) == self.measured(h) for _, h in parts):
            self.report.counted[keys] = framer.stream_records  # every chunk read: the count is the channel's
        op, first = parts[0]
        for fault in framer.faults:
            part_label, in_blob, pos = where[fault.piece] if fault.piece < len(where) else ("?", None, 0)
            rule = {"length": "record-length", "tag": "record-tag", "size": "record-tag"}.get(
                fault.kind, "record-truncated"
            )
            context = "" if complete or fault.kind != "length" else _ALONE_CONTEXT
            self.add_to(
                keys,
                rule,
                f"{fault.message} (in {part_label}){context}",
                operator=op.label(),
                subtask=first.subtask_index,
                channel=label,
                file=in_blob.name if in_blob else None,
                offset=in_blob.physical(pos + fault.position) if in_blob else None,
            )

    def check_topology(self, bound: dict[str, BoundVertex], located: list[_Located]) -> None:
        heads = {b.head.operator_id: b for b in bound.values() if b.head is not None}
        tails = {b.tail.operator_id: b for b in bound.values() if b.tail is not None}
        assert self.topology is not None
        verts = self.topology.vertices
        binding = operator_binding(self.topology, self.cp)
        placed = {b.operator_id for b in binding.operators if b.exact} if binding is not None else None
        doubted: set[str] = set()
        for x in located:
            h, op = x.handle, x.operator
            where = {"operator": op.label(), "subtask": h.subtask_index, "channel": x.label()}
            if placed is not None and op.operator_id not in placed:
                # Which plan operator holds this state is not certain: a finding here would be a guess.
                if op.operator_id not in doubted:
                    doubted.add(op.operator_id)
                    self.add(
                        "binding-uncertain",
                        f"{op.label()} holds channel state and is not bound to a plan operator for certain, so its "
                        "channels are not checked against the plan; the binding table says what would decide it "
                        "(a --uid NAME=UID, or the job-graph plan)",
                        operator=op.label(),
                    )
                continue
            if h.side == "input":
                b = heads.get(op.operator_id)
                if b is None:
                    self.add_to(
                        (x.key,),
                        "channel-holder",
                        "input channel state on an operator that heads no chain in the plan",
                        **where,
                    )
                    continue
                gates = {e.gate: e for e in b.vertex.inputs}
                edge = gates.get(h.gate_index)
                if edge is None:
                    self.add_to(
                        (x.key,),
                        "channel-index",
                        f"gate {h.gate_index} does not exist (vertex has {len(gates)} inputs)",
                        **where,
                    )
                elif h.input_channel_index >= verts[edge.upstream].parallelism:
                    self.add_to(
                        (x.key,),
                        "channel-index",
                        f"input channel {h.input_channel_index} >= upstream parallelism "
                        f"{verts[edge.upstream].parallelism}",
                        **where,
                    )
            else:
                b = tails.get(op.operator_id)
                if b is None:
                    if not any(bb.problem for bb in bound.values()):
                        self.add_to(
                            (x.key,),
                            "channel-holder",
                            "output channel state on an operator that ends no chain in the plan",
                            **where,
                        )
                    continue
                outs = b.vertex.outputs
                if h.partition_index >= len(outs):
                    self.add_to(
                        (x.key,),
                        "channel-index",
                        f"partition {h.partition_index} does not exist (vertex has {len(outs)} outputs)",
                        **where,
                    )
                elif h.subpartition_index >= verts[outs[h.partition_index].downstream].parallelism:
                    self.add_to(
                        (x.key,),
                        "channel-index",
                        f"subpartition {h.subpartition_index} >= downstream parallelism "
                        f"{verts[outs[h.partition_index].downstream].parallelism}",
                        **where,
                    )


__all__ = ["Report", "validate"]
