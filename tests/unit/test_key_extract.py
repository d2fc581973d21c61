"""The numpy key path is chosen from the PARSED extractor, whatever the spec's spelling, and equals the
per-record extractor value for value."""

from __future__ import annotations

import random
from collections.abc import Callable

import numpy as np
import pytest

from spillway.formats.channel_file import build_channel_file
from spillway.formats.values import ValueSpecError, parse_key_extractor
from spillway.rescale import router
from spillway.rescale.element_scan import scan_elements
from spillway.rescale.key_extract import FixedKey, fixed_key, target_function, vector_target_function
from spillway.rescale.plan import HASH, EdgePlan, PartRef, SourceChannel
from spillway.rescale.router import RouteStats, route_source

FIXED = {
    "long": FixedKey("long", 0, 8, exact=True),
    "bigint": FixedKey("long", 0, 8, exact=True),
    "tuple:0:long": FixedKey("long", 0, 8, exact=False),
    "TUPLE : 0 : LONG": FixedKey("long", 0, 8, exact=False),
    "tuple(long,?):0": FixedKey("long", 0, 8, exact=False),
    "tuple( long , ? ):0": FixedKey("long", 0, 8, exact=False),
    "tuple(long,long):0": FixedKey("long", 0, 16, exact=True),
    "tuple(long,long):1": FixedKey("long", 8, 16, exact=True),
    "tuple(int,long,?):1": FixedKey("long", 4, 12, exact=False),
    "int": FixedKey("int", 0, 4, exact=True),
    "tuple:0:int": FixedKey("int", 0, 4, exact=False),
    "tuple(double,int):1": FixedKey("int", 8, 12, exact=True),
}
NOT_FIXED = [
    "string",
    "tuple:0:string",
    "tuple(string,long):1",  # the key's offset depends on the string
    "tuple(long,string):0",  # strict: the whole value must decode, a string has no fixed width
    "tuple(boolean,long,?):1",  # a boolean byte must be 0 or 1: the per-record reader checks it
    "short",
    "row(long,int,string):0",
    "rowdata(bigint,string):0",
]
EDGE_LONGS = [0, 1, -1, 2**63 - 1, -(2**63), 2**31, -(2**31), 2**32 - 1, 123456789012345]


def _edge(key: str, new_down: int = 3) -> EdgePlan:
    return EdgePlan(0, "a -> b", "HASH", HASH, 0, 0, 2, 2, 2, new_down, 128, "b" * 32, "a" * 32, key=key)


@pytest.mark.parametrize("spec", list(FIXED))
def test_fixed_key_comes_from_the_parsed_extractor(spec: str) -> None:
    assert fixed_key(parse_key_extractor(spec)) == FIXED[spec]


@pytest.mark.parametrize("spec", NOT_FIXED)
def test_keys_without_a_fixed_place_take_the_per_record_path(spec: str) -> None:
    assert fixed_key(parse_key_extractor(spec)) is None
    assert vector_target_function(_edge(spec)) is None


def _value(spec: FixedKey, rng: random.Random, width: int) -> bytes:
    data = bytearray(rng.randbytes(width))
    if spec.scalar == "long" and spec.offset + 8 <= width:
        data[spec.offset : spec.offset + 8] = rng.choice(EDGE_LONGS).to_bytes(8, "big", signed=True)
    return bytes(data)


@pytest.mark.parametrize("spec", list(FIXED))
@pytest.mark.parametrize("new_down", [1, 3, 128])
def test_vector_targets_equal_the_scalar_extractor(spec: str, new_down: int) -> None:
    key = FIXED[spec]
    ep = _edge(spec, new_down)
    scalar, vector = target_function(ep), vector_target_function(ep)
    assert scalar is not None and vector is not None
    rng = random.Random(spec + str(new_down))
    widths = [key.width] if key.exact else [key.width, key.width + 5]
    for width in widths:
        for at, head in ((1, b"\x01"), (9, b"\x00" + bytes(8))):
            elements = [head + _value(key, rng, width) for _ in range(500)]
            rows = np.frombuffer(b"".join(elements), dtype=np.uint8).reshape(len(elements), -1)
            got = vector(rows, at)
            assert got is not None
            assert got.tolist() == [scalar(memoryview(e)[at:]) for e in elements]
    # Values the extractor refuses: the vector path declines, the per-record path says why.
    for width in [key.width - 1] + ([key.width + 1] if key.exact else []):
        element = b"\x01" + bytes(width)
        assert vector(np.frombuffer(element * 4, dtype=np.uint8).reshape(4, -1), 1) is None
        with pytest.raises(ValueSpecError):
            scalar(memoryview(element)[1:])


def _source(stream: bytes) -> SourceChannel:
    data, offsets = build_channel_file([stream[i : i + 4096] for i in range(0, len(stream), 4096)])
    return SourceChannel(0, 0, 0, 0, (PartRef(None, 0, len(data), tuple(offsets), data),), len(stream), "t")


def _routed(src: SourceChannel, ep: EdgePlan, **kw: object) -> dict:
    out: dict[int, bytes] = {}
    for run in route_source(src, ep, RouteStats(), **kw):  # type: ignore[arg-type]
        out[run.down] = out.get(run.down, b"") + bytes(run.data)
    return out


SPELLINGS = ["tuple:0:long", "tuple(long,?):0", "tuple( long , ? ):0", "TUPLE:0:LONG"]


def test_every_spelling_of_a_tuple_long_key_takes_the_numpy_path(monkeypatch: pytest.MonkeyPatch) -> None:
    """Tuple2<Long, Long> records: ``tuple(long,?):0`` used to go record by record while ``tuple:0:long``
    did not. Now both are one extractor: no per-record call, the same bytes as the per-record path."""
    rng = random.Random(5)
    element_list = [b"\x01" + rng.getrandbits(64).to_bytes(8, "big") + rng.randbytes(8) for _ in range(3000)]
    stream = b"".join(len(e).to_bytes(4, "big") + e for e in element_list)
    src = _source(stream)
    calls = 0

    def counting(ep: EdgePlan) -> Callable[[memoryview], int]:
        scalar = target_function(ep)
        assert scalar is not None

        def place(payload: memoryview) -> int:
            nonlocal calls
            calls += 1
            return scalar(payload)

        return place

    monkeypatch.setattr(router, "target_function", counting)
    outputs = []
    for spec in SPELLINGS:
        calls = 0
        outputs.append(_routed(src, _edge(spec)))
        assert calls == 0, spec
    per_record = _routed(src, _edge(SPELLINGS[0]), vectorize=lambda ep: None)
    assert calls == len(element_list)
    assert all(o == per_record for o in outputs) and len(per_record) == 3
    scans = {spec: scan_elements(memoryview(stream), _edge(spec), 1) for spec in SPELLINGS}
    slow = scan_elements(memoryview(stream), _edge(SPELLINGS[0]), 1, vectorize=lambda ep: None)
    assert all(s == slow for s in scans.values()) and 0 < slow.misplaced < slow.records
