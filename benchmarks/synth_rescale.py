#!/usr/bin/env python3
"""Synthesize a large unaligned checkpoint that `spillway rescale` accepts: the real 2.3.0 "counted"
fixture (src -rebalance-> parse -keyBy-> count -rebalance-> check) with its in-flight data blown up.

* src -> parse (REBALANCE): ``--gib`` of Long records (LongSerializer; element = tag 1 + 8-byte
  big-endian long), what ``fromSequence`` sends;
* parse -> count (HASH on f0): ``--hash-gib`` of Tuple2<Long, Long> records (v % 32, v) (element =
  tag 1 + two 8-byte longs), what ``parse`` sends.

Every logical channel is one endless record stream, cut mid-record between the downstream's input state
(first ~10 %) and the upstream's output state (rest), each part framed into chunks of 4-32 KiB (a 4-byte
length + payload, as Flink's channel-state writer does). One file per operator subtask and side, one
merged handle each (metadata V6, as in the fixture). Everything else (keyed/operator state, the other
edges' small channel state, the fixture's files) is kept, so `spillway validate` is clean and the
rescale planner sees the real job graph.

    python benchmarks/synth_rescale.py OUT_DIR --gib 1 --hash-gib 0.25
    # -> OUT_DIR/checkpoints/<job>/chk-3 and OUT_DIR/jobgraph.json
"""

from __future__ import annotations

import argparse
import random
import shutil
import struct
import uuid
from collections.abc import Iterator
from pathlib import Path

import numpy as np

from spillway.formats.metadata_codec import decode_metadata, encode_metadata
from spillway.model.checkpoint import (
    InputChannelEntry,
    MergedChannelHandle,
    MergedInputChannelHandle,
    MergedResultSubpartitionHandle,
    RelativeFileHandle,
    ResultSubpartitionEntry,
)
from spillway.model.walk import transform_stream_handles

ROOT = Path(__file__).resolve().parent.parent
FIXTURE = ROOT / "tests" / "fixtures" / "2.3.0-counted"
BLOCK_RECORDS = 1 << 20  # records generated per numpy block
MIN_CHUNK, MAX_CHUNK = 4 * 1024, 32 * 1024


def framed_records(values: np.ndarray, tuple_key: int | None) -> bytes:
    """Length-framed StreamRecords without timestamp: Long v, or Tuple2<Long, Long>(v % tuple_key, v)."""
    fields = 1 if tuple_key is None else 2
    element = 1 + 8 * fields
    out = np.empty((len(values), 4 + element), dtype=np.uint8)
    out[:, 0:4] = np.frombuffer(struct.pack(">i", element), dtype=np.uint8)
    out[:, 4] = 1  # TAG_RECORD (no timestamp)
    if tuple_key is None:
        out[:, 5:13] = values.astype(">i8").view(np.uint8).reshape(-1, 8)
    else:
        out[:, 5:13] = (values % tuple_key).astype(">i8").view(np.uint8).reshape(-1, 8)
        out[:, 13:21] = values.astype(">i8").view(np.uint8).reshape(-1, 8)
    return out.tobytes()


def channel_stream(first: int, step: int, count: int, tuple_key: int | None) -> Iterator[bytes]:
    """The framed records first, first+step, … (count of them), in blocks."""
    for start in range(0, count, BLOCK_RECORDS):
        n = min(BLOCK_RECORDS, count - start)
        yield framed_records(first + step * (start + np.arange(n, dtype=np.int64)), tuple_key)


class ByteTaker:
    """take(n) exact byte counts from a stream of blocks."""

    def __init__(self, blocks: Iterator[bytes]):
        self.blocks = blocks
        self.buf = b""
        self.pos = 0

    def take(self, n: int) -> bytes:
        parts = []
        while n > 0:
            if self.pos >= len(self.buf):
                self.buf, self.pos = next(self.blocks), 0
            piece = self.buf[self.pos : self.pos + n]
            self.pos += len(piece)
            n -= len(piece)
            parts.append(piece)
        return b"".join(parts)


def write_part(fh, taker: ByteTaker, nbytes: int, rng: random.Random) -> tuple[list[int], int]:  # type: ignore[no-untyped-def]
    """Append nbytes of the stream as chunks; returns (offsets of the length fields, state size)."""
    offsets, size = [], 0
    while nbytes > 0:
        n = min(nbytes, rng.randrange(MIN_CHUNK, MAX_CHUNK + 1))
        offsets.append(fh.tell())
        fh.write(struct.pack(">i", n))
        fh.write(taker.take(n))
        size += 4 + n
        nbytes -= n
    return offsets, size


