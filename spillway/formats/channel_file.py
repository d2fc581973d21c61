"""Channel-state files (docs/format/channel-state-files.md): a 4-byte header, then ``[i32 length][bytes]`` chunks.

Only the handles in ``_metadata`` say which chunk belongs to which channel. A handle's delegate is a
whole file, a byte range of a shared file (file merging: offsets are relative to the segment), or
bytes inlined into ``_metadata``; ``Blob`` hides the difference. Files are read with seeks and
bounded reads: nothing here loads a whole file.
"""

from __future__ import annotations

import io
import os
import struct
from array import array
from bisect import bisect_left
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path

from construct import Int32sb, Struct

from spillway.errors import SpillwayError
from spillway.safe_io import open_regular

SERIALIZATION_VERSION = 0
HEADER_SIZE = 4
LENGTH_SIZE = 4
READ_BLOCK = 1 << 20  # bytes per read when streaming a long chunk

FileHeader = Struct("version" / Int32sb)
ChunkHeader = Struct("length" / Int32sb)
# The same layout for hot loops (one per chunk, tens of thousands per GiB), without construct's per-call cost.
CHUNK_LENGTH = struct.Struct(">i")
assert ChunkHeader.build({"length": -2}) == CHUNK_LENGTH.pack(-2)


class BlobError(SpillwayError):
    """A read outside the blob, or an I/O failure; ``offset`` is blob-relative."""

    def __init__(self, message: str, offset: int):
        super().__init__(message)
        self.offset = offset


class Blob:
    """A readable byte range: ``size`` bytes addressed from 0. ``physical(pos)`` is the file offset."""

    name: str
    size: int
    base: int = 0

    def read_at(self, pos: int, n: int) -> bytes:
        raise NotImplementedError

    def read_into(self, pos: int, buffer: bytearray, n: int) -> int:
        buffer[:n] = self.read_at(pos, n)
        return n

    def physical(self, pos: int) -> int:
        return self.base + pos

    def close(self) -> None:
        pass

    def __enter__(self) -> Blob:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


class InlineBlob(Blob):
    def __init__(self, name: str, data: bytes):
        self.name = name
        self.data = data
        self.size = len(data)

    def read_at(self, pos: int, n: int) -> bytes:
        if pos < 0 or pos + n > self.size:
            raise BlobError(f"read of {n} bytes at {pos} is outside the {self.size} inline bytes", pos)
        return self.data[pos : pos + n]


class FileBlob(Blob):
    """``size`` bytes of a local file starting at ``base`` (a whole file: base 0, size = file length)."""

    def __init__(self, path: Path, base: int = 0, size: int | None = None, opened: io.BufferedReader | None = None):
        """``opened``: the file's bytes from elsewhere than ``path`` (a remote file held in memory), owned by
        the blob from now on."""
        self.path = path
        self.name = str(path)
        self.base = base
        self._fh: io.BufferedReader = opened if opened is not None else open_regular(path)  # closed by close()
        self.file_size = os.fstat(self._fh.fileno()).st_size
        self.size = self.file_size - base if size is None else size

    def read_at(self, pos: int, n: int) -> bytes:
        if pos < 0 or n < 0 or pos + n > self.size:
            raise BlobError(f"read of {n} bytes at {pos} is outside the {self.size}-byte range", pos)
        self._fh.seek(self.base + pos)
        data = self._fh.read(n)
        if len(data) != n:
            raise BlobError(f"file ended after {len(data)} of {n} bytes", pos + len(data))
        return data

    def read_into(self, pos: int, buffer: bytearray, n: int) -> int:
        """Read ``n`` bytes at ``pos`` into the start of a reusable buffer (no allocation)."""
        if pos < 0 or n < 0 or pos + n > self.size or n > len(buffer):
            raise BlobError(f"read of {n} bytes at {pos} is outside the {self.size}-byte range", pos)
        self._fh.seek(self.base + pos)
        got = self._fh.readinto(memoryview(buffer)[:n])
        if got != n:
            raise BlobError(f"file ended after {got} of {n} bytes", pos + (got or 0))
        return n

    def fileno(self) -> int:
        return self._fh.fileno()

    def close(self) -> None:
        self._fh.close()


@dataclass(frozen=True, slots=True)
class Chunk:
    offset: int  # blob-relative position of the length field
    length: int  # payload bytes

    @property
    def end(self) -> int:
        return self.offset + LENGTH_SIZE + self.length

    @property
    def footprint(self) -> int:
        """What a handle's ``state_size`` counts for this chunk (length prefix included)."""
        return LENGTH_SIZE + self.length


def read_version(blob: Blob) -> int:
    return FileHeader.parse(blob.read_at(0, HEADER_SIZE)).version


def read_chunk_header(blob: Blob, offset: int) -> Chunk:
    """The chunk whose length field is at ``offset``; bounds-checked against the blob."""
    if offset < HEADER_SIZE or offset + LENGTH_SIZE > blob.size:
        raise BlobError(f"chunk offset {offset} is outside [{HEADER_SIZE}, {blob.size - LENGTH_SIZE}]", offset)
    (length,) = CHUNK_LENGTH.unpack(blob.read_at(offset, LENGTH_SIZE))
    if length < 0:
        raise BlobError(f"negative chunk length {length}", offset)
    if offset + LENGTH_SIZE + length > blob.size:
        raise BlobError(
            f"chunk length {length} runs {offset + LENGTH_SIZE + length - blob.size} bytes past the end "
            f"({blob.size} bytes)",
            offset,
        )
    return Chunk(offset, length)


