"""Runs of equal records found with numpy: many elements framed per call instead of one.

Channel state often holds long runs of records of one length and tag (a fixed-width value type). Such a
run is a 2-D array — one row per element, length field first — so callers fingerprint and route it
column-wise. The framing is the same as ``stream_elements.split_elements`` (tests compare them on real and
synthetic streams): the run only grows while each next length field equals the first, so every row starts
exactly one stride after the previous one.
"""

from __future__ import annotations

import numpy as np

from spillway.formats.stream_elements import ELEMENTS, LENGTH_FIELD, MAX_ELEMENT, element_fault, length_fault

MIN_RUN = 32  # elements a run needs before the numpy path pays off
RETRY_AFTER = 4096  # after the numpy path declined, bytes framed one element at a time before trying again


def uniform_records(
    view: memoryview, p: int, n: int, min_rows: int = MIN_RUN, limit: int | None = MAX_ELEMENT
) -> np.ndarray | None:
    """The longest run (at least ``min_rows``) of well-formed records of one length and one tag starting at
    ``p`` in ``view[:n]``, as uint8 rows (length field + element), or None (also when the first length
    field is a fault: the caller's per-element path reports it). The rows export ``view``: drop them
    before releasing it."""
    length = int.from_bytes(view[p : p + LENGTH_FIELD], "big", signed=True)
    if length_fault(length, None, limit) is not None:
        return None
    stride = LENGTH_FIELD + length
    count = (n - p) // stride
    if count < min_rows:
        return None
    tag = view[p + LENGTH_FIELD]
    kind = ELEMENTS.get(tag)
    if kind is None or not kind.carries_value or element_fault(tag, length) is not None:
        return None
    rows = np.frombuffer(view, dtype=np.uint8, count=count * stride, offset=p).reshape(count, stride)
    same = rows[:, LENGTH_FIELD] == tag
    for j in range(LENGTH_FIELD):
        same &= rows[:, j] == view[p + j]
    first_bad = int(np.argmin(same))
    k = first_bad if not same[first_bad] else count
    return rows[:k] if k >= min_rows else None
