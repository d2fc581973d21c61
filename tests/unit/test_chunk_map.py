"""A channel-state file's chunk map (offset of each length field -> payload length), kept as arrays."""

from __future__ import annotations

import random
from array import array
from bisect import bisect_left

import pytest

from spillway.formats import native
from spillway.formats.channel_file import FileBlob, InlineBlob, build_channel_file, chunk_map


def _file(tmp_path, payloads: list[bytes]):
    data, offsets = build_channel_file(payloads)
    path = tmp_path / "channel-state"
    path.write_bytes(data)
    return path, data, offsets


@pytest.mark.parametrize("use_c", [True, False])
def test_chunk_map_holds_every_chunk_written(tmp_path, monkeypatch, use_c: bool) -> None:
    payloads = [b"a" * n for n in (0, 1, 7, 300, 5, 32 * 1024, 2)]
    path, data, offsets = _file(tmp_path, payloads)
    if not use_c:
        monkeypatch.setattr(native, "locate", lambda *_: None)
    with FileBlob(path) as blob:
        chunks, error = chunk_map(blob)
    assert error is None
    assert list(chunks) == offsets and len(chunks) == len(payloads)
    assert [chunks[o] for o in offsets] == [len(p) for p in payloads]
    assert dict(chunks.items()) == dict(zip(offsets, map(len, payloads), strict=True))
    assert chunks.get(offsets[3] + 1) is None and offsets[3] + 1 not in chunks and offsets[3] in chunks
    with pytest.raises(KeyError):
        chunks[len(data)]
    picked = [offsets[5], offsets[0], offsets[5]]  # any order, repeats allowed
    positions = chunks.indices(picked)
    assert positions is not None and list(positions) == [5, 0, 5]
    assert chunks.payload(positions) == 2 * 32 * 1024
    assert chunks.indices([offsets[1], offsets[1] + 2]) is None  # one offset starts no chunk
    assert chunks.indices([]) is not None
    many = [offsets[i % len(offsets)] for i in range(40, 0, -1)]  # enough to be looked up in C, when built
    assert list(chunks.indices(many) or []) == [i % len(offsets) for i in range(40, 0, -1)]
    assert chunks.indices([*many, offsets[-1] + 1]) is None


def test_chunk_map_stops_where_the_chain_breaks(tmp_path) -> None:
    path, data, offsets = _file(tmp_path, [b"x" * 10, b"y" * 20, b"z" * 30])
    path.write_bytes(data[:-5])  # the last chunk runs past the end
    with FileBlob(path) as blob:
        chunks, error = chunk_map(blob)
    assert list(chunks) == offsets[:2] and error is not None and error.offset == offsets[2]
    inline, _ = chunk_map(InlineBlob("inline", data))  # the pure-Python walk gives the same map
    assert list(inline.items()) == list(zip(offsets, (10, 20, 30), strict=True))


def test_locate_finds_each_offset_where_bisection_does_sorted_or_not() -> None:
    """spw_locate gallops on from the last answer while queries increase (a handle's chunks): the answers must be
    bisection's, for runs that increase, repeat, fall back and miss."""
    rng = random.Random(5)
    starts = sorted(rng.sample(range(4, 10**7), 5000))
    chunk_offsets = array("q", starts)
    for trial in range(60):
        query = [rng.choice(starts) if rng.random() < 0.8 else rng.randrange(0, 10**7 + 10) for _ in range(400)]
        if trial % 3:
            query.sort()  # mostly increasing, as a handle lists its chunks
        if trial % 3 == 2:
            query[100:200] = sorted(query[100:200], reverse=True)
        found = native.locate(chunk_offsets, array("q", query))
        assert found is not None
        expect = [i if i < len(starts) and starts[i] == q else -1 for q in query for i in [bisect_left(starts, q)]]
        assert list(found[0]) == expect and found[1] == expect.count(-1)


def test_a_handle_claims_its_chunks_only_when_all_are_free_and_distinct() -> None:
    lengths = array("i", [10, 20, 30, 40, 50])
    owner = array("i", [-1, -1, 3, -1, -1])
    assert native.claim(owner, array("q", [0, 1, 4]), 7, lengths) == 10 + 20 + 50
    assert list(owner) == [7, 7, 3, -1, 7]
    assert native.claim(owner, array("q", [3, 2]), 8, lengths) is None  # chunk 2 is handle 3's
    assert native.claim(owner, array("q", [3, 3]), 8, lengths) is None  # the same chunk twice
    assert list(owner) == [7, 7, 3, -1, 7]  # a refused claim leaves every owner as it was
    gathered = native.gather(lengths, array("q", [4, 0, 4]))
    assert gathered is not None and list(gathered[0]) == [50, 10, 50] and gathered[1] == 110
