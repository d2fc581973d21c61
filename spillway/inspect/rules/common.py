"""What every rule family speaks in: a finding with the channel handles it condemns, a located channel handle,
and a channel-state blob with its chunk map."""

from __future__ import annotations

from array import array
from collections.abc import Mapping
from dataclasses import dataclass, field

from spillway.formats.channel_file import Blob, ChunkMap, read_chunk_header
from spillway.inspect.channels import ChannelKey, channel_key
from spillway.inspect.findings import Finding
from spillway.model.checkpoint import ChannelHandle, OperatorState


@dataclass(frozen=True, slots=True)
class Flagged:
    """A finding, and the channel handles whose bytes it says cannot be trusted (if it is an error)."""

    finding: Finding
    keys: tuple[ChannelKey, ...] = ()


@dataclass
class Located:
    """A channel handle with the operator that holds it; ``plan_names``: a bound plan's names (``JobBinding.names``)."""

    operator: OperatorState
    handle: ChannelHandle
    plan_names: Mapping[str, str] | None = None

    @property
    def key(self) -> ChannelKey:
        return channel_key(self.operator, self.handle)

    def label(self) -> str:
        return self.handle.label()

    def operator_label(self) -> str:
        return self.operator.label(self.plan_names)

    def finding(self, rule: str, message: str, file: str | None = None, offset: int | None = None) -> Finding:
        """A finding located at this handle (operator, subtask, channel) and, if given, in ``file``."""
        return Finding(
            rule,
            message,
            operator=self.operator_label(),
            subtask=self.handle.subtask_index,
            channel=self.label(),
            file=file,
            offset=offset,
        )


@dataclass
class ChannelBlob:
    """One channel-state blob (a file, a range of a shared file, inline bytes) as validate found it."""

    blob: Blob | None  # None: not read (not a byte source, missing, not local)
    chunks: ChunkMap  # offset of each chunk's length field -> payload length
    complete: bool  # the chunk chain was walked to the end without a break
    display: str
    fault: Finding | None = None  # an error that makes every handle in this blob untrustworthy
    also: list[Finding] = field(default_factory=list)  # earlier such errors (a short file, then its broken chain)

    @property
    def short(self) -> bool:
        """The blob's file is shorter than its handles need (a file-size finding): chunks past its end are
        missing because of that, and are not reported one by one."""
        return any(f is not None and f.rule == "file-size" for f in (self.fault, *self.also))

    def length_at(self, offset: int) -> int:
        """The payload length of the chunk whose length field is at ``offset``, read from the blob (for offsets
        the chunk walk did not reach); raises ``BlobError`` when there is no such chunk."""
        assert self.blob is not None
        return read_chunk_header(self.blob, offset).length


class Claims:
    """Which handle claims each chunk of one blob: an owner number per chunk (-1: none), 4 bytes a chunk; offsets
    that start no chunk but were claimed anyway (each is a finding) on the side."""

    def __init__(self, chunks: ChunkMap) -> None:
        self.chunks = chunks
        self.owner = array("i", [-1]) * len(chunks)
        self.handles: list[Located] = []
        self.elsewhere: dict[int, Located] = {}  # claimed offsets where no chunk starts

    def claim(self, positions: array[int], x: Located) -> int | None:
        """The usual case at once: if every one of the chunks at ``positions`` is unclaimed and none repeats, they
        become ``x``'s and their payload bytes are returned; else None and nothing changes."""
        from spillway.formats.native import claim

        # A few chunks cost less here than the C call's argument conversion (as ``ChunkMap.indices``).
        paid = claim(self.owner, positions, len(self.handles), self.chunks.lengths) if len(positions) > 16 else None
        if paid is None:
            if len(set(positions)) != len(positions) or not self.free(positions):
                return None  # (or no native library: the same answer here)
            self.take(positions, x)
            return self.chunks.payload(positions)
        self.handles.append(x)
        return paid

    def free(self, positions: array[int]) -> bool:
        owner = self.owner
        return all(owner[i] < 0 for i in positions)

    def take(self, positions: array[int], x: Located) -> None:
        who = len(self.handles)
        self.handles.append(x)
        owner = self.owner
        for i in positions:
            owner[i] = who

    def get(self, offset: int) -> Located | None:
        i = self.chunks.index(offset)
        if i < 0:
            return self.elsewhere.get(offset)
        return self.handles[self.owner[i]] if self.owner[i] >= 0 else None

    def set(self, offset: int, x: Located) -> None:
        i = self.chunks.index(offset)
        if i < 0:
            self.elsewhere[offset] = x
            return
        if not self.handles or self.handles[-1] is not x:
            self.handles.append(x)
        self.owner[i] = len(self.handles) - 1

    def unclaimed(self) -> list[int]:
        """Positions of the chunks no handle claims."""
        if -1 not in self.owner:
            return []
        return [i for i, who in enumerate(self.owner) if who < 0]
