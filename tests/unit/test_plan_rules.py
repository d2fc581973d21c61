"""validate's rules that need the plan (docs/validate.md: ``channel-holder``, ``channel-index``,
``binding-uncertain``, ``topology``) on a real unaligned checkpoint and Flink's own job-graph plan of it.

The fixture's job (ids.json, jobgraph.json): ``src -> tostr`` chained, HASH to ``slow``, REBALANCE to
``len -> sink``; parallelism 2 everywhere. Flink wrote input channel state on ``slow`` (the head of its chain) and
output channel state on ``tostr`` and ``slow`` (the tails of theirs). Each test moves or renumbers one handle in
memory and reads what validate says about it."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from support.fixtures import fixture_named

from spillway.inspect.findings import Finding
from spillway.inspect.topology import load_plan
from spillway.inspect.validate import validate
from spillway.storage.load import LoadedCheckpoint, load_checkpoint

UNALIGNED = "2.3.0-unaligned"
FX = fixture_named(UNALIGNED)
IDS = {n["name"]: n["operator_id"] for n in json.loads((FX.root / "ids.json").read_text())["stream_nodes"]}


def _loaded() -> LoadedCheckpoint:
    return load_checkpoint(FX.checkpoint_dir)


def _op(loaded: LoadedCheckpoint, name: str) -> Any:
    return next(o for o in loaded.checkpoint.operators if o.operator_id == IDS[name])


def _found(loaded: LoadedCheckpoint, rule: str, plan: str = "jobgraph.json") -> list[Finding]:
    return [f for f in validate(loaded, load_plan(FX.root / plan)).findings if f.rule == rule]


def test_the_fixture_is_sound_against_its_plan() -> None:
    assert validate(_loaded(), load_plan(FX.root / "jobgraph.json")).findings == []


def test_output_state_on_a_chain_head_that_is_not_its_tail_is_misplaced() -> None:
    """``Source: seq`` (stored as ``src``) heads the chain ``src -> tostr``: output channel state belongs on
    ``tostr``, its tail."""
    loaded = _loaded()
    tostr, src = _op(loaded, "tostr"), _op(loaded, "Source: seq")
    moved = tostr.subtasks[1].result_subpartition_state.pop()
    src.subtasks[1].result_subpartition_state.append(moved)
    found = _found(loaded, "channel-holder")
    # one finding per subpartition the handle holds: one per subtask of slow (parallelism 2, jobgraph.json)
    assert [(f.operator, f.subtask, f.channel, f.severity) for f in found] == [
        (src.label(), 1, "out(0,0)", "error"),
        (src.label(), 1, "out(0,1)", "error"),
    ]
    assert {f.message for f in found} == {"output channel state on an operator that ends no chain in the plan"}
    assert src.label() == "src"  # the name Flink 2 stores for the source operator


def test_input_state_on_a_chain_tail_that_is_not_its_head_is_misplaced() -> None:
    """``tostr`` ends the chain ``src -> tostr`` but heads nothing: input channel state there has no gate."""
    loaded = _loaded()
    slow, tostr = _op(loaded, "slow"), _op(loaded, "tostr")
    moved = slow.subtasks[0].input_channel_state.pop()
    tostr.subtasks[0].input_channel_state.append(moved)
    holders = _found(loaded, "channel-holder")
    assert [(f.operator, f.subtask, f.message) for f in holders] == [
        ("tostr", 0, "input channel state on an operator that heads no chain in the plan")
    ]


def test_channel_state_of_an_operator_not_bound_for_certain_is_said_once_per_operator() -> None:
    """Another job's plan places no operator: one warning per operator holding channel state (``slow`` and
    ``tostr``, each with four handles), and no placement finding at all."""
    loaded = _loaded()
    doubts = _found(loaded, "binding-uncertain", plan="../2.3.0-sql/plan.json")
    assert sorted(f.operator for f in doubts) == ["slow", "tostr"]
    for f in doubts:
        assert f.severity == "warning" and f.subtask is None
        assert f.message.startswith(f"{f.operator} holds channel state and is not bound to a plan operator for certain")
        assert "not checked against the plan" in f.message
    loaded = _loaded()
    assert _found(loaded, "channel-holder", plan="../2.3.0-sql/plan.json") == []
    assert _found(loaded, "channel-index", plan="../2.3.0-sql/plan.json") == []


def test_a_plan_of_another_parallelism_is_a_mismatch_for_each_operator_of_the_vertex(tmp_path: Path) -> None:
    """Flink ran ``Source: seq -> tostr`` at parallelism 2 (jobgraph.json); a plan saying 3 describes another run."""
    doc = json.loads((FX.root / "jobgraph.json").read_text())
    (vertex,) = [n for n in doc["nodes"] if "tostr" in n["description"]]
    vertex["parallelism"] = 3
    (tmp_path / "plan.json").write_text(json.dumps(doc))
    found = [f for f in validate(_loaded(), load_plan(tmp_path / "plan.json")).findings if f.rule == "plan-mismatch"]
    assert sorted(f.operator for f in found) == ["src", "tostr"]
    assert all(f.message.startswith("parallelism 2 in the checkpoint, 3 in the plan") for f in found), found


def test_what_another_jobs_plan_cannot_assemble_is_a_topology_note_naming_it() -> None:
    """2.3.0-sql's plan: its aggregation's chain is fed by an edge whose ends are not in this checkpoint."""
    sql = json.loads((fixture_named("2.3.0-sql").root / "plan.json").read_text())
    aggregation = next(n["contents"] for n in sql["nodes"] if "GroupAggregate" in n["type"])
    notes = _found(_loaded(), "topology", plan="../2.3.0-sql/plan.json")
    assert [n.message for n in notes if n.message.startswith(f"edge into '{aggregation}")], notes
