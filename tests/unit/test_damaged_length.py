"""``damaged_length.locate`` on a real channel: random damage to one length field is named exactly or said to
be unknown, never pinned on another element. The channel and its elements come from Flink's own reading of
the handles (oracle.json) and a walk in the test (support/oracle_channel.py), not from spillway."""

from __future__ import annotations

import random
import struct
from pathlib import Path

from support.damaged import copy_fixture
from support.oracle_channel import biggest_channel

from spillway.formats.damaged_length import locate

KINDS = ("too large", "beyond the channel", "zero", "negative", "too small", "bit flip")


def _damaged(length: int, end: int, kind: str, rng: random.Random) -> int:
    value = {
        "too large": length + rng.randint(1, 40_000),
        "beyond the channel": rng.randint(end, 2**31 - 1),
        "zero": 0,
        "negative": -rng.randint(1, 2**31),
        "too small": rng.randint(1, max(1, length - 1)),
        "bit flip": length ^ (1 << rng.randrange(32)),
    }[kind]
    return value - 2**32 if value >= 2**31 else value


def test_random_damage_is_named_exactly_or_said_unknown(tmp_path: Path) -> None:
    channel = biggest_channel(copy_fixture("1.18.1-unaligned", tmp_path))
    data = b"".join(channel.file.read_bytes()[offset : offset + n] for _, offset, n in channel.chunks)
    assert locate(data) is None, "the sound channel frames cleanly"
    rng = random.Random(33)
    exact = {kind: [0, 0] for kind in KINDS}  # kind -> [named exactly, tried]
    for _ in range(100):
        k = rng.randrange(len(channel.elements))
        e, kind = channel.elements[k], rng.choice(KINDS)
        value = _damaged(e.length, len(data), kind, rng)
        if value == e.length:
            continue
        damaged = bytearray(data)
        struct.pack_into(">i", damaged, e.position, value)
        location = locate(damaged)
        if location is None:
            assert kind in ("too large", "bit flip"), (k, value)  # still frames cleanly: nothing to find
            continue
        exact[kind][1] += 1
        if location.damage is not None:
            found = location.damage
            assert (found.position, found.index, found.read, found.fits) == (e.position, k, value, e.length)
            exact[kind][0] += 1
        else:
            assert any(c.position == e.position for c in location.candidates) or not location.candidates
    for kind in ("too large", "beyond the channel", "zero", "negative"):
        named, tried = exact[kind]
        assert tried and named == tried, (kind, exact)
    named = sum(exact[kind][0] for kind in KINDS)
    tried = sum(exact[kind][1] for kind in KINDS)
    assert named >= 0.85 * tried, exact