def synth_edge(
    chk: Path,
    up_subtasks: list,
    down_subtasks: list,
    partition: int,
    gate: int,
    total_bytes: int,
    tuple_key: int | None,
    rng: random.Random,
) -> None:
    """Replace the channel state of one all-to-all edge with ``total_bytes`` of generated records."""
    p_up, p_down = len(up_subtasks), len(down_subtasks)
    record = 4 + 1 + 8 * (1 if tuple_key is None else 2)
    per_channel = max(1, total_bytes // (p_up * p_down) // record)
    parts: dict[tuple[int, int], tuple[int, int]] = {}  # (u, d) -> (input bytes, output bytes)
    streams: dict[tuple[int, int], ByteTaker] = {}
    for u in range(p_up):
        for d in range(p_down):
            size = per_channel * record
            cut = size // 10 + record // 2 + 1  # mid-record: the record spans the input/output junction
            parts[(u, d)] = (cut, size - cut)
            # values as a sequence source of parallelism p_up emits them, spread over the channels
            streams[(u, d)] = ByteTaker(channel_stream(u + p_up * d, p_up * p_down, per_channel, tuple_key))
    # Replay order: the downstream's input part first, so write it before the upstream's output part.
    for d, sub in enumerate(down_subtasks):
        sub.input_channel_state = [h for h in sub.input_channel_state if not _has(h, gate)]
        sub.input_channel_state.append(_write_file(chk, "input", d, gate, range(p_up), streams, parts, 0, rng))
    for u, sub in enumerate(up_subtasks):
        sub.result_subpartition_state = [h for h in sub.result_subpartition_state if not _has(h, partition)]
        sub.result_subpartition_state.append(
            _write_file(chk, "output", u, partition, range(p_down), streams, parts, 1, rng)
        )


def _has(h: object, first: int) -> bool:
    """Whether a channel handle holds a channel of gate (input side) or partition (output side) ``first``."""
    chans = getattr(h, "channels", None)
    return any(c.info[0] == first for c in chans) if chans is not None else getattr(h, "info", (None,))[0] == first


def _write_file(chk, side, index, first, others, streams, parts, which, rng) -> MergedChannelHandle:  # type: ignore[no-untyped-def]
    name = str(uuid.UUID(int=rng.getrandbits(128)))
    entry_type = InputChannelEntry if side == "input" else ResultSubpartitionEntry
    entries = []
    with open(chk / name, "wb") as fh:
        fh.write(b"\x00\x00\x00\x00")  # channel-state file header: serialization version 0
        for other in others:
            key = (other, index) if side == "input" else (index, other)
            offsets, size = write_part(fh, streams[key], parts[key][which], rng)
            if offsets:
                entries.append(entry_type(first, other, size, offsets))
        file_size = fh.tell()
    merged_type = MergedInputChannelHandle if side == "input" else MergedResultSubpartitionHandle
    return merged_type(index, sum(e.state_size for e in entries), RelativeFileHandle(name, file_size), entries)


def _move_remaining_channel_state(cp, src_chk: Path, chk: Path, rng: random.Random) -> None:  # type: ignore[no-untyped-def]
    """The fixture's other (small) channel state shares files with the replaced handles: copy each
    remaining handle's chunks into a file of its own, so no file keeps chunks that no handle claims."""
    for op in cp.operators:
        for sub in op.subtasks:
            for handles in (sub.input_channel_state, sub.result_subpartition_state):
                for h in handles:
                    d = h.delegate
                    if not isinstance(d, RelativeFileHandle) or not (src_chk / d.relative_path).exists():
                        continue
                    data = (src_chk / d.relative_path).read_bytes()
                    name = str(uuid.UUID(int=rng.getrandbits(128)))
                    with open(chk / name, "wb") as fh:
                        fh.write(data[:4])
                        for c in h.channels:
                            offsets = []
                            for off in c.offsets:
                                (n,) = struct.unpack_from(">i", data, off)
                                offsets.append(fh.tell())
                                fh.write(data[off : off + 4 + n])
                            c.offsets = offsets
                        h.delegate = RelativeFileHandle(name, fh.tell())


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("out", type=Path)
    ap.add_argument("--gib", type=float, default=1.0, help="channel state on src -> parse (REBALANCE)")
    ap.add_argument("--hash-gib", type=float, default=0.25, help="channel state on parse -> count (HASH)")
    ap.add_argument("--seed", type=int, default=5)
    args = ap.parse_args()
    rng = random.Random(args.seed)
    src_chk = next(FIXTURE.glob("checkpoints/*/chk-*"))
    chk = args.out / src_chk.relative_to(FIXTURE)
    if chk.exists():
        shutil.rmtree(chk)
    chk.mkdir(parents=True)
    shutil.copy2(FIXTURE / "jobgraph.json", args.out / "jobgraph.json")
    cp = decode_metadata((src_chk / "_metadata").read_bytes())
    ops = {o.uid: o for o in cp.operators}
    src, parse, count = ops["src"], ops["parse"], ops["count"]
    gib = 1 << 30
    by_index = lambda o: sorted(o.subtasks, key=lambda s: s.index)  # noqa: E731
    synth_edge(chk, by_index(src), by_index(parse), 0, 0, int(args.gib * gib), None, rng)
    if args.hash_gib > 0:
        synth_edge(chk, by_index(parse), by_index(count), 0, 0, int(args.hash_gib * gib), 32, rng)
    _move_remaining_channel_state(cp, src_chk, chk, rng)
    referenced: set[str] = set()

    def note(h: object) -> object:  # a visitor: returns the handle unchanged
        if isinstance(h, RelativeFileHandle):
            referenced.add(h.relative_path)
        return h

    transform_stream_handles(cp, note)
    for name in sorted(referenced):
        if not (chk / name).exists():
            shutil.copy2(src_chk / name, chk / name)
    (chk / "_metadata").write_bytes(encode_metadata(cp))
    print(chk)


if __name__ == "__main__":
    main()
