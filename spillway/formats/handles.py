"""State-handle layouts inside ``_metadata`` (docs/format/metadata.md links their encodings).

Three handle families share one type-code space: stream handles (pointers to bytes), keyed handles
and operator handles; channel-state handles come in two encodings (V1 without a type byte, V2 with one).
Each family is a ``Switch`` on its type code; the nesting Flink allows is finite (a key-groups handle
wraps a stream handle, a changelog handle wraps keyed handles), so no ``LazyBound`` is needed and the
whole tree compiles.
"""

from __future__ import annotations

from construct import Flag, Int8ub, Int32sb, Int64sb, Pass, Switch, this

from spillway.formats.primitives import (
    BoundedArray,
    BoundedBytes,
    FastStruct,
    JavaString,
    LengthPrefixed,
    UnknownCode,
)

# Type codes (MetadataV2V3SerializerBase).
NULL = 0
BYTE_STREAM = 1
FILE = 2
KEY_GROUPS = 3
PARTITIONABLE_OPERATOR = 4
INCREMENTAL_KEY_GROUPS = 5
RELATIVE_FILE = 6
SAVEPOINT_KEY_GROUPS = 7
CHANGELOG = 8
CHANGELOG_BYTE_INCREMENT = 9
CHANGELOG_FILE_INCREMENT = 10
INCREMENTAL_KEY_GROUPS_V2 = 11
KEY_GROUPS_V2 = 12
CHANGELOG_FILE_INCREMENT_V2 = 13
CHANGELOG_V2 = 14
SEGMENT_FILE = 15
EMPTY_SEGMENT_FILE = 16
SEGMENT_PARTITIONABLE_OPERATOR = 17

# Channel handle type bytes of the V2 channel-handle encoding (metadata V6+).
INPUT_CHANNEL = 1
RESULT_SUBPARTITION = 2
MERGED_INPUT_CHANNEL = 3
MERGED_RESULT_SUBPARTITION = 4

I64s = BoundedArray(Int64sb, 8)


def typed_handle(family: str, cases: dict) -> FastStruct:
    return FastStruct(
        "type" / Int8ub,
        "body" / Switch(this.type, cases, default=UnknownCode(family)),
    )


# --- stream handles -------------------------------------------------------------------------------

_BYTE_STREAM = FastStruct("name" / JavaString, "data" / BoundedBytes())
_FILE = FastStruct("state_size" / Int64sb, "path" / JavaString)
_RELATIVE_FILE = FastStruct("relative_path" / JavaString, "state_size" / Int64sb)
_SEGMENT_FILE = FastStruct(
    "start_pos" / Int64sb,
    "state_size" / Int64sb,
    "scope" / Int32sb,
    "path" / JavaString,
    "logical_file_id" / JavaString,
)

_PLAIN_STREAM_CASES = {
    NULL: Pass,
    BYTE_STREAM: _BYTE_STREAM,
    FILE: _FILE,
    RELATIVE_FILE: _RELATIVE_FILE,
    SEGMENT_FILE: _SEGMENT_FILE,
    EMPTY_SEGMENT_FILE: Pass,
}

# A legacy key-groups handle may stand where a stream handle is expected; its own delegate is a
# plain stream handle (Flink never nests them deeper).
PlainStreamHandle = typed_handle("StreamStateHandle", _PLAIN_STREAM_CASES)

_KEY_GROUPS_BODY = FastStruct(
    "start" / Int32sb,
    "offsets" / I64s,  # the key-group count is the offsets count
    "delegate" / PlainStreamHandle,
)

StreamHandle = typed_handle("StreamStateHandle", {**_PLAIN_STREAM_CASES, KEY_GROUPS: _KEY_GROUPS_BODY})

# --- keyed handles --------------------------------------------------------------------------------

_HANDLE_AND_LOCAL_PATH = FastStruct("local_path" / JavaString, "handle" / StreamHandle)
_HANDLE_LIST = BoundedArray(_HANDLE_AND_LOCAL_PATH, 3)

