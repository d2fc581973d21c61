"""State handles inside ``_metadata``: one registry entry per Flink type code (docs/format/handles.md).

An entry (``HandleKind``) holds the code's layout after the type byte, the families of positions it
may stand in, and the two conversions between the parsed layout and its model class
(spillway.model.checkpoint). Each family's layout is a ``Switch`` on the type byte built from the
entries, so decoding, encoding and the layouts all follow the registry. The nesting Flink allows is
finite (a key-groups handle wraps a plain stream handle, a changelog handle wraps non-changelog keyed
handles), so no ``LazyBound`` is needed and the whole tree compiles.

Channel-state handles have a code space of their own (the type byte of the typed layout, metadata V6+)
and, before V6, no type byte at all; ``channel_lists`` gives the layout a format version uses.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from functools import partial
from typing import Any

from construct import Construct, Container, Flag, Int8ub, Int32sb, Int64sb, ListContainer, Pass, Switch, this

from spillway.flink.features import ChannelLayout
from spillway.formats.fastparse import Build, Decoded
from spillway.formats.primitives import (
    BoundedArray,
    BoundedBytes,
    FastStruct,
    JavaString,
    LengthPrefixed,
    UnknownCode,
)
from spillway.model.checkpoint import (
    AnyChannelHandle,
    ByteStreamHandle,
    ChangelogByteIncrementHandle,
    ChangelogFileIncrementHandle,
    ChangelogHandle,
    EmptySegmentFileHandle,
    FileHandle,
    FileMergingDirs,
    Handle,
    IncrementalHandle,
    InputChannelEntry,
    InputChannelHandle,
    KeyGroupRange,
    KeyGroupsHandle,
    LocalPathHandle,
    MergedInputChannelHandle,
    MergedResultSubpartitionHandle,
    OperatorStateEntry,
    OperatorStreamHandle,
    RelativeFileHandle,
    ResultSubpartitionEntry,
    ResultSubpartitionHandle,
    SegmentFileHandle,
)

# Type codes and Flink's class per code: one table, in the model layer (re-exported for the codec's users).
from spillway.model.handle_codes import (
    BYTE_STREAM,
    CHANGELOG,
    CHANGELOG_BYTE_INCREMENT,
    CHANGELOG_FILE_INCREMENT,
    CHANGELOG_FILE_INCREMENT_V2,
    CHANGELOG_V2,
    CHANNEL_FLINK_CLASS,
    EMPTY_SEGMENT_FILE,
    FILE,
    FLINK_CLASS,
    INCREMENTAL_KEY_GROUPS,
    INCREMENTAL_KEY_GROUPS_V2,
    INPUT_CHANNEL,
    KEY_GROUPS,
    KEY_GROUPS_V2,
    MERGED_INPUT_CHANNEL,
    MERGED_RESULT_SUBPARTITION,
    NULL,
    PARTITIONABLE_OPERATOR,
    RELATIVE_FILE,
    RESULT_SUBPARTITION,
    SAVEPOINT_KEY_GROUPS,
    SEGMENT_FILE,
    SEGMENT_PARTITIONABLE_OPERATOR,
)

# Families: the positions a handle may stand in, each read by its own Flink method.
PLAIN_STREAM = "plain stream"  # the delegate of a key-groups handle read as a stream handle
STREAM = "stream"  # deserializeStreamStateHandle
NESTED_KEYED = "nested keyed"  # inside a changelog handle (deserializeKeyedStateHandle, no changelog)
KEYED = "keyed"  # deserializeKeyedStateHandle
OPERATOR = "operator"  # deserializeOperatorStateHandle
COORDINATOR = "coordinator"  # operator-coordinator state: a stream handle, only null or inline allowed

_FAMILY_TITLES = {
    PLAIN_STREAM: "StreamStateHandle",
    STREAM: "StreamStateHandle",
    NESTED_KEYED: "KeyedStateHandle",
    KEYED: "KeyedStateHandle",
    OPERATOR: "OperatorStateHandle",
    COORDINATOR: "coordinator state handle (only null or ByteStreamStateHandle allowed)",
}

Decode = Callable[[Any], Any]  # parsed body -> model handle (None for the null handle)
Encode = Callable[[Any], Any]  # model handle -> body to build


@dataclass(frozen=True, slots=True)
class HandleKind:
    code: int
    flink_class: str  # Flink's class (the main one, when a code covers several)
    families: frozenset[str]
    layout: Construct  # what follows the type byte
    decode: Decode
    encode: Encode


KINDS: dict[int, HandleKind] = {}
_DECODE: dict[int, Decode] = {}


def register(code: int, families: set[str], layout: Construct, decode: Decode, encode: Encode) -> None:
    if code in KINDS:
        raise ValueError(f"type code {code} registered twice")
    KINDS[code] = HandleKind(code, FLINK_CLASS[code], frozenset(families), layout, decode, encode)
    _DECODE[code] = decode


def typed_handle(title: str, cases: dict[int, Construct]) -> FastStruct:
    return FastStruct(
        "type" / Int8ub,
        "body" / Switch(this.type, cases, default=UnknownCode(title)),
    )


def family_layout(family: str) -> FastStruct:
    """The type byte and the body of every code registered (so far) for ``family``."""
    cases = {code: kind.layout for code, kind in sorted(KINDS.items()) if family in kind.families}
    return typed_handle(_FAMILY_TITLES[family], cases)


def decode_handle(c: Any) -> Any:
    """A parsed ``{type, body}`` as its model handle (None for the null handle). A handle the fast
    parser already decoded (``fast_decoders``) is returned as it is."""
    return _DECODE[c["type"]](c["body"]) if isinstance(c, dict) else c


def _plain(items: list[Any]) -> list[Any]:
    """A plain list (the fast parser's already is one; construct's parse gives a ListContainer)."""
    return items if type(items) is list else list(items)


def encode_handle(h: Handle | None) -> Container:
    if h is None:
        return Container(type=NULL, body=None)
    kind = KINDS.get(h.code)
    if kind is None or kind.code != h.code:
        raise TypeError(f"no layout for a {h.flink_class} (type code {h.code})")
    return Container(type=h.code, body=kind.encode(h))


def _bodyless(make: Callable[[], Any]) -> Decode:
    return lambda b: make()


I64s = BoundedArray(Int64sb, 8)

# --- stream handles -------------------------------------------------------------------------------

register(
    NULL,
    {PLAIN_STREAM, STREAM, NESTED_KEYED, KEYED, OPERATOR, COORDINATOR},
    Pass,
    _bodyless(lambda: None),
    lambda h: None,
)
register(
    BYTE_STREAM,
    {PLAIN_STREAM, STREAM, COORDINATOR},
    FastStruct("name" / JavaString, "data" / BoundedBytes()),
    Build(ByteStreamHandle, "name", "data"),
    lambda h: Container(name=h.name, data=h.data),
)
register(
    FILE,
    {PLAIN_STREAM, STREAM},
    FastStruct("state_size" / Int64sb, "path" / JavaString),
    Build(FileHandle, "path", "state_size"),
    lambda h: Container(state_size=h.state_size, path=h.path),
)
register(
    RELATIVE_FILE,
    {PLAIN_STREAM, STREAM},
    FastStruct("relative_path" / JavaString, "state_size" / Int64sb),
    Build(RelativeFileHandle, "relative_path", "state_size"),
    lambda h: Container(relative_path=h.relative_path, state_size=h.state_size),
)
register(
    SEGMENT_FILE,
    {PLAIN_STREAM, STREAM},
    FastStruct(
        "start_pos" / Int64sb,
        "state_size" / Int64sb,
        "scope" / Int32sb,
        "path" / JavaString,
        "logical_file_id" / JavaString,
    ),
    lambda b: SegmentFileHandle(b["path"], b["start_pos"], b["state_size"], b["scope"], b["logical_file_id"]),
    lambda h: Container(
        start_pos=h.start_pos, state_size=h.state_size, scope=h.scope, path=h.path, logical_file_id=h.logical_file_id
    ),
)
register(
    EMPTY_SEGMENT_FILE,
    {PLAIN_STREAM, STREAM},
    Pass,
    _bodyless(EmptySegmentFileHandle),
    lambda h: None,
)

# A legacy key-groups handle may stand where a stream handle is expected; its own delegate is a
# plain stream handle (Flink never nests them deeper).
PlainStreamHandle = family_layout(PLAIN_STREAM)

# --- keyed handles --------------------------------------------------------------------------------

_KEY_GROUPS_BODY = FastStruct(
    "start" / Int32sb,
    "offsets" / I64s,  # the key-group count is the offsets count
    "delegate" / PlainStreamHandle,
)


def _key_groups(code: int) -> Decode:
    def decode(b: Any) -> KeyGroupsHandle:
        offsets = _plain(b["offsets"])
        return KeyGroupsHandle(
            KeyGroupRange(b["start"], len(offsets)),
            offsets,
            decode_handle(b["delegate"]),
            b.get("state_handle_id"),
            code,
        )

    return decode


def _key_groups_c(h: KeyGroupsHandle) -> Container:
    c = Container(start=h.key_groups.start, offsets=h.offsets, delegate=encode_handle(h.delegate))
    if h.code == KEY_GROUPS_V2:
        c["state_handle_id"] = h.state_handle_id
    return c


register(
    KEY_GROUPS,
    {STREAM, NESTED_KEYED, KEYED},
    _KEY_GROUPS_BODY,
    _key_groups(KEY_GROUPS),
    _key_groups_c,
)
StreamHandle = family_layout(STREAM)

register(
    SAVEPOINT_KEY_GROUPS,
    {NESTED_KEYED, KEYED},
    _KEY_GROUPS_BODY,
    _key_groups(SAVEPOINT_KEY_GROUPS),
    _key_groups_c,
)
register(
    KEY_GROUPS_V2,
    {NESTED_KEYED, KEYED},
    FastStruct(*_KEY_GROUPS_BODY.subcons, "state_handle_id" / JavaString),
    _key_groups(KEY_GROUPS_V2),
    _key_groups_c,
)

_HANDLE_AND_LOCAL_PATH = FastStruct("local_path" / JavaString, "handle" / StreamHandle)
_HANDLE_LIST = BoundedArray(_HANDLE_AND_LOCAL_PATH, 3)
_INCREMENTAL_FIELDS_HEAD = (
    "checkpoint_id" / Int64sb,
    "backend_identifier" / JavaString,
    "start" / Int32sb,
    "count" / Int32sb,
)
_INCREMENTAL_FIELDS_TAIL = (
    "meta_state_handle" / StreamHandle,
    "shared_state" / _HANDLE_LIST,
    "private_state" / _HANDLE_LIST,
)


def _local_paths(items: Any) -> list[LocalPathHandle]:
    return [LocalPathHandle(i["local_path"], decode_handle(i["handle"])) for i in items]


def _local_paths_c(items: list[LocalPathHandle]) -> ListContainer:
    return ListContainer(Container(local_path=i.local_path, handle=encode_handle(i.handle)) for i in items)


def _incremental(b: Any) -> IncrementalHandle:
    return IncrementalHandle(
        checkpoint_id=b["checkpoint_id"],
        backend_identifier=b["backend_identifier"],
        key_groups=KeyGroupRange(b["start"], b["count"]),
        checkpointed_size=b.get("checkpointed_size"),
        meta_state_handle=decode_handle(b["meta_state_handle"]),
        shared_state=_local_paths(b["shared_state"]),
        private_state=_local_paths(b["private_state"]),
        state_handle_id=b.get("state_handle_id"),
    )


def _incremental_c(h: IncrementalHandle) -> Container:
    return Container(
        checkpoint_id=h.checkpoint_id,
        backend_identifier=h.backend_identifier,
        start=h.key_groups.start,
        count=h.key_groups.count,
        checkpointed_size=h.checkpointed_size,
        meta_state_handle=encode_handle(h.meta_state_handle),
        shared_state=_local_paths_c(h.shared_state),
        private_state=_local_paths_c(h.private_state),
        state_handle_id=h.state_handle_id,
    )


register(
    INCREMENTAL_KEY_GROUPS,
    {NESTED_KEYED, KEYED},
    FastStruct(*_INCREMENTAL_FIELDS_HEAD, *_INCREMENTAL_FIELDS_TAIL),
    _incremental,
    _incremental_c,
)
register(
    INCREMENTAL_KEY_GROUPS_V2,
    {NESTED_KEYED, KEYED},
    FastStruct(
        *_INCREMENTAL_FIELDS_HEAD,
        "checkpointed_size" / Int64sb,
        *_INCREMENTAL_FIELDS_TAIL,
        "state_handle_id" / JavaString,
    ),
    _incremental,
    _incremental_c,
)

_CHANGE = FastStruct("key_group" / Int32sb, "data" / BoundedBytes())
register(
    CHANGELOG_BYTE_INCREMENT,
    {NESTED_KEYED, KEYED},
    FastStruct(
        "start" / Int32sb,
        "count" / Int32sb,
        "from_" / Int64sb,
        "to" / Int64sb,
        "changes" / BoundedArray(_CHANGE, 8),
        "state_handle_id" / JavaString,
    ),
    lambda b: ChangelogByteIncrementHandle(
        KeyGroupRange(b["start"], b["count"]),
        b["from_"],
        b["to"],
        [(ch["key_group"], ch["data"]) for ch in b["changes"]],
        b["state_handle_id"],
    ),
    lambda h: Container(
        start=h.key_groups.start,
        count=h.key_groups.count,
        from_=h.from_sequence,
        to=h.to_sequence,
        changes=ListContainer(Container(key_group=k, data=d) for k, d in h.changes),
        state_handle_id=h.state_handle_id,
    ),
)

_HANDLE_AND_OFFSET = FastStruct("offset" / Int64sb, "handle" / StreamHandle)
_CHANGELOG_FILE_FIELDS = (
    "start" / Int32sb,
    "count" / Int32sb,
    "handles" / BoundedArray(_HANDLE_AND_OFFSET, 9),
    "size" / Int64sb,
    "checkpointed_size" / Int64sb,
    "state_handle_id" / JavaString,
)


def _changelog_file(b: Any) -> ChangelogFileIncrementHandle:
    return ChangelogFileIncrementHandle(
        KeyGroupRange(b["start"], b["count"]),
        [(x["offset"], decode_handle(x["handle"])) for x in b["handles"]],
        b["size"],
        b["checkpointed_size"],
        b["state_handle_id"],
        b.get("storage_identifier"),
    )


def _changelog_file_c(h: ChangelogFileIncrementHandle) -> Container:
    return Container(
        start=h.key_groups.start,
        count=h.key_groups.count,
        handles=ListContainer(Container(offset=o, handle=encode_handle(x)) for o, x in h.handles),
        size=h.size,
        checkpointed_size=h.checkpointed_size,
        state_handle_id=h.state_handle_id,
        storage_identifier=h.storage_identifier,
    )


register(
    CHANGELOG_FILE_INCREMENT,
    {NESTED_KEYED, KEYED},
    FastStruct(*_CHANGELOG_FILE_FIELDS),
    _changelog_file,
    _changelog_file_c,
)
register(
    CHANGELOG_FILE_INCREMENT_V2,
    {NESTED_KEYED, KEYED},
    FastStruct(*_CHANGELOG_FILE_FIELDS, "storage_identifier" / JavaString),
    _changelog_file,
    _changelog_file_c,
)

KeyedLeafHandle = family_layout(NESTED_KEYED)

_CHANGELOG_HEAD = (
    "start" / Int32sb,
    "count" / Int32sb,
    "checkpointed_size" / Int64sb,
    "materialized" / BoundedArray(KeyedLeafHandle, 1),
    "non_materialized" / BoundedArray(KeyedLeafHandle, 1),
    "materialization_id" / Int64sb,
)


def _changelog(b: Any) -> ChangelogHandle:
    return ChangelogHandle(
        key_groups=KeyGroupRange(b["start"], b["count"]),
        checkpointed_size=b["checkpointed_size"],
        materialized=[h for h in map(decode_handle, b["materialized"]) if h is not None],
        non_materialized=[h for h in map(decode_handle, b["non_materialized"]) if h is not None],
        materialization_id=b["materialization_id"],
        checkpoint_id=b.get("checkpoint_id"),
        state_handle_id=b["state_handle_id"],
    )


def _changelog_c(h: ChangelogHandle) -> Container:
    return Container(
        start=h.key_groups.start,
        count=h.key_groups.count,
        checkpointed_size=h.checkpointed_size,
        materialized=ListContainer(map(encode_handle, h.materialized)),
        non_materialized=ListContainer(map(encode_handle, h.non_materialized)),
        materialization_id=h.materialization_id,
        checkpoint_id=h.checkpoint_id,
        state_handle_id=h.state_handle_id,
    )


register(
    CHANGELOG,
    {KEYED},
    FastStruct(*_CHANGELOG_HEAD, "state_handle_id" / JavaString),
    _changelog,
    _changelog_c,
)
register(
    CHANGELOG_V2,
    {KEYED},
    FastStruct(*_CHANGELOG_HEAD, "checkpoint_id" / Int64sb, "state_handle_id" / JavaString),
    _changelog,
    _changelog_c,
)

KeyedHandle = family_layout(KEYED)

# --- operator (partitionable) handles -------------------------------------------------------------

_STATE_ENTRY = FastStruct("name" / JavaString, "mode" / Int8ub, "offsets" / I64s)
_STATE_ENTRIES = BoundedArray(_STATE_ENTRY, 7)


def _operator_handle(b: Any) -> OperatorStreamHandle:
    states = [OperatorStateEntry(s["name"], s["mode"], _plain(s["offsets"])) for s in b["states"]]
    return OperatorStreamHandle(states, decode_handle(b["delegate"]))


def _file_merging_operator_handle(b: Any) -> OperatorStreamHandle:
    h = _operator_handle(b)
    h.file_merging = FileMergingDirs(b["task_owned_dir"], b["shared_dir"], bool(b["is_empty"]))
    return h


def _operator_handle_c(h: OperatorStreamHandle) -> Container:
    c = Container(states=ListContainer(Container(name=s.name, mode=s.mode, offsets=s.offsets) for s in h.states))
    if h.file_merging is not None:
        d = h.file_merging
        c.update({"task_owned_dir": d.task_owned_dir, "shared_dir": d.shared_dir, "is_empty": d.is_empty})
    c["delegate"] = encode_handle(h.delegate)
    return c


register(
    PARTITIONABLE_OPERATOR,
    {OPERATOR},
    FastStruct("states" / _STATE_ENTRIES, "delegate" / StreamHandle),
    _operator_handle,
    _operator_handle_c,
)
register(
    SEGMENT_PARTITIONABLE_OPERATOR,
    {OPERATOR},
    FastStruct(
        "states" / _STATE_ENTRIES,
        "task_owned_dir" / JavaString,
        "shared_dir" / JavaString,
        "is_empty" / Flag,
        "delegate" / StreamHandle,
    ),
    _file_merging_operator_handle,
    _operator_handle_c,
)

OperatorHandle = family_layout(OPERATOR)

# Flink reads coordinator state as a stream handle but accepts only null or inline bytes.
CoordinatorHandle = family_layout(COORDINATOR)

# --- channel-state handles ------------------------------------------------------------------------
#
# One channel: (subtask index, since Flink 1.12), its index pair, the offsets of its chunks in the
# delegate, their total size, the delegate. A merged handle (V6+): the subtask index, the total size,
# the shared delegate, then one length-prefixed blob listing the channels.

_INPUT_PAIR = ("gate_index", "input_channel_index")
_OUTPUT_PAIR = ("partition_index", "subpartition_index")


def _single_layout(pair: tuple[str, str], indexed: bool) -> FastStruct:
    return FastStruct(
        *(("subtask_index" / Int32sb,) if indexed else ()),
        pair[0] / Int32sb,
        pair[1] / Int32sb,
        "offsets" / I64s,
        "state_size" / Int64sb,
        "delegate" / StreamHandle,
    )


def _merged_layout(pair: tuple[str, str]) -> FastStruct:
    entry = FastStruct(pair[0] / Int32sb, pair[1] / Int32sb, "state_size" / Int64sb, "offsets" / I64s)
    return FastStruct(
        "subtask_index" / Int32sb,
        "state_size" / Int64sb,
        "delegate" / StreamHandle,
        "blob" / LengthPrefixed(FastStruct("channels" / BoundedArray(entry, 20))),
    )


# subtask index: as stored, or (Flink 1.11 stores none) the index of the subtask holding the handle
ChannelDecode = Callable[[Any, int], Any]  # (parsed body, holding subtask index) -> model handle


def _input(b: Any, subtask: int) -> InputChannelHandle:
    return InputChannelHandle(
        b.get("subtask_index", subtask),
        b["gate_index"],
        b["input_channel_index"],
        _plain(b["offsets"]),
        b["state_size"],
        decode_handle(b["delegate"]),
    )


def _output(b: Any, subtask: int) -> ResultSubpartitionHandle:
    return ResultSubpartitionHandle(
        b.get("subtask_index", subtask),
        b["partition_index"],
        b["subpartition_index"],
        _plain(b["offsets"]),
        b["state_size"],
        decode_handle(b["delegate"]),
    )


def _merged_input(b: Any, subtask: int) -> MergedInputChannelHandle:
    channels = [
        InputChannelEntry(e["gate_index"], e["input_channel_index"], e["state_size"], _plain(e["offsets"]))
        for e in b["blob"]["channels"]
    ]
    return MergedInputChannelHandle(b["subtask_index"], b["state_size"], decode_handle(b["delegate"]), channels)


def _merged_output(b: Any, subtask: int) -> MergedResultSubpartitionHandle:
    channels = [
        ResultSubpartitionEntry(e["partition_index"], e["subpartition_index"], e["state_size"], _plain(e["offsets"]))
        for e in b["blob"]["channels"]
    ]
    return MergedResultSubpartitionHandle(b["subtask_index"], b["state_size"], decode_handle(b["delegate"]), channels)


def _single_c(h: InputChannelHandle | ResultSubpartitionHandle) -> Container:
    first, second = h.info
    names = _INPUT_PAIR if h.side == "input" else _OUTPUT_PAIR
    return Container(
        {
            "subtask_index": h.subtask_index,
            names[0]: first,
            names[1]: second,
            "offsets": h.offsets,
            "state_size": h.state_size,
            "delegate": encode_handle(h.delegate),
        }
    )


def _merged_c(h: MergedInputChannelHandle | MergedResultSubpartitionHandle) -> Container:
    names = _INPUT_PAIR if h.side == "input" else _OUTPUT_PAIR
    channels = ListContainer(
        Container({names[0]: c.info[0], names[1]: c.info[1], "state_size": c.state_size, "offsets": c.offsets})
        for c in h.channels
    )
    return Container(
        subtask_index=h.subtask_index,
        state_size=h.state_size,
        delegate=encode_handle(h.delegate),
        blob=Container(channels=channels),
    )


@dataclass(frozen=True, slots=True)
class ChannelKind:
    code: int  # type byte of the typed layout
    side: str
    layout: Construct
    decode: ChannelDecode
    encode: Encode

    @property
    def flink_class(self) -> str:
        return CHANNEL_FLINK_CLASS[self.code]


CHANNEL_KINDS: dict[int, ChannelKind] = {
    k.code: k
    for k in (
        ChannelKind(INPUT_CHANNEL, "input", _single_layout(_INPUT_PAIR, True), _input, _single_c),
        ChannelKind(
            RESULT_SUBPARTITION,
            "output",
            _single_layout(_OUTPUT_PAIR, True),
            _output,
            _single_c,
        ),
        ChannelKind(
            MERGED_INPUT_CHANNEL,
            "input",
            _merged_layout(_INPUT_PAIR),
            _merged_input,
            _merged_c,
        ),
        ChannelKind(
            MERGED_RESULT_SUBPARTITION,
            "output",
            _merged_layout(_OUTPUT_PAIR),
            _merged_output,
            _merged_c,
        ),
    )
}
_CHANNEL_DECODE = {code: k.decode for code, k in CHANNEL_KINDS.items()}


def _typed_channels(side: str, title: str) -> FastStruct:
    return typed_handle(title, {code: k.layout for code, k in CHANNEL_KINDS.items() if k.side == side})


InputChannelHandleTyped = _typed_channels("input", "input channel state handle")
OutputChannelHandleTyped = _typed_channels("output", "result subpartition state handle")


def _decode_typed(c: Any, subtask: int) -> Any:
    return _CHANNEL_DECODE[c["type"]](c["body"], subtask) if isinstance(c, dict) else c


def _encode_typed(h: AnyChannelHandle) -> Container:
    return Container(type=h.code, body=CHANNEL_KINDS[h.code].encode(h))


def _encode_untyped(h: AnyChannelHandle) -> Container:
    if h.merged:
        raise ValueError(f"a {h.flink_class} needs metadata V6 or later")
    return CHANNEL_KINDS[h.code].encode(h)


def channel_lists(layout: ChannelLayout) -> tuple[Construct, ...]:
    """The ``input_channel_state`` and ``result_subpartition_state`` fields of a subtask's state."""
    if layout is ChannelLayout.NONE:
        return ()
    if layout is ChannelLayout.TYPED:
        return (
            "input_channel_state" / BoundedArray(InputChannelHandleTyped, 1),
            "result_subpartition_state" / BoundedArray(OutputChannelHandleTyped, 1),
        )
    indexed = layout is ChannelLayout.INDEXED
    min_size = 29 if indexed else 25
    return (
        "input_channel_state" / BoundedArray(_single_layout(_INPUT_PAIR, indexed), min_size),
        "result_subpartition_state" / BoundedArray(_single_layout(_OUTPUT_PAIR, indexed), min_size),
    )


