"""What the binding says of each operator, word for word, where the words carry facts of Flink's.

Real checkpoints of Flink 1.20.3 (tests/fixtures/1.20.3-prod), with the plan edited the way real jobs name
operators (a name that is another operator's uid). Expected ids come from ids.json (Flink's own hasher); the
state each id holds from oracle.json (Flink's own reading of ``_metadata``)."""

from __future__ import annotations

import json
import re
from typing import Any

import pytest
from support.fixtures import Fixture, fixture_named

from spillway.flink.deduction import DEDUCED
from spillway.flink.operator_ids import DETERMINISTIC_HASH, ELIMINATION, UNBOUND, VERTEX_ID, bind, uid_hash
from spillway.flink.stream_graph import parse_job_graph_plan
from spillway.inspect.topology import operator_binding, parse_plan
from spillway.storage.load import load_checkpoint

FX = fixture_named("1.20.3-prod")


def _flink(fx: Fixture) -> dict[str, dict[str, Any]]:
    return {n["name"]: n for n in json.loads((fx.root / "ids.json").read_text())["stream_nodes"]}


def _renamed_plan(fx: Fixture, renames: dict[str, str]) -> Any:
    doc = json.loads((fx.root / "plan.json").read_text())
    for node in doc["nodes"]:
        for key in ("type", "contents"):
            if node.get(key) in renames:
                node[key] = renames[node[key]]
    return doc


def _flink_id(flink: dict[str, Any], vertex_id: str | None, position: int | None, name: str) -> str:
    """Flink's id of the operator of job vertex ``vertex_id`` at ``position`` (the head) or called ``name``."""
    [v] = [v for v in flink["vertices"] if v["id"] == vertex_id]
    if position == 0:
        return str(v["id"])
    names = {n["operator_id"]: n["name"] for n in flink["stream_nodes"]}
    [found] = [o for o in v["operator_ids"] if names[o] == name]
    return str(found)


def _evidence(op: dict[str, Any]) -> str:
    """The state an operator holds, read off Flink's own loader's view of the checkpoint."""
    subtasks = op["subtasks"]
    said = [f"parallelism {op['parallelism']}"]
    if any(s["managed_keyed_state"] or s["raw_keyed_state"] for s in subtasks):
        said.append("keyed state")
    handles = [h for s in subtasks for h in s["managed_operator_state"] + s["raw_operator_state"]]
    if any("SourceReaderState" in h.get("states", {}) for h in handles):
        said.append("source-reader state")
    gates = sorted({h["gate_index"] for s in subtasks for h in s["input_channel_state"]})
    if gates:
        said.append("input channel state on gate " + "/".join(map(str, gates)))
    if any(s["result_subpartition_state"] for s in subtasks):
        said.append("output channel state")
    state_kinds = (
        "managed_operator_state",
        "raw_operator_state",
        "managed_keyed_state",
        "raw_keyed_state",
        "input_channel_state",
        "result_subpartition_state",
    )
    if not any(s[k] for s in subtasks for k in state_kinds) and op["coordinator_state"] is None:
        said.append("no state")
    return ", ".join(said)


def test_every_deduced_operator_names_the_state_flink_stored_for_it() -> None:
    """The name "slow" is slow-count's uid (ids.json): the guess is set aside, and every operator is deduced
    from the state Flink stored; each reason names exactly that state."""
    renames = {"format-out": "slow", "slow-count": "legacy-slow"}
    flink = {renames.get(n, n): node for n, node in _flink(FX).items()}
    oracle = {o["operator_id"]: o for o in json.loads(FX.oracle.read_text())["operators"]}
    checkpoint = load_checkpoint(str(FX.checkpoint_dir)).checkpoint
    binding = operator_binding(parse_plan(_renamed_plan(FX, renames)), checkpoint)
    assert binding is not None
    deduced = [b for b in binding.operators if b.method == DEDUCED]
    assert len(deduced) >= 8
    kinds = set()
    for b in deduced:
        assert b.operator_id == flink[b.name]["operator_id"] and b.exact, (b.name, b.reason)
        said = _evidence(oracle[b.operator_id])
        kinds |= set(said.split(", ")[1:])
        head = (
            f"the only checkpoint operator that fits ({said}) in every consistent assignment "
            "(1 consistent assignment(s) met); others ruled out: "
        )
        assert b.reason.startswith(head), (b.name, b.reason)
        # each id ruled out is named by its first eight digits: one of the checkpoint's other ids
        ruled = re.findall(r"(?:^|; )([0-9a-f]+)…: ", b.reason[len(head) - len("others ruled out: ") :])
        assert ruled and all(len(r) == 8 for r in ruled), b.reason
        assert all(any(h.startswith(r) and h != b.operator_id for h in oracle) for r in ruled)
    # the evidence of this checkpoint covers every kind of state a reason can name
    assert kinds == {
        "keyed state",
        "source-reader state",
        "input channel state on gate 0/1",
        "output channel state",
        "no state",
    }


