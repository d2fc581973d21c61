"""Which ``_metadata`` format version stores what, and which Flink releases write it.

One row per format version (and per *dialect*: a version whose layout differs between the releases
that write it). Layouts, the codec and the checks ask this table instead of comparing version
numbers; the facts behind it are in ``docs/format/versions.md``.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from enum import Enum
from typing import NamedTuple


class Release(NamedTuple):
    """A Flink release line, (major, minor): the one representation of a release in spillway's tables (this one,
    the chaining rules, the stream-element tags). Compares as the tuple; prints as ``1.20``."""

    major: int
    minor: int

    def __str__(self) -> str:
        return f"{self.major}.{self.minor}"


NEWEST_RELEASE = Release(2, 3)  # the newest Flink release this table was checked against

_RELEASE = re.compile(r"(\d+)\.(\d+)")


def parse_release(release: str | Release) -> Release:
    """``"1.20.3"``, ``"1.20"``, ``"2.3-SNAPSHOT"``, ``"release-1.20.3"`` -> ``Release(1, 20)`` …: the one way
    release strings (of users, fixtures, jars) become comparable. A ``Release`` is returned as it is."""
    if isinstance(release, Release):
        return release
    m = _RELEASE.search(release)
    if m is None:
        raise ValueError(f"not a Flink release: {release!r}")
    return Release(int(m.group(1)), int(m.group(2)))


class ChannelLayout(Enum):
    """How a version encodes unaligned-checkpoint channel-state handles."""

    NONE = "none"  # V2: no channel state at all
    UNINDEXED = "unindexed"  # V3 by Flink 1.11: (index pair, offsets, size, delegate), no subtask index
    INDEXED = "indexed"  # V3-V5 by Flink 1.12-2.0: the subtask index first, then as UNINDEXED
    TYPED = "typed"  # V6+: a type byte per handle; single (as INDEXED) or merged handles


@dataclass(frozen=True, slots=True)
class FormatFeatures:
    version: int
    first_release: Release | None  # the first Flink release whose files read as this row; None: none yet
    last_release: Release | None  # the last one; None: no released Flink writes it yet
    channel_layout: ChannelLayout
    legacy_subtask_fields: bool  # V2: chain length per operator, duration and state count per subtask
    coordinator_state: bool  # operator-coordinator state per operator
    finished_markers: bool  # the layout can say "finished" (FLIP-147; written from Flink 1.14 on)
    properties: bool  # a Java-serialized CheckpointProperties object ends the file
    names_and_uids: bool  # operator name and uid stored per operator
    ref_checkpoint_ids: bool  # an optional reference checkpoint id per running subtask
    relative_file_handles: bool  # the releases writing it read RelativeFileStateHandle (type 6, Flink 1.11+)
    dialect: str | None = None  # None: the version's usual layout

    @property
    def channel_state(self) -> bool:
        return self.channel_layout is not ChannelLayout.NONE

    @property
    def merged_channel_handles(self) -> bool:
        return self.channel_layout is ChannelLayout.TYPED

    @property
    def channel_subtask_index(self) -> bool:
        """Whether channel handles store their subtask index (Flink 1.11's do not)."""
        return self.channel_layout in (ChannelLayout.INDEXED, ChannelLayout.TYPED)

    @property
    def releases(self) -> str:
        """``Flink 1.11-1.15``, ``Flink 2.0``, ``Flink after 2.3``."""
        if self.first_release is None:
            return f"Flink after {NEWEST_RELEASE}"
        if self.last_release == self.first_release:
            return f"Flink {self.first_release}"
        return f"Flink {self.first_release}-{self.last_release}"


_V2 = FormatFeatures(
    version=2,
    first_release=Release(1, 3),
    last_release=Release(1, 10),
    channel_layout=ChannelLayout.NONE,
    legacy_subtask_fields=True,
    coordinator_state=False,
    finished_markers=False,
    properties=False,
    names_and_uids=False,
    ref_checkpoint_ids=False,
    relative_file_handles=False,
)
# A V3 file without channel state reads the same in both dialects, so this row may also be Flink 1.11's.
_V3 = FormatFeatures(
    version=3,
    first_release=Release(1, 11),
    last_release=Release(1, 15),
    channel_layout=ChannelLayout.INDEXED,
    legacy_subtask_fields=False,
    coordinator_state=True,
    finished_markers=True,
    properties=False,
    names_and_uids=False,
    ref_checkpoint_ids=False,
    relative_file_handles=True,
)
# Flink 1.11 introduced V3; 1.12 added the subtask index to every channel handle without a new version.
_V3_FLINK_1_11 = FormatFeatures(
    version=3,
    first_release=Release(1, 11),
    last_release=Release(1, 11),
    channel_layout=ChannelLayout.UNINDEXED,
    legacy_subtask_fields=False,
    coordinator_state=True,
    finished_markers=True,
    properties=False,
    names_and_uids=False,
    ref_checkpoint_ids=False,
    relative_file_handles=True,
    dialect="flink-1.11",
)
_V4 = FormatFeatures(
    version=4,
    first_release=Release(1, 16),
    last_release=Release(1, 20),
    channel_layout=ChannelLayout.INDEXED,
    legacy_subtask_fields=False,
    coordinator_state=True,
    finished_markers=True,
    properties=True,
    names_and_uids=False,
    ref_checkpoint_ids=False,
    relative_file_handles=True,
)
_V5 = FormatFeatures(
    version=5,
    first_release=Release(2, 0),
    last_release=Release(2, 0),
    channel_layout=ChannelLayout.INDEXED,
    legacy_subtask_fields=False,
    coordinator_state=True,
    finished_markers=True,
    properties=True,
    names_and_uids=True,
    ref_checkpoint_ids=False,
    relative_file_handles=True,
)
_V6 = FormatFeatures(
    version=6,
    first_release=Release(2, 1),
    last_release=Release(2, 3),
    channel_layout=ChannelLayout.TYPED,
    legacy_subtask_fields=False,
    coordinator_state=True,
    finished_markers=True,
    properties=True,
    names_and_uids=True,
    ref_checkpoint_ids=False,
    relative_file_handles=True,
)
_V7 = FormatFeatures(
    version=7,
    first_release=None,
    last_release=None,
    channel_layout=ChannelLayout.TYPED,
    legacy_subtask_fields=False,
    coordinator_state=True,
    finished_markers=True,
    properties=True,
    names_and_uids=True,
    ref_checkpoint_ids=True,
    relative_file_handles=True,
)

# Per version: its dialects, the one to try first (the most common) first.
_TABLE: dict[int, tuple[FormatFeatures, ...]] = {
    2: (_V2,),
    3: (_V3, _V3_FLINK_1_11),
    4: (_V4,),
    5: (_V5,),
    6: (_V6,),
    7: (_V7,),
}
SUPPORTED_VERSIONS: tuple[int, ...] = tuple(_TABLE)


def dialects(version: int) -> tuple[FormatFeatures, ...]:
    """Every dialect of ``version``, in the order a reader should try them."""
    try:
        return _TABLE[version]
    except KeyError:
        raise ValueError(f"unknown metadata format version {version}") from None


def format_features(version: int, dialect: str | None = None) -> FormatFeatures:
    for f in dialects(version):
        if f.dialect == dialect:
            return f
    raise ValueError(f"metadata format version {version} has no dialect {dialect!r}")


__all__ = [
    "NEWEST_RELEASE",
    "SUPPORTED_VERSIONS",
    "ChannelLayout",
    "FormatFeatures",
    "Release",
    "dialects",
    "format_features",
    "parse_release",
]
