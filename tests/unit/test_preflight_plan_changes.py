"""preflight's plan changes (``-p VERTEX=N``, the checkpoint's job rescaled) and the restore forecast's reasons, on
the recorded job-graph plans of real restores: vertex ids, names and parallelisms are Flink's (jobgraph.json, as
Flink submitted the job), the old parallelism the checkpoint's."""

from __future__ import annotations

import json

import pytest
from support.fixtures import fixture_named
from support.preflight_matrix import case_uids, load_recorded, preflight_row, recorded_dir

from spillway.inspect.preflight import (
    NOTE,
    WARNING,
    checkpoint_parallelism_plan,
    find_vertex,
    forecast_reasons,
    place_operators,
    with_parallelism,
)
from spillway.inspect.topology import PlanError, Topology, load_plan
from spillway.storage.load import load_checkpoint

RELEASE = "2.0.0"


def plan(case: str) -> Topology:
    return load_plan(recorded_dir(RELEASE, case) / "jobgraph.json", case_uids(RELEASE, case))


def flink_vertices(case: str) -> dict[str, tuple[str, int]]:
    """Job-vertex id -> (Flink's description, parallelism) as Flink submitted the case's job."""
    nodes = json.loads((recorded_dir(RELEASE, case) / "jobgraph.json").read_text())["nodes"]
    return {n["id"]: (n["description"], n["parallelism"]) for n in nodes}


def vertex_of(case: str, name: str) -> str:
    """The job vertex whose description names ``name`` first on a line (Flink's ``name<br/>+- chained<br/>``)."""
    hits = [
        vid
        for vid, (description, _) in flink_vertices(case).items()
        if name in [line.removeprefix("+- ") for line in description.split("<br/>")]
    ]
    assert len(hits) == 1, (name, hits)
    return hits[0]


def test_a_vertex_is_found_by_id_by_any_operator_name_and_by_a_given_uid() -> None:
    p = plan("same")
    check_vertex = vertex_of("same", "check")
    assert vertex_of("same", "sink: Writer") == check_vertex  # chained to check
    assert find_vertex(p, check_vertex) == check_vertex
    assert find_vertex(p, "check") == check_vertex
    assert find_vertex(p, "sink: Writer") == check_vertex
    assert find_vertex(p, "sink") == check_vertex  # the uid given for the sink
    assert find_vertex(p, "src") == vertex_of("same", "Source: seq")
    assert find_vertex(p, "count") == vertex_of("same", "count")


def test_an_unknown_name_is_refused_with_the_vertices_listed() -> None:
    p = plan("same")
    with pytest.raises(PlanError) as refused:
        find_vertex(p, "nope")
    assert str(refused.value) == (
        "no vertex 'nope' in the plan (vertex id, operator name, NAME#NODE or given uid); vertices: "
        "Source: seq, check -> sink: Writer, count, parse"
    )


def test_with_parallelism_changes_the_named_vertices_only() -> None:
    p = plan("same")
    changed = with_parallelism(p, {"count": 3, "src": 1})
    expected = {vid: par for vid, (_, par) in flink_vertices("same").items()}
    expected[vertex_of("same", "count")] = 3
    expected[vertex_of("same", "Source: seq")] = 1
    assert {k: v.parallelism for k, v in changed.vertices.items()} == expected
    assert changed.uids == p.uids
    # what Flink ran for keyed-up (count 2 -> 3) is the same job at those parallelisms
    keyed_up = {vid: par for vid, (_, par) in flink_vertices("keyed-up").items()}
    assert {k: v.parallelism for k, v in with_parallelism(p, {"count": 3}).vertices.items()} == keyed_up


def test_the_checkpoints_job_rescaled_gives_the_old_plan_and_the_new_parallelism() -> None:
    """keyed-up: Flink ran the counted job with count at 3 over the checkpoint taken at 2 (and restored it)."""
    assert load_recorded(RELEASE, "keyed-up")["outcome"] == "restored"
    result = preflight_row(RELEASE, "keyed-up")
    count = vertex_of("keyed-up", "count")
    found = checkpoint_parallelism_plan(plan("keyed-up"), result)
    assert found is not None
    old, new = found
    assert new == {count: 3}
    # the plan at the checkpoint's parallelism: every vertex at 2, as the counted job ran (the "same" row's plan)
    assert {k: v.parallelism for k, v in old.vertices.items()} == {
        vid: par for vid, (_, par) in flink_vertices("same").items()
    }
    # nothing rescaled: no plan to rescale from
    assert checkpoint_parallelism_plan(plan("same"), preflight_row(RELEASE, "same")) is None


