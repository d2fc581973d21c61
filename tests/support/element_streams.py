"""Channel-state element streams for the framing tests: the reference walk, generated streams (hypothesis)
and the real fixtures' logical channels, cut where Flink cut them into buffers.

The reference is ``stream_elements.split_elements`` + ``element_fault`` over the whole stream in one buffer;
every other reader (the framers, the record reader, numpy runs, the router, the self-check) is compared with
it by ``tests/unit/test_stream_elements.py`` and ``tests/unit/test_rescale_framing.py``.
"""

from __future__ import annotations

import random
import struct
from collections import Counter
from dataclasses import dataclass, field
from functools import cache
from pathlib import Path

from hypothesis import HealthCheck, settings
from hypothesis import strategies as st

from spillway.formats.stream_elements import (
    ALL_TAGS,
    ELEMENTS,
    INT32_MAX,
    KINDS,
    MAX_ELEMENT,
    RECORD_TAGS,
    TAGS_BEFORE_1_19,
    LengthFault,
    StreamElement,
    element_fault,
    split_elements,
    tags_for_format_version,
)
from support.fixtures import all_fixtures

SETTINGS = settings(max_examples=100, deadline=None, suppress_health_check=[HealthCheck.too_slow])
TAG_SETS = st.sampled_from([ALL_TAGS, TAGS_BEFORE_1_19, frozenset({1}), frozenset({0, 2, 3})])
LIMITS = st.sampled_from([None, 30, 1 << 20])


@dataclass
class Walk:
    elements: list[tuple[int, int, int]] = field(default_factory=list)  # (position, length, tag)
    faults: list[tuple[str, int]] = field(default_factory=list)  # (kind, position of the length field)
    end: int = 0  # after the last whole element (at the length fault if there is one)
    lost: bool = False  # a length fault: the boundaries after ``end`` are unknown
    partial: tuple[int, int] | None = None  # (length, tag) of an unfinished last element whose tag is there


def reference(stream: bytes, *, end_known: bool, tags: frozenset[int] = ALL_TAGS, limit: int | None = None) -> Walk:
    w = Walk()
    try:
        for pos, length, tag in split_elements(stream, end=len(stream) if end_known else None, limit=limit):
            w.elements.append((pos, length, tag))
            fault = element_fault(tag, length, tags)
            if fault is not None:
                w.faults.append((fault.kind, pos))
            w.end = pos + 4 + length
    except LengthFault as fault:
        w.faults.append(("length", fault.position))
        w.end, w.lost = fault.position, True
    if not w.lost and len(stream) - w.end > 4:
        w.partial = (struct.unpack_from(">i", stream, w.end)[0], stream[w.end + 4])
    return w


def record_positions(w: Walk) -> list[tuple[int, int]]:
    return [(pos, length) for pos, length, tag in w.elements if tag in RECORD_TAGS]


def starts(pieces: list[bytes]) -> list[int]:
    out, at = [], 0
    for p in pieces:
        out.append(at)
        at += len(p)
    return out


def cut(stream: bytes, cuts: list[int]) -> list[bytes]:
    points = sorted({c for c in cuts if 0 < c < len(stream)})
    return [stream[a:b] for a, b in zip([0, *points], [*points, len(stream)], strict=True)]


def framed(element: bytes) -> bytes:
    return struct.pack(">i", len(element)) + element


def _element(rng: random.Random, kind_tag: int, value: bytes) -> bytes:
    kind = ELEMENTS[kind_tag]
    head = kind.head.parse(rng.randbytes(kind.head_size - 1))
    return StreamElement.build({"tag": kind_tag, "head": head, "value": value if kind.carries_value else None})


CORRUPTIONS = ["none", "unknown tag", "wrong size", "short record", "zero length", "negative length", "huge length"]