def walk_chunks(blob: Blob) -> Iterator[Chunk]:
    """Every chunk from the header to the end; raises ``BlobError`` where the chain breaks."""
    if isinstance(blob, FileBlob):
        from spillway.formats.native import walk_file

        native = walk_file(blob.fileno(), blob.base, blob.size)
        if native is not None:
            offsets, lengths, error = native
            for offset, length in zip(offsets, lengths, strict=True):
                yield Chunk(offset, length)
            if error is not None:
                # Re-read the failing header with the declared layout for the precise message.
                read_chunk_header(blob, error[0])
                raise BlobError(error[1], error[0])
            return
    offset = HEADER_SIZE
    while offset < blob.size:
        chunk = read_chunk_header(blob, offset)
        yield chunk
        offset = chunk.end


# ``native.walk_file``: chunk offsets, payload lengths, (offset, why) where the chain breaks
Walked = tuple["array[int]", "array[int]", tuple[int, str] | None]


class ChunkMap(Mapping[int, int]):
    """The chunks of one blob, offset of each length field -> payload length, as two arrays in file order: 12 bytes
    a chunk where a dict takes about 130 (a 10 GiB checkpoint has ~330 000 chunks of 32 KiB)."""

    __slots__ = ("lengths", "offsets")

    def __init__(self, offsets: array[int] | None = None, lengths: array[int] | None = None) -> None:
        self.offsets = array("q") if offsets is None else offsets  # increasing, as the chain is walked
        self.lengths = array("i") if lengths is None else lengths

    def __len__(self) -> int:
        return len(self.offsets)

    def __iter__(self) -> Iterator[int]:
        return iter(self.offsets)

    def index(self, offset: int) -> int:
        """Position of the chunk whose length field is at ``offset``, -1 if no chunk starts there."""
        i = bisect_left(self.offsets, offset)
        return i if i < len(self.offsets) and self.offsets[i] == offset else -1

    def __getitem__(self, offset: object) -> int:
        i = self.index(offset) if isinstance(offset, int) else -1
        if i < 0:
            raise KeyError(offset)
        return self.lengths[i]

    def __contains__(self, offset: object) -> bool:
        return isinstance(offset, int) and self.index(offset) >= 0

    def indices(self, offsets: list[int]) -> array[int] | None:
        """The position of every one of ``offsets`` (in C where it can), or None if any starts no chunk."""
        from spillway.formats.native import locate

        # A few offsets cost less by bisection here than the C call's argument conversion.
        found = locate(self.offsets, array("q", offsets)) if len(offsets) > 16 else None
        if found is None:
            out = array("q", map(self.index, offsets))
            return None if -1 in out else out
        out, missing = found
        return None if missing else out

    def payload(self, positions: array[int]) -> int:
        """Payload bytes of the chunks at ``positions``."""
        from spillway.formats.native import gather

        found = gather(self.lengths, positions) if len(positions) > 16 else None  # (in C, as ``indices``)
        return sum(map(self.lengths.__getitem__, positions)) if found is None else found[1]


def chunk_map(blob: Blob, walked: Walked | None = None) -> tuple[ChunkMap, BlobError | None]:
    """``walk_chunks`` as a ``ChunkMap``, without a ``Chunk`` per chunk (hundreds of thousands in a large
    checkpoint), and the error where the chain breaks (None: it ends exactly at the end of the blob).

    ``walked``: the native walk of this blob, if it was already run (on another thread)."""
    if walked is None and isinstance(blob, FileBlob):
        from spillway.formats.native import walk_file

        walked = walk_file(blob.fileno(), blob.base, blob.size)
    if walked is None:
        found = ChunkMap()
        try:
            for chunk in walk_chunks(blob):
                found.offsets.append(chunk.offset)
                found.lengths.append(chunk.length)
        except BlobError as exc:
            return found, exc
        return found, None
    offsets, lengths, error = walked
    found = ChunkMap(offsets, lengths)
    if error is None:
        return found, None
    try:  # re-read the failing header with the declared layout for the precise message
        read_chunk_header(blob, error[0])
    except BlobError as exc:
        return found, exc
    return found, BlobError(error[1], error[0])


def iter_payload(blob: Blob, chunk: Chunk, buffer: bytearray) -> Iterator[tuple[int, int]]:
    """Read a chunk's payload into ``buffer`` piece by piece; yields (blob position, bytes in buffer).

    Each piece is valid only until the next one is read: memory stays at one buffer whatever the size.
    """
    pos = chunk.offset + LENGTH_SIZE
    end = pos + chunk.length
    while pos < end:
        n = min(len(buffer), end - pos)
        blob.read_into(pos, buffer, n)
        yield pos, n
        pos += n


def build_channel_file(chunks: list[bytes]) -> tuple[bytes, list[int]]:
    """Header + chunks; returns the bytes and the offset of each chunk's length field (for writers/tests)."""
    out = bytearray(FileHeader.build({"version": SERIALIZATION_VERSION}))
    offsets = []
    for payload in chunks:
        offsets.append(len(out))
        out += ChunkHeader.build({"length": len(payload)}) + payload
    return bytes(out), offsets
