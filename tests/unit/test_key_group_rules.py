"""validate's keyed-state rules (docs/validate.md: ``key-group-tiling``, ``key-group-gap``, ``key-group-range``,
``key-group-clipped``) on the keyed operators of real checkpoints, their ranges moved in memory.

Expected ranges come from the fixtures as Flink wrote them and from Flink's own assignment
(``KeyGroupRangeAssignment.computeKeyGroupRangeForOperatorIndex``, restated below), never from spillway."""

from __future__ import annotations

from copy import deepcopy

import pytest
from support.fixtures import all_fixtures, fixture_named

from spillway.formats.metadata_codec import decode_metadata
from spillway.inspect.rules.key_groups import key_group_findings
from spillway.model.checkpoint import KeyGroupRange, OperatorState

LABEL = "the-operator"  # how the caller names the operator: every finding must carry it
Row = tuple[str, str, str | None, int | None]


def _flink_range(max_parallelism: int, parallelism: int, index: int) -> tuple[int, int]:
    """KeyGroupRangeAssignment.computeKeyGroupRangeForOperatorIndex: [start, end], both inclusive."""
    start = (index * max_parallelism + parallelism - 1) // parallelism
    end = ((index + 1) * max_parallelism + parallelism - 1) // parallelism - 1
    return start, end


def _keyed(fixture: str) -> OperatorState:
    """The one operator of ``fixture`` with keyed state (Flink wrote it at parallelism 2 or 3, max parallelism 128)."""
    cp = decode_metadata(fixture_named(fixture).metadata.read_bytes())
    (op,) = [o for o in cp.operators if any(s.managed_keyed_state for s in o.subtasks)]
    return op


def _rows(op: OperatorState, label: str | None = LABEL) -> list[Row]:
    return [(f.rule, f.message, f.operator, f.subtask) for f in key_group_findings(op, label)]


def _move(op: OperatorState, index: int, start: int, count: int) -> None:
    """Give subtask ``index``'s managed keyed state the range [start, start + count) (one offset per group)."""
    h = op.subtasks[index].managed_keyed_state
    assert h is not None
    h.key_groups = KeyGroupRange(start, count)
    if hasattr(h, "offsets"):
        h.offsets = list(range(count))


@pytest.mark.parametrize("fixture", [f for f in all_fixtures()], ids=lambda f: f.name)
def test_keyed_state_as_flink_wrote_it_breaks_no_key_group_rule(fixture) -> None:  # type: ignore[no-untyped-def]
    cp = decode_metadata(fixture.metadata.read_bytes())
    for op in cp.operators:
        assert _rows(op) == [], op.operator_id


def test_the_fixtures_ranges_are_the_ones_flink_assigns() -> None:
    """The premise of the tests below: Flink's formula gives the ranges the fixtures hold."""
    for name in ("1.20.3-prod", "1.20.3-rocksdb-incremental", "1.20.3-rocksdb-incremental-p3"):
        op = _keyed(name)
        held = [(s.managed_keyed_state.key_groups.start, s.managed_keyed_state.key_groups.last) for s in op.subtasks]
        assert held == [_flink_range(op.max_parallelism, op.parallelism, i) for i in range(op.parallelism)], name


def test_a_range_moved_down_overlaps_its_neighbour_and_leaves_the_top_uncovered() -> None:
    op = _keyed("1.20.3-prod")  # [0, 63] and [64, 127] of 128
    _move(op, 1, 60, 64)
    assert _rows(op) == [
        ("key-group-range", "managed_keyed_state covers [60, 123], Flink assigns [64, 127]", LABEL, 1),
        ("key-group-tiling", "managed_keyed_state key groups [60, 63] also held by another subtask", LABEL, 1),
        ("key-group-gap", "managed_keyed_state: no subtask holds key groups [124, 127]", LABEL, None),
    ]


def test_a_range_inside_another_overlaps_only_where_it_lies() -> None:
    """An overlap names the part of the range already held: up to the end of the range, not past it."""
    op = _keyed("1.20.3-rocksdb-incremental-p3")  # [0, 42], [43, 85], [86, 127]
    _move(op, 1, 10, 5)
    assert _rows(op) == [
        ("key-group-range", "managed_keyed_state covers [10, 14], Flink assigns [43, 85]", LABEL, 1),
        ("key-group-tiling", "managed_keyed_state key groups [10, 14] also held by another subtask", LABEL, 1),
        ("key-group-gap", "managed_keyed_state: no subtask holds key groups [43, 85]", LABEL, None),
    ]


def test_a_range_past_max_parallelism_or_below_zero_is_outside() -> None:
    op = _keyed("1.20.3-prod")
    _move(op, 1, 64, 65)  # [64, 128]: one past the last key group
    assert _rows(op) == [
        ("key-group-tiling", "managed_keyed_state key groups [64, 128] outside [0, 128)", LABEL, 1),
        ("key-group-range", "managed_keyed_state covers [64, 128], Flink assigns [64, 127]", LABEL, 1),
    ]
    op = _keyed("1.20.3-prod")
    _move(op, 0, -1, 65)
    assert _rows(op) == [
        ("key-group-tiling", "managed_keyed_state key groups [-1, 63] outside [0, 128)", LABEL, 0),
        ("key-group-range", "managed_keyed_state covers [-1, 63], Flink assigns [0, 63]", LABEL, 0),
    ]  # key group -1 is outside, not held by another subtask too