def test_a_new_job_that_is_not_the_checkpoints_rescaled_has_no_old_plan() -> None:
    """A vertex holding checkpoint operators of two parallelisms is no rescale of one vertex; a vertex without
    checkpoint operators (a new one) does not count."""
    result = preflight_row(RELEASE, "keyed-up")
    rows = [dict(r) for r in result.vertices]
    count = vertex_of("keyed-up", "count")
    mixed = [r | {"checkpoint_parallelism": None} if r["key"] == count else r for r in rows]
    assert checkpoint_parallelism_plan(plan("keyed-up"), type(result)(result.reasons, mixed)) is None
    new_vertex = [{"key": "new", "parallelism": 5, "checkpoint_parallelism": None, "operators": []}, *rows]
    found = checkpoint_parallelism_plan(plan("keyed-up"), type(result)(result.reasons, new_vertex))
    assert found is not None and found[1] == {count: 3}


def test_the_vertex_table_has_each_vertex_at_flinks_parallelism_and_the_checkpoints() -> None:
    result = preflight_row(RELEASE, "keyed-up")
    flink = flink_vertices("keyed-up")
    ids = json.loads((fixture_named(f"{RELEASE}-counted").root / "ids.json").read_text())
    by_vertex: dict[str, list[str]] = {}
    for n in ids["stream_nodes"]:
        by_vertex.setdefault(n["vertex_id"], []).append(n["operator_id"])
    assert {r["key"]: r["parallelism"] for r in result.vertices} == {k: p for k, (_, p) in flink.items()}
    assert all(r["checkpoint_parallelism"] == 2 for r in result.vertices)
    assert {r["key"]: sorted(r["operators"]) for r in result.vertices} == {k: sorted(v) for k, v in by_vertex.items()}
    # count holds input and output channel state, the source output state only, check none (an unaligned
    # checkpoint of the counted job)
    row = {r["vertex"]: r for r in result.vertices}
    assert row["count"]["input_channel_bytes"] > 0 and row["count"]["output_channel_bytes"] > 0
    assert row["Source: seq"]["input_channel_bytes"] == 0 < row["Source: seq"]["output_channel_bytes"]
    assert (
        row["check -> sink: Writer"]["input_channel_bytes"] == row["check -> sink: Writer"]["output_channel_bytes"] == 0
    )


def test_the_forecasts_warnings_become_reasons() -> None:
    forecast = {"flink": {"over_budget": 2, "bytes_filtered": 300, "bytes_read": 1000, "virtual_channels": 6}}
    stall, filtering = forecast_reasons(forecast)
    assert (stall.check, stall.verdict, stall.flink_issue) == ("recovery", WARNING, "FLINK-22946")
    assert stall.message == (
        "2 gate(s) recover more network buffers than the gate gets (see the forecast): risk of a stalled or "
        "spilling recovery"
    )
    assert (filtering.check, filtering.verdict, filtering.flink_issue) == ("recovery", NOTE, None)
    assert filtering.message == (
        "Flink will read 1000 bytes of channel state over 6 virtual channels and pass 300 of them through its record "
        "filter (records of old subtasks that now feed several new ones); a `spillway rescale` first writes the "
        "channel state at the new parallelism: Flink then restores it as-is, without virtual channels or filtering"
    )
    assert forecast_reasons({"flink": {"over_budget": 0, "bytes_filtered": 0}}) == []
    assert forecast_reasons({}) == []
    assert [r.verdict for r in forecast_reasons({"flink": {"over_budget": 1}})] == [WARNING]


@pytest.mark.parametrize("flavour", ["jobgraph.json", "plan.json"])
def test_each_checkpoint_operator_is_placed_where_flink_ran_it(flavour: str) -> None:
    """The counted job as Flink ran it (ids.json: each stream node's operator id and job vertex, in chain order):
    every operator of the checkpoint sits in its vertex at its chain position; check's chain has two operators
    with the sink its only end, the others one."""
    fx = fixture_named(f"{RELEASE}-counted")
    ids = json.loads((fx.root / "ids.json").read_text())
    topology = load_plan(recorded_dir(RELEASE, "same") / flavour, case_uids(RELEASE, "same"))
    loaded = load_checkpoint(fx.checkpoint_dir)
    place = place_operators(topology.as_new_job(), loaded.checkpoint)
    chains: dict[str, list[str]] = {}
    for n in ids["stream_nodes"]:
        chains.setdefault(n["vertex_id"], []).append(n["operator_id"])
    key_of = {v.names[0]: key for key, v in topology.vertices.items()}
    by_vertex = {key_of[n["name"]]: chains[n["vertex_id"]] for n in ids["stream_nodes"] if n["name"] in key_of}
    expected = {op: (key, pos) for key, ops in by_vertex.items() for pos, op in enumerate(ops)}
    assert place.where == expected
    assert {key: (v.chain_length, v.leaves) for key, v in place.vertices.items()} == {
        key: (len(ops), [len(ops) - 1]) for key, ops in by_vertex.items()
    }
    assert place.old_parallelism == {key: 2 for key in by_vertex}
    assert place.unknown == place.guessed == [] and place.assumed == {}
