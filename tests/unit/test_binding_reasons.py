"""What the binding says of each operator, word for word, where the words carry facts of Flink's.

Real checkpoints of Flink 1.20.3 (tests/fixtures/1.20.3-prod), with the plan edited the way real jobs name
operators (a name that is another operator's uid). Expected ids come from ids.json (Flink's own hasher); the
state each id holds from oracle.json (Flink's own reading of ``_metadata``)."""

from __future__ import annotations

import json
from typing import Any

from support.fixtures import Fixture, fixture_named

from spillway.flink.deduction import DEDUCED
from spillway.flink.operator_ids import uid_hash
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
        assert b.reason.startswith(
            f"the only checkpoint operator that fits ({said}) in every consistent assignment "
            "(1 consistent assignment(s) met); others ruled out: "
        ), (b.name, b.reason)
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
