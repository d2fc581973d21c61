"""Flink's channel-state checks on placements the recorded restores do not reach: the counted job's real operators
(2.0.0-counted: src holds output channel state, parse input and output, both at parallelism 2 over an all-to-all
exchange, so the highest channel index stored is 1) placed into new vertices. Expected channel counts follow
Flink's pointwise wiring (EdgeManagerBuildUtil.connectPointwise: each side connects to a contiguous range of the
other, ceil(other / this) at most); expected verdicts follow docs/format/restore-checks.md."""

from __future__ import annotations

import json
from collections.abc import Sequence
from functools import cache
from pathlib import Path

from support.damaged import copy_fixture
from support.fixtures import fixture_named

from spillway.inspect.preflight import _chain_leaves
from spillway.inspect.restore_checks import (
    FAILS,
    LOSS,
    REFUSED,
    UNKNOWN,
    FlinkDoes,
    NewVertex,
    Placement,
    PreflightLoss,
    Reason,
    Settings,
    channel_facts,
    channel_state,
    files,
    flink_31963_fixed,
    flink_38267_fixed,
    keyed_exchange,
    pointwise_channels,
)
from spillway.inspect.topology import load_plan
from spillway.model.checkpoint import CheckpointMetadata
from spillway.storage.load import LoadedCheckpoint, load_checkpoint

INDEX_OUT = "Index 1 out of bounds for length 1"  # Flink's failure on 2.0.0, pointwise-same-parallelism


@cache
def counted() -> CheckpointMetadata:
    return load_checkpoint(fixture_named("2.0.0-counted").checkpoint_dir).checkpoint


def op_id(uid: str) -> str:
    return next(o.operator_id for o in counted().operators if o.uid == uid)


