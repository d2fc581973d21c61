"""Record rules: ``record-length``, ``record-tag``, ``record-truncated`` — the framer's faults along one logical
channel (or one input part framed alone), as findings located in the file and byte where each starts."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass

from spillway.formats.channel_file import Blob
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
