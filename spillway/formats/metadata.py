"""The ``_metadata`` container and its per-version bodies (docs/format/metadata.md), declared as construct layouts.

Versions differ by fields, so each version's layout is composed from field sets rather than derived
from the previous one: V3 adds coordinator state, channel state and FLIP-147 markers to V2; V4 adds
the Java-serialized properties trailer; V5 adds operator name/uid; V6 switches the channel handles to
the typed (mergeable) encoding; V7 adds an optional reference checkpoint id per subtask.
"""

from __future__ import annotations

from functools import cache

from construct import (
    Const,
    Construct,
    GreedyBytes,
    If,
    Int8ub,
    Int32sb,
    Int32ub,
    Int64sb,
    this,
)

from spillway.formats.handles import (
    ChannelHandleV1,
    InputChannelHandleV2,
    KeyedHandle,
    OperatorHandle,
    OutputChannelHandleV2,
    StreamHandle,
    typed_handle,
)
from spillway.formats.primitives import (
    BoundedArray,
    BoundedBytes,
    CountedArray,
    EndOfData,
    FastStruct,
    JavaString,
    LengthPrefixed,
    OperatorIdHex,
    Require,
)

METADATA_MAGIC = 0x4960672D
MASTER_STATE_MAGIC = 0xC96B1696
SUPPORTED_VERSIONS = (2, 3, 4, 5, 6, 7)

Header = FastStruct("magic" / Int32ub, "version" / Int32sb)

MasterState = FastStruct(
    "magic" / Const(MASTER_STATE_MAGIC, Int32ub),
    "blob"
    / LengthPrefixed(
        FastStruct("version" / Int32sb, "name" / JavaString, "payload" / BoundedBytes()),
    ),
)

# SubtaskCommon: two optional operator handles behind an int "present" flag, two keyed handles.
# The flag is kept as read (Flink accepts any non-zero value) so that build reproduces the bytes.
SUBTASK_COMMON = (
    "managed_operator_present" / Int32sb,
    "managed_operator_state" / If(this.managed_operator_present != 0, OperatorHandle),
    "raw_operator_present" / Int32sb,
    "raw_operator_state" / If(this.raw_operator_present != 0, OperatorHandle),
    "managed_keyed_state" / KeyedHandle,
    "raw_keyed_state" / KeyedHandle,
)

CHANNEL_LISTS_V1 = (
    "input_channel_state" / BoundedArray(ChannelHandleV1, 29),
    "result_subpartition_state" / BoundedArray(ChannelHandleV1, 29),
)
CHANNEL_LISTS_V2 = (
    "input_channel_state" / BoundedArray(InputChannelHandleV2, 1),
    "result_subpartition_state" / BoundedArray(OutputChannelHandleV2, 1),
)
REF_CHECKPOINT = (
    "ref_marker" / Int8ub,
    "ref_checkpoint_id" / If(this.ref_marker == 1, Int64sb),
)

OPERATOR_HEAD = (
    "operator_id" / OperatorIdHex,
    "parallelism" / Int32sb,
    "max_parallelism" / Int32sb,
)
NAME_AND_UID = ("name" / JavaString, "uid" / JavaString)

SubtaskV2 = FastStruct(
    "index" / Int32sb,
    "legacy_duration" / Int64sb,
    "legacy_state_count" / Int32sb,
    Require(
        lambda ctx: ctx["legacy_state_count"] <= 0,
        "legacy state (from Flink <= 1.1) is no longer supported",
        4,
    ),
    *SUBTASK_COMMON,
)
OperatorV2 = FastStruct(
    *OPERATOR_HEAD,
    "chain_length" / Int32sb,
    "subtasks" / BoundedArray(SubtaskV2, 26),
)


def _subtask_entry(channel_lists: tuple, ref_checkpoint: bool) -> FastStruct:
    state = FastStruct(*SUBTASK_COMMON, *channel_lists, *(REF_CHECKPOINT if ref_checkpoint else ()))
    # e >= 0: subtask index followed by its state; e < 0: finished subtask -(index+1), nothing follows.
    return FastStruct("marker" / Int32sb, "state" / If(this.marker >= 0, state))


def _operator_v3plus(version: int) -> FastStruct:
    channel_lists = CHANNEL_LISTS_V2 if version >= 6 else CHANNEL_LISTS_V1
    entry = _subtask_entry(channel_lists, ref_checkpoint=version >= 7)
    return FastStruct(
        *(NAME_AND_UID if version >= 5 else ()),
        *OPERATOR_HEAD,
        "coordinator_state" / CoordinatorHandle,
        # -1 (any negative) = fully finished operator: no subtask entries follow.
        "subtask_count" / Int32sb,
        Require(
            lambda ctx: ctx["subtask_count"] >= 0 or ctx["coordinator_state"]["type"] == 0,
            "a fully finished operator must not have coordinator state",
            4,
        ),
        "subtasks" / If(this.subtask_count >= 0, CountedArray(this.subtask_count, entry, 4)),
    )


# Flink reads coordinator state as a stream handle but accepts only null or inline bytes.
CoordinatorHandle = typed_handle(
    "coordinator state handle (only null or ByteStreamStateHandle allowed)",
    {0: StreamHandle.body.cases[0], 1: StreamHandle.body.cases[1]},
)


@cache
def body(version: int) -> FastStruct:
    operator = OperatorV2 if version == 2 else _operator_v3plus(version)
    min_operator = {2: 32, 3: 29, 4: 29}.get(version, 33)
    return FastStruct(
        "checkpoint_id" / Int64sb,
        Require(lambda ctx: ctx["checkpoint_id"] >= 0, lambda ctx: f"invalid checkpoint id {ctx['checkpoint_id']}", 8),
        "master_states" / BoundedArray(MasterState, 8),
        "operators" / BoundedArray(operator, min_operator),
        # V4+: a Java-serialized CheckpointProperties object runs to the end of the file.
        *(("properties_raw" / GreedyBytes,) if version >= 4 else (EndOfData("the last operator"),)),
    )


@cache
def metadata_layout(version: int) -> Construct:
    """Whole-file layout for one version (header included), interpreted: full error paths."""
    return FastStruct("header" / Header, "body" / body(version))


@cache
def compiled_layout(version: int) -> Construct:
    """Same layout compiled to Python source: several times faster, error messages without paths."""
    return metadata_layout(version).compile()
