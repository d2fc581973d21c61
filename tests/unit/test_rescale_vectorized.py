"""The vectorized (numpy) paths of rescale routing and of its self-check give exactly what the
per-record paths give, and the self-check catches every kind of damage to a written channel file.

Each vectorized helper is compared with the scalar code it replaces (forced by raising FAST_MIN so the
vector path never engages), on streams that mix uniform runs with variable-length records, timestamps,
watermarks and latency markers, under every routing rule."""

from __future__ import annotations

import random
import zlib
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from support.moved import moved_counted

from spillway.formats.uniform_runs import MIN_RUN
from spillway.rescale.channel_reader import BLOCK
from spillway.rescale.channel_writer import WrittenFile
from spillway.rescale.crc import CRC_TABLE_LIMIT, crc32_rows, crc32_rows_numpy
from spillway.rescale.element_scan import scan_elements
from spillway.rescale.key_extract import target_function, vector_target_function
from spillway.rescale.plan import BALANCED, BROADCAST, GLOBAL, HASH, KEEP, EdgePlan, PartRef, SourceChannel
from spillway.rescale.router import RouteStats, route_source
from spillway.rescale.verify import check_file, self_check

FIXTURE = Path(__file__).parents[1] / "fixtures" / "2.3.0-counted"
EDGE_CASE_LONGS = [0, 1, -1, 2**63 - 1, -(2**63), 2**31, -(2**31), 2**32 - 1, 123456789012345]


def _long(v: int) -> bytes:
    return v.to_bytes(8, "big", signed=True)


def _record(value: bytes, ts: int | None = None) -> bytes:
    return (b"\x01" + value) if ts is None else (b"\x00" + _long(ts) + value)


def _framed(elements: list[bytes]) -> bytes:
    return b"".join(len(e).to_bytes(4, "big") + e for e in elements)


def _mixed_stream(rng: random.Random, n: int) -> list[bytes]:
    """Long uniform runs (long values, Tuple2<Long, Long>, with and without timestamps) broken up by
    strings, watermarks and latency markers."""
    out: list[bytes] = []
    while len(out) < n:
        kind = rng.randrange(6)
        run = rng.randrange(1, 120)
        for _ in range(run):
            v = rng.choice(EDGE_CASE_LONGS) if rng.random() < 0.05 else rng.getrandbits(64) - 2**63
            if kind == 0:
                out.append(_record(_long(v)))
            elif kind == 1:
                out.append(_record(_long(v % 32) + _long(v)))
            elif kind == 2:
                out.append(_record(_long(v), ts=rng.randrange(10**12)))
            elif kind == 3:
                out.append(_record(_long(v) + bytes(rng.randrange(0, 12))))  # tuple with a varying tail
            elif kind == 4:
                out.append(b"\x02" + _long(rng.randrange(10**12)))  # watermark
            else:
                out.append(b"\x03" + bytes(28))  # latency marker
    return out


def _source(elements: list[bytes], chunk: int, segments: tuple = ()) -> SourceChannel:
    from spillway.formats.channel_file import build_channel_file

    stream = _framed(elements)
    data, offsets = build_channel_file([stream[i : i + chunk] for i in range(0, len(stream), chunk)])
    return SourceChannel(0, 0, 0, 0, (PartRef(None, 0, len(data), tuple(offsets), data),), len(stream), "t", segments)


def _edge(rule: str, key: str | None = None, new_down: int = 3) -> EdgePlan:
    return EdgePlan(0, "a -> b", "HASH", rule, 0, 0, 2, 2, 2, new_down, 128, "b" * 32, "a" * 32, key=key)


def test_crc32_rows_equals_zlib_per_row() -> None:
    from spillway.formats.native import library

    assert library() is not None, "the native helper did not build (needs cc)"
    rng = np.random.default_rng(7)
    for length in (1, 5, 8, 9, 16, 17, 33, CRC_TABLE_LIMIT, CRC_TABLE_LIMIT + 1):
        framed = rng.integers(0, 256, size=(50, length + 4), dtype=np.uint8)
        rows = framed[:, 4:]  # a strided view, as the router passes it
        expected = [zlib.crc32(r.tobytes()) for r in rows]
        assert crc32_rows(rows).tolist() == expected, length  # C
        assert crc32_rows_numpy(rows).tolist() == expected, length  # the fallback


