"""The ``shapes`` / ``shapes-no-uid`` fixtures hold what they were made for (tests/fixtures/generator/README.md).

Everything here is read from Flink's own files of each fixture: ``ids.json`` (the stream graph, the hasher's ids and
the job vertices Flink built) and ``oracle.json`` (Flink's own metadata loader); nothing comes from spillway."""

from __future__ import annotations

import json
from collections import Counter

import pytest
from support.fixtures import Fixture, all_fixtures

RELEASES = ("1.14.6", "1.16.3", "1.18.1", "1.20.3", "2.2.1")
SHAPES = [f for f in all_fixtures() if f.info["scenario"] in ("shapes", "shapes-no-uid")]
WITH_UIDS = [pytest.param(f, id=f.name) for f in SHAPES if f.info["scenario"] == "shapes"]
NO_UIDS = [pytest.param(f, id=f.name) for f in SHAPES if f.info["scenario"] == "shapes-no-uid"]
ALL = [pytest.param(f, id=f.name) for f in SHAPES]

#: Names Flink gives an operator the job did not name (differing a little between releases).
DEFAULT_NAMES = (
    "Map",
    "Filter",
    "KeyedProcess",
    "Sink: Unnamed",
    "Sink: Writer",
    "Timestamps/Watermarks",
    "async wait operator",
    "Co-Process-Broadcast",
    "Co-Keyed-Process",
    "KeyedCoProcess",
    "TumblingEventTimeWindows",
)


def _ids(fx: Fixture) -> dict:
    return json.loads((fx.root / "ids.json").read_text())


def _oracle_ops(fx: Fixture) -> dict[str, dict]:
    return {o["operator_id"]: o for o in json.loads(fx.oracle.read_text())["operators"]}


def _is_default(name: str) -> bool:
    return name in DEFAULT_NAMES or name.startswith("Window(")


def test_both_scenarios_exist_on_five_release_lines() -> None:
    have = {(f.release, f.info["scenario"]) for f in SHAPES}
    assert have == {(r, s) for r in RELEASES for s in ("shapes", "shapes-no-uid")}


@pytest.mark.parametrize("fx", WITH_UIDS)
def test_a_name_is_another_operators_uid(fx: Fixture) -> None:
    nodes = _ids(fx)["stream_nodes"]
    by_name = {n["name"]: n for n in nodes}
    assert by_name["dedup"]["uid"] == "dedup-v2"
    assert by_name["legacy-dedup"]["uid"] == "dedup"
    # Flink hashes the uid, so the operator called "dedup" is NOT the one whose uid is "dedup".
    assert by_name["dedup"]["operator_id"] != by_name["legacy-dedup"]["operator_id"]
    with_uid = [n for n in nodes if n["uid"] is not None]
    assert len(with_uid) >= 10 and all(n["uid"] != n["name"] for n in with_uid)
    assert sum(n["uid"] is None for n in nodes) >= 10


@pytest.mark.parametrize("fx", WITH_UIDS)
def test_set_uid_hash_is_not_the_id_the_checkpoint_keeps(fx: Fixture) -> None:
    """setUidHash gives the async operator a user-defined id; the checkpoint keeps its generated id."""
    ids = _ids(fx)
    pairs = [
        (gen, user)
        for v in ids["vertices"]
        for gen, user in zip(v["operator_ids"], v["user_defined_operator_ids"], strict=True)
        if user is not None
    ]
    assert pairs == [(pairs[0][0], "5ba9e5a1d0c0ffee5ba9e5a1d0c0ffee")]
    node = next(n for n in ids["stream_nodes"] if n["operator_id"] == pairs[0][0])
    assert node["name"] == "async wait operator" and node["uid"] is None
    ops = _oracle_ops(fx)
    assert pairs[0][0] in ops and pairs[0][1] not in ops
    assert ops[pairs[0][0]]["subtasks"][0]["managed_operator_state"]  # the async operator's in-flight elements