_KEY_GROUPS_V2 = FastStruct(*_KEY_GROUPS_BODY.subcons, "state_handle_id" / JavaString)
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
_INCREMENTAL_V1 = FastStruct(*_INCREMENTAL_FIELDS_HEAD, *_INCREMENTAL_FIELDS_TAIL)
_INCREMENTAL_V2 = FastStruct(
    *_INCREMENTAL_FIELDS_HEAD,
    "checkpointed_size" / Int64sb,
    *_INCREMENTAL_FIELDS_TAIL,
    "state_handle_id" / JavaString,
)
_CHANGE = FastStruct("key_group" / Int32sb, "data" / BoundedBytes())
_CHANGELOG_BYTE_INCREMENT = FastStruct(
    "start" / Int32sb,
    "count" / Int32sb,
    "from_" / Int64sb,
    "to" / Int64sb,
    "changes" / BoundedArray(_CHANGE, 8),
    "state_handle_id" / JavaString,
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
_CHANGELOG_FILE_INCREMENT_V1 = FastStruct(*_CHANGELOG_FILE_FIELDS)
_CHANGELOG_FILE_INCREMENT_V2 = FastStruct(*_CHANGELOG_FILE_FIELDS, "storage_identifier" / JavaString)

_KEYED_LEAF_CASES = {
    NULL: Pass,
    KEY_GROUPS: _KEY_GROUPS_BODY,
    SAVEPOINT_KEY_GROUPS: _KEY_GROUPS_BODY,
    KEY_GROUPS_V2: _KEY_GROUPS_V2,
    INCREMENTAL_KEY_GROUPS: _INCREMENTAL_V1,
    INCREMENTAL_KEY_GROUPS_V2: _INCREMENTAL_V2,
    CHANGELOG_BYTE_INCREMENT: _CHANGELOG_BYTE_INCREMENT,
    CHANGELOG_FILE_INCREMENT: _CHANGELOG_FILE_INCREMENT_V1,
    CHANGELOG_FILE_INCREMENT_V2: _CHANGELOG_FILE_INCREMENT_V2,
}
KeyedLeafHandle = typed_handle("KeyedStateHandle", _KEYED_LEAF_CASES)

_CHANGELOG_HEAD = (
    "start" / Int32sb,
    "count" / Int32sb,
    "checkpointed_size" / Int64sb,
    "materialized" / BoundedArray(KeyedLeafHandle, 1),
    "non_materialized" / BoundedArray(KeyedLeafHandle, 1),
    "materialization_id" / Int64sb,
)
_CHANGELOG_V1 = FastStruct(*_CHANGELOG_HEAD, "state_handle_id" / JavaString)
_CHANGELOG_V2 = FastStruct(*_CHANGELOG_HEAD, "checkpoint_id" / Int64sb, "state_handle_id" / JavaString)

KeyedHandle = typed_handle(
    "KeyedStateHandle", {**_KEYED_LEAF_CASES, CHANGELOG: _CHANGELOG_V1, CHANGELOG_V2: _CHANGELOG_V2}
)

# --- operator (partitionable) handles -------------------------------------------------------------

_STATE_ENTRY = FastStruct("name" / JavaString, "mode" / Int8ub, "offsets" / I64s)
_STATE_ENTRIES = BoundedArray(_STATE_ENTRY, 7)

OperatorHandle = typed_handle(
    "OperatorStateHandle",
    {
        NULL: Pass,
        PARTITIONABLE_OPERATOR: FastStruct("states" / _STATE_ENTRIES, "delegate" / StreamHandle),
        SEGMENT_PARTITIONABLE_OPERATOR: FastStruct(
            "states" / _STATE_ENTRIES,
            "task_owned_dir" / JavaString,
            "shared_dir" / JavaString,
            "is_empty" / Flag,
            "delegate" / StreamHandle,
        ),
    },
)

# --- channel-state handles ------------------------------------------------------------------------

ChannelHandleV1 = FastStruct(
    "subtask_index" / Int32sb,
    "a" / Int32sb,  # gate index / partition index
    "b" / Int32sb,  # input channel index / subpartition index
    "offsets" / I64s,
    "state_size" / Int64sb,
    "delegate" / StreamHandle,
)

_CHANNEL_ENTRY = FastStruct("a" / Int32sb, "b" / Int32sb, "state_size" / Int64sb, "offsets" / I64s)
MERGED_CHANNEL_OFFSETS = FastStruct("channels" / BoundedArray(_CHANNEL_ENTRY, 20))

MergedChannelHandle = FastStruct(
    "subtask_index" / Int32sb,
    "state_size" / Int64sb,
    "delegate" / StreamHandle,
    "blob" / LengthPrefixed(MERGED_CHANNEL_OFFSETS),
)

InputChannelHandleV2 = typed_handle(
    "input channel state handle",
    {INPUT_CHANNEL: ChannelHandleV1, MERGED_INPUT_CHANNEL: MergedChannelHandle},
)
OutputChannelHandleV2 = typed_handle(
    "result subpartition state handle",
    {RESULT_SUBPARTITION: ChannelHandleV1, MERGED_RESULT_SUBPARTITION: MergedChannelHandle},
)
