"""Key functions for ``spillway rescale --key-fn`` in tests (the fixture jobs' own KeySelectors, in Python)."""

from __future__ import annotations

from spillway.formats.values import read_string


def key_of(payload: bytes) -> str:
    """FixtureJob's KeyOf: the part of a "key:srcSubtask:seq" String before the first ':'."""
    text, _ = read_string(payload, 0)
    assert text is not None
    return text.split(":", 1)[0]


def not_a_key(payload: bytes) -> list[int]:
    """A broken user function: keys must be a str or a Java hash code (int)."""
    return [len(payload)]


def raises(payload: bytes) -> str:
    """A user function that fails on every record."""
    raise ValueError(f"cannot key {len(payload)} bytes")


def parity(payload: bytes) -> bool:
    """A boolean key (hashed as java.lang.Boolean): the low bit of a Tuple2<Long, Long>'s first field."""
    return bool(payload[7] & 1)


NOT_CALLABLE = 3


def first_subtask(payload: bytes, parallelism: int) -> int:
    """A custom partitioner (``partitionCustom``) sending every record to subtask 0."""
    return 0
