"""The elements of channel state, declared once: tags, layouts, sizes and the rule for a framing fault.

Every reader of in-flight data uses this module: ``validate`` (``record_framing.Framer`` and its C twin,
which receives these tables at start-up), ``analyze`` (``record_reader``), rescale's router and the
self-check that re-reads what the router wrote. The byte format is described, with the releases that
write each tag, in ``docs/format/stream-elements.md``.

A logical channel is a plain sequence of ``i32 length`` (big-endian, signed) + ``length`` bytes of one
serialized element. The element's first byte is its tag; what follows is fixed by the tag, except for
records, whose fixed head (an optional timestamp) is followed by the value in the user type's own
serializer (kept raw here).
"""

from __future__ import annotations

import struct
from collections.abc import Iterator
from dataclasses import dataclass, field

from construct import Construct, Flag, GreedyBytes, If, Int8ub, Int32sb, Int64sb, Struct, Switch, this

from spillway.flink.features import Release, dialects

TAG_RECORD_WITH_TIMESTAMP = 0
TAG_RECORD = 1
TAG_WATERMARK = 2
TAG_LATENCY_MARKER = 3
TAG_WATERMARK_STATUS = 4
TAG_RECORD_ATTRIBUTES = 5
TAG_INTERNAL_WATERMARK = 6

LENGTH_FIELD = 4  # bytes of the length prefix in front of every element
INT32_MAX = (1 << 31) - 1  # a length field is a signed 32-bit integer: no element is longer
# The largest element rescale holds in memory. Not a Flink limit (Flink frames up to INT32_MAX bytes): readers
# that keep whole elements and do not know where the stream ends pass it as ``limit`` to ``length_fault``, so a
# corrupt length field is refused where it is read instead of after buffering the rest of the channel.
MAX_ELEMENT = 256 * 1024 * 1024


@dataclass(frozen=True)
class ElementKind:
    tag: int
    name: str  # as reports count it
    head: Construct  # the fixed-size fields after the tag byte (records: the fields before the value)
    carries_value: bool  # a record: the user value follows the head
    since: Release  # first Flink release whose StreamElementSerializer writes this tag
    event_time: bool = False  # the head's ``timestamp`` is the element's event time (shown by analyze)
    # Derived from ``head`` once (readers consult them per element):
    head_size: int = field(init=False)  # tag byte + head: the whole element if it carries no value
    value_offset: int | None = field(init=False)  # where a record's value starts
    min_length: int = field(init=False)
    max_length: int = field(init=False)
    event_time_offset: int | None = field(init=False)  # where the event time (an i64) starts

    def __post_init__(self) -> None:
        offsets, at = {}, 1
        for sub in self.head.subcons:
            offsets[sub.name] = at
            at += int(sub.sizeof())
        derived = {
            "head_size": at,
            "value_offset": at if self.carries_value else None,
            "min_length": at,
            "max_length": INT32_MAX if self.carries_value else at,
            "event_time_offset": offsets["timestamp"] if self.event_time else None,
        }
        for name, value in derived.items():
            object.__setattr__(self, name, value)


_TIMESTAMP = Struct("timestamp" / Int64sb)

KINDS: tuple[ElementKind, ...] = (
    ElementKind(TAG_RECORD_WITH_TIMESTAMP, "record", _TIMESTAMP, True, Release(1, 0), event_time=True),
    ElementKind(TAG_RECORD, "record", Struct(), True, Release(1, 0)),
    ElementKind(TAG_WATERMARK, "watermark", _TIMESTAMP, False, Release(1, 0), event_time=True),
    ElementKind(
        TAG_LATENCY_MARKER,
        "latency marker",
        Struct(
            "marked_time" / Int64sb,
            "operator_id_lower" / Int64sb,
            "operator_id_upper" / Int64sb,
            "subtask_index" / Int32sb,
        ),
        False,
        Release(1, 0),
    ),
    ElementKind(TAG_WATERMARK_STATUS, "watermark status", Struct("status" / Int32sb), False, Release(1, 0)),
    ElementKind(TAG_RECORD_ATTRIBUTES, "record attributes", Struct("is_backlog" / Flag), False, Release(1, 19)),
    ElementKind(
        TAG_INTERNAL_WATERMARK,
        "internal watermark",
        Struct("subpartition_index" / Int32sb, "timestamp" / Int64sb),
        False,
        Release(1, 19),
    ),
)
ELEMENTS: dict[int, ElementKind] = {k.tag: k for k in KINDS}
TAG_NAMES: dict[int, str] = {k.tag: k.name for k in KINDS}


def element_name(tag: int) -> str:
    """The kind of element a tag byte announces, as reports name it (``tag N`` for an unknown one)."""
    return TAG_NAMES.get(tag, f"tag {tag}")


RECORD_TAGS = frozenset(k.tag for k in KINDS if k.carries_value)
ALL_TAGS = frozenset(ELEMENTS)
TAGS_BEFORE_1_19 = frozenset(k.tag for k in KINDS if k.since < Release(1, 19))