def test_a_name_guess_set_aside_says_what_it_was_and_why() -> None:
    """The name "slow" hashes, as a uid, to slow-count's id (Flink's, uid "slow"); the operator named so is format-out,
    bound by the evidence to its own id. The reason ends saying what the guess was."""
    renames = {"format-out": "slow", "slow-count": "legacy-slow"}
    flink = _flink(FX)
    assert flink["slow-count"]["uid"] == "slow" and uid_hash("slow") == flink["slow-count"]["operator_id"]
    checkpoint = load_checkpoint(str(FX.checkpoint_dir)).checkpoint
    binding = operator_binding(parse_plan(_renamed_plan(FX, renames)), checkpoint)
    assert binding is not None
    [slow] = binding.by_name("slow")
    assert (slow.method, slow.operator_id, slow.exact) == (DEDUCED, flink["format-out"]["operator_id"], True)
    said = (
        f"; its name as a uid ('slow') hashes to {flink['slow-count']['operator_id']}, but that is a guess the other "
        "evidence does not confirm (a name may be another operator's uid), so it is not used"
    )
    assert slow.reason.endswith(said) and slow.reason.count("its name as a uid") == 1
    # only the operator whose guess was set aside says so
    others = [b for b in binding.operators if b.name != "slow"]
    assert not any("its name as a uid" in b.reason for b in others)


SHAPES = [fixture_named(f"{r}-shapes{s}") for r in ("1.14.6", "1.20.3", "2.2.1") for s in ("", "-no-uid")]


@pytest.mark.parametrize("fx", [pytest.param(f, id=f.name) for f in SHAPES])
def test_a_chain_whose_first_leaf_is_not_its_last_operator_is_not_rebuilt(fx: Fixture) -> None:
    """The window's chain ``Window -> (Sink: Unnamed, Map)``: its first leaf (the sink, position 1) is not its last
    operator, and the side-output Map (the last) is what feeds the next vertex (ids.json's edges). A job-graph
    plan does not say which leaf sends, so no stream graph is rebuilt from it and no generated id is taken; the
    vertex heads are Flink's ids all the same, and no other operator is bound to an id that is not Flink's."""
    flink = json.loads((fx.root / "ids.json").read_text())
    by_op = {n["operator_id"]: n for n in flink["stream_nodes"]}
    window = next(v for v in flink["vertices"] if "Window" in v["name"] or "Tumbling" in v["name"])
    chain = [by_op[o] for o in window["operator_ids"]]
    members = {n["id"] for n in chain}
    sink, side = (next(n for n in chain if n["name"] == name) for name in ("Sink: Unnamed", "Map"))
    leaving = {e["source"] for e in flink["stream_edges"] if e["source"] in members and e["target"] not in members}
    assert leaving == {side["id"]}  # only the side-output Map sends out of the vertex
    assert not any(e["source"] == sink["id"] for e in flink["stream_edges"])  # the sink is a leaf too

    job = parse_job_graph_plan(json.loads((fx.root / "jobgraph.json").read_text()))
    [shown] = [v for v in job.vertices if v.id == window["id"]]
    assert (shown.operators[1:], shown.parents) == (("Sink: Unnamed", "Map"), (None, 0, 0))  # first leaf: 1 of 0..2
    stored = [o.operator_id for o in load_checkpoint(str(fx.checkpoint_dir)).checkpoint.operators]
    binding = bind(job, stored, release=fx.release)
    assert "the job-graph plan could not be rebuilt into a stream graph; generated ids not tried" in binding.notes
    assert not any(b.method == DETERMINISTIC_HASH for b in binding.operators)
    heads = {v["id"] for v in flink["vertices"]}
    for b in binding.operators:
        if b.method == VERTEX_ID:
            assert b.operator_id in heads and b.position == 0
        if b.operator_id is not None:
            assert b.operator_id == _flink_id(flink, b.vertex_id, b.position, b.name), (b.name, b.method)


