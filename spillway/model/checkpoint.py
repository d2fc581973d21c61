"""The checkpoint model every layer above ``spillway.formats`` works with.

Plain dataclasses, one per thing Flink has a class for. Fields that exist only so a checkpoint can be
written back byte for byte (flags Flink accepts in several spellings, legacy fields) are kept too,
with defaults that match what Flink writes, so code building new checkpoints can ignore them.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from enum import Enum
from typing import ClassVar, Literal, TypeAlias

# --------------------------------------------------------------------------------------------------
# Stream handles: where bytes live


@dataclass(slots=True)
class ByteStreamHandle:
    """Bytes inlined into ``_metadata``. ``name`` is an identifier, never a file to open."""

    name: str
    data: bytes
    flink_class: ClassVar[str] = "ByteStreamStateHandle"

    @property
    def state_size(self) -> int:
        return len(self.data)


@dataclass(slots=True)
class FileHandle:
    """A whole file, by absolute path as Flink wrote it (``file:/…``, ``s3://…``)."""

    path: str
    state_size: int
    flink_class: ClassVar[str] = "FileStateHandle"


@dataclass(slots=True)
class RelativeFileHandle:
    """A file in the checkpoint's own directory, named relative to it."""

    relative_path: str
    state_size: int
    flink_class: ClassVar[str] = "RelativeFileStateHandle"


@dataclass(slots=True)
class SegmentFileHandle:
    """Bytes ``[start_pos, start_pos + state_size)`` of a shared physical file (file merging)."""

    path: str
    start_pos: int
    state_size: int
    scope: int  # 0 = EXCLUSIVE, 1 = SHARED
    logical_file_id: str
    flink_class: ClassVar[str] = "SegmentFileStateHandle"

    @property
    def scope_name(self) -> str:
        return {0: "EXCLUSIVE", 1: "SHARED"}.get(self.scope, f"UNKNOWN({self.scope})")


@dataclass(slots=True)
class EmptySegmentFileHandle:
    flink_class: ClassVar[str] = "EmptySegmentFileStateHandle"

    @property
    def state_size(self) -> int:
        return 0


# --------------------------------------------------------------------------------------------------
# Keyed handles


@dataclass(slots=True)
class KeyGroupRange:
    start: int
    count: int

    @property
    def last(self) -> int:
        return self.start + self.count - 1

    def as_pair(self) -> list[int]:
        # Flink normalises every empty range to EMPTY_KEY_GROUP_RANGE = [0, -1].
        return [self.start, self.last] if self.count > 0 else [0, -1]

    def __contains__(self, key_group: int) -> bool:
        return self.start <= key_group <= self.last


@dataclass(slots=True)
class KeyGroupsHandle:
    """Full-snapshot keyed state: one stream, an offset per key group.

    ``code`` 12 = KeyGroupsStateHandle (with id), 3 = legacy (no id), 7 = savepoint handle (no id).
    """

    key_groups: KeyGroupRange
    offsets: list[int]
    delegate: StreamHandle
    state_handle_id: str | None = None
    code: int = 12

    @property
    def flink_class(self) -> str:
        return "KeyGroupsSavepointStateHandle" if self.code == 7 else "KeyGroupsStateHandle"

    @property
    def state_size(self) -> int:
        return stream_size(self.delegate)


@dataclass(slots=True)
class LocalPathHandle:
    local_path: str
    handle: StreamHandle


@dataclass(slots=True)
class IncrementalHandle:
    """RocksDB incremental snapshot: shared SST files and private MANIFEST/OPTIONS/CURRENT."""

    checkpoint_id: int
    backend_identifier: str
    key_groups: KeyGroupRange
    checkpointed_size: int | None  # None for the legacy code 5
    meta_state_handle: StreamHandle
    shared_state: list[LocalPathHandle]
    private_state: list[LocalPathHandle]
    state_handle_id: str | None = None  # None for the legacy code 5
    flink_class: ClassVar[str] = "IncrementalRemoteKeyedStateHandle"

    @property
    def code(self) -> int:
        return 5 if self.checkpointed_size is None else 11

    @property
    def state_size(self) -> int:
        return (
            stream_size(self.meta_state_handle)
            + sum(stream_size(h.handle) for h in self.shared_state)
            + sum(stream_size(h.handle) for h in self.private_state)
        )


@dataclass(slots=True)
class ChangelogHandle:
    key_groups: KeyGroupRange
    checkpointed_size: int
    materialized: list[KeyedHandle]
    non_materialized: list[KeyedHandle]
    materialization_id: int
    checkpoint_id: int | None  # None for the legacy code 8
    state_handle_id: str
    flink_class: ClassVar[str] = "ChangelogStateBackendHandleImpl"

    @property
    def code(self) -> int:
        return 8 if self.checkpoint_id is None else 14

    @property
    def state_size(self) -> int:
        return sum(keyed_size(h) for h in self.materialized) + sum(keyed_size(h) for h in self.non_materialized)


@dataclass(slots=True)
class ChangelogByteIncrementHandle:
    key_groups: KeyGroupRange
    from_sequence: int
    to_sequence: int
    changes: list[tuple[int, bytes]]
    state_handle_id: str
    flink_class: ClassVar[str] = "InMemoryChangelogStateHandle"

    @property
    def state_size(self) -> int:
        return sum(len(data) for _, data in self.changes)


@dataclass(slots=True)
class ChangelogFileIncrementHandle:
    key_groups: KeyGroupRange
    handles: list[tuple[int, StreamHandle]]  # (offset, handle)
    size: int
    checkpointed_size: int
    state_handle_id: str
    storage_identifier: str | None  # None for the legacy code 10
    flink_class: ClassVar[str] = "ChangelogStateHandleStreamImpl"

    @property
    def code(self) -> int:
        return 10 if self.storage_identifier is None else 13

    @property
    def state_size(self) -> int:
        return self.size


# --------------------------------------------------------------------------------------------------
# Operator (partitionable) state


class DistributionMode(Enum):
    SPLIT_DISTRIBUTE = 0
    UNION = 1
    BROADCAST = 2


@dataclass(slots=True)
class OperatorStateEntry:
    name: str
    mode: int  # DistributionMode value; kept as an int so unknown values survive a round trip
    offsets: list[int]

    @property
    def mode_name(self) -> str:
        try:
            return DistributionMode(self.mode).name
        except ValueError:
            return f"UNKNOWN({self.mode})"


@dataclass(slots=True)
class FileMergingDirs:
    task_owned_dir: str
    shared_dir: str
    is_empty: bool


@dataclass(slots=True)
class OperatorStreamHandle:
    states: list[OperatorStateEntry]
    delegate: StreamHandle
    file_merging: FileMergingDirs | None = None

    @property
    def flink_class(self) -> str:
        if self.file_merging is None:
            return "OperatorStreamStateHandle"
        if self.file_merging.is_empty:
            return "EmptyFileMergingOperatorStreamStateHandle"
        return "FileMergingOperatorStreamStateHandle"

    @property
    def state_size(self) -> int:
        return stream_size(self.delegate)


# --------------------------------------------------------------------------------------------------
# Channel state (unaligned checkpoints)

ChannelSide = Literal["input", "output"]


@dataclass(slots=True)
class ChannelInfo:
    """(gate, input channel) on the input side; (partition, subpartition) on the output side."""

    side: ChannelSide
    a: int
    b: int

    def label(self) -> str:
        return f"in({self.a},{self.b})" if self.side == "input" else f"out({self.a},{self.b})"


@dataclass(slots=True)
class ChannelHandle:
    """One channel's chunks inside ``delegate``: offsets of the chunk length fields, total size."""

    side: ChannelSide
    subtask_index: int
    a: int
    b: int
    offsets: list[int]
    state_size: int
    delegate: StreamHandle

    @property
    def flink_class(self) -> str:
        return "InputChannelStateHandle" if self.side == "input" else "ResultSubpartitionStateHandle"

    @property
    def info(self) -> ChannelInfo:
        return ChannelInfo(self.side, self.a, self.b)


@dataclass(slots=True)
class MergedChannelEntry:
    a: int
    b: int
    state_size: int
    offsets: list[int]


@dataclass(slots=True)
class MergedChannelHandle:
    """Several channels of one subtask sharing one delegate (metadata V6+)."""

    side: ChannelSide
    subtask_index: int
    state_size: int
    delegate: StreamHandle
    channels: list[MergedChannelEntry]

    @property
    def flink_class(self) -> str:
        return "MergedInputChannelStateHandle" if self.side == "input" else "MergedResultSubpartitionStateHandle"

    def unmerged(self) -> list[ChannelHandle]:
        return [
            ChannelHandle(self.side, self.subtask_index, c.a, c.b, c.offsets, c.state_size, self.delegate)
            for c in self.channels
        ]


StreamHandle: TypeAlias = (
    ByteStreamHandle
    | FileHandle
    | RelativeFileHandle
    | SegmentFileHandle
    | EmptySegmentFileHandle
    | KeyGroupsHandle
    | None
)
KeyedHandle: TypeAlias = (
    KeyGroupsHandle | IncrementalHandle | ChangelogHandle | ChangelogByteIncrementHandle | ChangelogFileIncrementHandle
)
AnyChannelHandle: TypeAlias = ChannelHandle | MergedChannelHandle


def stream_size(handle: StreamHandle) -> int:
    return 0 if handle is None else handle.state_size


def keyed_size(handle: KeyedHandle | None) -> int:
    return 0 if handle is None else handle.state_size


def channel_handles(handles: list[AnyChannelHandle]) -> list[ChannelHandle]:
    """Per-channel view: merged handles are unmerged, in their stored order."""
    out: list[ChannelHandle] = []
    for h in handles:
        out.extend(h.unmerged() if isinstance(h, MergedChannelHandle) else (h,))
    return out


# --------------------------------------------------------------------------------------------------
# Checkpoint structure


@dataclass(slots=True)
class SubtaskState:
    index: int
    finished: bool = False
    managed_operator_state: OperatorStreamHandle | None = None
    raw_operator_state: OperatorStreamHandle | None = None
    managed_keyed_state: KeyedHandle | None = None
    raw_keyed_state: KeyedHandle | None = None
    input_channel_state: list[AnyChannelHandle] = field(default_factory=list)
    result_subpartition_state: list[AnyChannelHandle] = field(default_factory=list)
    ref_checkpoint_id: int | None = None
    # As read, for byte-exact rewriting (None: derive from the handle, as Flink does when writing).
    managed_operator_present: int | None = None
    raw_operator_present: int | None = None
    ref_marker: int = 0
    legacy_duration: int = -1
    legacy_state_count: int = 0

    def has_state(self) -> bool:
        return bool(
            self.managed_operator_state
            or self.raw_operator_state
            or self.managed_keyed_state
            or self.raw_keyed_state
            or self.input_channel_state
            or self.result_subpartition_state
        )


@dataclass(slots=True)
class OperatorState:
    operator_id: str  # 32 lowercase hex
    parallelism: int
    max_parallelism: int
    name: str | None = None
    uid: str | None = None
    fully_finished: bool = False
    coordinator_state: ByteStreamHandle | None = None
    subtasks: list[SubtaskState] = field(default_factory=list)  # file order
    chain_length: int = 1  # V2 only, ignored by Flink
    finished_marker: int = -1  # the negative subtask count of a fully finished operator, as read

    def subtask(self, index: int) -> SubtaskState | None:
        return next((s for s in self.subtasks if s.index == index), None)

    def label(self) -> str:
        return self.uid or self.name or self.operator_id


@dataclass(slots=True)
class MasterState:
    name: str
    version: int
    payload: bytes


@dataclass(slots=True)
class CheckpointProperties:
    discard_cancelled: bool
    discard_failed: bool
    discard_finished: bool
    discard_subsumed: bool
    discard_suspended: bool
    forced: bool
    unclaimed: bool
    checkpoint_type: dict[str, str]

    @property
    def is_savepoint(self) -> bool:
        return self.checkpoint_type.get("class") == "SavepointType"


@dataclass(slots=True)
class Checkpoint:
    format_version: int
    checkpoint_id: int
    operators: list[OperatorState]
    master_states: list[MasterState] = field(default_factory=list)
    properties: CheckpointProperties | None = None
    # The Java-serialized properties exactly as read (V4+); rewritten unchanged.
    properties_raw: bytes | None = None
    properties_note: str | None = None  # why ``properties`` could not be decoded, if it could not

    def operator(self, operator_id: str) -> OperatorState | None:
        return next((o for o in self.operators if o.operator_id == operator_id), None)
