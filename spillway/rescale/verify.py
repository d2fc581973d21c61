"""The rescale self-check: re-read every written channel file and prove

* every channel is a whole number of elements (starts and ends on a record boundary);
* each new channel holds exactly the records the router sent it (count + crc32 fingerprint), and per
  edge the records written equal the records read from the old channels (broadcast: once per target);
* every record of a hash edge sits on the subtask that owns its key group at the new parallelism.

Order within a source is guaranteed by construction (runs sorted by source and sequence) and checked
for hash edges by the key-group test; this module reports problems as strings (empty: all good).
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

from spillway.formats.channel_file import BlobError, FileBlob, read_chunk_header
from spillway.formats.stream_elements import MAX_ELEMENT, length_fault
from spillway.rescale.channel_reader import BLOCK
from spillway.rescale.channel_writer import WrittenFile
from spillway.rescale.element_scan import Scan, scan_elements
from spillway.rescale.execute import MoveResult
from spillway.rescale.plan import CUSTOM, HASH, EdgePlan, RescalePlan


def _channel_blocks(blob: FileBlob, offsets: list[int]) -> Iterator[bytes]:
    """The channel's payload, chunk by chunk, gathered into blocks of about BLOCK bytes."""
    parts: list[bytes] = []
    held = 0
    for off in offsets:
        chunk = read_chunk_header(blob, off)
        parts.append(blob.read_at(off + 4, chunk.length))
        held += chunk.length
        if held >= BLOCK:
            yield b"".join(parts)
            parts, held = [], 0
    if parts:
        yield b"".join(parts)


class ChannelScanner:
    """Frames one channel's payload as it is fed, in blocks of about BLOCK bytes (memory: one block plus
    at most one element carried over). ``base``: the payload offset of the first byte fed (a piece of the
    channel that starts on an element boundary); fault messages name offsets in the whole channel."""

    def __init__(self, ep: EdgePlan | None, down: int, where: str = "", base: int = 0):
        self.ep, self.down, self.where, self.base = ep, down, where, base
        self.total = Scan(0, 0, 0, 0)
        self.pending = b""
        self.parts: list[bytes] = []
        self.held = 0
        self.length = 0
        self.fault = ""

    def feed(self, data: bytes) -> None:
        self.parts.append(data)
        self.held += len(data)
        if self.held >= BLOCK:
            self._scan()

    def lost(self, message: str) -> None:
        """Part of the channel could not be read: framing stops here."""
        self.fault = self.fault or message
        self.parts, self.held = [], 0

    def _scan(self) -> None:
        if not self.parts:
            return
        block = self.parts[0] if len(self.parts) == 1 else b"".join(self.parts)
        self.parts, self.held = [], 0
        if self.fault:
            return
        total = self.total
        self.length += len(block)
        data = self.pending + block if self.pending else block
        view = memoryview(data)
        scan = scan_elements(view, self.ep, self.down)
        view.release()
        total.end += scan.end
        total.records += scan.records
        total.crc += scan.crc
        total.misplaced += scan.misplaced
        if scan.fault:
            self.fault = f"{scan.fault} at payload offset {self.base + total.end}"
            return
        self.pending = data[scan.end :]
        if len(self.pending) >= 4:
            field = int.from_bytes(self.pending[:4], "big", signed=True)
            if length_fault(field, None, MAX_ELEMENT) is not None:  # no element the router writes is larger
                self.fault = f"length field {field} at payload offset {self.base + total.end}"

    def finish(self) -> tuple[int, int, int, str]:
        """(records, crc sum, misplaced records, what was wrong with the framing or "", prefixed with
        ``where``)."""
        if self.parts:
            self._scan()
        if not self.fault and self.pending:
            self.fault = f"{len(self.pending)} bytes after the last whole element"
        fault = f"{self.where}: {self.fault}" if self.fault and self.where else self.fault
        return self.total.records, self.total.crc, self.total.misplaced, fault


def _scan_channel(blob: FileBlob, offsets: list[int], ep: EdgePlan | None, down: int) -> tuple[Scan, int, str]:
    """Frames one written channel block by block. Returns the totals, the payload length and what was
    wrong with the framing ("" if nothing)."""
    scanner = ChannelScanner(ep, down)
    for block in _channel_blocks(blob, offsets):
        scanner.feed(block)
        scanner._scan()  # each block as it comes (the last one may be short)
        if scanner.fault:
            break
    _, _, _, framing = scanner.finish()
    return scanner.total, scanner.length, framing


def check_file(directory: Path, f: WrittenFile, plan: RescalePlan) -> tuple[list[str], dict[int, int]]:
    """Problems found in one file, and records per gate."""
    problems: list[str] = []
    per_gate: dict[int, int] = {}
    edges = {(ep.down_head, ep.gate): ep for ep in plan.edges}
    blob = FileBlob(directory / f.name)
    try:
        if blob.size != f.size:
            problems.append(f"{f.name}: {blob.size} bytes on disk, {f.size} written")
        for ch in f.channels:
            ep = edges.get((f.operator_id, ch.gate))
            placed = ep if ep is not None and ep.rule in (HASH, CUSTOM) else None
            where = f"{f.name} channel (gate {ch.gate}, input channel {ch.up}) of subtask {f.down}"
            try:
                scan, _, framing = _scan_channel(blob, ch.offsets, placed, f.down)
            except BlobError as exc:  # a chunk the handle names is not there (file cut or overwritten)
                problems.append(f"{where}: {exc} (byte offset {exc.offset})")
                continue
            if framing:
                problems.append(f"{where}: {framing}")
            if scan.records != ch.records or scan.crc != ch.crc:
                problems.append(f"{where}: {scan.records} records read back, {ch.records} routed (or contents differ)")
            if scan.misplaced:
                problems.append(f"{where}: {scan.misplaced} records whose key group belongs to another subtask")
            per_gate[ch.gate] = per_gate.get(ch.gate, 0) + scan.records
    finally:
        blob.close()
    return problems, per_gate


def check_totals(plan: RescalePlan, result: MoveResult, written_per_edge: dict[int, int]) -> list[str]:
    problems = []
    read: dict[int, int] = {}
    for rep in result.sources:
        ep = plan.edges[plan.sources[rep.sid].edge]
        read[ep.index] = read.get(ep.index, 0) + rep.copies
        expected_copies = rep.records * (ep.new_down_p if ep.rule == "broadcast" else 1)
        if rep.copies != expected_copies:
            problems.append(f"{plan.sources[rep.sid].label}: {rep.records} records read, {rep.copies} routed")
    for ep in plan.edges:
        if read.get(ep.index, 0) != written_per_edge.get(ep.index, 0):
            problems.append(
                f"edge {ep.label}: {read.get(ep.index, 0)} records routed, {written_per_edge.get(ep.index, 0)} written"
            )
    return problems


def self_check(directory: Path, plan: RescalePlan, result: MoveResult) -> list[str]:
    problems: list[str] = []
    by_gate = {(ep.down_head, ep.gate): ep.index for ep in plan.edges}
    written: dict[int, int] = {}
    for f in result.files:
        found, per_gate = check_file(directory, f, plan)
        problems += found
        for gate, n in per_gate.items():
            idx = by_gate.get((f.operator_id, gate))
            if idx is not None:
                written[idx] = written.get(idx, 0) + n
    return problems + check_totals(plan, result, written)
