"""Channel-state blob rules: ``channel-header``, ``chunk-chain`` (the file), ``chunk-offset``, ``chunk-overlap``,
``channel-size``, ``inline-channel`` (each handle's chunks), ``unclaimed-chunks`` (chunks no handle refers to)."""

from __future__ import annotations

from array import array
from collections.abc import Generator, Iterator

from spillway.formats.channel_file import HEADER_SIZE, LENGTH_SIZE, SERIALIZATION_VERSION, BlobError
from spillway.inspect.findings import Finding
from spillway.inspect.rules.common import ChannelBlob, Claims, Flagged, Located
from spillway.model.checkpoint import ByteStreamHandle


def no_byte_source(who: Located, kind: str) -> Finding:
    return who.finding("chunk-offset", f"channel state with a {kind} delegate")


def header_finding(version: int | BlobError, display: str, offset: int) -> Finding | None:
    """``channel-header``: the blob is too short for a header, or its serialization version is not Flink's."""
    if isinstance(version, BlobError):
        return Finding("channel-header", f"too short for a header: {version}", file=display, offset=offset)
    if version != SERIALIZATION_VERSION:
        message = f"serialization version {version}, expected {SERIALIZATION_VERSION}"
        return Finding("channel-header", message, file=display, offset=offset)
    return None


def chain_finding(error: BlobError, display: str, offset: int) -> Finding:
    return Finding("chunk-chain", f"chunk chain breaks: {error}", file=display, offset=offset)


def handle_chunk_findings(
    x: Located, info: ChannelBlob, claimed: Claims, positions: array[int] | None
) -> Iterator[Flagged]:
    """The chunks of one handle: each offset starts a chunk no other handle claims (``claimed``, which this
    updates), and the handle's size is what its chunks add up to. ``positions``: where its offsets are in the
    chunk map (``ChunkMap.indices``), None if one starts no chunk."""
    h, blob = x.handle, info.blob
    assert blob is not None
    offsets = h.offsets
    footprint: int
    paid = claimed.claim(positions, x) if positions is not None else None
    if paid is not None:
        # The usual case, found in C and arrays: every offset starts a chunk nobody claimed.
        footprint = paid + LENGTH_SIZE * len(offsets)
    else:
        footprint = yield from _offset_findings(x, info, claimed)
    inline = isinstance(h.delegate, ByteStreamHandle)
    expected = blob.size if inline else footprint
    if info.short and footprint < h.state_size:
        return  # its chunks past the end are missing: the file-size finding says so, once for the file
    if h.state_size != expected:
        what = "the inline blob's length" if inline else "the sum of its chunks"
        finding = x.finding(
            "inline-channel" if inline else "channel-size",
            f"handle size {h.state_size} != {what} ({expected})",
            file=info.display,
            offset=blob.physical(h.offsets[0]) if h.offsets else None,
        )
        yield Flagged(finding, (x.key,))


def _offset_findings(x: Located, info: ChannelBlob, claimed: Claims) -> Generator[Flagged, None, int]:
    """Each offset on its own, with a finding for every one that is out of bounds, not a chunk start, or
    claimed twice; returns the handle's footprint as far as it can be measured."""
    h, blob = x.handle, info.blob
    assert blob is not None
    damage = (x.key,)
    total = 0
    for off in h.offsets:
        length = info.chunks.get(off)
        if length is None:
            if off >= blob.size and info.short:
                continue  # past the end of a file cut short: the file-size finding says so, once
            if off < HEADER_SIZE or off >= blob.size:
                message = f"offset {off} outside the {blob.size}-byte channel state"
                offset = blob.physical(off) if off >= 0 else None
                yield Flagged(x.finding("chunk-offset", message, file=info.display, offset=offset), damage)
                continue
            if info.complete:
                message = f"offset {off} is not the start of a chunk"
                yield Flagged(x.finding("chunk-offset", message, info.display, blob.physical(off)), damage)
            try:  # still measure it, so the size check stays meaningful
                length = info.length_at(off)
            except BlobError as exc:
                if not info.short:  # in a short file: the chunk the file was cut in (file-size says so)
                    message = f"offset {off}: {exc}"
                    yield Flagged(x.finding("chunk-offset", message, info.display, blob.physical(off)), damage)
                continue
        other = claimed.get(off)
        if other is not None:
            message = (
                f"chunk at {off} also claimed by {other.operator_label()}#{other.handle.subtask_index} {other.label()}"
            )
            # Which of the two owns the chunk is unknown: both are suspect.
            yield Flagged(x.finding("chunk-overlap", message, info.display, blob.physical(off)), (x.key, other.key))
        claimed.set(off, x)
        total += LENGTH_SIZE + length
    return total


def unclaimed_finding(info: ChannelBlob, claimed: Claims | None) -> Finding | None:
    """``unclaimed-chunks``: chunks of a fully walked blob that no handle refers to."""
    if info.blob is None or not info.complete:
        return None
    unclaimed = claimed.unclaimed() if claimed is not None else list(range(len(info.chunks)))
    if not unclaimed:
        return None
    size = sum(LENGTH_SIZE + info.chunks.lengths[i] for i in unclaimed)
    message = f"{len(unclaimed)} chunks ({size} bytes) belong to no handle"
    return Finding(
        "unclaimed-chunks", message, file=info.display, offset=info.blob.physical(info.chunks.offsets[unclaimed[0]])
    )
