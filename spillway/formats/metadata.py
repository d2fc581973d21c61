"""The ``_metadata`` container and its per-version bodies (docs/format/versions.md), as construct layouts.

A body is composed from field sets according to the version's row of the format-features table
(spillway.flink.features): coordinator state, channel-state lists in the version's channel-handle
layout, FLIP-147 markers, the properties trailer, operator name/uid, reference checkpoint ids. A
version with several dialects (V3: Flink 1.11 wrote channel handles without a subtask index) is read
with each dialect in turn; the body records the one that matched (``dialect``) and building uses it.
"""

from __future__ import annotations

from functools import cache
from typing import Any

from construct import (
    Const,
    Construct,
    ConstructError,
    GreedyBytes,
    If,
    Int8ub,
    Int32sb,
    Int32ub,
    Int64sb,
    this,
)

from spillway.flink.features import SUPPORTED_VERSIONS, FormatFeatures, dialects
from spillway.formats.handles import CoordinatorHandle, KeyedHandle, OperatorHandle, channel_lists
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

__all__ = ["METADATA_MAGIC", "SUPPORTED_VERSIONS", "body", "metadata_layout", "operator_layout"]

METADATA_MAGIC = 0x4960672D
MASTER_STATE_MAGIC = 0xC96B1696

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


def _subtask_entry(features: FormatFeatures) -> FastStruct:
    state = FastStruct(
        *SUBTASK_COMMON,
        *channel_lists(features.channel_layout),
        *(REF_CHECKPOINT if features.ref_checkpoint_ids else ()),
    )
    # e >= 0: subtask index followed by its state; e < 0: finished subtask -(index+1), nothing follows.
    return FastStruct("marker" / Int32sb, "state" / If(this.marker >= 0, state))


def _operator_v3plus(features: FormatFeatures) -> FastStruct:
    return FastStruct(
        *(NAME_AND_UID if features.names_and_uids else ()),
        *OPERATOR_HEAD,
        "coordinator_state" / CoordinatorHandle,
        # -1 (any negative) = fully finished operator: no subtask entries follow.
        "subtask_count" / Int32sb,
        Require(
            lambda ctx: ctx["subtask_count"] >= 0 or ctx["coordinator_state"]["type"] == 0,
            "a fully finished operator must not have coordinator state",
            4,
        ),
        "subtasks" / If(this.subtask_count >= 0, CountedArray(this.subtask_count, _subtask_entry(features), 4)),
    )


@cache
def operator_layout(features: FormatFeatures) -> FastStruct:
    """The layout of one operator's state, for one row of the features table."""
    return OperatorV2 if features.legacy_subtask_fields else _operator_v3plus(features)


@cache
def body(features: FormatFeatures) -> FastStruct:
    """The layout of everything after the header, for one row of the features table."""
    operator = operator_layout(features)
    # V2: id 16, parallelisms 8, chain length 4, subtask count 4. V3+: id 16, parallelisms 8,
    # coordinator type byte 1, subtask count 4; name and uid 2 bytes each
    min_operator = 32 if features.legacy_subtask_fields else 29 + (4 if features.names_and_uids else 0)
    return FastStruct(
        "checkpoint_id" / Int64sb,
        Require(lambda ctx: ctx["checkpoint_id"] >= 0, lambda ctx: f"invalid checkpoint id {ctx['checkpoint_id']}", 8),
        "master_states" / BoundedArray(MasterState, 8),
        "operators" / BoundedArray(operator, min_operator),
        # A Java-serialized CheckpointProperties object runs to the end of the file.
        *(("properties_raw" / GreedyBytes,) if features.properties else (EndOfData("the last operator"),)),
    )


class Dialects(Construct):
    """The body of a version with several dialects: the first that parses is recorded in the result
    (``dialect``) and building uses it again. When none parses, the error is the first one's (the
    most common dialect)."""

    def __init__(self, choices: tuple[FormatFeatures, ...]):
        super().__init__()
        self.choices = [(f.dialect, body(f)) for f in choices]

    def _parse(self, stream: Any, context: Any, path: str) -> Any:
        start = stream.tell()
        for dialect, sub in self.choices:
            try:
                obj = sub._parsereport(stream, context, path)
            except ConstructError:
                stream.seek(start)
                continue
            obj["dialect"] = dialect
            return obj
        return self.choices[0][1]._parsereport(stream, context, path)  # raises the first dialect's error

    def _build(self, obj: Any, stream: Any, context: Any, path: str) -> Any:
        wanted = obj.get("dialect")
        for dialect, sub in self.choices:
            if dialect == wanted:
                return sub._build(obj, stream, context, path)
        raise ConstructError(f"no dialect {wanted!r}", path=path)

    def emit_fast(self, gen: Any, var: str, scope: Any, out: list[str], ind: str) -> None:
        """``spillway.formats.fastparse``: each dialect in turn from the same start."""
        fname = gen.name("parse_dialects")
        lines = [f"def {fname}(data, pos, end):"]
        for dialect, sub in self.choices:
            lines += [
                "    try:",
                f"        obj, after = {gen.function(sub)}(data, pos, end)",
                "    except Exception:",
                "        pass",
                "    else:",
                f"        obj['dialect'] = {dialect!r}",
                "        return obj, after",
            ]
        lines.append("    _fail('no dialect matches')")
        gen.functions.append("\n".join(lines))
        out.append(f"{ind}{var}, pos = {fname}(data, pos, end)")


@cache
def metadata_layout(version: int) -> Construct:
    """Whole-file layout for one version (header included), interpreted: full error paths."""
    choices = dialects(version)
    return FastStruct("header" / Header, "body" / (body(choices[0]) if len(choices) == 1 else Dialects(choices)))