def flink_ranges(senders: int, receivers: int) -> tuple[int, int]:
    """Flink's pointwise wiring, written out: the most input channels of a receiver, the most subpartitions of a
    sender."""
    if senders >= receivers:
        ins = max((i + 1) * senders // receivers - i * senders // receivers for i in range(receivers))
        return ins, 1
    outs = max(
        sum(1 for r in range(receivers) if r * senders // receivers == s)  # receiver r reads sender r*S//R
        for s in range(senders)
    )
    return 1, outs


def test_pointwise_channel_counts_are_flinks() -> None:
    for senders in range(1, 9):
        for receivers in range(1, 9):
            assert pointwise_channels(senders, receivers) == flink_ranges(senders, receivers), (senders, receivers)


def _vertex(
    key: str,
    parallelism: int,
    inputs: Sequence[tuple[str, int, str]] = (),
    outputs: Sequence[tuple[str, int, str]] = (),
    chain: int = 1,
    leaves: list[int] | None = None,
) -> NewVertex:
    return NewVertex(key, key, parallelism, chain, list(inputs), list(outputs), leaves)


def _rescale_input(upstream_new: int, upstream_old: int) -> list[Reason]:
    """parse (2 subtasks, unchanged; input channel index 1 stored) behind a RESCALE exchange from ``up``."""
    vertices = {
        "up": _vertex("up", upstream_new, outputs=[("p", 0, "RESCALE")]),
        "p": _vertex("p", 2, inputs=[("up", 0, "RESCALE")]),
    }
    place = Placement(vertices, {op_id("parse"): ("p", 0)}, [], [], {"p": 2, "up": upstream_old})
    return channel_state(place, counted(), Settings(flink_version=(2, 0, 0)))


def test_a_rescale_exchange_between_unequal_unchanged_parallelisms() -> None:
    """Neither side rescaled, so Flink hands each subtask its channel state as stored: 4 senders -> 2 receivers
    gives each receiver 2 channels (index 1 exists); 1 -> 2 gives each one channel (index 1 does not)."""
    assert _rescale_input(4, 4) == []
    assert _rescale_input(3, 3) == []
    [r] = _rescale_input(1, 1)
    assert (r.check, r.verdict, r.operator, r.flink_message) == (
        "channel-state-channels",
        REFUSED,
        op_id("parse"),
        INDEX_OUT,
    )
    assert "its input 0 is RESCALE (pointwise) in the new job, with at most 1 channel(s) per subtask" in r.message
    # the upstream rescaled (4 -> 1): Flink builds virtual channels over the old ones; not this check's case
    assert [x.check for x in _rescale_input(1, 4)] == []


def _rescale_output(downstream_new: int, downstream_old: int, strategy: str = "RESCALE") -> list[Reason]:
    """src (2 subtasks, unchanged; output subpartition index 1 stored) in front of ``down``."""
    vertices = {
        "s": _vertex("s", 2, outputs=[("down", 0, strategy)]),
        "down": _vertex("down", downstream_new, inputs=[("s", 0, strategy)]),
    }
    place = Placement(vertices, {op_id("src"): ("s", 0)}, [], [], {"s": 2, "down": downstream_old})
    return channel_state(place, counted(), Settings(flink_version=(2, 0, 0)))


def test_the_sending_side_of_a_rescale_exchange_between_unequal_parallelisms() -> None:
    """2 senders -> 4 receivers: each sender has 2 subpartitions (index 1 exists); -> 3: one sender has 2; -> 2 and
    -> 1: one subpartition each. An all-to-all exchange keeps every subpartition."""
    assert _rescale_output(4, 4) == []
    assert _rescale_output(3, 3) == []
    for receivers in (2, 1):
        [r] = _rescale_output(receivers, receivers)
        assert (r.check, r.verdict, r.operator, r.flink_message) == (
            "channel-state-channels",
            REFUSED,
            op_id("src"),
            INDEX_OUT,
        )
        assert "its output 0 is RESCALE (pointwise) in the new job, with at most 1 channel(s)" in r.message
    assert _rescale_output(1, 1, "REBALANCE") == []
    assert _rescale_output(1, 1, "HASH") == []


def test_a_job_graph_chain_whose_first_leaf_is_not_its_last_operator() -> None:
    """1.20.3-shapes chains a window to a sink and to a map (Flink's stream edges in ids.json: both fed by the
    window, neither feeding another): the chain's leaves are its second and third operators."""
    fx = fixture_named("1.20.3-shapes")
    ids = json.loads((fx.root / "ids.json").read_text())
    plan = load_plan(fx.root / "jobgraph.json")
    window = next(n for n in ids["stream_nodes"] if n["name"] == "TumblingEventTimeWindows")
    members = [n for n in ids["stream_nodes"] if n["vertex_id"] == window["vertex_id"]]
    inside = {n["id"] for n in members}
    feeding = {e["source"] for e in ids["stream_edges"] if e["source"] in inside and e["target"] in inside}
    leaf_names = {n["name"] for n in members if n["id"] not in feeding}
    assert leaf_names == {"Sink: Unnamed", "Map"}
    key = window["vertex_id"]
    names = plan.vertices[key].names
    assert len(names) == len(members) == 3
    leaves = _chain_leaves(plan, key)
    assert leaves == [i for i, name in enumerate(names) if name in leaf_names] == [1, 2]


def _chained(
    position: int,
    leaves: list[int] | None,
    *,
    downstream_input: bool,
    version: tuple[int, int, int] | None = (2, 0, 0),
) -> list[Reason]:
    """src's output channel state at ``position`` of a three-operator chain whose ends are ``leaves``; behind it,
    parse's vertex (its input channel state restored when ``downstream_input``)."""
    vertices = {
        "c": _vertex("c", 2, outputs=[("p", 0, "REBALANCE")], chain=3, leaves=leaves),
        "p": _vertex("p", 2, inputs=[("c", 0, "REBALANCE")]),
    }
    where = {op_id("src"): ("c", position)}
    if downstream_input:
        where[op_id("parse")] = ("p", 0)
    place = Placement(vertices, where, [], [], {"c": 2, "p": 2})
    return channel_state(place, counted(), Settings(flink_version=version))


def test_output_state_at_the_first_leaf_is_at_a_chain_end() -> None:
    """The window's chain above: output state on its sink (position 1, the first leaf) is at a chain's end, not
    chained over; with two ends, Flink restores it only if that branch is first in its own order: unknown."""
    src = f"src ({op_id('src')})"
    [r] = _chained(1, [1, 2], downstream_input=True)
    assert (r.check, r.verdict) == ("channel-state-chained", UNKNOWN)
    assert r.message == (
        f"output channel state of {src} ends a branch of a chain with several ends: Flink restores it only if that "
        "branch is the first in its own order of the chain's outputs, which the plan does not show for sure"
    )
    # one end only, at position 1: certain
    assert _chained(1, [1], downstream_input=True) == []
    # the head is no end of that chain: chained over; parse's input state downstream makes 2.0.0 refuse
    [r] = _chained(0, [1, 2], downstream_input=True)
    assert (r.check, r.verdict) == ("channel-state-chained", REFUSED)
    assert r.flink_message and r.flink_message.endswith(f"[{op_id('src')}]")


def test_without_the_chains_shape_only_its_last_operator_ends_it() -> None:
    """A plan that does not show the chain's shape (leaves None): Flink's chain of three ends at its last operator;
    position 1 is chained over (2.0.0 refuses, parse downstream holding input state); position 2 is the end."""
    assert _chained(2, None, downstream_input=True) == []
    [r] = _chained(1, None, downstream_input=True)
    assert (r.check, r.verdict) == ("channel-state-chained", REFUSED)
    # 1.15.4 (before FLINK-31963) restores and drops it; from _metadata alone a record cut is unknown
    [r] = _chained(1, None, downstream_input=True, version=(1, 15, 4))
    assert (r.check, r.verdict) == ("channel-state-chained", UNKNOWN)
    assert r.message == (
        f"src ({op_id('src')}): output channel state of an operator that no longer ends its chain (vertex c); this "
        "release restores without it and drops it (whether a record is cut between it and the restored input state "
        "downstream needs the channel-state files read)"
    )
    # the release not given, a downstream holding input state: refuses from FLINK-31963 on, drops before
    [r] = _chained(1, None, downstream_input=True, version=None)
    assert (r.verdict, r.flink_issue) == (UNKNOWN, "FLINK-31963")
    assert r.message == (
        f"src ({op_id('src')}) holds output channel state and the new job chains an operator after it; a downstream "
        "holds input channel state. Flink from 1.16.2 / 1.17.1 on refuses this (FLINK-31963); earlier releases "
        "restore and drop that in-flight data; give --flink-version"
    )
    # no downstream input state: every release restores and drops it (no cut partner to read): unknown without files
    assert [x.verdict for x in _chained(1, None, downstream_input=False)] == [UNKNOWN]


def _damaged(tmp_path: Path, damage: str) -> tuple[LoadedCheckpoint, Path]:
    """A copy of 2.0.0-counted whose one channel-state file is removed, cut in half, or has one bit flipped in a
    record length of parse's input channel state (offset 30907)."""
    copy = copy_fixture("2.0.0-counted", tmp_path)
    [(state, _)] = copy.channel_files()
    data = state.read_bytes()
    if damage == "removed":
        state.unlink()
    elif damage == "cut":
        state.write_bytes(data[: len(data) // 2])
    else:
        state.write_bytes(data[:30907] + bytes([data[30907] ^ 0x80]) + data[30908:])
    return load_checkpoint(copy.chk), state


def _everything_placed(cp: CheckpointMetadata, but: str | None = None) -> Placement:
    where = {o.operator_id: (o.operator_id, 0) for o in cp.operators if o.uid != but}
    return Placement({}, where, [], [])


def test_a_missing_or_short_file_is_a_refusal_naming_the_file(tmp_path: Path) -> None:
    """Flink fails the task that opens a missing channel-state file or reads past a short one, for certain."""
    loaded, state = _damaged(tmp_path / "a", "removed")
    [r] = files(loaded, _everything_placed(loaded.checkpoint), Settings())
    assert (r.check, r.verdict, r.flink_does) == ("files", REFUSED, FlinkDoes.REFUSES)
    assert r.message == f"file-exists: missing file (referenced by parse input_channel_state) ({state})"
    loaded, state = _damaged(tmp_path / "b", "cut")
    reasons = {r.message.split(":")[0]: r for r in files(loaded, _everything_placed(loaded.checkpoint), Settings())}
    size = state.stat().st_size
    assert reasons["file-size"].verdict == REFUSED
    assert reasons["file-size"].message.startswith(f"file-size: file has {size} bytes, handles need {2 * size} ")
    assert reasons["file-size"].message.endswith(f" ({state}, {size})")
    # a chunk running past the cut: Flink fails only if it reads there
    assert reasons["chunk-chain"].verdict == UNKNOWN and reasons["chunk-chain"].flink_does is None
    assert reasons["chunk-chain"].message.endswith(": Flink fails where it reads these bytes, if it does")


def test_damaged_framing_is_unknown_and_skipped_with_the_operator_dropped(tmp_path: Path) -> None:
    loaded, state = _damaged(tmp_path, "flipped")
    [r] = files(loaded, _everything_placed(loaded.checkpoint), Settings())
    assert (r.check, r.verdict, r.operator) == ("files", UNKNOWN, "parse")
    assert r.message.startswith("record-length: ") and f"(parse, {state}, " in r.message
    assert r.message.endswith("): Flink fails where it reads these bytes, if it does")
    # parse not in the new job: with --allow-non-restored-state Flink never reads its state; without, it is read
    without_parse = _everything_placed(loaded.checkpoint, but="parse")
    assert files(loaded, without_parse, Settings(allow_non_restored_state=True)) == []
    assert [x.message for x in files(loaded, without_parse, Settings())] == [r.message]
    # another operator dropped: parse's state is still read
    without_check = _everything_placed(loaded.checkpoint, but="check")
    assert [x.message for x in files(loaded, without_check, Settings(allow_non_restored_state=True))] == [r.message]


def test_flink_38267_is_fixed_in_1_20_3_2_0_1_2_1_1_and_2_2_0() -> None:
    """docs/format/restore-checks.md: the fix and its backports were merged before 1.20.3, 2.0.1, 2.1.1 and 2.2.0;
    mixed-inputs-rescaled was refused by 1.15.4 and 2.0.0 and restored by 1.20.3 and 2.3.0."""
    fixed = [(1, 20, 3), (1, 20, 4), (2, 0, 1), (2, 1, 1), (2, 1, 2), (2, 2, 0), (2, 3, 0), (3, 0, 0)]
    broken = [(1, 15, 4), (1, 19, 3), (1, 20, 2), (2, 0, 0), (2, 1, 0), (1, 18, 9)]
    assert [flink_38267_fixed(v) for v in fixed] == [True] * len(fixed)
    assert [flink_38267_fixed(v) for v in broken] == [False] * len(broken)
    assert flink_38267_fixed(None) is None


def test_flink_31963_is_fixed_from_1_16_2_and_1_17_1() -> None:
    fixed = [(1, 16, 2), (1, 16, 3), (1, 17, 1), (1, 17, 2), (1, 18, 0), (1, 20, 3), (2, 0, 0)]
    broken = [(1, 15, 4), (1, 16, 1), (1, 16, 0), (1, 17, 0), (1, 14, 6)]
    assert [flink_31963_fixed(v) for v in fixed] == [True] * len(fixed)
    assert [flink_31963_fixed(v) for v in broken] == [False] * len(broken)


def _keyed(*inputs: tuple[str, int, str]) -> list[Reason]:
    """count (keyed state, 2.0.0-counted) heading a vertex with these inputs."""
    vertices = {"k": _vertex("k", 2, inputs=inputs)}
    return keyed_exchange(Placement(vertices, {op_id("count"): ("k", 0)}, [], []), counted())


def test_keyed_state_behind_each_kind_of_exchange() -> None:
    """keyBy (HASH) routes by key and a broadcast side reads no key's state; REBALANCE fails the task (Flink, on
    keyed-rebalance: "Key group N is not in KeyGroupRange"); FORWARD is right only for a stream keyed upstream the
    same way (reinterpretAsKeyedStream), which a plan cannot show."""
    count = f"count ({op_id('count')})"
    assert _keyed(("a", 0, "HASH")) == []
    assert _keyed(("a", 0, "BROADCAST")) == []
    [forward] = _keyed(("a", 0, "FORWARD"))
    assert (forward.check, forward.verdict, forward.operator, forward.flink_does) == (
        "keyed-exchange",
        UNKNOWN,
        op_id("count"),
        FlinkDoes.FAILS_AFTER_START,
    )
    assert forward.message == (
        f"{count} holds keyed state, and its vertex k gets input 0 FORWARD (pointwise): right only if the upstream "
        "is keyed the same way and has the same parallelism (reinterpretAsKeyedStream); otherwise the task fails on "
        "the first record of another subtask's key group"
    )
    assert forward.flink_message == "Key group N is not in KeyGroupRange"
    # a broadcast side next to a rebalanced input: the rebalanced one still fails
    [rebalanced] = _keyed(("a", 0, "BROADCAST"), ("b", 1, "REBALANCE"))
    assert (rebalanced.verdict, rebalanced.flink_does) == (FAILS, FlinkDoes.FAILS_AFTER_START)
    assert rebalanced.message.startswith(f"{count} holds keyed state, and its vertex k gets input 1 REBALANCE, ")
    # an operator without keyed state (src) behind REBALANCE: nothing to say
    vertices = {"k": _vertex("k", 2, inputs=[("a", 0, "REBALANCE")])}
    assert keyed_exchange(Placement(vertices, {op_id("src"): ("k", 0)}, [], []), counted()) == []


def test_output_state_at_a_chains_end_makes_flink_check_the_rest() -> None:
    """Flink checks the output side when the vertex's output operator itself holds output state: count at the end
    of the chain, src chained over in front of it: refused on every release, whatever downstream holds."""
    vertices = {"c": _vertex("c", 2, chain=3), "p": _vertex("p", 2)}
    place = Placement(vertices, {op_id("src"): ("c", 1), op_id("count"): ("c", 2)}, [], [], {"c": 2})
    for version in [(1, 15, 4), (2, 0, 0)]:
        reasons = channel_state(place, counted(), Settings(flink_version=version))
        # count's input state off the chain's head is chained over too (listed in the checkpoint's order)
        [r] = reasons
        assert (r.check, r.verdict) == ("channel-state-chained", REFUSED)
        assert r.flink_message is not None and r.flink_message.endswith(f"[{op_id('count')}, {op_id('src')}]")


def test_output_state_chained_over_without_a_cut_is_a_loss() -> None:
    """src's output state chained over on 1.15.4 (before FLINK-31963), nothing restored downstream holding input
    state: Flink restores and drops src's in-flight records; no record is cut with restored state."""
    loaded = load_checkpoint(fixture_named("2.0.0-counted").checkpoint_dir)
    facts = channel_facts(loaded)
    vertices = {"c": _vertex("c", 2, outputs=[("p", 0, "REBALANCE")], chain=3), "p": _vertex("p", 2)}
    place = Placement(vertices, {op_id("src"): ("c", 1)}, [], [], {"c": 2})
    loss = PreflightLoss()
    [r] = channel_state(place, loaded.checkpoint, Settings(flink_version=(1, 15, 4)), facts, loss)
    src = f"src ({op_id('src')})"
    why = "output channel state of an operator that no longer ends its chain (vertex c)"
    assert (r.check, r.verdict, r.operator, r.flink_does) == (
        "channel-state-chained",
        LOSS,
        op_id("src"),
        FlinkDoes.RESTORES_AND_DROPS,
    )
    assert r.message == (
        f"{src}: {why}: this release restores without it and drops those records in flight without a word; see the "
        "loss section"
    )
    [lost] = loss.in_flight
    assert lost.to_doc() == {
        "operator": op_id("src"),
        "label": src,
        "side": "output",
        "bytes": facts.bytes[(op_id("src"), "output")],
        "records": None,  # output state read alone may start inside a record
        "why": why,
    }
    assert lost.bytes > 0 and loss.to_doc()["in_flight_records"] is None
    # FLINK-31963 does not apply (no downstream input state): 2.0.0 drops it alike
    assert [x.verdict for x in channel_state(place, loaded.checkpoint, Settings(flink_version=(2, 0, 0)), facts)] == [
        LOSS
    ]


def test_the_release_not_given_names_flink_31963() -> None:
    [r] = _chained(1, None, downstream_input=True, version=None)
    assert (r.check, r.verdict, r.operator, r.flink_issue, r.flink_does) == (
        "channel-state-chained",
        UNKNOWN,
        op_id("src"),
        "FLINK-31963",
        None,
    )
    assert r.flink_message == (
        "Cannot recover from unaligned checkpoint when topology changes, such that data exchanges with persisted "
        f"data are now chained.\nThe following operators contain channel state: [{op_id('src')}]"
    )


def _parse_between(input_strategy: str, old: dict[str, int]) -> list[Reason]:
    """parse (2 subtasks, unchanged: input channel 1 and output subpartition 1 stored) fed by ``up`` over
    ``input_strategy`` and feeding ``down`` (2 subtasks) over RESCALE; ``old``: the checkpoint's parallelism of the
    vertices that held operators (a vertex missing from it is new)."""
    vertices = {
        "up": _vertex("up", 2, outputs=[("p", 0, input_strategy)]),
        "p": _vertex("p", 2, inputs=[("up", 0, input_strategy)], outputs=[("down", 0, "RESCALE")]),
        "down": _vertex("down", 2, inputs=[("p", 0, "RESCALE")]),
    }
    place = Placement(vertices, {op_id("parse"): ("p", 0)}, [], [], old)
    return channel_state(place, counted(), Settings(flink_version=(2, 0, 0)))


def test_each_side_of_an_operator_is_checked_for_its_pointwise_channels() -> None:
    """Its output side is RESCALE between unchanged parallelisms 2 -> 2: one subpartition per subtask, and index 1
    is stored, so the task fails (Flink on 2.0.0, pointwise-same-parallelism) — whatever its input side is: an
    all-to-all exchange, or a pointwise one from a rescaled upstream (what Flink does on that side is not this
    test's case); and also when ``down`` is a new vertex."""
    for strategy, old in [
        ("REBALANCE", {"p": 2, "up": 2, "down": 2}),
        ("RESCALE", {"p": 2, "up": 4, "down": 2}),
        ("REBALANCE", {"p": 2, "up": 2}),
    ]:
        [r] = [x for x in _parse_between(strategy, old) if "its output 0" in x.message]
        assert (r.check, r.verdict, r.operator, r.flink_message) == (
            "channel-state-channels",
            REFUSED,
            op_id("parse"),
            INDEX_OUT,
        ), (strategy, old)
        assert "its output 0 is RESCALE (pointwise) in the new job, with at most 1 channel(s) per subtask" in r.message
