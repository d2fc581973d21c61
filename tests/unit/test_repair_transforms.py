"""The state-removing rewrites of spillway/repair/transforms.py, in process, on real checkpoints.

Expected handles, operators and finished flags come from the fixtures' oracle.json (Flink's own dump of the
checkpoint) and the edges from the plan Flink wrote (jobgraph.json), never from the transforms.
2.3.0-unaligned: tostr =HASH=> slow -REBALANCE-> len; channel state on both sides of the keyBy edge (tostr's
output, slow's input) and on slow's output to len. 2.3.0-finished: bsrc, bmap, bsink fully finished; psrc, pmap,
psink with subtask 0 finished.
"""

from __future__ import annotations

import copy
import json
from typing import Any

import pytest
from support.fixtures import Fixture, fixture_named

from spillway.inspect.analyze import analyze
from spillway.inspect.topology import load_plan
from spillway.model.checkpoint import CheckpointMetadata, channel_handles
from spillway.repair.common import RepairError
from spillway.repair.transforms import ChannelLoss, StripResult, clear_finished, drop_operators, strip_channel_state
from spillway.storage.load import load_checkpoint

UNALIGNED = fixture_named("2.3.0-unaligned")
FINISHED = fixture_named("2.3.0-finished")


def _oracle(fx: Fixture) -> dict[str, dict[str, Any]]:
    """Operator name -> its entry in oracle.json."""
    return {o["name"]: o for o in json.loads(fx.oracle.read_text())["operators"]}


def _flink_handles(fx: Fixture, name: str, key: str) -> int:
    """How many channel handles ``name`` holds under ``key`` (input_channel_state / result_subpartition_state),
    as Flink reported them (a V6 merged handle counts its channels)."""
    op = _oracle(fx)[name]
    return sum(len(h.get("channels", [h])) for s in op["subtasks"] for h in s[key])


def _handles(cp: CheckpointMetadata, operator_id: str) -> tuple[int, int]:
    op = cp.operator(operator_id)
    assert op is not None
    return (
        sum(len(channel_handles(s.input_channel_state)) for s in op.subtasks),
        sum(len(channel_handles(s.result_subpartition_state)) for s in op.subtasks),
    )


def _analysis():  # type: ignore[no-untyped-def]
    loaded = load_checkpoint(UNALIGNED.checkpoint_dir)
    return loaded.checkpoint, analyze(loaded, load_plan(UNALIGNED.root / "jobgraph.json"))


def _edges(fx: Fixture) -> dict[tuple[str, str], str]:
    """(upstream vertex head name, downstream vertex head name) -> ship strategy, from Flink's job-graph plan."""
    doc = json.loads((fx.root / "jobgraph.json").read_text())
    head = {n["id"]: n["description"].split("<br/>")[0] for n in doc["nodes"]}
    return {(head[i["id"]], head[n["id"]]): i["ship_strategy"] for n in doc["nodes"] for i in n.get("inputs", [])}


def test_stripping_slows_channels_removes_both_halves_of_each_and_nothing_else() -> None:
    """Every logical channel touching slow goes whole: the keyBy edge's input halves on slow and output halves on
    tostr, and slow's output to len. Counts are Flink's handles; each loss names its edge as Flink's plan does."""
    cp, analysis = _analysis()
    o = _oracle(UNALIGNED)
    before = copy.deepcopy(cp)
    result = strip_channel_state(cp, analysis, {o["slow"]["operator_id"]})
    assert cp == before, "the input checkpoint is not changed"
    flink = {
        name: (
            _flink_handles(UNALIGNED, name, "input_channel_state"),
            _flink_handles(UNALIGNED, name, "result_subpartition_state"),
        )
        for name in ("tostr", "slow", "len")
    }
    assert flink["slow"][0] > 0 and flink["slow"][1] > 0 and flink["tostr"][1] > 0
    assert result.handles_removed == flink["tostr"][1] + flink["slow"][0] + flink["slow"][1]
    for name in ("tostr", "slow"):
        assert _handles(result.checkpoint, o[name]["operator_id"]) == (0, 0)
    edges = _edges(UNALIGNED)
    assert {(loss.upstream, loss.downstream, loss.edge) for loss in result.losses} == {
        ("tostr", "slow", edges[("Source: seq", "slow")]),
        ("slow", "len", edges[("slow", "len")]),
    }
    chosen = [c for c in analysis.channels if "slow" in (c.upstream["operator"], c.downstream["operator"])]
    assert [loss.channel for loss in result.losses] == [c.label for c in chosen]
    assert result.bytes_dropped == sum(c.bytes for c in chosen) > 0
    assert [loss.bytes for loss in result.losses] == [c.bytes for c in chosen]


