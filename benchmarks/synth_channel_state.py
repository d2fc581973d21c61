#!/usr/bin/env python3
"""Synthesize a large, realistic unaligned checkpoint: many channels of small records (50-200 B)
cut into 32 KiB chunks, records spanning chunks and the input/output junction, several subtasks
sharing files — written as metadata V6 with merged handles, plus a job-graph plan.

    python benchmarks/synth_channel_state.py OUT_DIR --gib 2 --parallelism 8
    python benchmarks/synth_channel_state.py OUT_DIR --gib 10 --parallelism 100   # 10 000 logical channels

The edge is all-to-all, so there are parallelism² logical channels and 2 × parallelism files. Each channel's
bytes are whole rotations of one block of records; the block is 20 000 records (~2.5 MB) unless a channel
would get less than that (many channels, little data), then it shrinks to about one channel's share.
"""

from __future__ import annotations

import argparse
import json
import random
import struct
import uuid
from pathlib import Path

from spillway.formats.channel_file import build_channel_file  # noqa: F401 - same layout as below
from spillway.formats.metadata_codec import encode_metadata
from spillway.model.checkpoint import (
    CheckpointMetadata,
    InputChannelEntry,
    MergedInputChannelHandle,
    MergedResultSubpartitionHandle,
    OperatorState,
    RelativeFileHandle,
    ResultSubpartitionEntry,
    SubtaskState,
)

CHUNK = 32 * 1024
PROPS = bytes.fromhex(
    "aced0005737200386f72672e6170616368652e666c696e6b2e72756e74696d652e636865636b706f696e742e436865636b706f696e7450726f7065727469657300000000000000020200085a00106469736361726443616e63656c6c65645a000d646973636172644661696c65645a000f6469736361726446696e69736865645a000f6469736361726453756273756d65645a00106469736361726453757370656e6465645a0006666f726365645a0009756e636c61696d65644c000e636865636b706f696e74547970657400324c6f72672f6170616368652f666c696e6b2f72756e74696d652f636865636b706f696e742f536e617073686f74547970653b787000000101000000737200326f72672e6170616368652e666c696e6b2e72756e74696d652e636865636b706f696e742e436865636b706f696e7454797065d6de4f0305ae1d3a0200024c00046e616d657400124c6a6176612f6c616e672f537472696e673b4c001473686172696e6746696c65735374726174656779740047"
    "4c6f72672f6170616368652f666c696e6b2f72756e74696d652f636865636b706f696e742f536e617073686f74547970652453686172696e6746696c657353747261746567793b787074000a436865636b706f696e747e7200456f72672e6170616368652e666c696e6b2e72756e74696d652e636865636b706f696e742e536e617073686f7454797065245368617269"
    "6e6746696c6573537472617465677900000000000000001200007872000e6a6176612e6c616e672e456e756d00000000000000001200007870740010464f52574152445f4241434b57415244"
)
UP, DOWN = "a" * 32, "b" * 32


def record_block(rng: random.Random, n: int) -> bytes:
    """n framed StreamRecords with timestamp and a String value, 50-200 bytes each."""
    out = bytearray()
    for i in range(n):
        text = (f"k{rng.randrange(10_000)}:" + "x" * rng.randrange(30, 180)).encode()
        payload = (
            b"\x00" + struct.pack(">q", i) + bytes([len(text) + 1]) + text
            if len(text) < 127
            else (
                b"\x00" + struct.pack(">q", i) + bytes([((len(text) + 1) & 0x7F) | 0x80, (len(text) + 1) >> 7]) + text
            )
        )
        out += struct.pack(">i", len(payload)) + payload
    return bytes(out)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("out", type=Path)
    ap.add_argument("--gib", type=float, default=2.0)
    ap.add_argument("--parallelism", type=int, default=8)
    args = ap.parse_args()
    p = args.parallelism
    rng = random.Random(7)
    target = int(args.gib * (1 << 30)) / (p * p)  # bytes per logical channel
    # ~2.5 MB of records, reused with rotation; ~121 B per record on average, so a smaller block when a
    # channel gets less than that (the default sizes keep 20 000 records and so the same bytes as before)
    block = record_block(rng, max(100, min(20_000, round(target / 121))))
    # Whole blocks per channel: a rotation that starts on a record boundary then also ends on one.
    blocks = max(1, round(target / len(block)))
    per_channel = blocks * len(block)
    chk = args.out / "job" / "chk-1"
    chk.mkdir(parents=True, exist_ok=True)
    down_subs, up_subs = write_edge(chk, rng, p, block, per_channel)
    ops = [
        OperatorState(DOWN, p, 128, name="down", uid="down", subtasks=list(down_subs.values())),
        OperatorState(UP, p, 128, name="up", uid="up", subtasks=list(up_subs.values())),
    ]
    (chk / "_metadata").write_bytes(encode_metadata(CheckpointMetadata(6, 1, ops, properties_raw=PROPS)))
    plan = {
        "nodes": [
            {
                "id": DOWN,
                "parallelism": p,
                "description": "down<br/>",
                "inputs": [{"id": UP, "num": 0, "ship_strategy": "HASH"}],
            },
            {"id": UP, "parallelism": p, "description": "up<br/>"},
        ]
    }
    (args.out / "plan.json").write_text(json.dumps(plan))
    print(chk)