def channel_codec(layout: ChannelLayout) -> tuple[ChannelDecode, ChannelDecode, Encode]:
    """(decode input handle, decode output handle, encode either) for a channel-handle layout."""
    if layout is ChannelLayout.TYPED:
        return _decode_typed, _decode_typed, _encode_typed
    return _input, _output, _encode_untyped


def fast_decoders() -> dict[int, Decoded]:
    """Hooks for ``spillway.formats.fastparse``: a handle of every family (the nested ones too) is
    decoded into its model as soon as its body is parsed, by the decode function registered for it."""
    decoders = {code: kind.decode for code, kind in KINDS.items()}
    # Not CoordinatorHandle: the operator's layout checks its type code (metadata.py), and a decoded
    # handle has none; it is one handle per operator anyway.
    families = (PlainStreamHandle, StreamHandle, KeyedLeafHandle, KeyedHandle, OperatorHandle)
    hooks = {id(layout): Decoded(decoders) for layout in families}
    # Typed channel handles (V6+) store their subtask index, and the fast parser gives offsets as a
    # list and the delegate decoded: a single handle is its constructor on the parsed fields.
    channel: dict[int, Decode] = {
        INPUT_CHANNEL: Build(InputChannelHandle, "subtask_index", *_INPUT_PAIR, "offsets", "state_size", "delegate"),
        RESULT_SUBPARTITION: Build(
            ResultSubpartitionHandle, "subtask_index", *_OUTPUT_PAIR, "offsets", "state_size", "delegate"
        ),
        MERGED_INPUT_CHANNEL: partial(_merged_input, subtask=-1),  # stored in the body: never used
        MERGED_RESULT_SUBPARTITION: partial(_merged_output, subtask=-1),
    }
    for layout in (InputChannelHandleTyped, OutputChannelHandleTyped):
        hooks[id(layout)] = Decoded(channel)
    return hooks
