"""The checkpoint model every layer above ``spillway.formats`` works with.

Plain dataclasses, one per thing Flink has a class for. Fields that exist only so a checkpoint can be
written back byte for byte (flags Flink accepts in several spellings, legacy fields) are kept too,
with defaults that match what Flink writes, so code building new checkpoints can ignore them.

Every state handle has the same small surface, so that one traversal (``spillway.model.walk``) serves
every kind: ``code`` (Flink's type code, docs/format/handles.md), ``flink_class``, ``state_size``,
``children()`` (the handles it holds, by role, ``None`` for an empty slot) and ``with_children(...)``
(a copy holding other children, same slots in the same order). Leaf stream handles say where their
bytes are: inline (``ByteStreamHandle``) or in a file (``file_name``, ``relative``, ``start_pos``,
``whole_file`` on every file-backed kind).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from enum import Enum
from typing import TYPE_CHECKING, Any, ClassVar, Literal, Protocol, TypeAlias, TypeGuard

from spillway.flink.features import FormatFeatures, format_features
from spillway.model.handle_codes import (
    BYTE_STREAM,
    CHANGELOG,
    CHANGELOG_BYTE_INCREMENT,
    CHANGELOG_FILE_INCREMENT,
    CHANGELOG_FILE_INCREMENT_V2,
    CHANGELOG_V2,
    CHANNEL_FLINK_CLASS,
    EMPTY_FILE_MERGING_OPERATOR_CLASS,
    EMPTY_SEGMENT_FILE,
    FILE,
    FLINK_CLASS,
    INCREMENTAL_KEY_GROUPS,
    INCREMENTAL_KEY_GROUPS_V2,
    INPUT_CHANNEL,
    KEY_GROUPS_V2,
    MERGED_INPUT_CHANNEL,
    MERGED_RESULT_SUBPARTITION,
    PARTITIONABLE_OPERATOR,
    RELATIVE_FILE,
    RESULT_SUBPARTITION,
    SEGMENT_FILE,
    SEGMENT_PARTITIONABLE_OPERATOR,
)

if TYPE_CHECKING:
    from typing_extensions import Self

# A handle's children: (role, child) per slot; the child is None for an empty slot.
Children: TypeAlias = "Sequence[tuple[str, Handle | None]]"
NO_CHILDREN: tuple[tuple[str, Handle | None], ...] = ()


class HandleKindError(TypeError):
    """A handle of one kind was put where Flink allows only others (e.g. a keyed handle as a delegate)."""


# --------------------------------------------------------------------------------------------------
# Stream handles: where bytes live


@dataclass(slots=True)
class ByteStreamHandle:
    """Bytes inlined into ``_metadata``. ``name`` is an identifier, never a file to open."""

    name: str
    data: bytes
    code: ClassVar[int] = BYTE_STREAM
    flink_class: ClassVar[str] = FLINK_CLASS[BYTE_STREAM]

    @property
    def state_size(self) -> int:
        return len(self.data)

    def children(self) -> Children:
        return NO_CHILDREN

    def with_children(self, children: Sequence[Handle | None]) -> Self:
        return self


@dataclass(slots=True)
class FileHandle:
    """A whole file, by absolute path as Flink wrote it (``file:/…``, ``s3://…``)."""

    path: str
    state_size: int
    code: ClassVar[int] = FILE
    flink_class: ClassVar[str] = FLINK_CLASS[FILE]
    relative: ClassVar[bool] = False
    whole_file: ClassVar[bool] = True
    start_pos: ClassVar[int] = 0

    @property
    def file_name(self) -> str:
        return self.path

    def with_file_name(self, name: str) -> FileHandle:
        return FileHandle(name, self.state_size)

    def children(self) -> Children:
        return NO_CHILDREN

    def with_children(self, children: Sequence[Handle | None]) -> Self:
        return self


@dataclass(slots=True)
class RelativeFileHandle:
    """A file in the checkpoint's own directory, named relative to it."""

    relative_path: str
    state_size: int
    code: ClassVar[int] = RELATIVE_FILE
    flink_class: ClassVar[str] = FLINK_CLASS[RELATIVE_FILE]
    relative: ClassVar[bool] = True
    whole_file: ClassVar[bool] = True
    start_pos: ClassVar[int] = 0

    @property
    def file_name(self) -> str:
        return self.relative_path

    def with_file_name(self, name: str) -> RelativeFileHandle:
        return RelativeFileHandle(name, self.state_size)

    def children(self) -> Children:
        return NO_CHILDREN

    def with_children(self, children: Sequence[Handle | None]) -> Self:
        return self


@dataclass(slots=True)
class SegmentFileHandle:
    """Bytes ``[start_pos, start_pos + state_size)`` of a shared physical file (file merging)."""

    path: str
    start_pos: int
    state_size: int
    scope: int  # 0 = EXCLUSIVE, 1 = SHARED
    logical_file_id: str
    code: ClassVar[int] = SEGMENT_FILE
    flink_class: ClassVar[str] = FLINK_CLASS[SEGMENT_FILE]
    relative: ClassVar[bool] = False
    whole_file: ClassVar[bool] = False

    @property
    def file_name(self) -> str:
        return self.path

    def with_file_name(self, name: str) -> SegmentFileHandle:
        return replace(self, path=name)

    @property
    def scope_name(self) -> str:
        return {0: "EXCLUSIVE", 1: "SHARED"}.get(self.scope, f"UNKNOWN({self.scope})")

    def children(self) -> Children:
        return NO_CHILDREN

    def with_children(self, children: Sequence[Handle | None]) -> Self:
        return self


@dataclass(slots=True)
class EmptySegmentFileHandle:
    code: ClassVar[int] = EMPTY_SEGMENT_FILE
    flink_class: ClassVar[str] = FLINK_CLASS[EMPTY_SEGMENT_FILE]

    @property
    def state_size(self) -> int:
        return 0

    def children(self) -> Children:
        return NO_CHILDREN

    def with_children(self, children: Sequence[Handle | None]) -> Self:
        return self


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


@dataclass(slots=True)
class KeyGroupsHandle:
    """Full-snapshot keyed state: one stream, an offset per key group.

    ``code`` 12 = KeyGroupsStateHandle (with id), 3 = legacy (no id), 7 = savepoint handle (no id).
    A legacy handle (3) may also stand where a stream handle is expected.
    """

    key_groups: KeyGroupRange
    offsets: list[int]
    delegate: StreamHandle
    state_handle_id: str | None = None
    code: int = KEY_GROUPS_V2

    @property
    def flink_class(self) -> str:
        return FLINK_CLASS[self.code]

    @property
    def state_size(self) -> int:
        return stream_size(self.delegate)

    def children(self) -> Children:
        return (("delegate", self.delegate),)

    def with_children(self, children: Sequence[Handle | None]) -> Self:
        (delegate,) = children
        return replace(self, delegate=as_stream(delegate))


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
    flink_class: ClassVar[str] = FLINK_CLASS[INCREMENTAL_KEY_GROUPS]

    @property
    def code(self) -> int:
        return INCREMENTAL_KEY_GROUPS if self.checkpointed_size is None else INCREMENTAL_KEY_GROUPS_V2

    @property
    def state_size(self) -> int:
        return (
            stream_size(self.meta_state_handle)
            + sum(stream_size(h.handle) for h in self.shared_state)
            + sum(stream_size(h.handle) for h in self.private_state)
        )

    def children(self) -> Children:
        out: list[tuple[str, Handle | None]] = [("meta", self.meta_state_handle)]
        out += [("shared:" + i.local_path, i.handle) for i in self.shared_state]
        out += [("private:" + i.local_path, i.handle) for i in self.private_state]
        return out

    def with_children(self, children: Sequence[Handle | None]) -> Self:
        n = len(self.shared_state)
        if len(children) != 1 + n + len(self.private_state):
            raise ValueError(f"{self.flink_class} holds {1 + n + len(self.private_state)} handles, got {len(children)}")
        return replace(
            self,
            meta_state_handle=as_stream(children[0]),
            shared_state=[
                LocalPathHandle(i.local_path, as_stream(c))
                for i, c in zip(self.shared_state, children[1 : 1 + n], strict=True)
            ],
            private_state=[
                LocalPathHandle(i.local_path, as_stream(c))
                for i, c in zip(self.private_state, children[1 + n :], strict=True)
            ],
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
    flink_class: ClassVar[str] = FLINK_CLASS[CHANGELOG]

    @property
    def code(self) -> int:
        return CHANGELOG if self.checkpoint_id is None else CHANGELOG_V2

    @property
    def state_size(self) -> int:
        return sum(keyed_size(h) for h in self.materialized) + sum(keyed_size(h) for h in self.non_materialized)

    def children(self) -> Children:
        return (
            *[("materialized", h) for h in self.materialized],
            *[("non_materialized", h) for h in self.non_materialized],
        )

    def with_children(self, children: Sequence[Handle | None]) -> Self:
        n = len(self.materialized)
        if len(children) != n + len(self.non_materialized):
            raise ValueError(f"{self.flink_class} holds {n + len(self.non_materialized)} handles, got {len(children)}")
        return replace(
            self,
            materialized=[as_nested_keyed(c) for c in children[:n]],
            non_materialized=[as_nested_keyed(c) for c in children[n:]],
        )


@dataclass(slots=True)
class ChangelogByteIncrementHandle:
    key_groups: KeyGroupRange
    from_sequence: int
    to_sequence: int
    changes: list[tuple[int, bytes]]
    state_handle_id: str
    code: ClassVar[int] = CHANGELOG_BYTE_INCREMENT
    flink_class: ClassVar[str] = FLINK_CLASS[CHANGELOG_BYTE_INCREMENT]

    @property
    def state_size(self) -> int:
        return sum(len(data) for _, data in self.changes)

    def children(self) -> Children:
        return NO_CHILDREN

    def with_children(self, children: Sequence[Handle | None]) -> Self:
        return self


@dataclass(slots=True)
class ChangelogFileIncrementHandle:
    key_groups: KeyGroupRange
    handles: list[tuple[int, StreamHandle]]  # (offset, handle)
    size: int
    checkpointed_size: int
    state_handle_id: str
    storage_identifier: str | None  # None for the legacy code 10
    flink_class: ClassVar[str] = FLINK_CLASS[CHANGELOG_FILE_INCREMENT]

    @property
    def code(self) -> int:
        return CHANGELOG_FILE_INCREMENT if self.storage_identifier is None else CHANGELOG_FILE_INCREMENT_V2

    @property
    def state_size(self) -> int:
        return self.size

    def children(self) -> Children:
        return tuple(("delegate", h) for _, h in self.handles)

    def with_children(self, children: Sequence[Handle | None]) -> Self:
        if len(children) != len(self.handles):
            raise ValueError(f"{self.flink_class} holds {len(self.handles)} handles, got {len(children)}")
        return replace(self, handles=[(o, as_stream(c)) for (o, _), c in zip(self.handles, children, strict=True)])


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
    """Operator state: one stream, the offsets of each named state's elements.

    ``code`` 4 = OperatorStreamStateHandle; 17 = the file-merging variants (``file_merging`` set).
    """

    states: list[OperatorStateEntry]
    delegate: StreamHandle
    file_merging: FileMergingDirs | None = None

    @property
    def code(self) -> int:
        return PARTITIONABLE_OPERATOR if self.file_merging is None else SEGMENT_PARTITIONABLE_OPERATOR

    @property
    def flink_class(self) -> str:
        if self.file_merging is not None and self.file_merging.is_empty:
            return EMPTY_FILE_MERGING_OPERATOR_CLASS
        return FLINK_CLASS[self.code]

    @property
    def state_size(self) -> int:
        return stream_size(self.delegate)

    def children(self) -> Children:
        return (("delegate", self.delegate),)

    def with_children(self, children: Sequence[Handle | None]) -> Self:
        (delegate,) = children
        return replace(self, delegate=as_stream(delegate))


# --------------------------------------------------------------------------------------------------
# Channel state (unaligned checkpoints)
#
# The input side names a channel by (gate index, input channel index), the output side by (partition
# index, subpartition index): Flink's InputChannelInfo and ResultSubpartitionInfo. ``info`` is that pair,
# ``label()`` its short form ``in(g,c)`` / ``out(p,s)``. ``code`` is the handle's type byte in the typed
# channel-handle layout (metadata V6+). Merged handles (V6+) hold several channels of one subtask
# that share one delegate; ``unmerged()`` gives them as single handles (a single handle: itself),
# ``channel_count`` how many (without building them).

ChannelSide = Literal["input", "output"]
KeepChannel: TypeAlias = Callable[[int, int], bool]  # (first, second index of the pair) -> keep?


class ChannelState(Protocol):
    """What single and merged channel handles of both sides have in common."""

    @property
    def side(self) -> ChannelSide: ...
    @property
    def subtask_index(self) -> int: ...
    @property
    def state_size(self) -> int: ...
    @property
    def delegate(self) -> StreamHandle: ...

    @property
    def channel_count(self) -> int: ...

    def unmerged(self) -> Sequence[ChannelHandle]: ...
    def kept(self, keep: KeepChannel) -> Self | None: ...


@dataclass(slots=True)
class InputChannelHandle:
    """One input channel's chunks inside ``delegate``: offsets of the chunk length fields, total size."""

    subtask_index: int
    gate_index: int
    input_channel_index: int
    offsets: list[int]
    state_size: int
    delegate: StreamHandle
    side: ClassVar[Literal["input"]] = "input"
    merged: ClassVar[bool] = False
    channel_count: ClassVar[int] = 1
    code: ClassVar[int] = INPUT_CHANNEL
    flink_class: ClassVar[str] = CHANNEL_FLINK_CLASS[INPUT_CHANNEL]

    @property
    def info(self) -> tuple[int, int]:
        return (self.gate_index, self.input_channel_index)

    def label(self) -> str:
        return f"in({self.gate_index},{self.input_channel_index})"

    def unmerged(self) -> tuple[InputChannelHandle]:
        return (self,)

    def kept(self, keep: KeepChannel) -> Self | None:
        return self if keep(self.gate_index, self.input_channel_index) else None

    def children(self) -> Children:
        return (("delegate", self.delegate),)

    def with_children(self, children: Sequence[Handle | None]) -> Self:
        (delegate,) = children
        return replace(self, delegate=as_stream(delegate))


@dataclass(slots=True)
class ResultSubpartitionHandle:
    """One result subpartition's chunks inside ``delegate`` (output side)."""

    subtask_index: int
    partition_index: int
    subpartition_index: int
    offsets: list[int]
    state_size: int
    delegate: StreamHandle
    side: ClassVar[Literal["output"]] = "output"
    merged: ClassVar[bool] = False
    channel_count: ClassVar[int] = 1
    code: ClassVar[int] = RESULT_SUBPARTITION
    flink_class: ClassVar[str] = CHANNEL_FLINK_CLASS[RESULT_SUBPARTITION]

    @property
    def info(self) -> tuple[int, int]:
        return (self.partition_index, self.subpartition_index)

    def label(self) -> str:
        return f"out({self.partition_index},{self.subpartition_index})"

    def unmerged(self) -> tuple[ResultSubpartitionHandle]:
        return (self,)

    def kept(self, keep: KeepChannel) -> Self | None:
        return self if keep(self.partition_index, self.subpartition_index) else None

    def children(self) -> Children:
        return (("delegate", self.delegate),)

    def with_children(self, children: Sequence[Handle | None]) -> Self:
        (delegate,) = children
        return replace(self, delegate=as_stream(delegate))


@dataclass(slots=True)
class InputChannelEntry:
    """One channel of a merged input handle."""

    gate_index: int
    input_channel_index: int
    state_size: int
    offsets: list[int]

    @property
    def info(self) -> tuple[int, int]:
        return (self.gate_index, self.input_channel_index)


@dataclass(slots=True)
class ResultSubpartitionEntry:
    """One subpartition of a merged output handle."""

    partition_index: int
    subpartition_index: int
    state_size: int
    offsets: list[int]

    @property
    def info(self) -> tuple[int, int]:
        return (self.partition_index, self.subpartition_index)


@dataclass(slots=True)
class MergedInputChannelHandle:
    """Several input channels of one subtask sharing one delegate (metadata V6+)."""

    subtask_index: int
    state_size: int
    delegate: StreamHandle
    channels: list[InputChannelEntry]
    side: ClassVar[Literal["input"]] = "input"
    merged: ClassVar[bool] = True
    code: ClassVar[int] = MERGED_INPUT_CHANNEL
    flink_class: ClassVar[str] = CHANNEL_FLINK_CLASS[MERGED_INPUT_CHANNEL]

    @property
    def channel_count(self) -> int:
        return len(self.channels)

    def unmerged(self) -> list[InputChannelHandle]:
        return [
            InputChannelHandle(
                self.subtask_index, c.gate_index, c.input_channel_index, c.offsets, c.state_size, self.delegate
            )
            for c in self.channels
        ]

    def kept(self, keep: KeepChannel) -> Self | None:
        """Without the channels ``keep`` rejects (the size shrinks accordingly); None when none is left."""
        kept = [c for c in self.channels if keep(c.gate_index, c.input_channel_index)]
        if len(kept) == len(self.channels):
            return self
        return replace(self, channels=kept, state_size=sum(c.state_size for c in kept)) if kept else None

    def children(self) -> Children:
        return (("delegate", self.delegate),)

    def with_children(self, children: Sequence[Handle | None]) -> Self:
        (delegate,) = children
        return replace(self, delegate=as_stream(delegate))


@dataclass(slots=True)
class MergedResultSubpartitionHandle:
    """Several result subpartitions of one subtask sharing one delegate (metadata V6+)."""

    subtask_index: int
    state_size: int
    delegate: StreamHandle
    channels: list[ResultSubpartitionEntry]
    side: ClassVar[Literal["output"]] = "output"
    merged: ClassVar[bool] = True
    code: ClassVar[int] = MERGED_RESULT_SUBPARTITION
    flink_class: ClassVar[str] = CHANNEL_FLINK_CLASS[MERGED_RESULT_SUBPARTITION]

    @property
    def channel_count(self) -> int:
        return len(self.channels)

    def unmerged(self) -> list[ResultSubpartitionHandle]:
        return [
            ResultSubpartitionHandle(
                self.subtask_index, c.partition_index, c.subpartition_index, c.offsets, c.state_size, self.delegate
            )
            for c in self.channels
        ]

    def kept(self, keep: KeepChannel) -> Self | None:
        """Without the channels ``keep`` rejects (the size shrinks accordingly); None when none is left."""
        kept = [c for c in self.channels if keep(c.partition_index, c.subpartition_index)]
        if len(kept) == len(self.channels):
            return self
        return replace(self, channels=kept, state_size=sum(c.state_size for c in kept)) if kept else None

    def children(self) -> Children:
        return (("delegate", self.delegate),)

    def with_children(self, children: Sequence[Handle | None]) -> Self:
        (delegate,) = children
        return replace(self, delegate=as_stream(delegate))


# --------------------------------------------------------------------------------------------------
# Handle groups. A new handle kind joins the groups it belongs to here, and nowhere else.

StreamLeaf: TypeAlias = ByteStreamHandle | FileHandle | RelativeFileHandle | SegmentFileHandle | EmptySegmentFileHandle
FileBacked: TypeAlias = FileHandle | RelativeFileHandle | SegmentFileHandle
ByteSource: TypeAlias = ByteStreamHandle | FileBacked  # a stream whose bytes can be read
StreamHandle: TypeAlias = StreamLeaf | KeyGroupsHandle | None
NestedKeyedHandle: TypeAlias = (
    KeyGroupsHandle | IncrementalHandle | ChangelogByteIncrementHandle | ChangelogFileIncrementHandle
)
KeyedHandle: TypeAlias = NestedKeyedHandle | ChangelogHandle
ChannelHandle: TypeAlias = InputChannelHandle | ResultSubpartitionHandle
MergedChannelHandle: TypeAlias = MergedInputChannelHandle | MergedResultSubpartitionHandle
InputChannelState: TypeAlias = InputChannelHandle | MergedInputChannelHandle
OutputChannelState: TypeAlias = ResultSubpartitionHandle | MergedResultSubpartitionHandle
AnyChannelHandle: TypeAlias = ChannelHandle | MergedChannelHandle
Handle: TypeAlias = StreamLeaf | KeyedHandle | OperatorStreamHandle | AnyChannelHandle

# The same groups as classes, for isinstance (most frequent first: it tests them in order).
STREAM_LEAF_TYPES = (FileHandle, ByteStreamHandle, RelativeFileHandle, SegmentFileHandle, EmptySegmentFileHandle)
FILE_BACKED_TYPES = (FileHandle, RelativeFileHandle, SegmentFileHandle)
_BYTE_SOURCES = frozenset({*FILE_BACKED_TYPES, ByteStreamHandle})
_STREAMS = frozenset({*STREAM_LEAF_TYPES, KeyGroupsHandle})
_NESTED_KEYED = frozenset(
    {KeyGroupsHandle, IncrementalHandle, ChangelogByteIncrementHandle, ChangelogFileIncrementHandle}
)
HANDLE_TYPES: tuple[type[Handle], ...] = (
    ByteStreamHandle,
    FileHandle,
    RelativeFileHandle,
    SegmentFileHandle,
    EmptySegmentFileHandle,
    KeyGroupsHandle,
    IncrementalHandle,
    ChangelogHandle,
    ChangelogByteIncrementHandle,
    ChangelogFileIncrementHandle,
    OperatorStreamHandle,
    InputChannelHandle,
    ResultSubpartitionHandle,
    MergedInputChannelHandle,
    MergedResultSubpartitionHandle,
)


def is_stream_leaf(h: object) -> TypeGuard[StreamLeaf]:
    """A handle that holds bytes itself (inline or in a file) rather than other handles."""
    return isinstance(h, STREAM_LEAF_TYPES)


def is_file_backed(h: object) -> TypeGuard[FileBacked]:
    """A stream handle whose bytes are in a file: ``file_name``, ``relative``, ``start_pos``, ``whole_file``."""
    return isinstance(h, FILE_BACKED_TYPES)


def is_byte_source(h: object) -> TypeGuard[ByteSource]:
    """A stream handle whose bytes can be read (inline or file-backed; not null, not an empty segment)."""
    return type(h) in _BYTE_SOURCES


def _fits_stream_slot(h: Handle | None) -> TypeGuard[StreamHandle]:
    return h is None or type(h) in _STREAMS


def _fits_changelog(h: Handle | None) -> TypeGuard[NestedKeyedHandle]:
    return type(h) in _NESTED_KEYED


def as_stream(h: Handle | None) -> StreamHandle:
    """``h`` if a stream handle may stand where it is put, else ``HandleKindError``."""
    if _fits_stream_slot(h):
        return h
    raise HandleKindError(f"a {h.flink_class if h else None} cannot stand where a stream handle is expected")


def as_nested_keyed(h: Handle | None) -> NestedKeyedHandle:
    """``h`` if it may stand inside a changelog handle, else ``HandleKindError``."""
    if _fits_changelog(h):
        return h
    raise HandleKindError(f"a {h.flink_class if h else 'null'} handle cannot stand inside a changelog handle")


def stream_size(handle: StreamHandle) -> int:
    return 0 if handle is None else handle.state_size


def keyed_size(handle: KeyedHandle | None) -> int:
    return 0 if handle is None else handle.state_size


def channel_handles(handles: Sequence[ChannelState]) -> list[ChannelHandle]:
    """Per-channel view: merged handles are unmerged, in their stored order."""
    out: list[ChannelHandle] = []
    for h in handles:
        out.extend(h.unmerged())
    return out


# --------------------------------------------------------------------------------------------------
# CheckpointMetadata structure


@dataclass(slots=True)
class SubtaskState:
    index: int
    finished: bool = False
    managed_operator_state: OperatorStreamHandle | None = None
    raw_operator_state: OperatorStreamHandle | None = None
    managed_keyed_state: KeyedHandle | None = None
    raw_keyed_state: KeyedHandle | None = None
    input_channel_state: list[InputChannelState] = field(default_factory=list)
    result_subpartition_state: list[OutputChannelState] = field(default_factory=list)
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

    def label(self, plan_names: Mapping[str, str] | None = None) -> str:
        """How the operator is shown: its uid, its name, else the name a bound plan gives it (``plan_names``:
        operator id -> name, ``JobBinding.names``; Flink before 2.0 stores ids only), else its id."""
        named = plan_names.get(self.operator_id) if plan_names else None
        return self.uid or self.name or named or self.operator_id


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
    checkpoint_type: dict[str, Any]  # the CheckpointType's class and fields, as decoded


@dataclass(slots=True)
class CheckpointMetadata:
    format_version: int
    checkpoint_id: int
    operators: list[OperatorState]
    master_states: list[MasterState] = field(default_factory=list)
    properties: CheckpointProperties | None = None
    # The Java-serialized properties exactly as read (V4+); rewritten unchanged.
    properties_raw: bytes | None = None
    properties_note: str | None = None  # why ``properties`` could not be decoded, if it could not
    # A layout variant of format_version (spillway.flink.features), as read; None: the usual one.
    format_dialect: str | None = None

    @property
    def features(self) -> FormatFeatures:
        """What this checkpoint's format stores (follows ``format_version`` and ``format_dialect``)."""
        return format_features(self.format_version, self.format_dialect)

    def operator(self, operator_id: str) -> OperatorState | None:
        return next((o for o in self.operators if o.operator_id == operator_id), None)
