"""One logical channel of a damaged copy of an ``unaligned`` fixture, found without spillway's framer: the handles
from Flink's own reading of the ``_metadata`` (the fixture's oracle.json), the operators from Flink's ids
(ids.json), the elements from a walk over the chunk payloads here (tests/cli/test_validate_damaged.py,
tests/unit/test_damaged_length.py)."""

from __future__ import annotations

import json
import struct
from dataclasses import dataclass
from pathlib import Path

from support.damaged import Copy

SEGMENT = 32 * 1024  # Flink's default network buffer (taskmanager.memory.segment-size)


@dataclass(frozen=True)
class Element:
    position: int  # of its length field in the logical channel
    length: int
    file_offset: int  # of its length field in the channel-state file


@dataclass(frozen=True)
class Channel:
    file: Path
    chunks: list[tuple[int, int, int]]  # (stream position, file offset of the payload, payload length)
    elements: list[Element]

    @property
    def end(self) -> int:
        return sum(n for _, _, n in self.chunks)

    def buffer_end(self, position: int, size: int = SEGMENT) -> int:
        """Where the network buffer holding ``position`` ends: Flink cuts each chunk into buffers of ``size``."""
        for start, _, n in self.chunks:
            if start <= position < start + n:
                return start + min(n, (position - start) // size * size + size)
        raise AssertionError(position)


def _handles(copy: Copy) -> tuple[dict, dict]:
    oracle = json.loads((copy.root / "oracle.json").read_text())
    ids = {n["name"]: n["operator_id"] for n in json.loads((copy.root / "ids.json").read_text())["stream_nodes"]}
    ops = {o["operator_id"]: o for o in oracle["operators"]}
    return ops[ids["slow"]], ops[ids["tostr"]]


def biggest_channel(copy: Copy) -> Channel:
    """The logical channel tostr#u -> slow#d with the most bytes: slow#d's input channel u, then tostr#u's
    subpartition d (record-framing.md, "The logical channel")."""
    slow, tostr = _handles(copy)
    best: tuple[int, Path, list[tuple[int, int]]] | None = None
    for sub in slow["subtasks"]:
        for h in sub["input_channel_state"]:
            outs = [
                x
                for x in tostr["subtasks"][h["input_channel_index"]]["result_subpartition_state"]
                if x["subpartition_index"] == sub["index"]
            ]
            parts = [h, *outs]
            assert len({x["delegate"]["relative_path"] for x in parts}) == 1  # one file per checkpoint here
            path = copy.chk / h["delegate"]["relative_path"]
            data = path.read_bytes()
            chunks = [(off + 4, struct.unpack_from(">i", data, off)[0]) for x in parts for off in x["offsets"]]
            total = sum(n for _, n in chunks)
            if best is None or total > best[0]:
                best = (total, path, chunks)
    assert best is not None
    _, path, payloads = best
    chunks, at = [], 0
    for offset, n in payloads:
        chunks.append((at, offset, n))
        at += n
    stream = b"".join(path.read_bytes()[offset : offset + n] for offset, n in payloads)
    elements, p = [], 0
    while p < len(stream):
        (length,) = struct.unpack_from(">i", stream, p)
        start, offset, _ = next(c for c in chunks if c[0] <= p < c[0] + c[2])
        elements.append(Element(p, length, offset + p - start))
        p += 4 + length
    assert p == len(stream), "the sound channel frames to its end"
    return Channel(path, chunks, elements)
