"""Whole records out of a chunked byte stream, with where each one starts (for analyze and decode).

``Framer`` only checks boundaries; this reader also hands out each record's bytes. It keeps one
partial record at most, so memory is bounded by the largest record, not by the channel.
"""

from __future__ import annotations

import struct
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

from spillway.formats.record_framing import TAG_RECORD_WITH_TIMESTAMP, TAG_WATERMARK

_I64 = struct.Struct(">q")


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
        if self.payload[0] in (TAG_RECORD_WITH_TIMESTAMP, TAG_WATERMARK) and len(self.payload) >= 9:
            return _I64.unpack_from(self.payload, 1)[0]
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
        while len(buf) - self._pos >= 4:
            length = int.from_bytes(buf[self._pos : self._pos + 4], "big", signed=True)
            if length <= 0:
                token, pos = self._locate(self._pos)
                self.bad_length = (token, pos, length)
                return
            end = self._pos + 4 + length
            if end > len(buf):
                break
            token, pos = self._locate(self._pos)
            spans = self._locate(end - 1)[0] is not token
            yield Record(self._seq, length, bytes(buf[self._pos + 4 : end]), token, pos, spans)
            self._seq += 1
            self._pos = end

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
