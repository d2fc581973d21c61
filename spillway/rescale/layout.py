"""Where every staged run lands in the new channel files, computed from the sorted run refs alone, so a
file can be written by several tasks at once (the Spark backend's write stage).

A new file is a header, then its channels in (gate, input channel) order; a channel is its runs' bytes
in replay order, cut into chunks of ``buffer_size`` (only the last one shorter), each behind a 4-byte
length. That depends only on the runs' lengths, so the whole file, every chunk offset and every
channel's record count and crc sum are known before a byte is written (``plan_files``), and the file
splits into pieces of whole runs that cover disjoint, contiguous byte ranges (``Piece``). Each piece
is written with ``pwrite`` into a file the driver created at its final size, then read back and framed
(``write_piece``). The result is byte-identical to ``channel_writer.write_sorted_runs`` (tested).

Why: one task per new file left the write stage with as many tasks as new subtasks (3 for ``-p
parse=3``: two rounds on two cores) and routed every ref through Spark's shuffle and sort.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field

from spillway.formats.channel_file import CHUNK_LENGTH, SERIALIZATION_VERSION, FileHeader
from spillway.rescale.channel_reader import BLOCK
from spillway.rescale.channel_writer import WrittenChannel, WrittenFile, target_file_name
from spillway.rescale.plan import CUSTOM, HASH, RescalePlan
from spillway.rescale.staging import RunRef, StagedReader
from spillway.rescale.verify import ChannelScanner

HEADER = FileHeader.build({"version": SERIALIZATION_VERSION})
WRITE_BATCH = 4 * 1024 * 1024  # bytes gathered before one pwrite


@dataclass(frozen=True, slots=True)
class Placed:
    """A run and its place: channel ``chan`` of the file starts at file offset ``start`` and holds
    ``length`` payload bytes; the run's payload begins at payload offset ``q`` of that channel."""

    ref: RunRef
    chan: int
    start: int
    length: int
    q: int

    def span(self, buffer_size: int) -> tuple[int, int]:
        """The file bytes this run writes: its payload and the headers of the chunks it begins."""
        stride = 4 + buffer_size
        k, r = divmod(self.q, buffer_size)
        first = self.start + k * stride + (4 + r if r else 0)
        last = self.q + self.ref.length - 1
        k, r = divmod(last, buffer_size)
        return first, self.start + k * stride + 4 + r + 1


@dataclass
class Piece:
    """Consecutive runs of one file: file bytes [start, end), the header too when ``start`` is 0."""

    name: str
    operator_id: str
    down: int
    start: int
    end: int
    runs: list[Placed] = field(default_factory=list)


