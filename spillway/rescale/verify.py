"""The rescale self-check: re-read every written channel file and prove

* every channel is a whole number of elements (starts and ends on a record boundary);
* each new channel holds exactly the records the router sent it (count + crc32 fingerprint), and per
  edge the records written equal the records read from the old channels (broadcast: once per target);
* every record of a hash edge sits on the subtask that owns its key group at the new parallelism.

Order within a source is guaranteed by construction (runs sorted by source and sequence) and checked
for hash edges by the key-group test; this module reports problems as strings (empty: all good).
"""

from __future__ import annotations

import zlib
from pathlib import Path

from spillway.formats.channel_file import FileBlob, read_chunk_header
from spillway.formats.record_framing import TAG_RECORD, TAG_RECORD_WITH_TIMESTAMP
from spillway.rescale.channel_writer import WrittenFile
from spillway.rescale.execute import MoveResult
from spillway.rescale.plan import CUSTOM, HASH, RescalePlan
from spillway.rescale.route import target_function


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
            place = target_function(ep) if ep is not None and ep.rule in (HASH, CUSTOM) else None
            where = f"{f.name} channel (gate {ch.gate}, input channel {ch.up}) of subtask {f.down}"
            stream = bytearray()
            for off in ch.offsets:
                chunk = read_chunk_header(blob, off)
                stream += blob.read_at(off + 4, chunk.length)
            view = memoryview(stream)
            p, records, crc, misplaced = 0, 0, 0, 0
            while p + 4 <= len(view):
                length = int.from_bytes(view[p : p + 4], "big", signed=True)
                if length <= 0 or p + 4 + length > len(view):
                    break
                element = view[p + 4 : p + 4 + length]
                if element[0] in (TAG_RECORD, TAG_RECORD_WITH_TIMESTAMP):
                    records += 1
                    crc += zlib.crc32(element)
                    if place is not None:
                        value = element[9:] if element[0] == TAG_RECORD_WITH_TIMESTAMP else element[1:]
                        if place(value) != f.down:
                            misplaced += 1
                p += 4 + length
            if p != len(view):
                problems.append(f"{where}: {len(view) - p} bytes after the last whole element")
            if records != ch.records or crc != ch.crc:
                problems.append(f"{where}: {records} records read back, {ch.records} routed (or contents differ)")
            if misplaced:
                problems.append(f"{where}: {misplaced} records whose key group belongs to another subtask")
            per_gate[ch.gate] = per_gate.get(ch.gate, 0) + records
            view.release()
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
