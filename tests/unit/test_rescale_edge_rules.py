"""The rule rescale plans for every ship strategy, and how it resolves what the user names (spillway/rescale/plan.py).

The real 2.3.0 "counted" checkpoint (Source: seq -REBALANCE-> parse -HASH-> count -REBALANCE-> check -> sink, p=2,
records in flight into parse, count and check) with its own job-graph plan, the count -> check edge's ship strategy
set to each of Flink's partitioners in turn. Expected rules follow what each partitioner does in Flink: REBALANCE
and SHUFFLE spread records over every downstream subtask (re-balanced by bytes when the downstream is rescaled),
GLOBAL sends everything to subtask 0, BROADCAST to every subtask, HASH by key group, CUSTOM by the user's function,
FORWARD and RESCALE are pointwise (records stay on their channel; FORWARD needs equal parallelism). Operator ids,
uids and max parallelism come from ids.json and oracle.json.
"""

from __future__ import annotations

import json
from dataclasses import replace
from functools import cache
from typing import Any

import pytest
from support.fixtures import fixture_named

from spillway.errors import UsageError
from spillway.inspect.topology import bind, load_plan, parse_plan
from spillway.rescale.plan import (
    BALANCED,
    BROADCAST,
    GLOBAL,
    HASH,
    KEEP,
    RescaleRefused,
    build_plan,
    resolve_vertex,
)
from spillway.storage.load import LoadedCheckpoint, load_checkpoint

FX = fixture_named("2.3.0-counted")
EDGE = "count -> check -> sink: Writer"


@cache
def _ids(name: str = "2.3.0-counted") -> dict[str, dict[str, Any]]:
    return {n["name"]: n for n in json.loads((fixture_named(name).root / "ids.json").read_text())["stream_nodes"]}


def _loaded() -> LoadedCheckpoint:
    ld = load_checkpoint(FX.checkpoint_dir)
    ld.resolve_files()
    return ld


def _plan(strategy: str) -> Any:
    doc = json.loads((FX.root / "jobgraph.json").read_text())
    check = next(n for n in doc["nodes"] if n["description"].startswith("check"))
    check["inputs"][0]["ship_strategy"] = strategy
    return parse_plan(doc)


def _rules(strategy: str, vertex: str, **kw: Any) -> dict[str, str]:
    ld = _loaded()
    plan = build_plan(ld.checkpoint, _plan(strategy), ld.resolver, {vertex: 3}, **kw)
    return {e.label: e.rule for e in plan.edges}


@pytest.mark.parametrize(
    ("strategy", "rule"),
    [("REBALANCE", BALANCED), ("SHUFFLE", BALANCED), ("GLOBAL", GLOBAL), ("BROADCAST", BROADCAST), ("RESCALE", KEEP)],
)
def test_the_rule_into_a_rescaled_downstream(strategy: str, rule: str) -> None:
    assert _rules(strategy, "check") == {f"{EDGE} ({strategy})": rule}


@pytest.mark.parametrize(
    ("strategy", "rule"),
    [
        ("REBALANCE", KEEP),
        ("SHUFFLE", KEEP),
        ("GLOBAL", GLOBAL),
        ("BROADCAST", BROADCAST),
        ("RESCALE", KEEP),
        ("HASH", KEEP),
        ("CUSTOM", KEEP),
    ],
)
def test_the_rule_out_of_a_rescaled_upstream_into_a_kept_downstream(strategy: str, rule: str) -> None:
    """count rescaled, check kept: records keep their downstream subtask unless the partitioner itself depends
    on nothing but the downstream (GLOBAL, BROADCAST); parse -> count is a keyBy into the rescaled count."""
    assert _rules(strategy, "count", keys={"count": "string"}) == {
        f"{EDGE} ({strategy})": rule,
        "parse -> count (HASH)": HASH,
    }


