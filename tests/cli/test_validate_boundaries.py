"""validate's comparisons at their exact boundary values (mutation survivors of issue 21: a `>=` that could be
`>`, a `<` that could be `<=`), each on a copy of a real fixture with the boundary value taken from the
fixture's own facts (Flink's key-group ranges and max parallelism in oracle.json, the job's parallelism in
its plan, the channel file's size on disk)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from support.damaged import Copy, copy_fixture, rewrite
from support.fixtures import fixture_named

from spillway.inspect.validate import validate
from spillway.model.checkpoint import KeyGroupRange
from spillway.storage.load import load_checkpoint

KEYED = "1.10.3-aligned"  # slow's keyed state: KeyGroupsStateHandles [0, 63] and [64, 127], max parallelism 128
UNALIGNED = "1.20.3-unaligned"  # V4: one plain handle per channel; tostr -HASH-> slow -REBALANCE-> len, p = 2
V6 = "2.3.0-unaligned"  # V6: every channel handle shares one delegate naming the whole channel-state file


def _oracle_keyed(name: str) -> tuple[str, int, list[tuple[int, int]]]:
    """(operator id, max parallelism, [(first, last) key group per subtask]) of the keyed operator, as Flink
    loaded it."""
    doc = json.loads(fixture_named(name).oracle.read_text())
    op = next(o for o in doc["operators"] if any(s["managed_keyed_state"] for s in o["subtasks"]))
    ranges = [tuple(s["managed_keyed_state"][0]["key_group_range"]) for s in op["subtasks"]]
    return op["operator_id"], op["max_parallelism"], ranges  # type: ignore[return-value]


def _keyed_op(cp: Any, operator_id: str) -> Any:
    return next(o for o in cp.operators if o.operator_id == operator_id)


def _messages(c: Copy, rule: str, plan: bool = False) -> list[str]:
    return [f.message for f in c.run(plan=plan).findings if f.rule == rule]


def test_a_range_ending_on_the_last_key_group_is_inside_one_past_it_is_not(tmp_path: Path) -> None:
    op_id, max_p, ranges = _oracle_keyed(KEYED)
    assert ranges[-1][1] == max_p - 1  # Flink's last range ends on the last key group: no finding (sound)
    c = copy_fixture(KEYED, tmp_path)

    def past_the_end(cp: Any) -> None:
        h = sorted(_keyed_op(cp, op_id).subtasks, key=lambda s: s.index)[-1].managed_keyed_state
        h.key_groups = KeyGroupRange(h.key_groups.start, h.key_groups.count + 1)  # last = max parallelism
        h.offsets = [*h.offsets, h.offsets[-1]]

    rewrite(c, past_the_end)
    first = ranges[-1][0]
    assert f"managed_keyed_state key groups [{first}, {max_p}] outside [0, {max_p})" in _messages(c, "key-group-tiling")


def test_subtasks_of_one_key_group_each_tile_without_a_gap() -> None:
    """max parallelism = parallelism: each subtask holds a single key group (first == last). Such a range is
    not empty: nothing is reported (were it skipped, its key group would look unheld)."""
    fx = fixture_named(KEYED)
    op_id, _, ranges = _oracle_keyed(KEYED)
    loaded = load_checkpoint(fx.checkpoint_dir)
    op = _keyed_op(loaded.checkpoint, op_id)
    op.max_parallelism = op.parallelism = len(ranges)  # Flink assigns key group i to subtask i
    for sub in op.subtasks:
        h = sub.managed_keyed_state
        h.key_groups = KeyGroupRange(sub.index, 1)
        h.offsets = h.offsets[:1]
    found = [(f.rule, f.message) for f in validate(loaded).findings if f.rule.startswith("key-group")]
    assert found == []


def test_the_file_size_finding_names_the_first_handle_of_those_needing_the_most(tmp_path: Path) -> None:
    """Every channel handle of the V6 fixture names the whole channel-state file (the same end): the finding
    names the first of them in Flink's order (oracle.json: operators, then input before output side), not a
    later one with an equal need."""
    fx = fixture_named(V6)
    doc = json.loads(fx.oracle.read_text())
    needs = [
        (o["name"], kind, h["delegate"]["state_size"])
        for o in doc["operators"]
        for s in o["subtasks"]
        for kind in ("input_channel_state", "result_subpartition_state")
        for h in s[kind]
    ]
    size = max(n for _, _, n in needs)
    name, kind, _ = next(x for x in needs if x[2] == size)
    assert sum(1 for x in needs if x[2] == size) > 1 and any(x[:2] != (name, kind) for x in needs if x[2] == size)
    c = copy_fixture(V6, tmp_path)
    (path, _), *_ = c.channel_files()
    assert path.stat().st_size == size
    path.write_bytes(path.read_bytes()[: size - 1])  # one byte short: the smallest shortfall
    assert _messages(c, "file-size") == [f"file has {size - 1} bytes, handles need {size} ({name} {kind})"]


def test_a_file_of_exactly_the_needed_size_has_no_size_finding(tmp_path: Path) -> None:
    c = copy_fixture(V6, tmp_path)
    report = c.run(plan=True)
    assert not [f for f in report.findings if f.rule.startswith("file-size")]


def _first_input(cp: Any, name: str) -> Any:
    return next(h for o in cp.operators if o.operator_id == name for s in o.subtasks for h in s.input_channel_state)


def _ids(name: str) -> dict[str, str]:
    return {
        n["name"]: n["operator_id"]
        for n in json.loads((fixture_named(name).root / "ids.json").read_text())["stream_nodes"]
    }


def _parallelism(name: str, vertex_name: str) -> int:
    plan = json.loads((fixture_named(name).root / "jobgraph.json").read_text())
    nodes = plan.get("nodes") or plan["plan"]["nodes"]
    return next(n["parallelism"] for n in nodes if vertex_name in n["description"])


def test_an_input_channel_index_equal_to_the_upstream_parallelism_does_not_exist(tmp_path: Path) -> None:
    up_p = _parallelism(UNALIGNED, "tostr")
    slow = _ids(UNALIGNED)["slow"]
    c = copy_fixture(UNALIGNED, tmp_path)
    rewrite(c, lambda cp: setattr(_first_input(cp, slow), "input_channel_index", up_p))
    assert f"input channel {up_p} >= upstream parallelism {up_p}" in _messages(c, "channel-index", plan=True)
    c2 = copy_fixture(UNALIGNED, tmp_path / "last")
    rewrite(c2, lambda cp: setattr(_first_input(cp, slow), "input_channel_index", up_p - 1))  # the last that exists
    assert not [m for m in _messages(c2, "channel-index", plan=True) if "input channel" in m]


def _first_output(cp: Any, name: str) -> Any:
    return next(
        h for o in cp.operators if o.operator_id == name for s in o.subtasks for h in s.result_subpartition_state
    )


def test_a_subpartition_equal_to_the_downstream_parallelism_does_not_exist(tmp_path: Path) -> None:
    down_p = _parallelism(UNALIGNED, "slow")
    tostr = _ids(UNALIGNED)["tostr"]
    c = copy_fixture(UNALIGNED, tmp_path)
    rewrite(c, lambda cp: setattr(_first_output(cp, tostr), "subpartition_index", down_p))
    assert f"subpartition {down_p} >= downstream parallelism {down_p}" in _messages(c, "channel-index", plan=True)


def test_a_partition_equal_to_the_number_of_outputs_does_not_exist(tmp_path: Path) -> None:
    tostr = _ids(UNALIGNED)["tostr"]
    c = copy_fixture(UNALIGNED, tmp_path)
    rewrite(c, lambda cp: setattr(_first_output(cp, tostr), "partition_index", 1))  # tostr's chain has 1 output
    assert "partition 1 does not exist (vertex has 1 outputs)" in _messages(c, "channel-index", plan=True)


def test_a_gate_equal_to_the_number_of_inputs_does_not_exist(tmp_path: Path) -> None:
    slow = _ids(UNALIGNED)["slow"]
    c = copy_fixture(UNALIGNED, tmp_path)
    rewrite(c, lambda cp: setattr(_first_input(cp, slow), "gate_index", 1))  # slow's vertex has 1 input
    assert "gate 1 does not exist (vertex has 1 inputs)" in _messages(c, "channel-index", plan=True)