@pytest.mark.parametrize("fx", NO_UIDS)
def test_no_uid_at_all_and_twenty_default_names(fx: Fixture) -> None:
    ids = _ids(fx)
    nodes = ids["stream_nodes"]
    assert all(n["uid"] is None for n in nodes)
    assert all(u is None for v in ids["vertices"] for u in v["user_defined_operator_ids"])
    names = Counter(n["name"] for n in nodes)
    assert sum(c for name, c in names.items() if _is_default(name)) >= 20, names
    assert names["KeyedProcess"] == 3 and names["Map"] >= 5 and names["Filter"] >= 2
    assert names["Sink: Unnamed"] >= 4


@pytest.mark.parametrize("fx", ALL)
def test_the_topology_has_every_shape(fx: Fixture) -> None:
    ids = _ids(fx)
    nodes = {n["id"]: n for n in ids["stream_nodes"]}
    edges = ids["stream_edges"]
    into: dict[int, list[dict]] = {}
    out_of: dict[int, list[dict]] = {}
    for e in edges:
        into.setdefault(e["target"], []).append(e)
        out_of.setdefault(e["source"], []).append(e)
    # A union of three inputs, each keyed.
    assert any(len(es) == 3 and {e["partitioner"] for e in es} == {"HASH"} for es in into.values())
    # A broadcast-connect and a keyed two-input operator.
    assert any(any(e["partitioner"] == "BROADCAST" for e in es) for es in into.values())
    assert any({(e["type_number"], e["partitioner"]) for e in es} == {(1, "HASH"), (2, "HASH")} for es in into.values())
    # An operator without uid feeding a sink (Sink V2 writer from 1.15) and keyed branches.
    sink_name = "Sink: Unnamed" if fx.release.startswith("1.14") else "Sink: Writer"
    feeders = [
        nid
        for nid, es in out_of.items()
        if nodes[nid]["uid"] is None
        and any(nodes[e["target"]]["name"] == sink_name for e in es)
        and sum(e["partitioner"] == "HASH" for e in es) >= 2
    ]
    assert len(feeders) == 1
    names = [n["name"] for n in nodes.values()]
    assert "async wait operator" in names
    assert any("TumblingEventTimeWindows" in n for n in names)
    # Chain cuts: startNewChain (HEAD) and disableChaining (NEVER) on non-sources.
    assert {"HEAD", "NEVER"} <= {n["chaining_strategy"] for n in nodes.values() if not n["name"].startswith("Source")}
    # Fan-outs to several sinks.
    assert sum(n["name"].startswith("Sink") for n in nodes.values()) >= 5


def _channels(handles: list[dict]) -> list[dict]:
    """Per-channel handles; from 2.1 on Flink writes one merged handle per subtask holding them (``channels``)."""
    return [c for h in handles for c in h.get("channels", [h])]


@pytest.mark.parametrize("fx", ALL)
def test_channel_state_on_several_gates_next_to_keyed_and_operator_state(fx: Fixture) -> None:
    ops = _oracle_ops(fx).values()
    gates = {
        o["operator_id"]: {c["gate_index"] for s in o["subtasks"] for c in _channels(s["input_channel_state"])}
        for o in ops
    }
    with_input = [i for i, g in gates.items() if g]
    assert len(with_input) >= 2
    assert max(len(g) for g in gates.values()) >= 2
    assert any(h for o in ops for s in o["subtasks"] for h in s["result_subpartition_state"])
    assert sum(any(s["managed_keyed_state"] for s in o["subtasks"]) for o in ops) >= 6
    assert sum(any(s["managed_operator_state"] for s in o["subtasks"]) for o in ops) >= 4


@pytest.mark.parametrize("release", RELEASES)
def test_both_scenarios_build_the_same_graph(release: str) -> None:
    by_scenario = {f.info["scenario"]: _ids(f) for f in SHAPES if f.release == release}
    shape = {
        s: (
            sorted((n["id"], n["name"], n["parallelism"], n["chaining_strategy"]) for n in ids["stream_nodes"]),
            sorted((e["source"], e["target"], e["partitioner"], e["type_number"]) for e in ids["stream_edges"]),
        )
        for s, ids in by_scenario.items()
    }
    assert shape["shapes"] == shape["shapes-no-uid"]