def write_edge(
    chk: Path, rng: random.Random, p: int, block: bytes, per_channel: int
) -> tuple[dict[int, SubtaskState], dict[int, SubtaskState]]:
    """The channel-state files of one all-to-all edge (up -> down, ``p`` subtasks each) in ``chk``: one file
    per subtask and side, ``per_channel`` bytes per logical channel. Returns the (down, up) subtask states."""
    bounds = _boundaries(block)
    down_subs = {d: SubtaskState(d) for d in range(p)}
    up_subs = {u: SubtaskState(u) for u in range(p)}
    # One file per subtask of each side; chunks of the channels of that subtask interleave round-robin.
    for side, subs in (("input", down_subs), ("output", up_subs)):
        for s, sub in subs.items():
            name = str(uuid.UUID(int=rng.getrandbits(128)))
            path = chk / name
            entry_type = InputChannelEntry if side == "input" else ResultSubpartitionEntry
            entries: dict[int, InputChannelEntry | ResultSubpartitionEntry] = {}
            streams = {}
            for other in range(p):
                # channel other->s (input side) or s->other (output side); the logical stream is split:
                # the first ~10 % is the downstream's input state, the rest the upstream's output state.
                u, d = (other, s) if side == "input" else (s, other)
                start = bounds[(u * 7919 + d * 104729) % len(bounds)]
                total = per_channel
                cut = total // 10 + 13  # mid-record almost surely
                if side == "input":
                    lo, hi = 0, cut
                else:
                    lo, hi = cut, total
                streams[other] = (start, lo, hi)
                # (gate 0, input channel = upstream) or (partition 0, subpartition = downstream)
                entries[other] = entry_type(0, other, 0, [])
            with open(path, "wb") as fh:
                fh.write(b"\x00\x00\x00\x00")
                pos = 4
                cursors = {o: streams[o][1] for o in streams}
                live = set(streams)
                while live:
                    for o in sorted(live):
                        start, lo, hi = streams[o]
                        n = min(CHUNK - rng.randrange(0, 64), hi - cursors[o])
                        if n <= 0:
                            live.discard(o)
                            continue
                        data = _slice(block, start + cursors[o], n, per_channel)
                        fh.write(struct.pack(">i", n) + data)
                        entries[o].offsets.append(pos)
                        entries[o].state_size += 4 + n
                        pos += 4 + n
                        cursors[o] += n
            size = path.stat().st_size
            chans = [e for e in entries.values() if e.offsets]
            merged_type = MergedInputChannelHandle if side == "input" else MergedResultSubpartitionHandle
            merged = merged_type(s, sum(e.state_size for e in chans), RelativeFileHandle(name, size), chans)
            (sub.input_channel_state if side == "input" else sub.result_subpartition_state).append(merged)
    return down_subs, up_subs


def _boundaries(block: bytes) -> list[int]:
    out, pos = [], 0
    while pos < len(block):
        out.append(pos)
        pos += 4 + struct.unpack_from(">i", block, pos)[0]
    return out


def _slice(block: bytes, start: int, n: int, limit: int) -> bytes:
    """Bytes [start, start+n) of the endless record stream that repeats ``block`` (record-aligned wrap)."""
    out = bytearray()
    pos = start % len(block)
    while len(out) < n:
        take = min(n - len(out), len(block) - pos)
        out += block[pos : pos + take]
        pos = 0
    return bytes(out)


if __name__ == "__main__":
    main()