def test_stripping_lens_channels_keeps_the_keyby_edge() -> None:
    """len holds no channel state of its own (oracle.json): only slow's output halves towards it go; tostr's and
    slow's input halves of the keyBy edge stay, handle for handle."""
    cp, analysis = _analysis()
    o = _oracle(UNALIGNED)
    assert _flink_handles(UNALIGNED, "len", "input_channel_state") == 0
    result = strip_channel_state(cp, analysis, {o["len"]["operator_id"]})
    assert result.handles_removed == _flink_handles(UNALIGNED, "slow", "result_subpartition_state")
    assert _handles(result.checkpoint, o["slow"]["operator_id"]) == (
        _flink_handles(UNALIGNED, "slow", "input_channel_state"),
        0,
    )
    assert _handles(result.checkpoint, o["tostr"]["operator_id"]) == _handles(cp, o["tostr"]["operator_id"])
    assert {(loss.upstream, loss.downstream) for loss in result.losses} == {("slow", "len")}


def test_stripping_every_channel_and_none() -> None:
    """None: every channel handle of the checkpoint goes (all of Flink's); an empty choice removes nothing."""
    cp, analysis = _analysis()
    every = sum(
        _flink_handles(UNALIGNED, name, key)
        for name in _oracle(UNALIGNED)
        for key in ("input_channel_state", "result_subpartition_state")
    )
    result = strip_channel_state(cp, analysis, None)
    assert result.handles_removed == every > 0
    assert not any(
        s.input_channel_state or s.result_subpartition_state for op in result.checkpoint.operators for s in op.subtasks
    )
    assert len(result.losses) == len(analysis.channels)
    nothing = strip_channel_state(cp, analysis, set())
    assert nothing.handles_removed == 0 and nothing.losses == [] and nothing.checkpoint == cp


def test_dropped_records_are_unknown_when_any_channel_is_uncounted() -> None:
    counted = StripResult(
        load_checkpoint(UNALIGNED.checkpoint_dir).checkpoint,
        [ChannelLoss("a", "u", "d", "HASH", 3, 10), ChannelLoss("b", "u", "d", None, 0, 5)],
    )
    assert counted.records_dropped == 3 and counted.bytes_dropped == 15
    counted.losses.append(ChannelLoss("c", "u", "d", "REBALANCE", None, 7))
    assert counted.records_dropped is None and counted.bytes_dropped == 22
    assert StripResult(load_checkpoint(UNALIGNED.checkpoint_dir).checkpoint).records_dropped == 0


def test_clearing_finished_flags_turns_the_chosen_operators_running_with_no_state() -> None:
    """bsrc is fully finished, psrc has subtask 0 finished (oracle.json): cleared, bsrc has no subtask entries
    and is not finished, psrc keeps only its running subtask 1; the others (bsink, pmap) keep Flink's flags."""
    cp = load_checkpoint(FINISHED.checkpoint_dir).checkpoint
    o = _oracle(FINISHED)
    assert o["Source: bseq"]["fully_finished"] and [s["finished"] for s in o["Source: pseq"]["subtasks"]] == [
        True,
        False,
    ]
    before = copy.deepcopy(cp)
    chosen = {o["Source: bseq"]["operator_id"], o["Source: pseq"]["operator_id"], o["slow"]["operator_id"]}
    out, changed = clear_finished(cp, chosen)
    assert cp == before
    assert changed == [  # in the checkpoint's operator order (oracle.json: bsrc before psrc)
        "bsrc: fully finished -> running (no state)",
        "psrc: finished subtasks [0] -> running (no state)",
    ]
    bsrc = out.operator(o["Source: bseq"]["operator_id"])
    psrc = out.operator(o["Source: pseq"]["operator_id"])
    assert bsrc is not None and bsrc.fully_finished is False and bsrc.subtasks == []
    assert psrc is not None and [s.index for s in psrc.subtasks] == [1] and not psrc.subtasks[0].finished
    for name in ("bsink: Writer", "pmap", "slow"):
        op, old = out.operator(o[name]["operator_id"]), cp.operator(o[name]["operator_id"])
        assert op == old
    assert clear_finished(cp, {o["slow"]["operator_id"]}) == (cp, [])


def test_dropping_operators() -> None:
    cp = load_checkpoint(UNALIGNED.checkpoint_dir).checkpoint
    o = _oracle(UNALIGNED)
    before = copy.deepcopy(cp)
    out = drop_operators(cp, {o["tostr"]["operator_id"], o["len"]["operator_id"]})
    assert cp == before
    assert [op.operator_id for op in out.operators] == [
        op.operator_id for op in cp.operators if op.name not in ("tostr", "len")
    ]
    gone = ["00000000000000000000000000000001", "ffffffffffffffffffffffffffffffff"]
    with pytest.raises(RepairError) as err:
        drop_operators(cp, {gone[1], gone[0], o["tostr"]["operator_id"]})
    assert str(err.value) == f"no operator {gone} in the checkpoint"
    assert drop_operators(cp, set()) == cp
