"""Shared pieces of keyed/operator state redistribution: the refusal, new files made of byte ranges of old
ones, bounded reads from delegates, deterministic names.

A new state file is described, not written: literal bytes and (source handle, offset, length) ranges.
``materialize`` writes one (the checkpoint writer decides where).
"""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

from spillway.errors import SpillwayError
from spillway.formats.channel_file import Blob
from spillway.formats.errors import CheckpointFormatError
from spillway.model.checkpoint import (
    ByteStreamHandle,
    RelativeFileHandle,
    StreamHandle,
    is_byte_source,
    is_file_backed,
)
from spillway.storage.blobs import DelegateBlobs, delegate_display

# Copies stream through memory in slices of this size (a key group or list element can be large).
COPY_SLICE = 1 << 20
# Namespace of the names spillway gives new state files and handle ids (uuid5: same input, same output).
_NAMESPACE = uuid.UUID("6f1d7c52-0b7e-4c8e-9d1b-5a4f3e2d1c0b")


class RescaleRefused(SpillwayError):
    """The state cannot be redistributed offline; ``reason`` is one sentence naming what and the alternative."""

    def __init__(self, reason: str):
        super().__init__(reason)
        self.reason = reason


Piece = bytes | tuple[StreamHandle, int, int]


@dataclass
class NewStateFile:
    relative_path: str  # file name inside the output checkpoint directory (uuid-like, unique)
    pieces: list[Piece] = field(default_factory=list)  # literal bytes, or (source handle, offset, length) to copy
    size: int = 0

    def add_bytes(self, data: bytes) -> int:
        """Append literal bytes; returns their position in the new file."""
        pos = self.size
        if data:
            self.pieces.append(data)
            self.size += len(data)
        return pos

    def add_range(self, source: StreamHandle, offset: int, length: int) -> int:
        """Append ``length`` bytes of ``source`` from ``offset``; returns their position in the new file.
        Adjacent ranges of the same source are coalesced into one piece."""
        pos = self.size
        if length <= 0:
            return pos
        last = self.pieces[-1] if self.pieces else None
        if isinstance(last, tuple) and last[0] is source and last[1] + last[2] == offset:
            self.pieces[-1] = (source, last[1], last[2] + length)
        else:
            self.pieces.append((source, offset, length))
        self.size += length
        return pos

    def handle(self) -> RelativeFileHandle:
        return RelativeFileHandle(self.relative_path, self.size)


def stable_uuid(*parts: object) -> str:
    """A uuid-formatted name derived from ``parts`` (deterministic output for the same input)."""
    return str(uuid.uuid5(_NAMESPACE, "\x1f".join(str(p) for p in parts)))


def named_by_flink(handle: StreamHandle) -> str:
    """The handle's bytes as ``_metadata`` names them (the path Flink wrote, never where this run reads them
    from): names derived from it are the same whether the checkpoint is read from local disk or a store."""
    if isinstance(handle, ByteStreamHandle):
        return f"inline:{handle.name}"
    return handle.file_name if is_file_backed(handle) else "?"


def describe(blobs: DelegateBlobs, handle: StreamHandle) -> str:
    return delegate_display(blobs.resolver, handle)


def open_stream(blobs: DelegateBlobs, handle: StreamHandle, what: str) -> Blob:
    """The handle's bytes; a clean error naming the file when they cannot be reached."""
    if not is_byte_source(handle):
        raise RescaleRefused(
            f"{what}: its bytes live in a {type(handle).__name__}, which spillway cannot read; rescale in Flink instead"
        )
    blob = blobs.get(handle)
    if blob is None:
        raise CheckpointFormatError(
            describe(blobs, handle), None, what, "cannot be opened (missing or unreachable file)"
        )
    return blob


def read_bounded(blobs: DelegateBlobs, handle: StreamHandle, blob: Blob, pos: int, n: int, what: str) -> bytes:
    if pos < 0 or n < 0 or pos + n > blob.size:
        raise CheckpointFormatError(
            describe(blobs, handle), pos, what, f"{n} bytes at {pos} run past the end of the {blob.size}-byte state"
        )
    return blob.read_at(pos, n)


def same_bytes(
    blobs: DelegateBlobs, a: StreamHandle, blob_a: Blob, b: StreamHandle, blob_b: Blob, n: int, what: str
) -> bool:
    """True if the first ``n`` bytes of both streams are equal (compared slice by slice)."""
    pos = 0
    while pos < n:
        step = min(COPY_SLICE, n - pos)
        if read_bounded(blobs, a, blob_a, pos, step, what) != read_bounded(blobs, b, blob_b, pos, step, what):
            return False
        pos += step
    return True


def iter_file_bytes(file: NewStateFile, blobs: DelegateBlobs) -> Iterator[bytes]:
    """The new file's content, in slices of at most COPY_SLICE bytes."""
    for piece in file.pieces:
        if isinstance(piece, bytes):
            yield piece
            continue
        source, offset, length = piece
        blob = open_stream(blobs, source, f"source of {file.relative_path}")
        pos = offset
        while pos < offset + length:
            step = min(COPY_SLICE, offset + length - pos)
            yield read_bounded(blobs, source, blob, pos, step, f"source of {file.relative_path}")
            pos += step


def materialize(file: NewStateFile, blobs: DelegateBlobs, target: Path) -> None:
    """Write ``file`` to ``target`` and check its size."""
    written = 0
    with open(target, "wb") as out:
        for data in iter_file_bytes(file, blobs):
            out.write(data)
            written += len(data)
    if written != file.size:
        raise RuntimeError(f"{target}: wrote {written} bytes, the plan says {file.size}")