@st.composite
def streams(draw: st.DrawFn) -> tuple[bytes, list[int], str]:
    """(stream, cut points, corruption): every element kind (built with the ``StreamElement`` construct), long
    uniform runs, and at most one corruption — an unknown tag, an element of the wrong size for its tag, a
    short record, a zero, negative or huge length field — and maybe cut short anywhere."""
    rng = draw(st.randoms(use_true_random=False))
    out: list[bytes] = []
    for _ in range(draw(st.integers(0, 8))):
        if draw(st.booleans()):  # a uniform run: one record shape repeated
            tag = draw(st.sampled_from(sorted(RECORD_TAGS)))
            width = draw(st.sampled_from([0, 1, 8, 16, 23]))
            out += [framed(_element(rng, tag, rng.randbytes(width))) for _ in range(draw(st.integers(1, 70)))]
        else:
            for _ in range(draw(st.integers(1, 6))):
                tag = draw(st.sampled_from([k.tag for k in KINDS]))
                out.append(framed(_element(rng, tag, rng.randbytes(rng.randrange(41)))))
    corruption = draw(st.sampled_from(CORRUPTIONS))
    if corruption != "none":
        at = draw(st.integers(0, len(out)))
        if corruption == "unknown tag":
            bad = framed(bytes([draw(st.integers(7, 255))]) + draw(st.binary(max_size=20)))
        elif corruption == "wrong size":
            tag = draw(st.sampled_from([k.tag for k in KINDS if not k.carries_value]))
            size = draw(st.integers(1, 39))
            size += size >= ELEMENTS[tag].head_size  # any size but the right one
            bad = framed(bytes([tag]) + bytes(size - 1))
        elif corruption == "short record":
            bad = framed(b"\x00" + bytes(draw(st.integers(0, 7))))  # a timestamped record without its timestamp
        elif corruption == "zero length":
            bad = struct.pack(">i", 0)
        elif corruption == "negative length":
            bad = struct.pack(">i", draw(st.integers(-(2**31), -1))) + b"\x01abc"
        else:
            bad = struct.pack(">i", draw(st.sampled_from([MAX_ELEMENT + 1, INT32_MAX, 1 << 20]))) + b"\x01abc"
        out.insert(at, bad)
    stream = b"".join(out)
    if stream and draw(st.booleans()):  # cut short (maybe inside a length field)
        stream = stream[: draw(st.integers(0, len(stream) - 1))]
    cuts = draw(st.lists(st.integers(0, max(len(stream), 1)), max_size=12))
    return stream, cuts, corruption


# ---------------------------------------------------------------------------------------------------
# real channel state


def real_fixtures() -> list:
    """One fixture with channel state per release (the ``unaligned`` scenario), plus SQL (untimestamped records)."""
    import pytest

    return [
        pytest.param(f.name, id=f.name)
        for f in all_fixtures()
        if f.info.get("scenario") in ("unaligned", "sql") and (f.root / "jobgraph.json").exists()
    ]


@dataclass(frozen=True)
class RealChannel:
    label: str
    pieces: tuple[bytes, ...]  # the channel's chunks in replay order, as Flink cut them
    tags: frozenset[int]  # what the checkpoint's metadata version allows

    @property
    def stream(self) -> bytes:
        return b"".join(self.pieces)


@cache
def real_channels(name: str, most: int = 4) -> tuple[RealChannel, ...] | str:
    """Up to ``most`` logical channels of a fixture whose chunks are in files (inline state has no file to read
    them from), or why there are none to read (a release this checkout does not decode)."""
    from spillway.inspect.analyze import analyze
    from spillway.inspect.topology import load_plan
    from spillway.storage.load import load_checkpoint

    fixture = next(f for f in all_fixtures() if f.name == name)
    try:
        loaded = load_checkpoint(fixture.checkpoint_dir)
    except Exception as exc:
        return f"{name}: {exc}"
    loaded.resolve_files()
    tags = tags_for_format_version(loaded.checkpoint.format_version)
    channels = analyze(loaded, load_plan(fixture.root / "jobgraph.json")).channels
    on_disk = [ch for ch in channels if ch.buffers and all(Path(b.file).is_file() for b in ch.buffers)]
    out = []
    for ch in random.Random(name).sample(on_disk, min(len(on_disk), most)):
        pieces = []
        for b in ch.buffers:
            with open(b.file, "rb") as fh:
                fh.seek(b.offset + 4)
                pieces.append(fh.read(b.length))
        out.append(RealChannel(ch.label, tuple(pieces), tags))
    return tuple(out)


def tag_counts(w: Walk) -> Counter:
    return Counter(tag for _, _, tag in w.elements)
