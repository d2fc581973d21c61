"""The payload of one old logical channel, in replay order (input part, then output part), in blocks."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import TypeVar

from spillway.formats.channel_file import FileBlob, InlineBlob, read_chunk_header
from spillway.rescale.plan import PartRef, SourceChannel

BLOCK = 1024 * 1024  # chunks are gathered into blocks of about this size before framing (fewer numpy calls)

T = TypeVar("T")


def open_part(part: PartRef) -> FileBlob | InlineBlob:
    if part.data is not None:
        return InlineBlob("inline", part.data)
    assert part.path is not None
    return FileBlob(Path(part.path), part.base, part.size)


def iter_channel_bytes(src: SourceChannel) -> Iterator[bytes]:
    """The old logical channel's payload, chunk by chunk, in replay order."""
    for part in src.parts:
        blob = open_part(part)
        try:
            for off in part.offsets:
                chunk = read_chunk_header(blob, off)
                yield blob.read_at(off + 4, chunk.length)
        finally:
            blob.close()


def iter_channel_blocks(src: SourceChannel, size: int | None = None) -> Iterator[bytes]:
    """The same payload in blocks of at least ``size`` (default BLOCK) bytes (the last one shorter)."""
    size = size or BLOCK
    parts: list[bytes] = []
    held = 0
    for data in iter_channel_bytes(src):
        parts.append(data)
        held += len(data)
        if held >= size:
            yield b"".join(parts)
            parts, held = [], 0
    if parts:
        yield b"".join(parts)


def with_last(items: Iterator[T]) -> Iterator[tuple[T, bool]]:
    """Each item with whether it is the last one."""
    it = iter(items)
    try:
        held = next(it)
    except StopIteration:
        return
    for item in it:
        yield held, False
        held = item
    yield held, True
