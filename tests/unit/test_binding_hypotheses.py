"""A uid guessed from a name is a hypothesis, and a job-graph plan's ids outrank it.

Real checkpoints of Flink 1.20.3 (tests/fixtures/1.20.3-prod), with their plans edited the way real jobs name
operators: an operator's name is another operator's uid (``dedup`` named so, with uid ``dedup-v2``, next to
``legacy-dedup`` with uid ``dedup``). Expected ids are Flink's (ids.json, written by Flink's own hasher)."""

from __future__ import annotations

import json
from typing import Any

import pytest
from support.fixtures import Fixture, all_fixtures

from spillway.flink.operator_ids import UID_HASH, VERTEX_ID
from spillway.inspect.topology import operator_binding, parse_plan
from spillway.storage.load import load_checkpoint

FX = next(f for f in all_fixtures() if f.name == "1.20.3-prod")


def _flink_ids(fx: Fixture) -> dict[str, str]:
    return {n["name"]: n["operator_id"] for n in json.loads((fx.root / "ids.json").read_text())["stream_nodes"]}


def _renamed(doc: Any, renames: dict[str, str]) -> Any:
    """The plan with operators renamed (both flavours: stream nodes' names, job vertices' descriptions)."""
    doc = json.loads(json.dumps(doc))
    for node in doc.get("plan", doc)["nodes"]:
        for key in ("type", "contents"):
            if node.get(key) in renames:
                node[key] = renames[node[key]]
        if "description" in node:
            for old, new in renames.items():
                node["description"] = node["description"].replace(f"{old}<br/>", f"{new}<br/>")
    return doc


def _bind(flavour: str, renames: dict[str, str]) -> tuple[dict[str, Any], dict[str, str]]:
    doc = _renamed(json.loads((FX.root / flavour).read_text()), renames)
    checkpoint = load_checkpoint(FX.checkpoint_dir).checkpoint
    binding = operator_binding(parse_plan(doc), checkpoint)
    assert binding is not None
    truth = {renames.get(name, name): h for name, h in _flink_ids(FX).items()}
    return {b.name: b for b in binding.operators}, truth


# slow-count has uid "slow", format-out has uid "fmt" (ids.json)
NAME_IS_ANOTHER_UID = {"format-out": "slow", "slow-count": "legacy-slow"}
NAMES_SWAPPED_WITH_UIDS = {"format-out": "slow", "slow-count": "fmt"}


@pytest.mark.parametrize("renames", [NAME_IS_ANOTHER_UID, NAMES_SWAPPED_WITH_UIDS], ids=["another-uid", "swapped"])
def test_a_name_that_is_another_operators_uid_binds_nothing_wrong(renames: dict[str, str]) -> None:
    ops, truth = _bind("plan.json", renames)
    assert _flink_ids(FX)["slow-count"] != truth["slow"]  # the name "slow" hashes to the wrong operator's id
    for name, b in ops.items():
        if b.exact:
            assert b.operator_id == truth[name], (name, b.method, b.reason)
    # The checkpoint's own evidence (keyed state, channel state) decides both, once the guess is set aside.
    assert ops["slow"].exact and ops["slow"].operator_id == truth["slow"] and ops["slow"].method != UID_HASH
    assert "a guess the other evidence does not confirm" in ops["slow"].reason
    assert all(b.exact for b in ops.values())


def test_a_confirmed_name_guess_stays_exact() -> None:
    """Unedited, the names slow-count and format-out are no uids; nothing is set aside and every operator is
    bound to Flink's id (the guard against dropping what the evidence confirms)."""
    ops, truth = _bind("plan.json", {})
    assert {n: b.operator_id for n, b in ops.items()} == truth
    assert all(b.exact for b in ops.values())
    assert not any("does not confirm" in b.reason for b in ops.values())


def test_a_job_graph_vertex_id_outranks_a_name_guess() -> None:
    """format-out heads job vertex 36597482…; renamed "slow" (slow-count's uid) it keeps its vertex id."""
    ops, truth = _bind("jobgraph.json", NAME_IS_ANOTHER_UID)
    assert (ops["slow"].method, ops["slow"].operator_id) == (VERTEX_ID, truth["slow"])
    assert (ops["legacy-slow"].method, ops["legacy-slow"].operator_id) == (VERTEX_ID, truth["legacy-slow"])


def test_a_chained_operator_named_as_another_chains_uid_is_not_bound_by_it() -> None:
    """parse (chained behind Source: events, uid parse-events) renamed "rules-tag" — tag-rules' uid; tag-rules
    renamed. The guess would give parse tag-rules' id; parallelism 3 vs 2 refutes it, and parse is bound to its
    own id by the evidence."""
    ops, truth = _bind("jobgraph.json", {"parse": "rules-tag", "tag-rules": "tagging"})
    for name, b in ops.items():
        if b.exact:
            assert b.operator_id == truth[name], (name, b.method, b.reason)
    assert ops["rules-tag"].operator_id == truth["rules-tag"] and ops["rules-tag"].exact
    assert ops["tagging"].operator_id == truth["tagging"] and ops["tagging"].exact