@pytest.mark.parametrize("spec", ["long", "tuple:0:long"])
@pytest.mark.parametrize("new_down", [1, 3, 7, 128])
def test_vector_key_targets_equal_the_scalar_extractor(spec: str, new_down: int) -> None:
    rng = random.Random(new_down)
    values = EDGE_CASE_LONGS + [rng.getrandbits(64) - 2**63 for _ in range(2000)]
    tail = b"" if spec == "long" else _long(5)
    ep = _edge(HASH, spec, new_down)
    scalar, vector = target_function(ep), vector_target_function(ep)
    assert scalar is not None and vector is not None
    for ts in (None, 99):
        elements = [_record(_long(v) + tail, ts) for v in values]
        rows = np.frombuffer(b"".join(elements), dtype=np.uint8).reshape(len(elements), -1)
        at = 9 if ts is not None else 1
        got = vector(rows, at)
        assert got is not None
        assert got.tolist() == [scalar(memoryview(e)[at:]) for e in elements]


def test_vector_targets_decline_rows_of_the_wrong_shape() -> None:
    vector = vector_target_function(_edge(HASH, "long"))
    assert vector is not None
    assert vector(np.zeros((4, 1 + 12), dtype=np.uint8), 1) is None  # 12 bytes are not a Long
    assert vector_target_function(_edge(HASH, "string")) is None  # no vector form: per record
    assert vector_target_function(_edge(BALANCED)) is None


def _routes(src: SourceChannel, ep: EdgePlan, **tuning: Any) -> tuple[dict, RouteStats]:
    """Per new channel (up, down): its bytes in the order the writer puts them (runs sorted by seq), and
    its record count and crc sum. How runs of different targets interleave does not reach the output.
    ``tuning``: ``route_source``'s ``block``, ``min_run`` and ``vectorize``."""
    stats = RouteStats()
    per_target: dict[tuple[int, int], list] = {}
    for r in route_source(src, ep, stats, **tuning):
        per_target.setdefault((r.up, r.down), []).append(r)
    out = {}
    for t, runs in per_target.items():
        seqs = [r.seq for r in runs]
        assert seqs == sorted(set(seqs)), "runs of one target must leave in increasing seq order"
        out[t] = (b"".join(r.data for r in runs), sum(r.records for r in runs), sum(r.crc for r in runs))
    return out, stats


