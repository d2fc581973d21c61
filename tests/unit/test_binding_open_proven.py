"""Every operator the binding leaves open is open as a checked fact, on every production-shaped and uid-less
fixture (the criterion of ``test_binding_done``: the stream-graph plan, no uid typed).

Each plan operator is one of: bound exactly (Flink's id, in the checkpoint); decided absent (no id in the
checkpoint can be it, and Flink's id is indeed not there); or open, and then proven open — the binding names the
checkpoint ids it could not eliminate (at least two, Flink's own among them) and, for each, a complete assignment
it met in which the operator takes that id. Each of those assignments is checked here against the checkpoint's
facts read directly (every id taken once, parallelism, keyed state only behind a keyed input of the plan), and
Flink's own assignment is among them. So two assignments that fit all the evidence differ on every open operator.

Expected ids come only from each fixture's ``ids.json`` (Flink's StreamGraphHasherV2 while the job was built)."""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

import pytest
from support.fixtures import Fixture, all_fixtures
from support.plan_nodes import plan_to_flink_nodes

from spillway.inspect.topology import bind_job, load_plan
from spillway.model.checkpoint import CheckpointMetadata
from spillway.storage.load import load_checkpoint

ABSENT = "-"

#: Per fixture: (bound exactly, decided absent, open and proven open). Fixtures not listed bind every operator.
COUNTS = {
    "1.12.5-prod": (9, 2, 0),
    "1.12.5-prod-no-uid": (9, 2, 0),
    "1.14.6-prod-finished": (13, 0, 4),
    "1.14.6-shapes": (25, 0, 2),
    "1.16.3-shapes": (25, 0, 2),
    "1.18.1-shapes": (25, 0, 2),
    "1.20.3-prod-counted": (4, 0, 2),
    "1.20.3-prod-finished": (13, 0, 4),
    "1.20.3-shapes": (25, 0, 2),
}

DONE = [
    pytest.param(f, id=f.name)
    for f in all_fixtures()
    if f.info["scenario"].startswith(("shapes", "prod")) or f.info["scenario"].endswith("no-uid")
]


def _keyed_inputs(plan: dict[str, Any]) -> set[int]:
    """Plan nodes with a keyed input (``HASH``), read from plan.json."""
    return {n["id"] for n in plan["nodes"] if any(i["ship_strategy"] == "HASH" for i in n.get("predecessors", []))}


def _fits(
    assignment: Mapping[int, str], checkpoint: CheckpointMetadata, plan: dict[str, Any], releases_all: bool
) -> list[str]:
    """Why ``assignment`` (plan node -> checkpoint id or "-") cannot be the job, by the checkpoint's facts read
    here: each id taken by one operator, every id taken (a release that writes every operator), the parallelism
    the plan gives, keyed state only behind a keyed input."""
    wrong: list[str] = []
    taken = [v for v in assignment.values() if v != ABSENT]
    if len(taken) != len(set(taken)):
        wrong.append("an id is taken twice")
    ids = {o.operator_id for o in checkpoint.operators}
    if releases_all and set(taken) != ids:
        wrong.append(f"ids left over: {sorted(ids - set(taken))}")
    nodes = {n["id"]: n for n in plan["nodes"]}
    keyed_in = _keyed_inputs(plan)
    for nid, v in assignment.items():
        op = checkpoint.operator(v) if v != ABSENT else None
        if op is None:
            continue
        if op.parallelism != nodes[nid]["parallelism"]:
            wrong.append(f"#{nid}: parallelism {op.parallelism}, the plan's {nodes[nid]['parallelism']}")
        keyed = any(s.managed_keyed_state is not None or s.raw_keyed_state is not None for s in op.subtasks)
        if keyed and nid not in keyed_in:
            wrong.append(f"#{nid}: keyed state without a keyed input")
    return wrong


@pytest.mark.parametrize("fx", DONE)
def test_each_operator_is_bound_decided_absent_or_proven_open(fx: Fixture) -> None:
    checkpoint = load_checkpoint(fx.checkpoint_dir).checkpoint
    stored = {o.operator_id for o in checkpoint.operators}
    plan = json.loads((fx.root / "plan.json").read_text())
    flink = {nid: n["operator_id"] for nid, n in plan_to_flink_nodes(fx.root).items()}
    binding = bind_job(load_plan(fx.root / "plan.json"), checkpoint).operators
    assert binding is not None
    node_of = {i: b.node_id for i, b in enumerate(binding.operators)}
    assert None not in node_of.values()
    exact = {b.node_id: b.operator_id for b in binding.operators if b.exact}
    flinks = {nid: (h if h in stored else ABSENT) for nid, h in flink.items()}
    # the facts read here are Flink's: its own assignment meets them
    releases_all = ABSENT not in flinks.values()
    assert _fits(flinks, checkpoint, plan, releases_all) == []
    witnesses = [{node_of[i]: v for i, v in a.items()} for a in binding.assignments]
    counts = [0, 0, 0]
    for b in binding.operators:
        nid = b.node_id
        assert nid is not None
        if b.exact:
            assert b.operator_id == flink[nid] and b.operator_id in stored, b
            counts[0] += 1
        elif b.operator_id is None and not b.candidates:
            assert flink[nid] not in stored, b  # decided absent, and Flink's id is indeed not in the checkpoint
            counts[1] += 1
        else:
            assert b.operator_id is None, b  # nothing open is bound, not even as a guess
            assert len(b.candidates) >= 2 and flinks[nid] in b.candidates, b
            for candidate in b.candidates:
                proof = [w for w in witnesses if w.get(nid) == candidate]
                assert proof, f"#{nid} {b.name}: no assignment met gives it {candidate}"
                whole = {**exact, **proof[0]}
                assert set(whole) == set(flink), f"#{nid}: the assignment leaves operators out"
                assert _fits(whole, checkpoint, plan, releases_all) == [], (nid, candidate)
            counts[2] += 1
    assert tuple(counts) == COUNTS.get(fx.name, (len(binding.operators), 0, 0))
    if witnesses:  # Flink's own assignment is one the binding met
        assert {nid: flinks[nid] for nid in witnesses[0]} in witnesses


def test_the_counts_name_fixtures_that_exist() -> None:
    assert set(COUNTS) <= {p.values[0].name for p in DONE}


def test_the_facts_read_here_refuse_a_wrong_assignment() -> None:
    """Flink's assignment of 1.16.3-shapes with dedup's id (keyed state, behind keyBy) swapped with the id of the
    Map after it (no keyed input), and with one id taken twice: each is refused."""
    fx = next(p.values[0] for p in DONE if p.values[0].name == "1.16.3-shapes")
    checkpoint = load_checkpoint(fx.checkpoint_dir).checkpoint
    plan = json.loads((fx.root / "plan.json").read_text())
    flink = {nid: n["operator_id"] for nid, n in plan_to_flink_nodes(fx.root).items()}
    assert _fits(flink, checkpoint, plan, True) == []
    dedup, after = 7, 8
    assert [p["id"] for p in next(n for n in plan["nodes"] if n["id"] == after)["predecessors"]] == [dedup]
    swapped = {**flink, dedup: flink[after], after: flink[dedup]}
    assert _fits(swapped, checkpoint, plan, True) == [f"#{after}: keyed state without a keyed input"]
    twice = {**flink, after: flink[dedup]}
    assert _fits(twice, checkpoint, plan, True)[:1] == ["an id is taken twice"]
