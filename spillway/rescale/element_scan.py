"""The self-check's re-read of a written channel: its whole elements, records, crc32 sum and misplaced keys.

Framing and the element rule are ``stream_elements``' (the same the router applied); uniform runs are
counted with numpy (``uniform_runs``, ``crc``), the rest element by element, with equal results.
"""

from __future__ import annotations

import zlib
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from spillway.formats.stream_elements import ELEMENTS, LENGTH_FIELD, LengthFault, element_fault, split_elements
from spillway.formats.uniform_runs import MIN_RUN, RETRY_AFTER, uniform_records
from spillway.rescale.crc import crc32_rows
from spillway.rescale.key_extract import VectorTargets, target_function, vector_target_function
from spillway.rescale.plan import EdgePlan


@dataclass(slots=True)
class Scan:
    end: int  # bytes framed as whole elements
    records: int
    crc: int  # sum of crc32 of the record elements
    misplaced: int  # records a HASH/CUSTOM edge would route to another subtask than ``down``
    fault: str = ""  # the element at ``end`` breaks the element rule (the router never writes one)


def scan_elements(
    view: memoryview,
    ep: EdgePlan | None = None,
    down: int = 0,
    *,
    min_run: int = MIN_RUN,
    vectorize: Callable[[EdgePlan], VectorTargets | None] | None = None,
) -> Scan:
    """Frame a whole written channel (the self-check's re-read): records, their crc32 sum, and with
    ``ep`` (a HASH or CUSTOM edge) how many records belong elsewhere than subtask ``down``. Stops at the
    first element that does not fit or breaks a rule (``end`` then falls short of the length)."""
    place = target_function(ep) if ep is not None else None
    vplace = (vectorize or vector_target_function)(ep) if ep is not None else None
    scan = Scan(0, 0, 0, 0)
    n = len(view)
    p = slow_until = 0
    while p + LENGTH_FIELD <= n:
        if p >= slow_until:
            rows = uniform_records(view, p, n, min_run)
            if rows is not None:
                p += _count_run(view, p, rows, scan, place, vplace, down)
                del rows  # it exports ``view``
                continue
            slow_until = p + RETRY_AFTER
        p, more = _count_elements(view, p, slow_until, scan, place, down)
        if not more:
            break
    scan.end = p
    return scan


def _count_run(
    view: memoryview,
    p: int,
    rows: np.ndarray,
    scan: Scan,
    place: Callable[[memoryview], int] | None,
    vplace: VectorTargets | None,
    down: int,
) -> int:
    k, stride = rows.shape
    scan.records += k
    scan.crc += int(crc32_rows(rows[:, LENGTH_FIELD:]).sum(dtype=np.uint64))
    if place is not None:
        at = ELEMENTS[int(rows[0, LENGTH_FIELD])].value_offset
        assert at is not None
        targets = vplace(rows[:, LENGTH_FIELD:], at) if vplace is not None else None
        if targets is not None:
            scan.misplaced += int((targets != down).sum())
        else:
            base = p + LENGTH_FIELD + at
            width = stride - LENGTH_FIELD - at
            scan.misplaced += sum(place(view[base + i * stride : base + i * stride + width]) != down for i in range(k))
    return k * stride


def _count_elements(
    view: memoryview, p: int, stop_at: int, scan: Scan, place: Callable[[memoryview], int] | None, down: int
) -> tuple[int, bool]:
    """Counts elements from ``p`` until ``stop_at`` is passed. Returns (where it stopped, whether there may
    be more: False at an element that does not fit, a bad length field or an element fault)."""
    try:
        for at, length, tag in split_elements(view, p):
            fault = element_fault(tag, length)
            if fault is not None:
                scan.fault = fault.message
                return at, False
            kind = ELEMENTS[tag]
            if kind.value_offset is not None:
                element = view[at + LENGTH_FIELD : at + LENGTH_FIELD + length]
                scan.records += 1
                scan.crc += zlib.crc32(element)
                if place is not None and place(element[kind.value_offset :]) != down:
                    scan.misplaced += 1
            p = at + LENGTH_FIELD + length
            if p >= stop_at:
                return p, True
    except LengthFault as fault:
        return fault.position, False
    return p, False
