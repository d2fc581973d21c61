"""``validate``'s byte work: channel-state blobs opened once and walked into chunk maps, record framing in the C
framer on a small thread pool (the pure-Python framer where a channel needs locating faults or there is no C
compiler), and the read buffers.

The C walks and framing release the GIL, so they run on the pool (one thread per usable core). Channels whose
handles list their chunks in file order are framed file by file (each file read once, front to back); the
others in batches, a few ahead of the Python loop that turns results into findings. That loop consumes the
results in job order, as a serial run does, so the findings and their order do not depend on the number of
threads.
"""

from __future__ import annotations

import os
import threading
from array import array
from collections import deque
from collections.abc import Hashable, Iterator, Mapping
from concurrent.futures import Future, ThreadPoolExecutor
from types import EllipsisType
from typing import TYPE_CHECKING

from spillway.formats.channel_file import (
    READ_BLOCK,
    Blob,
    BlobError,
    Chunk,
    ChunkMap,
    FileBlob,
    Walked,
    chunk_map,
    iter_payload,
    read_chunk_header,
    read_version,
)
from spillway.formats.record_framing import Framer, NativeFramer, make_framer
from spillway.inspect.findings import Finding
from spillway.inspect.rules.chunks import chain_finding, header_finding, no_byte_source
from spillway.inspect.rules.common import ChannelBlob, Located
from spillway.inspect.rules.records import Piece
from spillway.inspect.validate_report import Recorder
from spillway.model.checkpoint import (
    ByteStreamHandle,
    ChannelHandle,
    OperatorState,
    StreamHandle,
    is_byte_source,
    is_file_backed,
)
from spillway.storage import remote_copies
from spillway.storage.blobs import delegate_display, delegate_key, open_delegate
from spillway.storage.locate import FileResolver

if TYPE_CHECKING:
    from spillway.formats.native import FileFraming, FrameBatch, WalkFraming

AHEAD = 4  # framing batches in flight per worker thread: enough to keep them busy, few enough to stay small
# A batch of channels is framed in one C call: up to this many channels or (at least) this much payload, so
# tiny channels do not cost a Python round trip each, and big ones still spread over the threads.
BATCH_CHANNELS = 256
BATCH_BYTES = 8 << 20

Parts = list[tuple[OperatorState, ChannelHandle]]  # the parts of a logical channel, in stream order
# A channel to frame: its label, its parts, and None (a whole logical channel, which must end on a record
# boundary) or, for an input part framed alone, the most payload its logical channel can have.
Job = tuple[str, Parts, int | None]
Counted = tuple[int, int, int]  # the C framer's result for a clean channel: (elements, records, payload bytes)
# (fd, blob base, chunk offsets, payload lengths) per part of a logical channel, in stream order
NativePlan = list[tuple[int, int, list[int], "array[int]"]]


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


def _frame_batch(batch: FrameBatch, tags: frozenset[int]) -> list[tuple[int, int] | None]:
    """(Stream elements, of them records) of each channel of the batch, None where it did not frame cleanly
    (runs on a worker thread: touches nothing shared but the batch, which the caller no longer changes)."""
    from spillway.formats.native import frame_batch, framer_rules

    return frame_batch(batch, framer_rules(tags, None), _thread_buffer())


def _frame_file(framing: FileFraming, phase: int, file: tuple[int, int]) -> None:
    """One file's chunks of one phase (runs on a worker thread: the channels it touches are its alone)."""
    framing.frame_file(phase, file, _thread_buffer())