# One whole element (record values kept as raw bytes), composed from the table.
StreamElement = Struct(
    "tag" / Int8ub,
    "head" / Switch(this.tag, {k.tag: k.head for k in KINDS}),
    "value" / If(lambda ctx: ctx.tag in RECORD_TAGS, GreedyBytes),
)


def tags_for_format_version(version: int) -> frozenset[int]:
    """Tags some release writing this ``_metadata`` version can put into channel state (the releases per
    version: ``flink.features``). V4 is written by 1.16-1.18 (tags 0-4) and by 1.19-1.20 (tags 0-6) alike and
    cannot tell them apart: it allows all, so a 1.19 tag in a V4 checkpoint is never reported as unknown. A
    version no known release writes allows every known tag."""
    try:
        newest = [f.last_release for f in dialects(version)]
    except ValueError:
        return ALL_TAGS
    if any(r is None for r in newest):
        return ALL_TAGS
    last = max(r for r in newest if r is not None)
    return frozenset(k.tag for k in KINDS if k.since <= last)


# ---------------------------------------------------------------------------------------------------
# The fault rule. A length field is a fault if it is not positive (every element has its tag byte), if it
# claims more bytes than the stream still holds (where the reader knows the end), or if it exceeds the
# reader's ``limit`` (rescale: MAX_ELEMENT). An element is a fault if its tag is not one the release writes,
# or if its length does not fit the tag (fixed-size elements exactly, records at least their head). After a
# length fault the element boundaries are lost; after an element fault they are not.


def length_fault(length: int, left: int | None = None, limit: int | None = None) -> str | None:
    """Why ``length`` cannot be an element's length field, or None. ``left``: bytes after the field up to the
    stream's end (None: unknown); ``limit``: the most the reader accepts (None: no limit of its own)."""
    if length <= 0:
        return "not positive"
    if left is not None:
        left = max(left, 0)  # a stream that ended before this field (e.g. a file with a bad header) has 0
    if left is not None and length > left:
        return f"more than the {left} bytes left in the channel"
    if limit is not None and length > limit:
        return f"more than the {limit} bytes an element may have here"
    return None


@dataclass(frozen=True, slots=True)
class ElementFault:
    kind: str  # "tag" or "size"
    message: str


def element_fault(tag: int, length: int, tags: frozenset[int] = ALL_TAGS) -> ElementFault | None:
    """The fault of an element with this tag byte and length field, or None if it is well formed."""
    kind = ELEMENTS.get(tag)
    if kind is None or tag not in tags:
        return ElementFault("tag", f"unknown StreamElement tag {tag} (valid: {sorted(tags)})")
    if kind.carries_value:
        if length < kind.min_length:
            return ElementFault("size", f"{kind.name} of {length} bytes, at least {kind.min_length} expected")
    elif length != kind.head_size:
        return ElementFault("size", f"{kind.name} of {length} bytes, expected {kind.head_size}")
    return None


def size_bounds(tags: frozenset[int] = ALL_TAGS) -> list[tuple[int, int]]:
    """(min, max) element length per tag byte 0..255; (1, 0) for tags not in ``tags`` (nothing fits). The
    table the C framer checks elements with."""
    out = [(1, 0)] * 256
    for tag in tags:
        kind = ELEMENTS.get(tag)
        if kind is not None:
            out[tag] = (kind.min_length, kind.max_length)
    return out


# ---------------------------------------------------------------------------------------------------
# The reference walk over a buffer holding (part of) a stream. ``record_framing.Framer`` (pieces of any size,
# no buffering), its C twin and the numpy runs of ``uniform_runs`` are tested equal to it.

_LENGTH = struct.Struct(">i")


class LengthFault(Exception):
    """A length field breaks ``length_fault``: the element boundaries after it are lost."""

    def __init__(self, position: int, length: int, why: str) -> None:
        super().__init__(f"length field {length} at {position} is {why}")
        self.position = position  # of the length field in the walked buffer
        self.length = length
        self.why = why


def split_elements(
    data: bytes | bytearray | memoryview,
    start: int = 0,
    stop: int | None = None,
    *,
    end: int | None = None,
    limit: int | None = None,
) -> Iterator[tuple[int, int, int]]:
    """``(position of the length field, length, tag)`` of each whole element in ``data[start:stop]``, in order,
    until one does not fit (its position is then ``start`` of the rest). ``end``: where the stream ends, in
    ``data``'s positions, when the reader knows it. Raises ``LengthFault``; element faults are the caller's
    (``element_fault``), since the walk can go on after them."""
    stop = len(data) if stop is None else stop
    unpack = _LENGTH.unpack_from
    p = start
    while stop - p >= LENGTH_FIELD:
        (length,) = unpack(data, p)
        left = None if end is None else end - p - LENGTH_FIELD
        why = length_fault(length, left, limit)
        if why is not None:
            raise LengthFault(p, length, why)
        after = p + LENGTH_FIELD + length
        if after > stop:
            return
        yield p, length, data[p + LENGTH_FIELD]
        p = after