def test_an_empty_range_holds_nothing_and_is_not_judged() -> None:
    """Flink writes an empty range as [0, -1] (KeyGroupRange.EMPTY_KEY_GROUP_RANGE): no range to compare, so only
    the gap the subtask leaves."""
    op = _keyed("1.20.3-prod")
    _move(op, 1, 0, 0)
    assert _rows(op) == [("key-group-gap", "managed_keyed_state: no subtask holds key groups [64, 127]", LABEL, None)]
    op = _keyed("1.20.3-prod")
    _move(op, 1, 200, 0)  # empty, wherever it says it starts
    assert _rows(op) == [("key-group-gap", "managed_keyed_state: no subtask holds key groups [64, 127]", LABEL, None)]


def test_a_missing_offset_is_a_tiling_error() -> None:
    """A full snapshot stores one offset per key group it covers."""
    op = _keyed("1.20.3-prod")
    h = op.subtasks[0].managed_keyed_state
    h.offsets = h.offsets[:-1]  # type: ignore[union-attr]
    assert _rows(op) == [("key-group-tiling", "63 offsets for 64 key groups", LABEL, 0)]


def test_a_whole_instance_handed_to_a_subtask_at_a_higher_parallelism_is_clipped() -> None:
    """An offline rescale may give a subtask a whole RocksDB instance whose range contains Flink's range for it:
    Flink restores only its own range (the rest is deleted), so that is what tiles; an instance not containing it
    is compared as usual."""
    op = _keyed("1.20.3-rocksdb-incremental")  # [0, 63] and [64, 127]
    op.parallelism = 4
    zero, one = _flink_range(128, 4, 0), _flink_range(128, 4, 1)
    assert (zero, one) == ((0, 31), (32, 63))
    assert _rows(op) == [
        ("key-group-clipped", "managed_keyed_state covers [0, 63]; Flink restores only [0, 31] of it", LABEL, 0),
        ("key-group-range", "managed_keyed_state covers [64, 127], Flink assigns [32, 63]", LABEL, 1),
        ("key-group-gap", "managed_keyed_state: no subtask holds key groups [32, 63]", LABEL, None),
    ]


def test_clipping_at_parallelism_equal_to_max_parallelism() -> None:
    """Parallelism may equal max parallelism (one key group each); only beyond it is there no range to compare."""
    op = _keyed("1.20.3-rocksdb-incremental")
    op.parallelism = 128
    assert _rows(op) == [
        ("key-group-clipped", "managed_keyed_state covers [0, 63]; Flink restores only [0, 0] of it", LABEL, 0),
        ("key-group-range", "managed_keyed_state covers [64, 127], Flink assigns [1, 1]", LABEL, 1),
        ("key-group-gap", "managed_keyed_state: no subtask holds key groups [1, 63]", LABEL, None),
    ]
    op = _keyed("1.20.3-rocksdb-incremental")
    op.parallelism = 129
    assert _rows(op) == []


def test_a_full_snapshot_is_never_clipped() -> None:
    """Only an incremental RocksDB instance is restored by range; a full snapshot's range is compared as it is."""
    op = _keyed("1.20.3-prod")
    op.parallelism = 4
    assert _rows(op) == [
        ("key-group-range", "managed_keyed_state covers [0, 63], Flink assigns [0, 31]", LABEL, 0),
        ("key-group-range", "managed_keyed_state covers [64, 127], Flink assigns [32, 63]", LABEL, 1),
    ]


def test_a_subtask_beyond_the_parallelism_gets_no_range_of_its_own() -> None:
    op = _keyed("1.20.3-prod")
    op.parallelism = 1  # Flink assigns subtask 0 everything; subtask 1 does not exist at parallelism 1
    assert _rows(op) == [("key-group-range", "managed_keyed_state covers [0, 63], Flink assigns [0, 127]", LABEL, 0)]
    op = _keyed("1.20.3-rocksdb-incremental")
    op.parallelism = 1
    assert _rows(op) == [("key-group-range", "managed_keyed_state covers [0, 63], Flink assigns [0, 127]", LABEL, 0)]
    op = _keyed("1.20.3-prod")
    op.parallelism = 0  # not a parallelism: no range to compare with
    assert _rows(op) == []


def test_raw_keyed_state_tiles_on_its_own_and_is_named_so() -> None:
    op = _keyed("1.20.3-prod")
    op.subtasks[0].raw_keyed_state = deepcopy(op.subtasks[0].managed_keyed_state)
    assert _rows(op) == [("key-group-gap", "raw_keyed_state: no subtask holds key groups [64, 127]", LABEL, None)]


def test_findings_name_the_operator_by_its_label_by_default() -> None:
    op = _keyed("1.20.3-prod")
    _move(op, 1, 64, 0)
    assert [f.operator for f in key_group_findings(op)] == [op.label()]
    assert op.label() != LABEL


def test_an_instance_reaching_past_either_end_of_flinks_range_is_clipped() -> None:
    """Containing Flink's range is enough, whichever end the instance shares with it: subtask 1 of 2 handed the
    whole [0, 127] restores [64, 127]; at parallelism 1 an instance past max parallelism restores [0, 127]."""
    op = _keyed("1.20.3-rocksdb-incremental")
    _move(op, 1, 0, 128)
    assert _rows(op) == [
        ("key-group-clipped", "managed_keyed_state covers [0, 127]; Flink restores only [64, 127] of it", LABEL, 1),
    ]
    op = _keyed("1.20.3-rocksdb-incremental")
    op.parallelism = 1
    _move(op, 0, 0, 201)
    assert _rows(op)[0] == (
        "key-group-clipped",
        "managed_keyed_state covers [0, 200]; Flink restores only [0, 127] of it",
        LABEL,
        0,
    )


def test_an_incremental_instance_without_a_parallelism_is_compared_with_nothing() -> None:
    op = _keyed("1.20.3-rocksdb-incremental")
    op.parallelism = 0
    assert _rows(op) == []