class Engine:
    """The channel-state blobs of one checkpoint and the threads that read them; ``close`` releases both."""

    frame_while_walking = True  # False: no guessed framing (tests compare the two ways)

    def __init__(
        self,
        resolver: FileResolver,
        tags: frozenset[int],
        recorder: Recorder,
        workers: int = 1,
        plan_names: Mapping[str, str] | None = None,
    ) -> None:
        self.resolver = resolver
        self.plan_names = plan_names  # operator id -> a bound plan's name (``JobBinding.names``), for labels
        self.tags = tags
        self.recorder = recorder
        self.workers = workers
        self.blobs: dict[Hashable, ChannelBlob] = {}
        self.buffer = bytearray(READ_BLOCK)
        self.keys: dict[int, Hashable] = {}  # id(delegate) -> blob key; the checkpoint keeps every delegate alive
        self.pool: ThreadPoolExecutor | None = None
        self.opened: dict[Hashable, Blob | None] = {}  # opened ahead of open_blob, for the walks on the pool
        self.walks: dict[Hashable, Future[Walked | None]] = {}
        self.located: dict[tuple[int, Hashable], tuple[list[int], array[int] | None]] = {}  # see ``positions``
        self.guess: WalkFraming | None = None  # channels framed while their files were walked (prefetch_walks)
        self.walker: threading.Thread | None = None  # runs the walks' phases on the pool
        self.walked: dict[tuple[int, int], Walked] = {}  # (fd, base) -> its walk, for the later phases
        self.futures: dict[Hashable, Future[Walked | None]] = {}  # every walk's (open_blob takes them from walks)
        self.closing = False

    def close(self) -> None:
        self.closing = True  # the walker submits no further phase
        if self.pool is not None:  # no worker may still read a descriptor that is about to be closed
            self.pool.shutdown(wait=True, cancel_futures=True)
        if self.walker is not None:
            self.walker.join()
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

    # ------------------------------------------------------------------ blobs and their chunk maps
    def blob_key(self, delegate: StreamHandle) -> Hashable:
        key = self.keys.get(id(delegate))
        if key is None:
            key = self.keys[id(delegate)] = delegate_key(self.resolver, delegate)
        return key

    def info(self, h: ChannelHandle) -> ChannelBlob | None:
        """The blob of a handle, once opened."""
        return self.blobs.get(self.blob_key(h.delegate))

    def walk_order(self, located: list[Located], guesses: list[tuple[Parts, bool]]) -> list[StreamHandle]:
        """One delegate per channel-state blob, in the order :meth:`walk_phases` reads their files (the order to
        fetch a remote checkpoint's in): those of files no guessed channel lists, then the guessed channels' first
        parts, their second parts, …"""
        listed = {self.blob_key(h.delegate) for parts, _ in guesses for _, h in parts}
        order: dict[Hashable, StreamHandle] = {}
        for x in located:
            key = self.blob_key(x.handle.delegate)
            if key not in listed:
                order.setdefault(key, x.handle.delegate)
        for phase in range(max((len(parts) for parts, _ in guesses), default=0)):
            for parts, _ in guesses:
                if len(parts) > phase:
                    delegate = parts[phase][1].delegate
                    order.setdefault(self.blob_key(delegate), delegate)
        return list(order.values())

    def prefetch_walks(self, located: list[Located], guesses: list[tuple[Parts, bool]]) -> None:
        """Open every file-backed blob now and walk its chunk chain, on the pool (or here, with one thread);
        open_blob takes the walks in its own order. ``guesses``: the channels the framing will most likely
        frame, (parts, whether it must end on a record boundary) each, framed in the same reads as the walks
        (each file read once for both, front to back); frame_by_file keeps that framing where the guess was
        right."""
        from spillway.formats.native import library

        if library() is None:
            return
        pool = self.start_pool()
        files: dict[tuple[int, int], tuple[Hashable, FileBlob]] = {}
        for x in located:
            delegate = x.handle.delegate
            key = self.blob_key(delegate)
            if key in self.opened or not is_byte_source(delegate) or isinstance(delegate, ByteStreamHandle):
                continue
            # A remote checkpoint's file may still be arriving: its walk waits for it (walk_task).
            blob = self.opened[key] = open_delegate(self.resolver, delegate, arrived=False)
            if isinstance(blob, FileBlob):
                files[blob.fileno(), blob.base] = key, blob
                self.walks[key] = self.futures[key] = Future()
        self.guess = self.guesses(guesses, files) if self.frame_while_walking else None
        if pool is None:
            self.walk_phases(files, None)
        else:
            walker = threading.Thread(target=self.walk_phases, args=(files, pool), daemon=True)
            walker.start()
            self.walker = walker  # only once started: a Ctrl-C inside start() must not leave one to join

    def guesses(
        self, guesses: list[tuple[Parts, bool]], files: dict[tuple[int, int], tuple[Hashable, FileBlob]]
    ) -> WalkFraming | None:
        """The guessed channels whose parts are all in ``files`` with their offsets in file order."""
        from spillway.formats.native import WalkFraming, framer_rules

        by_key = {key: (fd, base) for (fd, base), (key, _) in files.items()}
        guess = WalkFraming(framer_rules(self.tags, None))
        for parts, complete in guesses:
            plan = []
            for _, h in parts:
                file = by_key.get(self.blob_key(h.delegate))
                if file is None or h.offsets != sorted(h.offsets):
                    break
                plan.append((*file, h.offsets))
            else:
                guess.add(plan, complete)
        if not guess.slots:
            return None
        guess.start()
        return guess

    def walk_phases(
        self, files: dict[tuple[int, int], tuple[Hashable, FileBlob]], pool: ThreadPoolExecutor | None
    ) -> None:
        """Walk every file, framing the guessed channels on the way: phase by phase (a channel's second part only
        after its first), the files of a phase on the pool; each file is walked in the first phase that lists it,
        files no guessed channel lists with the first."""
        guess = self.guess
        phases = guess.files if guess is not None else []
        listed = {file for phase in phases for file in phase}
        try:
            for phase in range(max(1, len(phases))):
                todo = [file for file in files if file not in listed] if phase == 0 else []
                todo += list(phases[phase]) if phases else []
                if self.closing:
                    break
                if pool is None:
                    for file in todo:
                        self.walk_task(phase, file, files[file])
                else:
                    for done in [pool.submit(self.walk_task, phase, file, files[file]) for file in todo]:
                        done.result()
        except BaseException as exc:  # the walks not done fail with it (open_blob raises it)
            for key, _ in files.values():
                future = self.futures[key]
                if not future.done():
                    future.set_exception(exc)

    def walk_task(self, phase: int, file: tuple[int, int], entry: tuple[Hashable, FileBlob]) -> None:
        """One file of one phase: walked (and its guessed chunks of the phase framed), or, walked already, framed."""
        from spillway.formats.native import walk_file

        key, blob = entry
        guess = self.guess
        walked = self.walked.get(file)
        if walked is not None:
            assert guess is not None
            guess.frame_walked(phase, file, walked, _thread_buffer())
            return
        future = self.futures[key]
        try:
            remote_copies.arrive(blob.path)  # a remote checkpoint's file: walked once it has arrived
            found = None
            if guess is not None and phase < len(guess.files) and file in guess.files[phase]:
                found = guess.walk_frame(phase, file, blob.size, _thread_buffer())
            if found is None:  # no guess here, or a read failed: the walk alone, which reports it
                found = walk_file(blob.fileno(), blob.base, blob.size)
            assert found is not None
            self.walked[file] = found
            future.set_result(found)
        except BaseException as exc:
            future.set_exception(exc)
            raise

    def open_blob(self, delegate: StreamHandle, who: Located, path_faults: dict[str, Finding]) -> ChannelBlob:
        """The blob ``delegate`` names, opened and walked the first time (``channel-header``, ``chunk-chain``
        findings then); ``path_faults``: the file-level errors already found, by local path or original name."""
        key = self.blob_key(delegate)
        if key in self.blobs:
            return self.blobs[key]
        info = self.blobs[key] = ChannelBlob(None, ChunkMap(), False, "?")
        if not is_byte_source(delegate):
            info.fault = self.recorder.add(no_byte_source(who, "null" if delegate is None else type(delegate).__name__))
            return info
        info.display = delegate_display(self.resolver, delegate)
        resolved = self.resolver.resolve(delegate) if is_file_backed(delegate) else None
        if resolved is not None:
            info.fault = path_faults.get(resolved.local_text or "") or path_faults.get(resolved.original)
        info.blob = self.opened.pop(key) if key in self.opened else open_delegate(self.resolver, delegate)
        if info.blob is None:
            return info  # a missing or unreadable file is reported by the file rules
        blob = info.blob
        if isinstance(blob, FileBlob):
            remote_copies.arrive(blob.path)  # opened while it was still arriving (prefetch_walks)
        self.recorder.report.blobs_checked += 1
        try:
            version: int | BlobError = read_version(blob)
        except BlobError as exc:
            version = exc
        header = header_finding(version, info.display, blob.physical(0))
        if header is not None:
            info.fault = self.recorder.add(header)
            return info
        walk = self.walks.pop(key, None)
        info.chunks, error = chunk_map(blob, walk.result() if walk is not None else None)
        if error is None:
            info.complete = True
        else:
            # Conservative: past a break nothing in the file can be trusted, so every handle in it is damaged.
            if info.fault is not None:  # the file is short: that error damages the handles too
                info.also.append(info.fault)
            info.fault = self.recorder.add(chain_finding(error, info.display, blob.physical(error.offset)))
        self.recorder.report.chunks += len(info.chunks)
        return info

    def positions(self, h: ChannelHandle) -> array[int] | None:
        """Where a handle's offsets are in its blob's chunk map (once its blob is open), None if one starts no
        chunk; found once per handle."""
        # By the offsets list, which the handles a merged handle unmerges into share (each call makes new ones),
        # and the blob; the list is kept with the result, so its id is not reused while the entry exists.
        blob = self.blob_key(h.delegate)
        key = (id(h.offsets), blob)
        known = self.located.get(key)
        if known is not None:
            return known[1]
        info = self.blobs.get(blob)
        if info is None:
            return None
        found = info.chunks.indices(h.offsets)
        self.located[key] = (h.offsets, found)
        return found

    def measured(self, h: ChannelHandle) -> int | None:
        """A handle's payload bytes if every one of its offsets starts a chunk of its file, else None."""
        info = self.info(h)
        positions = self.positions(h) if info is not None else None
        return None if info is None or positions is None else info.chunks.payload(positions)

    def payload(self, h: ChannelHandle) -> int:
        """A handle's payload bytes as measured from its file's chunks (its stated size where unknown: an upper
        bound, which is what the alone framing's record-length limit needs)."""
        info = self.info(h)
        measured = self.measured(h) if info is not None and info.blob is not None else None
        return max(h.state_size, 0) if measured is None else measured

    def unreadable(self, h: ChannelHandle) -> str | None:
        """Why the records of a handle cannot be framed at all (its file was not read, or its header is not a
        channel-state header: any record fault found there would only restate that), or None."""
        info = self.info(h)
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

    # ------------------------------------------------------------------ framing in C
    def run_ahead(self, jobs: list[Job]) -> Iterator[Counted | None]:
        """The native framing result of each job, in job order — (elements, records, payload bytes), or None
        where the caller must frame it itself. Channels whose chunks come in file order are framed file by file
        first (each file read once, front to back); the others in batches on the pool a few batches ahead of the
        caller, or here without one."""
        from spillway.formats.native import FrameBatch, library

        if library() is None:
            yield from (None for _ in jobs)
            return
        by_file, plans = self.frame_by_file(jobs)
        pool = self.start_pool()
        # per batch: its result, and per job (index in the batch, or -1: not framed natively, or -2: framed by
        # file; then payload bytes, or the job's index)
        Group = tuple[Future[list[tuple[int, int] | None]] | None, list[tuple[int, int]]]
        groups: deque[Group] = deque()

        def submit(batch: FrameBatch) -> Future[list[tuple[int, int] | None]]:
            if pool is not None:
                return pool.submit(_frame_batch, batch, self.tags)
            done: Future[list[tuple[int, int] | None]] = Future()
            done.set_result(_frame_batch(batch, self.tags))
            return done

        def results(group: Group) -> Iterator[Counted | None]:
            future, entries = group
            counts = future.result() if future is not None else []
            for index, size in entries:
                if index == -2:
                    yield by_file[size]
                    continue
                found = counts[index] if index >= 0 else None
                yield None if found is None else (*found, size)

        batch, entries, size = FrameBatch(), [], 0
        for n, (_, _, bound_alone) in enumerate(jobs):
            if n in by_file:
                entries.append((-2, n))
                continue
            plan = plans.get(n)
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

    def frame_by_file(self, jobs: list[Job]) -> tuple[dict[int, Counted | None], dict[int, tuple[NativePlan, int]]]:
        """Frame, file by file, every job whose parts each list their chunks in file order (every handle of the
        bundled Flink fixtures does): its result by job index; and the native plans of the other jobs the C
        framer can take, by job index. Reading each file once, front to back, in large reads is what ``cat``
        does; one read per chunk cost about twice its CPU (benchmarks/README.md)."""
        from spillway.formats.native import FileFraming, framer_rules

        if self.walker is not None:
            self.walker.join()  # the guessed framing is done
        guess = self.guess
        framing = FileFraming(framer_rules(self.tags, None))
        slots: dict[int, tuple[int, int]] = {}  # job index -> (slot, payload bytes)
        others: dict[int, tuple[NativePlan, int]] = {}
        out: dict[int, Counted | None] = {}
        for n, (_, parts, bound_alone) in enumerate(jobs):
            guessed = self.guessed(parts, bound_alone) if guess is not None else ...
            if guessed is not ...:  # framed while walked, as it would be here
                out[n] = guessed
                continue
            plan = self.native_plan(parts)
            if plan is None:
                continue
            if not all(offsets == sorted(offsets) for _, _, offsets, _ in plan[0]):
                others[n] = plan
                continue
            total = plan[1] if bound_alone is None else bound_alone
            slots[n] = (framing.add(plan[0], total, bound_alone is None), plan[1])
        if not slots:
            return out, others
        framing.start()
        pool = self.start_pool()
        for phase, files in enumerate(framing.files):  # a channel's second part only after its first
            if pool is None:
                for file in files:
                    framing.frame_file(phase, file, self.buffer)
            else:
                for done in [pool.submit(_frame_file, framing, phase, file) for file in files]:
                    done.result()
        counts = framing.results()
        for n, (slot, payload) in slots.items():
            found = counts[slot]
            out[n] = None if found is None else (*found, payload)
        return out, others

    def guessed(self, parts: Parts, bound_alone: int | None) -> Counted | EllipsisType | None:
        """The result of a job framed while its files were walked — what ``native_plan`` and ``FileFraming`` give
        for it (its parts are the guessed handles' offsets, each in file order, in the same files) — or ``...``
        where the guess does not answer for it."""
        guess = self.guess
        assert guess is not None
        key = []
        payload = 0
        for _, h in parts:
            info = self.info(h)
            if info is None or not isinstance(info.blob, FileBlob):
                return ...
            positions = self.positions(h)
            if positions is None:
                return ...  # (native_plan would give None: not framed natively)
            key.append((info.blob.fileno(), info.blob.base, h.offsets))
            payload += info.chunks.payload(positions)
        slot = guess.slot(key, bound_alone is None)
        if slot is None:
            return ...
        found = guess.result(slot, payload if bound_alone is None else bound_alone)
        if found is ...:
            return ...
        return None if found is None else (*found, payload)

    def native_plan(self, parts: Parts) -> tuple[NativePlan, int] | None:
        """What the C framer needs for a channel whose parts are all whole chunks of local files, and the
        channel's payload length; None for anything else (inline bytes, unknown offsets: the slow path)."""
        from spillway.formats.native import gather

        plan: NativePlan = []
        total = 0
        for _, h in parts:
            info = self.info(h)
            if info is None or not isinstance(info.blob, FileBlob):
                return None
            positions = self.positions(h)
            if positions is None:
                return None
            gathered = gather(info.chunks.lengths, positions) if len(positions) > 16 else None
            if gathered is None:  # a few chunks: here, not worth a C call
                lengths = array("i", map(info.chunks.lengths.__getitem__, positions))
                total += sum(lengths)
            else:
                lengths, length = gathered
                total += length
            plan.append((info.blob.fileno(), info.blob.base, h.offsets, lengths))
        return plan, total

    # ------------------------------------------------------------------ framing piece by piece, to locate faults
    def reframe(self, parts: Parts, total: int, complete: bool) -> tuple[Framer | NativeFramer, list[Piece]] | None:
        """Frame a channel again piece by piece: the framer (its counts and faults) and where each piece fed to
        it lies; None if a read failed (the chunk rules report that)."""
        framer = make_framer(total, self.tags)
        pieces: list[Piece] = []
        try:
            for piece, n in self._pieces(parts):
                pieces.append(piece)
                framer.feed(self.buffer, n)
                self.recorder.report.bytes_read += n
        except BlobError:
            return None
        if complete:
            framer.finish()
        return framer, pieces

    def read_back(self, parts: Parts, limit: int) -> tuple[bytearray, list[int]] | None:
        """The channel's payload in stream order and the length of each piece (as ``reframe`` fed them); None
        if it is longer than ``limit`` bytes or a read failed."""
        data, lengths = bytearray(), []
        try:
            for _, n in self._pieces(parts):
                if len(data) + n > limit:
                    return None
                data += memoryview(self.buffer)[:n]
                lengths.append(n)
        except BlobError:
            return None
        return data, lengths

    def _pieces(self, parts: Parts) -> Iterator[tuple[Piece, int]]:
        """Each piece of the channel's payload, in stream order, and how many of its bytes are now in
        ``self.buffer``."""
        for op, h in parts:
            info = self.info(h)
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
                label = f"{op.label(self.plan_names)}#{h.subtask_index} {h.label()}"
                for pos, n in iter_payload(info.blob, chunk, self.buffer):
                    yield Piece(label, info.blob, pos, off), n
