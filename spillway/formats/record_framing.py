"""Records inside channel state (spec 06): ``i32 length`` + a serialized ``StreamElement``.

The bytes of one logical channel are a plain record stream cut into chunks anywhere — inside a
record, even inside a length prefix. ``Framer`` consumes the pieces in order and keeps only the
state of the record in progress, so a channel of any size is checked in bounded memory.
"""

from __future__ import annotations

import ctypes
from dataclasses import dataclass, field

from construct import Flag, Int8ub, Int32sb, Int64sb, Struct, Switch, this

TAG_RECORD_WITH_TIMESTAMP = 0
TAG_RECORD = 1
TAG_WATERMARK = 2
TAG_LATENCY_MARKER = 3
TAG_WATERMARK_STATUS = 4
TAG_RECORD_ATTRIBUTES = 5  # Flink 1.19+
TAG_INTERNAL_WATERMARK = 6  # Flink 1.19+

TAG_NAMES = {
    TAG_RECORD_WITH_TIMESTAMP: "record",
    TAG_RECORD: "record",
    TAG_WATERMARK: "watermark",
    TAG_LATENCY_MARKER: "latency marker",
    TAG_WATERMARK_STATUS: "watermark status",
    TAG_RECORD_ATTRIBUTES: "record attributes",
    TAG_INTERNAL_WATERMARK: "internal watermark",
}
# Elements of fixed size: payload length including the tag byte.
FIXED_SIZES = {
    TAG_WATERMARK: 9,
    TAG_LATENCY_MARKER: 29,
    TAG_WATERMARK_STATUS: 5,
    TAG_RECORD_ATTRIBUTES: 2,
    TAG_INTERNAL_WATERMARK: 13,
}
MIN_SIZES = {TAG_RECORD_WITH_TIMESTAMP: 9, TAG_RECORD: 1}
ALL_TAGS = frozenset(TAG_NAMES)
TAGS_BEFORE_1_19 = frozenset(range(5))

# The element layouts (value bytes are the user type's serializer: kept raw here).
StreamElement = Struct(
    "tag" / Int8ub,
    "body"
    / Switch(
        this.tag,
        {
            TAG_RECORD_WITH_TIMESTAMP: Struct("timestamp" / Int64sb),
            TAG_RECORD: Struct(),
            TAG_WATERMARK: Struct("timestamp" / Int64sb),
            TAG_LATENCY_MARKER: Struct(
                "marked_time" / Int64sb,
                "operator_id_lower" / Int64sb,
                "operator_id_upper" / Int64sb,
                "subtask_index" / Int32sb,
            ),
            TAG_WATERMARK_STATUS: Struct("status" / Int32sb),
            TAG_RECORD_ATTRIBUTES: Struct("is_backlog" / Flag),
            TAG_INTERNAL_WATERMARK: Struct("subpartition_index" / Int32sb, "timestamp" / Int64sb),
        },
    ),
)


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
    than remain is caught where its length is read, not at the end.
    """

    total: int
    tags: frozenset[int] = ALL_TAGS
    records: int = 0
    elements: dict[int, int] = field(default_factory=dict)  # tag -> count
    consumed: int = 0
    faults: list[FramingFault] = field(default_factory=list)
    # State of the record in progress.
    _head: bytes = b""  # partial length prefix
    _left: int = 0  # payload bytes still to come
    _length: int = 0
    _need_tag: bool = False
    _start: tuple[int, int] = (0, 0)  # (piece, position) of the current record's length field
    _piece: int = -1
    _dead: bool = False  # after a length fault the boundaries are lost: stop checking

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
        self.consumed += n

    def _begin(self, length: int, position_after_prefix: int) -> bool:
        remaining = self.total - position_after_prefix
        if length <= 0 or length > remaining:
            why = "not positive" if length <= 0 else f"more than the {remaining} bytes left in the channel"
            self._fault("length", f"record length {length} is {why}")
            self._dead = True
            return False
        self._length = length
        self._left = length
        self._need_tag = True
        return True

    def _check_tag(self, tag: int) -> None:
        self.elements[tag] = self.elements.get(tag, 0) + 1
        if tag not in self.tags:
            self._fault("tag", f"unknown StreamElement tag {tag} (valid: {sorted(self.tags)})")
            return
        fixed = FIXED_SIZES.get(tag)
        if fixed is not None and self._length != fixed:
            self._fault("size", f"{TAG_NAMES[tag]} of {self._length} bytes, expected {fixed}")
        elif fixed is None and self._length < MIN_SIZES[tag]:
            self._fault("size", f"{TAG_NAMES[tag]} of {self._length} bytes, at least {MIN_SIZES[tag]} expected")

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

    def __init__(self, total: int, tags: frozenset[int], lib: object):
        from spillway.formats.native import FramerState

        self._lib = lib
        self._st = FramerState()
        self._st.total = total
        self._st.tag_mask = sum(1 << t for t in tags if t < 32)
        self._st_ref = ctypes.byref(self._st)
        self.total = total
        self.tags = tags
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
            pos = self._lib.spw_feed(self._st_ref, address, n, self._piece, pos)  # type: ignore[attr-defined]
            if st.fault_kind:
                self._record_fault()
                st.fault_kind = 0
        st.consumed += n

    def feed_file_chunks(self, fd: int, base: int, chunks: list[tuple[int, int]], buffer: bytearray) -> bool:
        """Feed whole chunks of a file-backed blob in one native call. False if a fault (or read error)
        stopped it: the framer is then spent, and the caller re-frames piece by piece to locate it."""
        n = len(chunks)
        if n == 0:
            return True
        offsets = (ctypes.c_int64 * n)(*(c[0] for c in chunks))
        lengths = (ctypes.c_int32 * n)(*(c[1] for c in chunks))
        address = ctypes.addressof((ctypes.c_char * len(buffer)).from_buffer(buffer))
        rc = self._lib.spw_frame_chunks(  # type: ignore[attr-defined]
            self._st_ref, fd, base, offsets, lengths, n, address, len(buffer)
        )
        self._piece += n
        return rc == 0

    def _record_fault(self) -> None:
        st = self._st
        kind, value = st.fault_kind, st.fault_value
        if kind == 1:
            why = "not positive" if value <= 0 else f"more than the {st.fault_remaining} bytes left in the channel"
            self.faults.append(FramingFault("length", f"record length {value} is {why}", st.fault_piece, st.fault_pos))
        elif kind == 2:
            self.faults.append(
                FramingFault(
                    "tag",
                    f"unknown StreamElement tag {st.fault_tag} (valid: {sorted(self.tags)})",
                    st.fault_piece,
                    st.fault_pos,
                )
            )
        else:
            tag = st.fault_tag
            fixed = FIXED_SIZES.get(tag)
            expected = f"expected {fixed}" if fixed else f"at least {MIN_SIZES[tag]} expected"
            self.faults.append(
                FramingFault("size", f"{TAG_NAMES[tag]} of {value} bytes, {expected}", st.fault_piece, st.fault_pos)
            )

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
    def elements(self) -> dict[int, int]:
        return {t: c for t, c in enumerate(self._st.tag_counts) if c}

    @property
    def in_record(self) -> bool:
        st = self._st
        return bool(st.head_len or st.left or st.need_tag)


def make_framer(total: int, tags: frozenset[int] = ALL_TAGS) -> Framer | NativeFramer:
    from spillway.formats.native import library

    lib = library()
    return NativeFramer(total, tags, lib) if lib is not None else Framer(total, tags)
