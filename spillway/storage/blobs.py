"""Open channel-state delegates as ``Blob``s — inline bytes, whole files, segments of shared files —
once per distinct delegate (many handles share one file). Used by validate and analyze alike."""

from __future__ import annotations

import os
from collections.abc import Hashable, Iterable, Iterator

from spillway.formats.channel_file import Blob, FileBlob, InlineBlob
from spillway.model.checkpoint import ByteStreamHandle, StreamHandle, is_file_backed
from spillway.storage import remote_copies
from spillway.storage.locate import FileResolver


def delegate_key(resolver: FileResolver, delegate: StreamHandle) -> Hashable:
    """Equal for handles that read the same bytes (same resolved file and segment start)."""
    if delegate is None or isinstance(delegate, ByteStreamHandle):
        return ("inline", id(delegate))
    resolved = resolver.resolve(delegate)
    path = resolved.local_text if resolved and resolved.local_text else repr(delegate)
    return ("file", path, delegate.start_pos if is_file_backed(delegate) else 0)


def delegate_display(resolver: FileResolver, delegate: StreamHandle) -> str:
    if isinstance(delegate, ByteStreamHandle):
        return f"inline:{delegate.name}"
    resolved = resolver.resolve(delegate)
    if resolved and resolved.local_text:
        return remote_copies.shown(resolved.local_text)
    return delegate.file_name if is_file_backed(delegate) and not delegate.relative else "?"


def open_delegate(resolver: FileResolver, delegate: StreamHandle, *, arrived: bool = True) -> Blob | None:
    """The delegate's bytes, or None when they cannot be reached (missing file, non-local path, null).
    ``arrived=False``: a remote checkpoint's file is opened while its fetch is still under way (started now if
    need be); its bytes must not be read before :func:`spillway.storage.remote_copies.arrive` returns."""
    if isinstance(delegate, ByteStreamHandle):
        return InlineBlob(f"inline:{delegate.name}", delegate.data)
    if not is_file_backed(delegate):
        return None
    resolved = resolver.resolve(delegate)
    if resolved is None or resolved.local is None:
        return None
    if arrived:
        remote_copies.arrive(resolved.local_text)  # a remote checkpoint's file: read now, not before
    elif remote_copies.start([resolved.local_text]) and not remote_copies.present(resolved.local):
        remote_copies.arrive(resolved.local_text)  # its fetch failed already: that error, not "missing"
    in_memory = remote_copies.held(resolved.local)  # a remote file's bytes, framed where they arrived
    if in_memory is None and not resolved.local.is_file():
        return None
    try:
        opened = None if in_memory is None else os.fdopen(os.dup(in_memory), "rb")
        if delegate.whole_file:
            blob = FileBlob(resolved.local, opened=opened)
            blob.name = remote_copies.shown(blob.name)
            return blob
        blob = FileBlob(resolved.local, delegate.start_pos, delegate.state_size, opened=opened)
        blob.name = remote_copies.shown(blob.name)
        # A truncated physical file: expose what is there, so reads fail at the real end.
        blob.size = min(blob.size, max(0, blob.file_size - delegate.start_pos))
        return blob
    except OSError:
        return None


def _local_files(resolver: FileResolver, delegates: Iterable[StreamHandle]) -> Iterator[str]:
    for d in delegates:
        if is_file_backed(d) and (resolved := resolver.resolve(d)) is not None and resolved.local_text:
            yield resolved.local_text


def prefetch_delegates(resolver: FileResolver, delegates: Iterable[StreamHandle]) -> None:
    """Fetch every remote file among ``delegates``' now, all at once (many ranged reads in flight), rather
    than one by one as each is opened. Nothing to do for a local checkpoint."""
    remote_copies.prefetch(_local_files(resolver, delegates))


def start_delegates(resolver: FileResolver, delegates: Iterable[StreamHandle]) -> None:
    """Like :func:`prefetch_delegates`, without waiting: the files arrive in the order of ``delegates`` while
    the caller reads the first ones (each after :func:`spillway.storage.remote_copies.arrive`)."""
    remote_copies.start(_local_files(resolver, delegates))


class DelegateBlobs:
    """A cache of opened delegates; close() releases every file."""

    def __init__(self, resolver: FileResolver):
        self.resolver = resolver
        self.open: dict[Hashable, Blob | None] = {}

    def get(self, delegate: StreamHandle) -> Blob | None:
        key = delegate_key(self.resolver, delegate)
        if key not in self.open:
            self.open[key] = open_delegate(self.resolver, delegate)
        return self.open[key]

    def close(self) -> None:
        for blob in self.open.values():
            if blob is not None:
                blob.close()
