"""Which new vertices Flink holds to the checkpoint's max parallelism, on placements the recorded restores do not
separate: the counted job's real operators (2.0.0-counted, max parallelism 128 as Counted.java sets it) in new
vertices one above it. Flink's rule (StateAssignmentOperation.checkParallelismPreconditions) applies to every task
that gets state assigned: a vertex holding restored state, and a stateless vertex on the other side of an exchange
whose channel state is restored (on 2.0.0 Flink refused above-max-parallelism naming the stateless "len -> sink"
vertex, tests/fixtures/preflight-matrix/2.0.0/above-max-parallelism/flink.json)."""

from __future__ import annotations

from functools import cache

from support.fixtures import fixture_named

from spillway.inspect.restore_checks import REFUSED, NewVertex, Placement, Settings, max_parallelism
from spillway.model.checkpoint import CheckpointMetadata
from spillway.storage.load import load_checkpoint


@cache
def counted() -> CheckpointMetadata:
    return load_checkpoint(fixture_named("2.0.0-counted").checkpoint_dir).checkpoint


def op_id(uid: str) -> str:
    return next(o.operator_id for o in counted().operators if o.uid == uid)


def _above(where: dict[str, tuple[str, int]], vertices: dict[str, NewVertex]) -> list[tuple[str | None, str]]:
    place = Placement(vertices, where, [], [])
    return [(r.operator, r.verdict) for r in max_parallelism(place, counted(), Settings(no_max_parallelism=True))]


def test_a_vertex_holding_keyed_state_alone_above_the_max_parallelism_is_refused() -> None:
    assert max(o.max_parallelism for o in counted().operators) == 128
    alone = {"k": NewVertex("k", "k", 129, 1, [], [])}
    assert _above({op_id("count"): ("k", 0)}, alone) == [(op_id("count"), REFUSED)]
    at_max = {"k": NewVertex("k", "k", 128, 1, [], [])}
    assert _above({op_id("count"): ("k", 0)}, at_max) == []


def test_a_stateless_vertex_feeding_restored_input_channel_state_is_held_to_it_too() -> None:
    """parse restores input channel state on gate 0 (2 subtasks, as checkpointed); the sink writer, stateless,
    sits in the vertex that feeds that gate at 129."""
    vertices = {
        "up": NewVertex("up", "up", 129, 1, [], [("p", 0, "REBALANCE")]),
        "p": NewVertex("p", "p", 2, 1, [("up", 0, "REBALANCE")], []),
    }
    assert _above({op_id("parse"): ("p", 0), op_id("sink"): ("up", 0)}, vertices) == [(op_id("sink"), REFUSED)]
