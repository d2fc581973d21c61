"""Binding by the job's own ids (``flink-id``): the ``setUidHash`` id of the shapes job, every reason and uid.

The shapes job (tests/fixtures/<release>-shapes) gives its ``async wait operator`` a user-defined hash with
``setUidHash``; Flink records it in the job vertex (``ids.json`` ``vertices[].user_defined_operator_ids``) and keeps
the operator's state under its generated id. Every expected id and uid here is Flink's (``ids.json``, written by
Flink's own hasher; the checkpoint's ids read from ``_metadata``)."""

from __future__ import annotations

import copy
import json
from typing import Any

import pytest
from support.fixtures import Fixture, all_fixtures

from spillway.flink import operator_ids
from spillway.flink.job_ids import parse_job_ids
from spillway.storage.load import load_checkpoint

SHAPES = [pytest.param(f, id=f.name) for f in all_fixtures() if f.info["scenario"] == "shapes"]
FLINKS = "Flink's id from the job's jar"
ABSENT = "; not in the checkpoint (no state for it there)"


def _with_user_hashes(fx: Fixture) -> tuple[dict[str, Any], dict[str, str]]:
    """ids.json with each stream node's ``user_hash`` as Flink recorded it in its vertex; generated -> user id."""
    doc = copy.deepcopy(json.loads((fx.root / "ids.json").read_text()))
    users = {
        gen: user
        for v in doc["vertices"]
        for gen, user in zip(v["operator_ids"], v["user_defined_operator_ids"], strict=True)
        if user is not None
    }
    for node in doc["stream_nodes"]:
        node["user_hash"] = users.get(node["operator_id"])
    return doc, users


def _stored(fx: Fixture) -> list[str]:
    return [o.operator_id for o in load_checkpoint(str(fx.checkpoint_dir)).checkpoint.operators]


@pytest.mark.parametrize("fx", SHAPES)
def test_the_set_uid_hash_operator_binds_to_the_id_its_checkpoint_holds(fx: Fixture) -> None:
    doc, users = _with_user_hashes(fx)
    [(generated, user)] = users.items()
    stored = _stored(fx)
    assert generated in stored and user not in stored  # Flink kept the state under the generated id
    job = parse_job_ids(doc)

    binding = operator_ids.bind(job.graph, stored, release=fx.release)
    nodes = {n["id"]: n for n in doc["stream_nodes"]}
    for b in binding.operators:
        node = nodes[b.node_id]
        held = node["operator_id"] in stored
        assert (b.method, b.operator_id, b.uid, b.vertex_id) == (
            operator_ids.FLINK_ID,
            node["operator_id"],
            node["uid"],
            node["vertex_id"],
        )
        assert (b.in_checkpoint, b.exact, b.reason) == (held, held, FLINKS + ("" if held else ABSENT))
    assert binding.unclaimed == () and binding.notes == () and binding.solutions is None

    # A checkpoint that holds the state under the user-defined hash (the id a job restored from one written
    # with that hash keeps): the operator is bound to it, and says why.
    renamed = [user if h == generated else h for h in stored]
    binding = operator_ids.bind(job.graph, renamed, release=fx.release)
    [bound] = [b for b in binding.operators if b.operator_id in (generated, user)]
    assert (bound.name, bound.operator_id, bound.exact, bound.reason) == (
        "async wait operator",
        user,
        True,
        "the setUidHash id from the job's jar",
    )
    assert binding.unclaimed == ()


@pytest.mark.parametrize("fx", SHAPES)
def test_flinks_ids_leave_nothing_for_the_guessing_passes(fx: Fixture) -> None:
    """Every operator bound by Flink's id: no uid guess, no generated-id search, no structure (with the
    checkpoint's facts given too), and an id of the checkpoint no operator of the job has stays unclaimed."""
    doc, _ = _with_user_hashes(fx)
    job = parse_job_ids(doc)
    loaded = load_checkpoint(str(fx.checkpoint_dir)).checkpoint
    stored = [o.operator_id for o in loaded.operators]
    stranger = "0123456789abcdef0123456789abcdef"
    binding = operator_ids.bind(job.graph, [*stored, stranger], release=fx.release)
    assert {b.method for b in binding.operators} == {operator_ids.FLINK_ID}
    assert binding.unclaimed == (stranger,)
    assert binding.chained_outputs == {}


@pytest.mark.parametrize("fx", SHAPES)
def test_an_operator_whose_id_the_checkpoint_lacks_says_so(fx: Fixture) -> None:
    """Every id of the job but one (``Sink: Writer``'s, or 1.14's first ``Sink: Unnamed``) given as the
    checkpoint's: that operator is bound to Flink's id, not in the checkpoint, and says it has no state there."""
    doc, _ = _with_user_hashes(fx)
    job = parse_job_ids(doc)
    missing = next(n for n in doc["stream_nodes"] if n["name"] in ("Sink: Writer", "Sink: Unnamed"))
    rest = [h for h in _stored(fx) if h != missing["operator_id"]]
    binding = operator_ids.bind(job.graph, rest, release=fx.release)
    [b] = [b for b in binding.operators if b.node_id == missing["id"]]
    expected = (missing["operator_id"], False, False, FLINKS + ABSENT)
    assert (b.operator_id, b.in_checkpoint, b.exact, b.reason) == expected
