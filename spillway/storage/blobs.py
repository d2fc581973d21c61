"""Open channel-state delegates as ``Blob``s — inline bytes, whole files, segments of shared files —
once per distinct delegate (many handles share one file). Used by validate and analyze alike."""

from __future__ import annotations

from typing import Any

from spillway.formats.channel_file import Blob, FileBlob, InlineBlob
from spillway.model.checkpoint import ByteStreamHandle, FileHandle, RelativeFileHandle, SegmentFileHandle
from spillway.storage.locate import FileResolver


def delegate_key(resolver: FileResolver, delegate: object) -> object:
    """Equal for handles that read the same bytes (same resolved file and segment start)."""
    if isinstance(delegate, ByteStreamHandle) or delegate is None:
        return ("inline", id(delegate))
    resolved = resolver.resolve(delegate)
    path = resolved.local_text if resolved and resolved.local_text else repr(delegate)
    base = delegate.start_pos if isinstance(delegate, SegmentFileHandle) else 0
    return ("file", path, base)


def delegate_display(resolver: FileResolver, delegate: object) -> str:
    if isinstance(delegate, ByteStreamHandle):
        return f"inline:{delegate.name}"
    resolved = resolver.resolve(delegate)
    return resolved.local_text if resolved and resolved.local_text else str(getattr(delegate, "path", "?"))


def open_delegate(resolver: FileResolver, delegate: object) -> Blob | None:
    """The delegate's bytes, or None when they cannot be reached (missing file, non-local path, null)."""
    if isinstance(delegate, ByteStreamHandle):
        return InlineBlob(f"inline:{delegate.name}", delegate.data)
    if not isinstance(delegate, FileHandle | RelativeFileHandle | SegmentFileHandle):
        return None
    resolved = resolver.resolve(delegate)
    if resolved is None or resolved.local is None or not resolved.local.is_file():
        return None
    try:
        if isinstance(delegate, SegmentFileHandle):
            blob = FileBlob(resolved.local, delegate.start_pos, delegate.state_size)
            # A truncated physical file: expose what is there, so reads fail at the real end.
            blob.size = min(blob.size, max(0, blob.file_size - delegate.start_pos))
            return blob
        return FileBlob(resolved.local)
    except OSError:
        return None


class DelegateBlobs:
    """A cache of opened delegates; close() releases every file."""

    def __init__(self, resolver: FileResolver):
        self.resolver = resolver
        self.open: dict[Any, Blob | None] = {}

    def get(self, delegate: object) -> Blob | None:
        key = delegate_key(self.resolver, delegate)
        if key not in self.open:
            self.open[key] = open_delegate(self.resolver, delegate)
        return self.open[key]

    def close(self) -> None:
        for blob in self.open.values():
            if blob is not None:
                blob.close()
