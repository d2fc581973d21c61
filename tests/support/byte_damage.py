"""A Hypothesis strategy for damaged copies of real files: a few bytes flipped, set, inserted or deleted,
or the file cut short (tests/unit/test_roundtrip.py, tests/cli/test_bad_input.py)."""

from __future__ import annotations

from collections.abc import Sequence

from hypothesis import strategies as st


@st.composite
def damaged_bytes(
    draw: st.DrawFn,
    corpus: Sequence[bytes],
    *,
    keep: int = 0,
    edits: tuple[int, int] = (1, 4),
    set_values: Sequence[int] = (0x00, 0x01, 0x7F, 0x80, 0xFF),
) -> bytes:
    """One file of ``corpus`` with ``edits`` (min, max) damages at or after byte ``keep`` (a header to leave
    alone); never empty."""
    data = bytearray(draw(st.sampled_from(list(corpus))))
    for _ in range(draw(st.integers(*edits))):
        if len(data) <= keep:
            break
        pos = draw(st.integers(keep, len(data) - 1))
        kind = draw(st.sampled_from(["flip", "set", "cut", "insert", "delete"]))
        if kind == "flip":
            data[pos] ^= 1 << draw(st.integers(0, 7))
        elif kind == "set":
            data[pos] = draw(st.sampled_from(list(set_values)))
        elif kind == "cut":
            del data[pos:]
        elif kind == "insert":
            data[pos:pos] = draw(st.binary(min_size=1, max_size=8))
        else:
            del data[pos : pos + draw(st.integers(1, 8))]
    return bytes(data) or b"\x00"
