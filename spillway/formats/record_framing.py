"""Checking element boundaries along one logical channel fed in pieces (``validate``).

The bytes of one logical channel are a plain element stream (``stream_elements``) cut into chunks
anywhere — inside an element, even inside a length prefix. ``Framer`` consumes the pieces in order and
keeps only the state of the element in progress, so a channel of any size is checked in bounded memory.
What counts as a fault is ``stream_elements.length_fault`` and ``element_fault``; ``NativeFramer`` runs
the same loop in C with the tables of that module.
"""

from __future__ import annotations

import ctypes
from dataclasses import dataclass, field

from spillway.formats.stream_elements import (
    ALL_TAGS,
    RECORD_TAGS,
    TAGS_BEFORE_1_19,
    element_fault,
    length_fault,
    size_bounds,
)

__all__ = ["ALL_TAGS", "TAGS_BEFORE_1_19", "Framer", "FramingFault", "NativeFramer", "make_framer"]


@dataclass(slots=True)
class FramingFault:
    kind: str  # "length", "tag", "size", "truncated"
    message: str
    piece: int  # index of the fed piece where the record (or fault) starts
    position: int  # offset inside that piece


@dataclass
class Framer:
    """Incremental record-boundary checker for one logical channel.

    ``total`` is the payload length of the whole logical stream, so a record that claims more bytes
    than remain is caught where its length is read, not at the end. ``limit``: the reader's own bound on
    a length field (``length_fault``), None for none.
    """

    total: int
    tags: frozenset[int] = ALL_TAGS
    limit: int | None = None
    records: int = 0  # whole stream elements passed (records, watermarks, other events)
    stream_records: int = 0  # of them, stream records
    elements: dict[int, int] = field(default_factory=dict)  # tag -> count
    consumed: int = 0
    faults: list[FramingFault] = field(default_factory=list)
    # State of the record in progress.
    _head: bytes = b""  # partial length prefix
    _left: int = 0  # payload bytes still to come
    _length: int = 0
    _need_tag: bool = False
    _tag: int = -1  # tag of the element in progress, once read
    _start: tuple[int, int] = (0, 0)  # (piece, position) of the current record's length field
    _piece: int = -1
    _dead: bool = False  # after a length fault the boundaries are lost: stop checking
    _bounds: list[tuple[int, int]] = field(init=False, repr=False)  # the C framer's table: a quick first check

    def __post_init__(self) -> None:
        self._bounds = size_bounds(self.tags)

    def feed(self, data: bytes | bytearray, n: int | None = None) -> None:
        if n is not None and n != len(data):
            data = bytes(memoryview(data)[:n])
        self._piece += 1
        if self._dead:
            self.consumed += len(data)
            return
        i, n = 0, len(data)
        piece = self._piece
        while i < n:
            if self._left == 0 and not self._need_tag:
                # At a record boundary (or inside a split length prefix).
                if self._head or n - i < 4:
                    if not self._head:
                        self._start = (piece, i)
                    take = min(4 - len(self._head), n - i)
                    self._head += data[i : i + take]
                    i += take
                    if len(self._head) < 4:
                        break
                    length = int.from_bytes(self._head, "big", signed=True)
                    self._head = b""
                else:
                    self._start = (piece, i)
                    length = int.from_bytes(data[i : i + 4], "big", signed=True)
                    i += 4
                if not self._begin(length, self.consumed + i):
                    self.consumed += n
                    return
            if self._need_tag:
                if i >= n:
                    break
                self._check_tag(data[i])
                self._need_tag = False
            take = min(self._left, n - i)
            i += take
            self._left -= take
            if self._left == 0 and not self._need_tag:
                self.records += 1
                if self._tag in RECORD_TAGS:
                    self.stream_records += 1
        self.consumed += n

    def _begin(self, length: int, position_after_prefix: int) -> bool:
        why = length_fault(length, self.total - position_after_prefix, self.limit)
        if why is not None:
            self._fault("length", f"record length {length} is {why}")
            self._dead = True
            return False
        self._length = length
        self._left = length
        self._need_tag = True
        return True

    def _check_tag(self, tag: int) -> None:
        self._tag = tag
        self.elements[tag] = self.elements.get(tag, 0) + 1
        low, high = self._bounds[tag]
        if not low <= self._length <= high:
            fault = element_fault(tag, self._length, self.tags)
            assert fault is not None, "size_bounds disagrees with element_fault"
            self._fault(fault.kind, fault.message)

    def _fault(self, kind: str, message: str) -> None:
        piece, pos = self._start
        self.faults.append(FramingFault(kind, message, piece, pos))

    def finish(self) -> None:
        """Call after the last piece: a record still in progress is a fault."""
        if self._dead:
            return
        if self._head:
            self._fault("truncated", f"stream ends inside a length prefix ({len(self._head)} of 4 bytes)")
        elif self._left or self._need_tag:
            self._fault(
                "truncated",
                f"stream ends inside a record: {self._left} of {self._length} payload bytes missing",
            )

    @property
    def in_record(self) -> bool:
        return bool(self._head) or self._left > 0 or self._need_tag


