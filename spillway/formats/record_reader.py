"""Whole elements out of a chunked byte stream, with where each one starts (for analyze and decode).

``Framer`` only checks boundaries; this reader also hands out each element's bytes. It keeps one
partial element at most, so memory is bounded by the largest element, not by the channel. Boundaries
are found by ``stream_elements.split_elements``; the element rule is the caller's (``element_fault``).
"""

from __future__ import annotations

import struct
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

from spillway.formats.stream_elements import ELEMENTS, LengthFault, split_elements

_I64 = struct.Struct(">q")
# tag -> where an element of that tag holds its event time (record with timestamp, watermark)
_EVENT_TIME_AT = {k.tag: k.event_time_offset for k in ELEMENTS.values() if k.event_time_offset is not None}


@dataclass(slots=True)
class Record:
    seq: int
    length: int  # payload bytes (the 4-byte prefix excluded)
    payload: bytes  # tag byte first
    start: Any  # location token of the piece holding the length field's first byte
    start_pos: int  # position of the length field inside that piece
    spans_pieces: bool

    @property
    def tag(self) -> int:
        return self.payload[0]

    @property
    def timestamp(self) -> int | None:
        at = _EVENT_TIME_AT.get(self.payload[0])
        if at is not None and len(self.payload) >= at + 8:
            return _I64.unpack_from(self.payload, at)[0]
        return None


class RecordReader:
    """Feed pieces with a location token each; ``records()`` yields the records completed so far."""

    def __init__(self) -> None:
        self._buf = bytearray()
        self._pos = 0  # start of unconsumed bytes in _buf
        self._pieces: list[tuple[int, Any]] = []  # (buffer offset where the piece starts, token)
        self._seq = 0
        self.bad_length: tuple[Any, int, int] | None = None  # (token, pos, length) of a corrupt length

    def feed(self, data: bytes, token: Any) -> Iterator[Record]:
        if self.bad_length is not None:
            return
        if self._pos and self._pos == len(self._buf):
            self._buf.clear()
            self._pos = 0
            self._pieces.clear()
        elif self._pos > (1 << 20):
            del self._buf[: self._pos]
            self._pieces = [(o - self._pos, t) for o, t in self._pieces]
            self._pos = 0
        self._pieces.append((len(self._buf), token))
        self._buf += data
        buf = self._buf
        try:
            for start, length, _tag in split_elements(buf, self._pos):
                end = start + 4 + length
                token, pos = self._locate(start)
                spans = self._locate(end - 1)[0] is not token
                yield Record(self._seq, length, bytes(buf[start + 4 : end]), token, pos, spans)
                self._seq += 1
                self._pos = end
        except LengthFault as fault:
            token, pos = self._locate(fault.position)
            self.bad_length = (token, pos, fault.length)

    def _locate(self, offset: int) -> tuple[Any, int]:
        found = self._pieces[0]
        for start, token in self._pieces:
            if start > offset:
                break
            found = (start, token)
        return found[1], offset - found[0]

    @property
    def leftover(self) -> int:
        """Bytes of a record still incomplete (0 on a boundary)."""
        return len(self._buf) - self._pos

    def pending_location(self) -> tuple[Any, int] | None:
        return self._locate(self._pos) if self.leftover else None
