"""Flink's state-handle type codes (the byte before each handle in ``_metadata``, written by
MetadataV2V3SerializerBase and its channel-state counterpart; docs/format/handles.md) and the Java class
each code stands for. The one table: the model's ``code``/``flink_class`` and the codec's registry
(``spillway.formats.handles``) are both read from here."""

from __future__ import annotations

# Type codes of stream, keyed and operator state handles.
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

# Flink's class per code (the main one where a code covers several: 17 is also the empty variant).
FLINK_CLASS: dict[int, str] = {
    NULL: "null",
    BYTE_STREAM: "ByteStreamStateHandle",
    FILE: "FileStateHandle",
    KEY_GROUPS: "KeyGroupsStateHandle",
    PARTITIONABLE_OPERATOR: "OperatorStreamStateHandle",
    INCREMENTAL_KEY_GROUPS: "IncrementalRemoteKeyedStateHandle",
    RELATIVE_FILE: "RelativeFileStateHandle",
    SAVEPOINT_KEY_GROUPS: "KeyGroupsSavepointStateHandle",
    CHANGELOG: "ChangelogStateBackendHandleImpl",
    CHANGELOG_BYTE_INCREMENT: "InMemoryChangelogStateHandle",
    CHANGELOG_FILE_INCREMENT: "ChangelogStateHandleStreamImpl",
    INCREMENTAL_KEY_GROUPS_V2: "IncrementalRemoteKeyedStateHandle",
    KEY_GROUPS_V2: "KeyGroupsStateHandle",
    CHANGELOG_FILE_INCREMENT_V2: "ChangelogStateHandleStreamImpl",
    CHANGELOG_V2: "ChangelogStateBackendHandleImpl",
    SEGMENT_FILE: "SegmentFileStateHandle",
    EMPTY_SEGMENT_FILE: "EmptySegmentFileStateHandle",
    SEGMENT_PARTITIONABLE_OPERATOR: "FileMergingOperatorStreamStateHandle",
}
EMPTY_FILE_MERGING_OPERATOR_CLASS = "EmptyFileMergingOperatorStreamStateHandle"  # code 17, is_empty set

# Type bytes of the typed channel-handle layout (metadata V6+), and their classes.
INPUT_CHANNEL = 1
RESULT_SUBPARTITION = 2
MERGED_INPUT_CHANNEL = 3
MERGED_RESULT_SUBPARTITION = 4

CHANNEL_FLINK_CLASS: dict[int, str] = {
    INPUT_CHANNEL: "InputChannelStateHandle",
    RESULT_SUBPARTITION: "ResultSubpartitionStateHandle",
    MERGED_INPUT_CHANNEL: "MergedInputChannelStateHandle",
    MERGED_RESULT_SUBPARTITION: "MergedResultSubpartitionStateHandle",
}