class NativeFramer:
    """``Framer`` with the byte loop in C (``native.py``); same results, I/O-bound speed."""

    def __init__(self, total: int, tags: frozenset[int], lib: ctypes.CDLL, limit: int | None = None) -> None:
        from spillway.formats.native import FramerState, framer_rules

        self._lib = lib
        self._rules = framer_rules(tags, limit)  # cached and shared; referenced here so it outlives the state
        self._st = FramerState()
        self._tag_counts = (ctypes.c_int64 * 256)()  # referenced here so it outlives the state
        self._st.tag_counts = self._tag_counts
        self._st.rules = ctypes.pointer(self._rules)
        self._st.total = total
        self._st_ref = ctypes.byref(self._st)
        self.total = total
        self.tags = tags
        self.limit = limit
        self.faults: list[FramingFault] = []
        self._piece = -1

    def feed(self, data: bytes | bytearray, n: int | None = None) -> None:
        n = len(data) if n is None else n
        self._piece += 1
        if n == 0:
            return
        address = (
            ctypes.addressof((ctypes.c_char * n).from_buffer(data))
            if isinstance(data, bytearray)
            else ctypes.cast(ctypes.c_char_p(bytes(data)), ctypes.c_void_p).value
        )
        keep = data  # noqa: F841 - the buffer must outlive the call
        st = self._st
        pos = 0
        while pos < n:
            pos = self._lib.spw_feed(self._st_ref, address, n, self._piece, pos)
            if st.fault_kind:
                self._record_fault()
                st.fault_kind = 0
        st.consumed += n

    def _record_fault(self) -> None:
        """The C loop only says where and which numbers; the words come from the Python rule."""
        from spillway.formats.native import FAULT_LENGTH

        st = self._st
        if st.fault_kind == FAULT_LENGTH:
            why = length_fault(st.fault_value, st.fault_remaining, self.limit)
            message, kind = f"record length {st.fault_value} is {why}", "length"
        else:
            fault = element_fault(st.fault_tag, st.fault_value, self.tags)
            assert fault is not None, "the C tables disagree with stream_elements"
            message, kind = fault.message, fault.kind
        self.faults.append(FramingFault(kind, message, st.fault_piece, st.fault_pos))

    def finish(self) -> None:
        st = self._st
        if st.dead:
            return
        if st.head_len:
            self.faults.append(
                FramingFault(
                    "truncated",
                    f"stream ends inside a length prefix ({st.head_len} of 4 bytes)",
                    st.start_piece,
                    st.start_pos,
                )
            )
        elif st.left or st.need_tag:
            self.faults.append(
                FramingFault(
                    "truncated",
                    f"stream ends inside a record: {st.left} of {st.length} payload bytes missing",
                    st.start_piece,
                    st.start_pos,
                )
            )

    @property
    def records(self) -> int:
        return self._st.records

    @property
    def stream_records(self) -> int:
        return self._lib.spw_stream_records(self._st_ref)

    @property
    def elements(self) -> dict[int, int]:
        return {t: c for t, c in enumerate(self._tag_counts) if c}

    @property
    def in_record(self) -> bool:
        st = self._st
        return bool(st.head_len or st.left or st.need_tag)


def make_framer(total: int, tags: frozenset[int] = ALL_TAGS, limit: int | None = None) -> Framer | NativeFramer:
    from spillway.formats.native import library

    lib = library()
    return NativeFramer(total, tags, lib, limit) if lib is not None else Framer(total, tags, limit=limit)