@pytest.mark.parametrize("fx", [pytest.param(f, id=f.name) for f in SHAPES])
def test_an_operator_bound_by_elimination_stays_uncertain(fx: Fixture) -> None:
    """The job-graph plan alone, with the checkpoint's parallelisms: the rules branch (``Source: rules -> Map``)
    is the only one at parallelism 1 (ids.json), its head is bound by vertex id, so its Map is the only operator
    left at parallelism 1 for the only id left at 1. That is Flink's id for it, yet only a structural guess: in
    the checkpoint, never exact. At parallelism 2 several operators and ids are left: none is bound."""
    flink = json.loads((fx.root / "ids.json").read_text())
    at_one = [n for n in flink["stream_nodes"] if n["parallelism"] == 1]
    assert sorted(n["name"] for n in at_one) == ["Map", "Source: rules"]
    map_id = next(n["operator_id"] for n in at_one if n["name"] == "Map")
    job = parse_job_graph_plan(json.loads((fx.root / "jobgraph.json").read_text()))
    parallelism = {o.operator_id: o.parallelism for o in load_checkpoint(str(fx.checkpoint_dir)).checkpoint.operators}
    binding = bind(job, list(parallelism), release=fx.release, checkpoint_parallelism=parallelism)
    [guessed] = [b for b in binding.operators if b.method == ELIMINATION]
    assert (guessed.name, guessed.operator_id, guessed.in_checkpoint, guessed.exact, guessed.position) == (
        "Map",
        map_id,
        True,
        False,
        1,
    )
    assert guessed.reason == (
        "the only operator left with parallelism 1 and the only checkpoint id left: structural guess, not Flink's rule"
    )
    left = [b for b in binding.operators if b.method == UNBOUND]
    assert {b.vertex_id for b in left} <= {v["id"] for v in flink["vertices"] if v["parallelism"] == 2}
    assert len(left) == len(binding.unclaimed) > 1
    assert {parallelism[h] for h in binding.unclaimed} == {2}
    # without the parallelisms nothing tells the ids left apart
    plain = bind(job, list(parallelism), release=fx.release)
    assert not any(b.method == ELIMINATION for b in plain.operators)


@pytest.mark.parametrize("release", ["1.14.6", "1.16.3", "1.18.1", "1.20.3"])
def test_dedup_is_not_bound_by_its_name_which_is_legacy_dedups_uid(release: str) -> None:
    """The shapes job's ``dedup`` (uid dedup-v2) next to ``legacy-dedup`` (uid dedup), stream-graph plan, ids only
    (1.x stores no names): "dedup" as a uid hashes to legacy-dedup's id, which is not dedup's. The guess is set
    aside; the checkpoint's facts and the generated ids of its neighbours then leave dedup one id, Flink's, and the
    reason ends with the guess set aside."""
    fx = fixture_named(f"{release}-shapes")
    flink = _flink(fx)
    assert flink["legacy-dedup"]["uid"] == "dedup" and flink["dedup"]["uid"] == "dedup-v2"
    legacy = flink["legacy-dedup"]["operator_id"]
    checkpoint = load_checkpoint(str(fx.checkpoint_dir)).checkpoint
    binding = operator_binding(parse_plan(json.loads((fx.root / "plan.json").read_text())), checkpoint)
    assert binding is not None
    [dedup] = binding.by_name("dedup")
    assert (dedup.method, dedup.operator_id, dedup.exact) == (DEDUCED, flink["dedup"]["operator_id"], True)
    assert dedup.reason.startswith("the only checkpoint operator that fits "), dedup.reason
    assert dedup.reason.endswith(
        f"; its name as a uid ('dedup') hashes to {legacy}, but that is a guess the other evidence does not confirm "
        "(a name may be another operator's uid), so it is not used"
    ), dedup.reason
    # legacy-dedup's id is bound to no operator but legacy-dedup, if to any
    assert all(b.name == "legacy-dedup" for b in binding.operators if b.operator_id == legacy)
