"""Record rules: ``record-length``, ``record-tag``, ``record-truncated`` — the framer's faults along one logical
channel (or one input part framed alone), as findings located in the file and byte where each starts. Where a
whole channel's framing broke and one damaged length field explains it (``damaged_length.locate``), the
faults from that field on become one finding at that field, saying what Flink would do with the element."""

from __future__ import annotations

from bisect import bisect_right
from collections.abc import Iterator
from dataclasses import dataclass, replace

from spillway.formats.channel_file import Blob
from spillway.formats.damaged_length import Location, flink_reading, recovered_buffers
from spillway.formats.record_framing import FramingFault
from spillway.inspect.channels import ChannelKey
from spillway.inspect.findings import Finding
from spillway.inspect.rules.common import Flagged

# Said after a record-length fault of an input part framed alone: what the "bytes left" were.
ALONE_CONTEXT = "; framed without its output side, the bytes left are this part's and all output-side state's"
RULE_OF_FAULT = {"length": "record-length", "tag": "record-tag", "size": "record-tag"}  # else record-truncated


@dataclass(frozen=True, slots=True)
class Piece:
    """One piece fed to the framer: the part it belongs to, and where its bytes start."""

    part: str  # "operator#subtask channel"
    blob: Blob
    position: int  # blob-relative
    chunk: int = -1  # offset of the chunk it is part of (Flink cuts its recovery buffers from one chunk each)


@dataclass(frozen=True, slots=True)
class FramedChannel:
    """What was framed: a whole logical channel (``complete``) or an input part alone."""

    label: str
    operator: str  # the first part's operator
    subtask: int  # and subtask
    keys: tuple[ChannelKey, ...]  # the parts, in stream order
    complete: bool


def record_findings(channel: FramedChannel, faults: list[FramingFault], pieces: list[Piece]) -> Iterator[Flagged]:
    for fault in faults:
        piece = pieces[fault.piece] if fault.piece < len(pieces) else None
        context = "" if channel.complete or fault.kind != "length" else ALONE_CONTEXT
        finding = Finding(
            RULE_OF_FAULT.get(fault.kind, "record-truncated"),
            f"{fault.message} (in {piece.part if piece else '?'}){context}",
            operator=channel.operator,
            subtask=channel.subtask,
            channel=channel.label,
            file=piece.blob.name if piece else None,
            offset=piece.blob.physical(piece.position + fault.position) if piece else None,
        )
        yield Flagged(finding, channel.keys)


@dataclass(frozen=True, slots=True)
class ReadBack:
    """A whole logical channel read back to locate a damaged length field: where each piece starts in it."""

    location: Location
    starts: list[int]  # stream position of each piece
    lengths: list[int]  # bytes of each piece
    buffer_size: int  # Flink's network buffer size the verdict is for


def damaged_findings(
    channel: FramedChannel, faults: list[FramingFault], pieces: list[Piece], back: ReadBack
) -> Iterator[Flagged]:
    """``record_findings`` with the faults a damaged length field caused folded into one finding at that field;
    where no single field explains them, the first fault says so and stays where the framing broke."""
    loc, starts = back.location, back.starts

    def stream(fault: FramingFault) -> int:
        return starts[fault.piece] + fault.position if fault.piece < len(starts) else 1 << 62

    damage = loc.damage
    if damage is None:
        first = min(faults, key=stream, default=None)
        if first is None or (first.kind != "length" and not loc.candidates):
            yield from record_findings(channel, faults, pieces)
            return
        if loc.candidates:
            here = pieces[first.piece].blob.name if first.piece < len(pieces) else None
            shown = ", ".join(
                f"element {d.index} at {_where(d.position, starts, pieces, here)}" for d in loc.candidates
            )
            why = f"{len(loc.candidates)} corrected length fields frame the rest of the channel equally well ({shown})"
        elif not loc.searched:
            why = "the search for it gave up (too many positions to try)"
        else:
            why = "no single corrected length field lets the rest of the channel frame cleanly"
        noted = replace(first, message=f"{first.message}; framing broke here, the damaged field is not known: {why}")
        yield from record_findings(channel, [noted if f is first else f for f in faults], pieces)
        return
    yield from record_findings(channel, [f for f in faults if stream(f) < damage.position], pieces)
    index = bisect_right(starts, damage.position) - 1
    piece = pieces[index]
    chunks: list[tuple[int, int]] = []
    for i, p in enumerate(pieces):
        if i and (p.part, p.blob.name, p.chunk) == (pieces[i - 1].part, pieces[i - 1].blob.name, pieces[i - 1].chunk):
            chunks[-1] = (chunks[-1][0], chunks[-1][1] + back.lengths[i])
        else:
            chunks.append((starts[i], back.lengths[i]))
    end = starts[-1] + back.lengths[-1] if starts else 0
    reading = flink_reading(damage, recovered_buffers(chunks, back.buffer_size), end)
    at_field = [f for f in faults if stream(f) == damage.position]
    if at_field:
        broke = at_field[0].message
    else:
        further = loc.broke_at - damage.position
        broke = f"framing broke {further} bytes further on, at {_where(loc.broke_at, starts, pieces, piece.blob.name)}"
    # A correction longer than the length read also explains bytes overwritten after the element's claimed end.
    instead = (
        f", or the {damage.fits - damage.read} bytes after it were overwritten" if damage.read < damage.fits else ""
    )
    message = (
        f"element {damage.index} of the channel has a damaged length field: {damage.read} read, {damage.fits} fits"
        f" (the only one whose correction lets the rest of the channel frame cleanly{instead}); {broke}"
        f" (in {piece.part}). With {back.buffer_size}-byte network buffers, {reading.text}"
    )
    finding = Finding(
        "record-length",
        message,
        operator=channel.operator,
        subtask=channel.subtask,
        channel=channel.label,
        file=piece.blob.name,
        offset=piece.blob.physical(piece.position + damage.position - starts[index]),
    )
    yield Flagged(finding, channel.keys)


def _where(position: int, starts: list[int], pieces: list[Piece], here: str | None = None) -> str:
    """``offset N of FILE`` of a position in the channel (``offset N`` if FILE is ``here``)."""
    index = bisect_right(starts, position) - 1
    piece = pieces[index]
    offset = piece.blob.physical(piece.position + position - starts[index])
    return f"offset {offset}" if piece.blob.name == here else f"offset {offset} of {piece.blob.name}"