def test_records_in_flight_on_a_custom_or_hash_edge_into_a_rescaled_vertex_need_the_users_function() -> None:
    ld = _loaded()
    with pytest.raises(UsageError) as err:
        build_plan(ld.checkpoint, _plan("CUSTOM"), ld.resolver, {"check": 3})
    assert str(err.value) == (
        f"edge {EDGE} (CUSTOM) uses a custom partitioner with records in flight: give key_fns="
        "{VERTEX: module:function(payload, parallelism) -> target subtask}"
    )
    plan = build_plan(ld.checkpoint, _plan("CUSTOM"), ld.resolver, {"check": 3}, key_fns={"check": "m:f"})
    (edge,) = plan.edges
    assert (edge.rule, edge.key_fn, edge.key) == ("custom", "m:f", None)
    with pytest.raises(UsageError, match=rf"^edge {EDGE} \(HASH\) is a keyBy \(HASH\) edge with records in flight"):
        build_plan(ld.checkpoint, _plan("HASH"), ld.resolver, {"check": 3})
    (edge,) = build_plan(ld.checkpoint, _plan("HASH"), ld.resolver, {"check": 3}, keys={"check": "string"}).edges
    assert (edge.rule, edge.key, edge.key_fn) == (HASH, "string", None)


@pytest.mark.parametrize(("vertex", "old", "new"), [("check", 2, 3), ("count", 3, 2)])
def test_a_forward_edge_between_different_parallelisms_is_refused(vertex: str, old: int, new: int) -> None:
    ld = _loaded()
    with pytest.raises(RescaleRefused) as err:
        build_plan(ld.checkpoint, _plan("FORWARD"), ld.resolver, {vertex: 3}, keys={"count": "string"})
    assert str(err.value) == (
        f"edge {EDGE} (FORWARD): a FORWARD edge needs equal parallelism on both sides, got {old} -> {new}; "
        "rescale both vertices together"
    )


def test_a_pointwise_edge_with_records_in_flight_is_refused_even_with_both_sides_rescaled() -> None:
    """Both ends of the FORWARD edge at 3: the parallelism fits, but records in flight on a pointwise edge have no
    channel Flink would re-route them to."""
    ld = _loaded()
    with pytest.raises(RescaleRefused) as err:
        build_plan(ld.checkpoint, _plan("FORWARD"), ld.resolver, {"check": 3, "count": 3}, keys={"count": "string"})
    assert str(err.value) == f"edge {EDGE} (FORWARD) is pointwise (FORWARD) yet carries channel state"


def test_a_strategy_rescale_does_not_know_is_refused_naming_it() -> None:
    ld = _loaded()
    with pytest.raises(RescaleRefused) as err:
        build_plan(ld.checkpoint, _plan("FOO"), ld.resolver, {"check": 3})
    assert str(err.value) == f"edge {EDGE} (FOO): ship strategy 'FOO' is not supported by rescale"


def test_an_edge_plan_carries_flinks_facts_of_both_ends() -> None:
    """Gate and output index from the plan, parallelism before and after, the downstream head's max parallelism
    (oracle.json) and id, the upstream tail's id (ids.json)."""
    ld = _loaded()
    plan = build_plan(ld.checkpoint, load_plan(FX.root / "jobgraph.json"), ld.resolver, {"check": 3})
    (edge,) = plan.edges
    max_p = {o["name"]: o["max_parallelism"] for o in json.loads(FX.oracle.read_text())["operators"]}
    ids = _ids()
    assert (edge.gate, edge.partition, edge.old_up_p, edge.new_up_p, edge.old_down_p, edge.new_down_p) == (
        0,
        0,
        2,
        2,
        2,
        3,
    )
    assert edge.max_parallelism == max_p["check"] == 128
    assert (edge.down_head, edge.up_tail) == (ids["check"]["operator_id"], ids["count"]["operator_id"])
    assert (edge.key, edge.key_fn, edge.strategy) == (None, None, "REBALANCE")
    assert [edge.new_up(u) for u in range(4)] == [0, 1, 0, 1]


# ------------------------------------------------------------------------------------------- naming a vertex


def _bound(name: str) -> tuple[Any, dict[str, Any]]:
    fx = fixture_named(name)
    topology = load_plan(fx.root / "jobgraph.json")
    return topology, bind(topology, load_checkpoint(fx.checkpoint_dir).checkpoint)