@pytest.mark.parametrize(
    "rule,key,vector_keys",
    [
        (BALANCED, None, True),
        (HASH, "long", True),
        (HASH, "tuple:0:long", True),
        (HASH, "tuple:0:long", False),  # an extractor without a vector form: per record on uniform runs
        (KEEP, None, True),
        (BROADCAST, None, True),
    ],
)
@pytest.mark.parametrize("block", [BLOCK, 1000, 4099])  # small blocks: runs carried across block ends
def test_route_source_vector_path_equals_the_per_record_path(
    rule: str, key: str | None, vector_keys: bool, block: int
) -> None:
    tuning: dict[str, Any] = {"block": block}
    rng = random.Random(rule + str(key) + str(vector_keys))
    elements = _mixed_stream(rng, 6000)
    if not vector_keys:
        tuning["vectorize"] = lambda ep: None
    if key == "long":
        elements = [e for e in elements if e[0] not in (0, 1) or len(e) - (9 if e[0] == 0 else 1) == 8]
    payload = len(_framed(elements))
    segments = ((payload // 5, 2), (payload // 2, 0), (payload + 1, 1)) if rule == BALANCED else ()
    src = _source(elements, chunk=rng.choice([97, 4096, 32 * 1024]), segments=segments)
    ep = _edge(rule, key)
    fast, fast_stats = _routes(src, ep, **tuning, min_run=MIN_RUN)
    slow, slow_stats = _routes(src, ep, **tuning, min_run=10**9)
    assert fast == slow
    assert fast_stats == slow_stats
    assert fast_stats.records == sum(1 for e in elements if e[0] in (0, 1))


@pytest.mark.parametrize("rule,key", [(HASH, "long"), (GLOBAL, None), (HASH, "tuple:0:long")])
def test_scan_elements_vector_path_equals_the_per_record_path(rule: str, key: str | None) -> None:
    rng = random.Random(11)
    elements = [e for e in _mixed_stream(rng, 5000) if e[0] not in (0, 1) or len(e) in (9, 17, 25)]
    if key == "long":
        elements = [e for e in elements if e[0] not in (0, 1) or len(e) - (9 if e[0] == 0 else 1) == 8]
    stream = _framed(elements) + b"\x00\x00"  # a torn length field at the end: ``end`` stops before it
    ep = _edge(rule, key) if rule == HASH else None
    fast = scan_elements(memoryview(stream), ep, 1, vectorize=vector_target_function)
    slow = scan_elements(memoryview(stream), ep, 1, min_run=10**9, vectorize=vector_target_function)
    assert fast == slow
    assert fast.end == len(stream) - 2
    assert fast.records == sum(1 for e in elements if e[0] in (0, 1))
    if ep is not None:
        assert 0 < fast.misplaced < fast.records


# --------------------------------------------------------------------------------------------------
# the self-check against damaged output (real 2.3.0 "counted" checkpoint, parse and count 2 -> 3)


@pytest.fixture(scope="module")
def rescaled(tmp_path_factory: pytest.TempPathFactory):  # type: ignore[no-untyped-def]
    return moved_counted(tmp_path_factory.mktemp("moved"))


def _biggest(move) -> WrittenFile:  # type: ignore[no-untyped-def]
    return max(move.files, key=lambda f: sum(c.records for c in f.channels))


def _damaged(rescaled, tmp_path: Path, edit) -> list[str]:  # type: ignore[no-untyped-def]
    import shutil

    out, plan, move = rescaled
    copy = tmp_path / "copy"
    shutil.copytree(out, copy)
    f = _biggest(move)
    data = bytearray((copy / f.name).read_bytes())
    edit(data, f)
    (copy / f.name).write_bytes(bytes(data))
    return self_check(copy, plan, move)


def test_self_check_catches_a_changed_record_byte(rescaled, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    def flip(data: bytearray, f: WrittenFile) -> None:
        ch = max(f.channels, key=lambda c: c.records)
        data[ch.offsets[len(ch.offsets) // 2] + 4 + 13] ^= 0x40  # inside a record of the middle chunk

    problems = _damaged(rescaled, tmp_path, flip)
    assert any("contents differ" in p for p in problems), problems


def test_self_check_catches_a_broken_length_field(rescaled, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    def smash(data: bytearray, f: WrittenFile) -> None:
        ch = max(f.channels, key=lambda c: c.records)
        data[ch.offsets[0] + 4 : ch.offsets[0] + 8] = b"\xff\xff\xff\xf0"  # first element's length: -16

    problems = _damaged(rescaled, tmp_path, smash)
    assert any("length field -16 at payload offset 0" in p for p in problems), problems


def test_self_check_catches_a_truncated_file(rescaled, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    def cut(data: bytearray, f: WrittenFile) -> None:
        del data[-3:]

    problems = _damaged(rescaled, tmp_path, cut)
    assert any("bytes on disk" in p for p in problems), problems


def test_self_check_catches_records_on_the_wrong_subtask(rescaled) -> None:  # type: ignore[no-untyped-def]
    from dataclasses import replace

    out, plan, move = rescaled
    keyed = next(e for e in plan.edges if e.rule == HASH).down_head  # count: its input is routed by key
    f = next(f for f in move.files if f.operator_id == keyed and any(c.records for c in f.channels))
    wrong = replace(f, down=(f.down + 1) % 3)  # the same bytes, claimed for the neighbouring subtask
    problems, _ = check_file(out, wrong, plan)
    assert any("key group belongs to another subtask" in p for p in problems), problems


def test_self_check_streams_channels_across_blocks(rescaled, monkeypatch: pytest.MonkeyPatch) -> None:  # type: ignore[no-untyped-def]
    import spillway.rescale.verify as verify

    out, plan, move = rescaled
    whole = [check_file(out, f, plan) for f in move.files]
    monkeypatch.setattr(verify, "BLOCK", 1000)  # elements now straddle block ends
    assert [check_file(out, f, plan) for f in move.files] == whole
    assert all(p == [] for p, _ in whole)
