"""What preflight's loss section says an operator holds: the kinds of state and their bytes, on the counted job's
2.0.0 checkpoint as Flink wrote it. Expected kinds are the slots of Flink's ``OperatorSubtaskState`` (managed and
raw keyed / operator state, input and output channel state) and the source's ``OperatorCoordinator`` state Flink
stores for a FLIP-27 source; expected bytes are the payloads Flink wrote into those handles (inline in
``_metadata`` for this job: state.storage.fs.memory-threshold)."""

from __future__ import annotations

from dataclasses import replace
from functools import cache

from support.fixtures import fixture_named

from spillway.inspect.restore_checks import (
    LOSS,
    UNKNOWN,
    ChannelFacts,
    FlinkDoes,
    LostInFlight,
    Placement,
    PreflightLoss,
    Reason,
    _dropped,
    cut_partners,
    state_bytes,
    state_kinds,
)
from spillway.model.checkpoint import CheckpointMetadata, OperatorState
from spillway.storage.load import load_checkpoint


@cache
def counted() -> CheckpointMetadata:
    return load_checkpoint(fixture_named("2.0.0-counted").checkpoint_dir).checkpoint


def op(uid: str) -> OperatorState:
    return next(o for o in counted().operators if o.uid == uid)


def test_each_operator_of_the_counted_job_holds_the_kinds_flink_stored() -> None:
    """Counted.java: src is a FLIP-27 source (split state, enumerator state) feeding parse over an unaligned
    exchange; count is keyed; check keeps an operator list ("seen"); the sink writer keeps nothing."""
    assert state_kinds(op("src")) == ("operator", "coordinator", "output channel")
    assert state_kinds(op("parse")) == ("input channel", "output channel")
    assert state_kinds(op("count")) == ("keyed", "input channel", "output channel")
    assert state_kinds(op("check")) == ("operator",)
    assert state_kinds(op("sink")) == ()


def test_raw_state_is_named_raw() -> None:
    """Raw keyed and raw operator state use the same handle types as managed state (KeyGroupsStateHandle,
    OperatorStateHandle); no fixture job writes any, so count's and check's handles are moved into those slots."""
    count, check = op("count"), op("check")
    raw_keyed = replace(
        count,
        subtasks=[replace(s, raw_keyed_state=s.managed_keyed_state, managed_keyed_state=None) for s in count.subtasks],
    )
    assert state_kinds(raw_keyed) == ("raw keyed", "input channel", "output channel")
    raw_operator = replace(
        check,
        subtasks=[
            replace(s, raw_operator_state=s.managed_operator_state, managed_operator_state=None) for s in check.subtasks
        ],
    )
    assert state_kinds(raw_operator) == ("raw operator",)
    # bytes do not depend on the slot
    assert state_bytes(raw_keyed) == state_bytes(count) and state_bytes(raw_operator) == state_bytes(check)


def test_the_bytes_are_those_flink_wrote() -> None:
    check = op("check")
    written = [s.managed_operator_state.delegate.data for s in check.subtasks if s.managed_operator_state is not None]
    assert len(written) == 2 and state_bytes(check) == sum(len(b) for b in written)
    assert state_bytes(op("sink")) == 0  # a stateless operator Flink lists: nothing to lose
    src = op("src")
    assert src.coordinator_state is not None
    assert state_bytes(src) - state_bytes(replace(src, coordinator_state=None)) == len(src.coordinator_state.data)


def test_in_flight_records_add_up_unless_one_side_is_not_countable() -> None:
    loss = PreflightLoss(
        in_flight=[
            LostInFlight("a", "parse (a)", "input", 100, 3, "dropped"),
            LostInFlight("b", "count (b)", "input", 50, 2, "dropped"),
        ]
    )
    doc = loss.to_doc()
    assert (doc["in_flight_bytes"], doc["in_flight_records"], doc["state_bytes"]) == (150, 5, 0)
    loss.in_flight.append(LostInFlight("c", "src (c)", "output", 10, None, "dropped"))
    assert loss.to_doc()["in_flight_records"] is None
    assert not PreflightLoss() and loss


def _dropping_count(facts: ChannelFacts | None) -> tuple[list[Reason], PreflightLoss]:
    """count dropped (--allow-non-restored-state) while src, which holds output channel state, is restored."""
    loss = PreflightLoss()
    place = Placement({}, {op("src").operator_id: ("s", 0)}, [], [])
    return _dropped(op("count"), place, counted(), facts, loss), loss


def test_a_dropped_operator_with_its_channel_state_names_at_most_four_cut_channels() -> None:
    """count's input channels end inside records whose first half is in src's restored output state: each such
    channel is a cut; the message counts them all and names four, with an ellipsis only when there are more."""
    count = op("count")
    label = f"count ({count.operator_id})"
    for cuts, shown in [(4, "c0; c1; c2; c3"), (5, "c0; c1; c2; c3; …")]:
        facts = ChannelFacts(cut={count.operator_id: [f"c{i}" for i in range(cuts)]})
        [r], loss = _dropping_count(facts)
        assert (r.check, r.verdict, r.operator) == ("dropped-channel-state", UNKNOWN, count.operator_id)
        assert r.message.startswith(
            f"{label} is dropped with its channel state, and a record is cut between it and restored channel state "
            f"on {cuts} channel(s) ({shown}): the restored half"
        )
        assert [(x.operator, x.label, x.side) for x in loss.in_flight] == [
            (count.operator_id, label, "input"),
            (count.operator_id, label, "output"),
        ]
    # no cut anywhere: a plain loss, every kind of state named
    [r], loss = _dropping_count(ChannelFacts())
    assert (r.check, r.verdict, r.operator) == ("operator-mapping", LOSS, count.operator_id)
    assert r.message == (
        f"{label} is not in the new job: Flink restores without it and drops its state (keyed, input channel, output "
        f"channel, {state_bytes(count)} bytes) without a word (--allow-non-restored-state); see the loss section"
    )
    # without the channel-state files: unknown, and the task may fail after the start
    [r], loss = _dropping_count(None)
    assert (r.check, r.verdict, r.operator, r.flink_does) == (
        "operator-mapping",
        UNKNOWN,
        count.operator_id,
        FlinkDoes.FAILS_AFTER_START,
    )
    assert [x.kinds for x in loss.state] == [("keyed", "input channel", "output channel")] and loss.in_flight == []


def test_the_partners_of_a_cut_are_on_the_other_side_of_the_channel() -> None:
    """A dropped operator's input channels that end inside a record matter only when some restored operator holds
    output channel state (the record's rest); its output state's partners are the restored operators' input channels
    that end inside a record."""
    count, parse, src, check = op("count"), op("parse"), op("src"), op("check")

    def partners(side: str, restored: list[OperatorState], cut: dict[str, list[str]]) -> list[str]:
        place = Placement({}, {o.operator_id: ("v", 0) for o in restored}, [], [])
        return cut_partners(count, side, place, counted(), ChannelFacts(cut=cut))

    mine = {count.operator_id: ["count in"]}
    assert partners("input", [src], mine) == ["count in"]  # src restores output state: the rest of the record
    assert partners("input", [check], mine) == []  # check holds no channel state
    both = {count.operator_id: ["count in"], parse.operator_id: ["parse in"], src.operator_id: ["src in"]}
    # output side: only restored operators with input channel state (parse, not src) are partners
    assert partners("output", [parse, src], both) == ["parse in"]
    assert partners("output", [parse], {}) == []  # parse's input ends on a record boundary: no cut