@pytest.mark.parametrize("fixture", ["2.3.0-counted", "1.15.4-counted"])
def test_a_vertex_is_named_by_id_by_any_operators_name_or_by_a_uid(fixture: str) -> None:
    """check's vertex by its vertex id, by its head's or its chained sink's name or operator id; on 1.15 (no uid
    stored) a uid still names its operator through Flink's hash of it (ids.json: the sink's uid)."""
    topology, bound = _bound(fixture)
    ids = _ids(fixture)
    check = ids["check"]["vertex_id"]
    sink = next(n for n in ids.values() if n["uid"] == "sink")
    for name in (check, "check", sink["name"], sink["operator_id"], "sink", ids["check"]["uid"]):
        assert resolve_vertex(topology, bound, name) == check, name
    assert resolve_vertex(topology, bound, "src") == ids["Source: seq"]["vertex_id"]


def test_an_unknown_or_ambiguous_name_is_a_usage_error_listing_the_vertices() -> None:
    topology, bound = _bound("2.3.0-counted")
    with pytest.raises(UsageError) as err:
        resolve_vertex(topology, bound, "nope")
    assert str(err.value) == (
        "no vertex 'nope' in the plan (vertex id, operator uid or name, NAME#NODE); vertices: Source: seq, "
        "check -> sink: Writer, count, parse"
    )
    for b in bound.values():  # one name on two vertices
        if b.vertex.names[0] in ("count", "parse"):
            b.vertex = replace(b.vertex, names=(*b.vertex.names, "twice"))
    with pytest.raises(UsageError) as err:
        resolve_vertex(topology, bound, "twice")
    assert str(err.value) == "'twice' names 2 vertices; use a vertex id or NAME#NODE"


def test_a_stateful_operator_the_binding_cannot_place_refuses_the_rescale_naming_who_could_hold_it() -> None:
    """1.20.3-prod-counted with its stream-graph plan and no uid: nothing in the checkpoint tells check-totals
    (operator state) from the discard sink (both with a uid, same parallelism, no channel state into either).
    The refusal names the operator by Flink's id of check-totals (ids.json; 1.20 stores no names), the two plan
    operators that could hold it, and what decides it; with check-totals' uid the plan is made."""
    fx = fixture_named("1.20.3-prod-counted")
    ids = _ids("1.20.3-prod-counted")
    ld = load_checkpoint(fx.checkpoint_dir)
    ld.resolve_files()
    args: dict[str, Any] = {"keys": {"count-per-key": "tuple:0:long"}}
    p = {"count-per-key": 3, "forward-values": 3, "parse": 3}
    with pytest.raises(RescaleRefused) as err:
        build_plan(ld.checkpoint, load_plan(fx.root / "plan.json"), ld.resolver, p, **args)
    assert str(err.value) == (
        f"cannot tell which vertex operator(s) {ids['check-totals']['operator_id']} belong to: the checkpoint's "
        "evidence fits more than one way, with 'check-totals', 'discard: Writer'. Give the uid of one of them "
        "(uids={NAME: UID} or uid_map=FILE), or pass the job-graph plan (REST /jobs/<job-id>/plan)"
    )
    plan = build_plan(
        ld.checkpoint,
        load_plan(fx.root / "plan.json", {"check-totals": ids["check-totals"]["uid"]}),
        ld.resolver,
        p,
        **args,
    )
    # (the plan alone does not show forward-values' startNewChain: the operators, not the chains, are compared)
    assert sorted(n for v in plan.rescaled() for n in v.label.split(" -> ")) == [
        "count-per-key",
        "forward-values",
        "parse",
    ]
    # Nothing rescaled: nothing needs placing.
    assert build_plan(ld.checkpoint, load_plan(fx.root / "plan.json"), ld.resolver, {}).rescaled() == []