def plan_files(refs: list[RunRef], buffer_size: int, piece_bytes: int) -> tuple[list[WrittenFile], list[Piece]]:
    """The new files (as ``write_sorted_runs`` would report them) and their pieces of about
    ``piece_bytes`` each. ``refs`` must be sorted by ``RunRef.order``."""
    files: list[WrittenFile] = []
    pieces: list[Piece] = []
    i = 0
    while i < len(refs):
        j = i
        while j < len(refs) and refs[j].tkey == refs[i].tkey:
            j += 1
        op = refs[i].tkey.split(":")[0]
        down = refs[i].down
        f = WrittenFile(op, down, target_file_name(op, down))
        placed: list[Placed] = []
        pos = len(HEADER)
        a = i
        while a < j:
            b = a
            while b < j and (refs[b].gate, refs[b].up) == (refs[a].gate, refs[a].up):
                b += 1
            length = sum(r.length for r in refs[a:b])
            if length:  # an empty channel is not listed (the writer drops it too)
                chunks = -(-length // buffer_size)
                ch = WrittenChannel(refs[a].gate, refs[a].up, [pos + k * (4 + buffer_size) for k in range(chunks)], 0)
                ch.size = 4 * chunks + length
                ch.records = sum(r.records for r in refs[a:b])
                ch.crc = sum(r.crc for r in refs[a:b])
                q = 0
                for r in refs[a:b]:
                    if r.length:
                        placed.append(Placed(r, len(f.channels), pos, length, q))
                        q += r.length
                f.channels.append(ch)
                pos += ch.size
            a = b
        f.size = pos
        files.append(f)
        pieces += _cut(f, placed, buffer_size, piece_bytes)
        i = j
    return files, pieces


def _cut(f: WrittenFile, placed: list[Placed], buffer_size: int, piece_bytes: int) -> list[Piece]:
    parts = max(1, round(f.size / piece_bytes))
    share = f.size / parts
    out = [Piece(f.name, f.operator_id, f.down, 0, len(HEADER))]
    for p in placed:
        first, end = p.span(buffer_size)
        cur = out[-1]
        if cur.runs and first >= share * len(out):  # this run starts the next share of the file
            cur = Piece(f.name, f.operator_id, f.down, first, first)
            out.append(cur)
        cur.runs.append(p)
        cur.end = end
    return out


def create_files(directory: str, files: list[WrittenFile]) -> None:
    """Each new file, empty at its final size, for the pieces to write into."""
    for f in files:
        fd = os.open(os.path.join(directory, f.name), os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
        try:
            os.ftruncate(fd, f.size)
        finally:
            os.close(fd)


def _segments(p: Placed, data: bytes | memoryview, buffer_size: int) -> Iterator[bytes | memoryview]:
    """The run's file bytes in order: chunk headers (for the chunks it begins) and payload slices."""
    view = memoryview(data)
    q = p.q
    i = 0
    while i < len(view):
        r = q % buffer_size
        if r == 0:
            yield CHUNK_LENGTH.pack(min(buffer_size, p.length - q))
        n = min(buffer_size - r, len(view) - i)
        yield view[i : i + n]
        i += n
        q += n


def _pwrite_all(fd: int, data: bytes, offset: int) -> None:
    view = memoryview(data)
    while view:
        n = os.pwrite(fd, view, offset)
        view = view[n:]
        offset += n


def _pread_all(fd: int, length: int, offset: int) -> bytes:
    parts = []
    while length > 0:
        data = os.pread(fd, length, offset)
        if not data:
            break
        parts.append(data)
        length -= len(data)
        offset += len(data)
    return b"".join(parts)


@dataclass
class PieceResult:
    """What the piece's re-read found, per channel index: [records, crc sum, misplaced], and problems."""

    name: str
    channels: dict[int, list[int]] = field(default_factory=dict)
    problems: list[str] = field(default_factory=list)


def write_piece(directory: str, piece: Piece, buffer_size: int, plan: RescalePlan, punch: bool = True) -> PieceResult:
    """Write the piece's runs from staging into its byte range, flush them, re-read and frame them
    (the self-check of ``verify.check_file``, per piece: every run holds whole elements, so each piece
    frames on its own; the caller sums channels across pieces). ``punch``: free the staged bytes once
    written (their disk blocks and dirty pages), so staging never holds the whole payload at once on top
    of the output; a retried task then finds zeros and fails its check instead of writing wrong data."""
    path = os.path.join(directory, piece.name)
    reader = StagedReader(directory, writable=punch)
    fd = os.open(path, os.O_WRONLY)
    try:
        batch: list[bytes | memoryview] = [HEADER] if piece.start == 0 else []
        held = len(batch[0]) if batch else 0
        at = piece.start
        for p in piece.runs:
            batch.extend(_segments(p, reader.read(p.ref), buffer_size))
            held += p.ref.length
            if held >= WRITE_BATCH:
                data = b"".join(batch)
                _pwrite_all(fd, data, at)
                at += len(data)
                batch, held = [], 0
        if batch:
            data = b"".join(batch)
            _pwrite_all(fd, data, at)
            at += len(data)
        assert at == piece.end, (piece.name, at, piece.end)
        if punch:
            for p in piece.runs:
                reader.punch(p.ref)
        reader.close()
        # the output must be on disk before it is renamed into place: flushing now overlaps the wait with
        # the re-read (fdatasync releases the GIL)
        with ThreadPoolExecutor(max_workers=1, thread_name_prefix="spillway-fsync") as pool:
            flushed = pool.submit(os.fdatasync, fd)
            result = check_piece(directory, piece, buffer_size, plan)
            flushed.result()
    finally:
        os.close(fd)
        reader.close()
    return result


def check_piece(directory: str, piece: Piece, buffer_size: int, plan: RescalePlan) -> PieceResult:
    """Re-read the piece's bytes from the file: the chunk headers it wrote and its runs' elements."""
    edges = {(ep.down_head, ep.gate): ep for ep in plan.edges}
    result = PieceResult(piece.name)
    fd = os.open(os.path.join(directory, piece.name), os.O_RDONLY)
    try:
        if piece.start == 0 and _pread_all(fd, len(HEADER), 0) != HEADER:
            result.problems.append(f"{piece.name}: the file header differs from the one written")
        scanner: ChannelScanner | None = None
        chan = -1
        where = piece.name
        k = 0
        while k < len(piece.runs):
            # a window of whole runs, about BLOCK bytes, read in one go
            m = k
            held = 0
            while m < len(piece.runs) and (m == k or held < BLOCK):
                held += piece.runs[m].ref.length
                m += 1
            lo = piece.runs[k].span(buffer_size)[0]
            hi = piece.runs[m - 1].span(buffer_size)[1]
            window = memoryview(_pread_all(fd, hi - lo, lo))
            for p in piece.runs[k:m]:
                if p.chan != chan:
                    if scanner is not None:
                        _finish(result, scanner, chan)
                    ref = p.ref
                    ep = edges.get((piece.operator_id, ref.gate))
                    placed = ep if ep is not None and ep.rule in (HASH, CUSTOM) else None
                    where = f"{piece.name} channel (gate {ref.gate}, input channel {ref.up}) of subtask {piece.down}"
                    scanner = ChannelScanner(placed, piece.down, where, base=p.q)
                    chan = p.chan
                assert scanner is not None
                first, end = p.span(buffer_size)
                parts = _payload(p, window[first - lo : end - lo], buffer_size, result, where)
                if parts is None:
                    scanner.lost(f"{end - first} bytes at file offset {first} are missing")
                    continue
                scanner.feed(parts)
            window.release()
            k = m
        if scanner is not None:
            _finish(result, scanner, chan)
    finally:
        os.close(fd)
    return result


def _payload(p: Placed, raw: memoryview, buffer_size: int, result: PieceResult, where: str) -> bytes | None:
    """The run's payload out of its file bytes, checking the chunk headers it begins."""
    out = []
    q = p.q
    i = 0
    size = p.ref.length
    done = 0
    while done < size:
        r = q % buffer_size
        if r == 0:
            head = bytes(raw[i : i + 4])
            want = CHUNK_LENGTH.pack(min(buffer_size, p.length - q))
            if len(head) < 4:
                return None
            if head != want:
                (got,) = CHUNK_LENGTH.unpack(head)
                result.problems.append(
                    f"{where}: chunk length {got} at payload offset {q}, {CHUNK_LENGTH.unpack(want)[0]} written"
                )
            i += 4
        n = min(buffer_size - r, size - done)
        chunk = raw[i : i + n]
        if len(chunk) < n:
            return None
        out.append(chunk)
        i += n
        q += n
        done += n
    return b"".join(out)


def _finish(result: PieceResult, scanner: ChannelScanner, chan: int) -> None:
    records, crc, misplaced, fault = scanner.finish()
    result.channels[chan] = [records, crc, misplaced]
    if fault:
        result.problems.append(fault)


def sum_pieces(
    directory: str, files: list[WrittenFile], results: list[PieceResult]
) -> tuple[list[str], dict[tuple[str, int], int]]:
    """Problems of the whole files (sizes, per-channel totals against what the router sent) and the
    records read back per (operator id, gate)."""
    problems: list[str] = []
    found: dict[tuple[str, int], list[int]] = {}
    for res in results:
        problems += res.problems
        for chan, (records, crc, misplaced) in res.channels.items():
            got = found.setdefault((res.name, chan), [0, 0, 0])
            got[0] += records
            got[1] += crc
            got[2] += misplaced
    per_gate: dict[tuple[str, int], int] = {}
    for f in files:
        size = os.stat(os.path.join(directory, f.name)).st_size
        if size != f.size:
            problems.append(f"{f.name}: {size} bytes on disk, {f.size} written")
        for c, ch in enumerate(f.channels):
            records, crc, misplaced = found.get((f.name, c), [0, 0, 0])
            where = f"{f.name} channel (gate {ch.gate}, input channel {ch.up}) of subtask {f.down}"
            if records != ch.records or crc != ch.crc:
                problems.append(f"{where}: {records} records read back, {ch.records} routed (or contents differ)")
            if misplaced:
                problems.append(f"{where}: {misplaced} records whose key group belongs to another subtask")
            key = (f.operator_id, ch.gate)
            per_gate[key] = per_gate.get(key, 0) + records
    return problems, per_gate