def test_a_partially_finished_vertex_is_refused() -> None:
    """2.3.0-finished: pseq/pmap/psink have subtask 0 finished (oracle.json), which an offline rescale cannot
    spread over a new parallelism."""
    fx = fixture_named("2.3.0-finished")
    oracle = {o["name"]: o for o in json.loads(fx.oracle.read_text())["operators"]}
    finished = [s["index"] for s in oracle["Source: pseq"]["subtasks"] if s["finished"]]
    assert finished == [0]
    ld = load_checkpoint(fx.checkpoint_dir)
    ld.resolve_files()
    with pytest.raises(RescaleRefused) as err:
        build_plan(ld.checkpoint, load_plan(fx.root / "jobgraph.json"), ld.resolver, {"pmap": 3})
    first = str(err.value).split(": operator ")[1].split(" is ")[0]
    assert first in ("psrc", "pmap", "psink")  # uids Flink stored for the three (oracle.json)
    assert str(err.value) == (
        f"Source: pseq -> pmap -> psink: Writer: operator {first} is partially finished (subtasks {finished}); "
        "rescale it in Flink or clear the flags first (spillway repair clear-finished)"
    )


@pytest.mark.parametrize("name", ["2.3.0-inline", "2.3.0-unaligned"])
def test_each_part_of_a_moved_channel_points_at_flinks_bytes(name: str) -> None:
    """Every part of every source channel of the keyBy edge into a rescaled slow points at the bytes of a delegate
    Flink wrote (oracle.json): inline, the delegate's bytes themselves (sha256) and size; in a file, the file's
    absolute path, its start and the delegate's size."""
    import hashlib

    fx = fixture_named(name)
    oracle = json.loads(fx.oracle.read_text())
    inline: dict[str, int] = {}
    files: dict[str, int] = {}
    offsets: set[tuple[str, tuple[int, ...]]] = set()
    for o in oracle["operators"]:
        for s in o["subtasks"]:
            for side, key in (("input", "input_channel_state"), ("output", "result_subpartition_state")):
                for h in s[key]:
                    d = h["delegate"]
                    if d["type"] == "ByteStreamStateHandle":
                        inline[d["data_sha256"]] = d["state_size"]
                    else:
                        files[str((fx.checkpoint_dir / d["relative_path"]).resolve())] = d["state_size"]
                    offsets |= {(side, tuple(ch["offsets"])) for ch in h.get("channels", [h])}
    ld = load_checkpoint(fx.checkpoint_dir)
    ld.resolve_files()
    plan = build_plan(
        ld.checkpoint, load_plan(fx.root / "jobgraph.json"), ld.resolver, {"slow": 3}, keys={"slow": "string"}
    )
    parts = [p for s in plan.sources for p in s.parts]
    assert parts and {p.side for p in parts} == {"input", "output"}
    for p in parts:
        assert (p.side, p.offsets) in offsets
        if p.data is not None:
            assert p.path is None and p.base == 0
            assert inline[hashlib.sha256(p.data).hexdigest()] == p.size == len(p.data)
        else:
            assert p.path is not None and files[p.path] == p.size and p.base == 0  # whole files (no file merging)


def test_an_operator_the_binding_cannot_place_refuses_though_it_holds_only_coordinator_state() -> None:
    """As above, with check-totals holding no subtask state at all but coordinator state (a source's
    enumerator, say): a rescale would lose it just the same, so the plan is refused naming it."""
    from spillway.model.checkpoint import ByteStreamHandle

    fx = fixture_named("1.20.3-prod-counted")
    ids = _ids("1.20.3-prod-counted")
    ld = load_checkpoint(fx.checkpoint_dir)
    ld.resolve_files()
    (op,) = [o for o in ld.checkpoint.operators if o.operator_id == ids["check-totals"]["operator_id"]]
    for sub in op.subtasks:
        sub.managed_operator_state, sub.managed_operator_present = None, None
    assert not any(sub.has_state() for sub in op.subtasks)
    op.coordinator_state = ByteStreamHandle("coordinator", b"enumerator state")
    p = {"count-per-key": 3, "forward-values": 3, "parse": 3}
    with pytest.raises(RescaleRefused, match=rf"^cannot tell which vertex operator\(s\) {op.operator_id} belong to"):
        build_plan(
            ld.checkpoint, load_plan(fx.root / "plan.json"), ld.resolver, p, keys={"count-per-key": "tuple:0:long"}
        )
