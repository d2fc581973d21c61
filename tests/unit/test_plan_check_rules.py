"""plan_check's findings, in process, one Flink fact at a time (spillway/inspect/plan_check.py).

The checkpoints are real fixtures; a plan that contradicts one is the fixture's own plan with one thing changed
that Flink's rules forbid for the state the checkpoint holds (docs/format/operator-ids.md §7–8): keyed state
behind a non-keyed edge, a source reader's state on an operator with an input, output channel state on an
operator whose chain sends nothing there, more input channels than the input has subtasks, another parallelism,
an operator a V5+ checkpoint (which stores every operator's name) does not have. Operator ids are Flink's
(ids.json); the operator labels are the names and uids Flink stored (metadata V6).
"""

from __future__ import annotations

import json
from collections.abc import Callable
from functools import cache
from typing import Any

import pytest
from support.fixtures import fixture_named

from spillway.inspect.plan_check import plan_mismatches, state_mismatches
from spillway.inspect.topology import bind, operator_binding, parse_plan
from spillway.model.checkpoint import CheckpointMetadata
from spillway.storage.load import load_checkpoint

FX = "2.3.0-unaligned"  # Source: seq (uid src) -> tostr =HASH=> slow (keyed) -REBALANCE-> len -> sink (uid sink)
NOT_THIS = "the plan does not describe this checkpoint"


@cache
def _flink_ids() -> dict[str, str]:
    ids = json.loads((fixture_named(FX).root / "ids.json").read_text())
    return {n["name"]: n["operator_id"] for n in ids["stream_nodes"]}


def _checkpoint(name: str = FX) -> CheckpointMetadata:
    return load_checkpoint(fixture_named(name).checkpoint_dir).checkpoint


def _doc(flavour: str, fixture: str = FX, edit: Callable[[dict[str, dict[str, Any]]], None] | None = None) -> Any:
    doc = json.loads((fixture_named(fixture).root / flavour).read_text())
    if edit is not None:
        edit({str(n.get("type") or n["description"].split("<br/>")[0]): n for n in doc["nodes"]})
    return doc


def _findings(
    doc: Any, checkpoint: CheckpointMetadata | None = None
) -> tuple[list[tuple[str, str, str]], list[tuple[str, str, str]]]:
    cp = checkpoint or _checkpoint()
    topology = parse_plan(doc)
    return plan_mismatches(bind(topology, cp), cp), state_mismatches(topology, cp)


def _by_stored_name(name: str, why: str) -> tuple[str, str, str]:
    return ("plan-mismatch", name, f"{name!r} is {_flink_ids()[name]} by stored-name, but {why}: {NOT_THIS}")


@pytest.mark.parametrize("flavour", ["plan.json", "jobgraph.json"])
def test_the_jobs_own_plan_raises_nothing(flavour: str) -> None:
    assert _findings(_doc(flavour)) == ([], [])


def _no_keyby(nodes: dict[str, dict[str, Any]]) -> None:
    for n in nodes.values():
        for e in n.get("inputs", []) + n.get("predecessors", []):
            if e["ship_strategy"].upper().startswith("HASH"):
                e["ship_strategy"] = "REBALANCE"


def test_keyed_state_behind_a_rebalance() -> None:
    """slow holds keyed state: its input must be keyed. By the stream graph the operator bound by its stored
    name is checked against its node; by the job graph its vertex's inputs are."""
    assert _findings(_doc("plan.json", edit=_no_keyby)) == (
        [],
        [_by_stored_name("slow", "it holds keyed state and no input of this operator is keyed")],
    )
    assert _findings(_doc("jobgraph.json", edit=_no_keyby)) == (
        [],
        [
            (
                "plan-mismatch",
                "slow",
                "slow holds keyed state, but the plan feeds its vertex 'slow' by no keyed edge (inputs: REBALANCE): "
                f"{NOT_THIS}",
            )
        ],
    )


def test_a_source_reader_and_a_chain_tail_in_the_wrong_places() -> None:
    """The plan with the names of the source and of tostr swapped: the source reader's state would sit on an
    operator with an input, and tostr's output channel state on the source position, whose chain sends only
    through tostr's position (FORWARD: one subpartition, while the checkpoint has subpartition 1)."""

    def swap(nodes: dict[str, dict[str, Any]]) -> None:
        a, b = nodes["Source: seq"], nodes["tostr"]
        for k in ("type", "contents"):
            a[k], b[k] = b[k], a[k]

    assert _findings(_doc("plan.json", edit=swap)) == (
        [],
        [
            _by_stored_name("tostr", "subpartition 1, no output its chain can have has that many subpartitions"),
            _by_stored_name("Source: seq", "it holds a source reader's state and this operator is not a source"),
        ],
    )


def test_another_parallelism() -> None:
    """Source and tostr at parallelism 1: their state is of 2 subtasks, and slow's input channel 1 (of the 2
    upstream subtasks over HASH) cannot exist behind 1 subtask."""

    def p1(nodes: dict[str, dict[str, Any]]) -> None:
        nodes["Source: seq"]["parallelism"] = nodes["tostr"]["parallelism"] = 1

    vertex = f"(vertex 'Source: seq -> tostr'): {NOT_THIS}"
    assert _findings(_doc("plan.json", edit=p1)) == (
        [
            ("plan-mismatch", "src", f"parallelism 2 in the checkpoint, 1 in the plan {vertex}"),
            ("plan-mismatch", "tostr", f"parallelism 2 in the checkpoint, 1 in the plan {vertex}"),
        ],
        [
            _by_stored_name("Source: seq", "parallelism 2 in the checkpoint, 1 in the plan"),
            _by_stored_name("tostr", "parallelism 2 in the checkpoint, 1 in the plan"),
            _by_stored_name("slow", "input channel 1, no input of this operator has that many channels"),
        ],
    )


def test_the_same_job_at_parallelism_3_by_its_job_graph() -> None:
    """2.3.0-unaligned-p3 is this job (same uids, same ids) at parallelism 3: every operator, chained ones too."""
    pm, sm = _findings(_doc("jobgraph.json", "2.3.0-unaligned-p3"))
    assert sm == []
    p = "parallelism 2 in the checkpoint, 3 in the plan"
    assert sorted(pm) == sorted(
        [
            ("plan-mismatch", "len", f"{p} (vertex 'len -> sink: Writer'): {NOT_THIS}"),
            ("plan-mismatch", "sink", f"{p} (vertex 'len -> sink: Writer'): {NOT_THIS}"),
            ("plan-mismatch", "slow", f"{p} (vertex 'slow'): {NOT_THIS}"),
            ("plan-mismatch", "src", f"{p} (vertex 'Source: seq -> tostr'): {NOT_THIS}"),
            ("plan-mismatch", "tostr", f"{p} (vertex 'Source: seq -> tostr'): {NOT_THIS}"),
        ]
    )


def test_an_operator_a_v5_checkpoint_does_not_name() -> None:
    def ghost(nodes: dict[str, dict[str, Any]]) -> None:
        nodes["len"]["type"] = nodes["len"]["contents"] = "ghost"

    pm, sm = _findings(_doc("plan.json", edit=ghost))
    assert pm == []
    assert sm[0] == (
        "plan-mismatch",
        "ghost",
        "the plan has 'ghost' and the checkpoint, which stores every operator with its name (metadata V5+), "
        "does not: the plan is of another job",
    )
    # and nothing is left for the checkpoint's len: no assignment fits, said as a warning
    assert [(r, o) for r, o, _ in sm[1:]] == [("plan-unbound", "-")]
    assert sm[1][2].startswith("no assignment of the 1 plan operator(s) not bound by id to the 1 checkpoint")


UNBOUND = (
    "plan-unbound",
    "-",
    "no operator of the plan is in this checkpoint by Flink's own ids: the plan may be of another job, or its "
    "operators' uids differ from their names (give them: --uid NAME=UID)",
)


def test_another_jobs_plan() -> None:
    """The SQL job's plans share no operator with this job. Its job graph names chains by Flink's ids, and this
    checkpoint stores stateless operators (2.3.0), so none of them being here is certain: an error. Its stream
    graph binds nothing by id: a warning saying what would make it certain."""
    pm, _ = _findings(_doc("jobgraph.json", "2.3.0-sql"))
    assert pm == [
        (
            "plan-mismatch",
            "-",
            "none of the plan's job vertex ids is an operator of this checkpoint: the plan is of another job",
        )
    ]
    pm, _ = _findings(_doc("plan.json", "2.3.0-sql"))
    assert pm == [UNBOUND]


@pytest.mark.parametrize("flavour", ["plan.json", "jobgraph.json"])
def test_another_jobs_plan_on_a_release_that_leaves_stateless_operators_out(flavour: str) -> None:
    """1.12 stores only operators with state: every job vertex's head may be absent from a sound checkpoint, so
    a job graph sharing no id proves nothing; both flavours only warn."""
    cp = _checkpoint("1.12.5-unaligned")
    assert all(any(s.has_state() for s in o.subtasks) for o in cp.operators)
    pm, _ = _findings(_doc(flavour, "2.3.0-sql"), cp)
    assert pm == [UNBOUND]


@pytest.mark.parametrize(
    ("fixture", "method", "slow_id"),
    [
        # uid slow = its name: bound by the uid's hash (Flink's ids.json: 59fa…)
        pytest.param("1.12.5-unaligned", "uid-hash", "59fa767824610e31f4a11d6125e09bf4", id="uid-hash"),
        # no uid at all: bound by Flink's generated hash (ids.json: 9dd6…)
        pytest.param("1.15.4-no-uid", "deterministic-hash", "9dd63673dd41ea021b896d5203f3ba7c", id="generated"),
    ],
)
def test_keyed_state_behind_a_rebalance_by_every_direct_binding(fixture: str, method: str, slow_id: str) -> None:
    ids = json.loads((fixture_named(fixture).root / "ids.json").read_text())
    assert {n["name"]: n["operator_id"] for n in ids["stream_nodes"]}["slow"] == slow_id
    pm, sm = _findings(_doc("plan.json", fixture, _no_keyby), _checkpoint(fixture))
    assert pm == []
    assert sm == [
        (
            "plan-mismatch",
            "slow",
            f"'slow' is {slow_id} by {method}, but it holds keyed state and no input of this operator is keyed: "
            f"{NOT_THIS}",
        )
    ]


def test_keyed_state_behind_a_forward_edge_between_vertices() -> None:
    """reinterpretAsKeyedStream keeps a FORWARD edge: keyed state behind it is Flink's, not a mismatch."""

    def forward(nodes: dict[str, dict[str, Any]]) -> None:
        for e in nodes["slow"]["inputs"]:
            e["ship_strategy"] = "FORWARD"

    assert _findings(_doc("jobgraph.json", edit=forward)) == ([], [])


@pytest.mark.parametrize(
    ("inputs", "shown"),
    [
        pytest.param([("Source: seq", "REBALANCE"), ("len", "BROADCAST")], "BROADCAST, REBALANCE", id="two"),
        pytest.param([], "none", id="none"),
    ],
)
def test_a_keyed_vertex_without_a_keyed_input_names_its_inputs(inputs: list[tuple[str, str]], shown: str) -> None:
    def rewire(nodes: dict[str, dict[str, Any]]) -> None:
        nodes["slow"]["inputs"] = [
            {"id": nodes[name]["id"], "num": i, "ship_strategy": ship} for i, (name, ship) in enumerate(inputs)
        ]

    _, sm = _findings(_doc("jobgraph.json", edit=rewire))
    assert sm == [
        (
            "plan-mismatch",
            "slow",
            f"slow holds keyed state, but the plan feeds its vertex 'slow' by no keyed edge (inputs: {shown}): "
            f"{NOT_THIS}",
        )
    ]


def test_an_operator_a_v5_checkpoint_of_2_0_does_not_name() -> None:
    """2.0.0 writes metadata V5, which stores every operator's name (V6 was tested above)."""
    cp = _checkpoint("2.0.0-unaligned")
    assert cp.format_version == 5

    def ghost(nodes: dict[str, dict[str, Any]]) -> None:
        nodes["len"]["type"] = nodes["len"]["contents"] = "ghost"

    _, sm = _findings(_doc("plan.json", "2.0.0-unaligned", ghost), cp)
    assert sm[0][:2] == ("plan-mismatch", "ghost")


def test_reinterpret_as_keyed_stream_behind_a_keyby() -> None:
    """1.12.5-rocksdb-incremental's plan with an operator inserted between the keyBy and slow, which it feeds over
    FORWARD (reinterpretAsKeyedStream): slow, bound by its uid's hash, holds keyed state behind a FORWARD edge in a
    chain the keyBy feeds — Flink's, not a mismatch."""
    fixture = "1.12.5-rocksdb-incremental"

    def insert(nodes: dict[str, dict[str, Any]]) -> None:
        slow = nodes["slow"]
        (pred,) = slow["predecessors"]
        assert pred["ship_strategy"] == "HASH"
        nodes["slow"]["predecessors"] = [{"id": 99, "ship_strategy": "FORWARD"}]
        nodes["reinterpret"] = {
            "id": 99,
            "type": "reinterpret",
            "contents": "reinterpret",
            "pact": "Operator",
            "parallelism": slow["parallelism"],
            "predecessors": [pred],
        }

    doc = _doc("plan.json", fixture)
    nodes = {n["type"]: n for n in doc["nodes"]}
    insert(nodes)
    doc["nodes"].insert(doc["nodes"].index(nodes["slow"]), nodes["reinterpret"])
    cp = _checkpoint(fixture)
    binding = {b.name: (b.method, b.exact) for b in operator_binding(parse_plan(doc), cp).operators}
    assert binding["slow"] == ("uid-hash", True)
    assert _findings(doc, cp) == ([], [])


def test_a_renamed_operator_with_its_uid_is_in_the_checkpoint_under_its_old_name() -> None:
    """tostr renamed tostr2 in the plan, its uid given: Flink's id is the uid's hash (ids.json), which the
    checkpoint has, stored with the name tostr and the uid tostr. No name goes into Flink's id, so Flink restores
    it (tests/integration/test_renamed_restore.py: a real restore of this checkpoint into the renamed job): a
    warning, not a mismatch — and not reported as missing from the checkpoint either."""

    def rename(nodes: dict[str, dict[str, Any]]) -> None:
        nodes["tostr"]["type"] = nodes["tostr"]["contents"] = "tostr2"

    topology = parse_plan(_doc("plan.json", edit=rename), uids={"tostr2": "tostr"})
    cp = _checkpoint()
    assert state_mismatches(topology, cp) == [
        (
            "plan-renamed",
            "tostr2",
            f"'tostr2' is {_flink_ids()['tostr']} by uid-hash (uid 'tostr', as the checkpoint stores it), which the "
            "checkpoint stores with the name 'tostr': the same operator renamed; Flink restores state by operator "
            "id, not by name",
        )
    ]
    assert plan_mismatches(bind(topology, cp), cp) == []


def test_a_renamed_operator_without_uid_keeps_its_generated_id() -> None:
    """2.3.0-no-uid: tostr renamed tostr2, no uid anywhere. Flink's generated id hashes the node's position and
    chaining, not its name: the plan still yields tostr's id (ids.json), bound by deterministic-hash — a rename."""
    fixture = "2.3.0-no-uid"

    def rename(nodes: dict[str, dict[str, Any]]) -> None:
        nodes["tostr"]["type"] = nodes["tostr"]["contents"] = "tostr2"

    ids = {
        n["name"]: n["operator_id"]
        for n in json.loads((fixture_named(fixture).root / "ids.json").read_text())["stream_nodes"]
    }
    assert _findings(_doc("plan.json", fixture, rename), _checkpoint(fixture)) == (
        [],
        [
            (
                "plan-renamed",
                "tostr2",
                f"'tostr2' is {ids['tostr']} by deterministic-hash, which the checkpoint stores with the name "
                "'tostr': the same operator renamed; Flink restores state by operator id, not by name",
            )
        ],
    )


def test_a_renamed_operator_with_another_contradiction_is_still_a_mismatch() -> None:
    """tostr renamed and given parallelism 3: the rename is not what is reported, the parallelism Flink would refuse
    is (the checkpoint stores 2, ids.json)."""

    def rename(nodes: dict[str, dict[str, Any]]) -> None:
        nodes["tostr"]["type"] = nodes["tostr"]["contents"] = "tostr2"
        nodes["tostr"]["parallelism"] = 3

    topology = parse_plan(_doc("plan.json", edit=rename), uids={"tostr2": "tostr"})
    found = state_mismatches(topology, _checkpoint())
    assert found == [
        (
            "plan-mismatch",
            "tostr2",
            f"'tostr2' is {_flink_ids()['tostr']} by uid-hash, but parallelism 2 in the checkpoint, 3 in the plan: "
            f"{NOT_THIS}",
        )
    ]


def test_keyed_state_behind_a_rebalance_in_a_1x_checkpoint_is_named_by_the_plan() -> None:
    """1.12.5 stores ids only: the job-graph plan binds slow by its vertex id (Flink's, ids.json) and the finding
    names it as the plan does, not by that id."""
    fx = "1.12.5-unaligned"
    ids = json.loads((fixture_named(fx).root / "ids.json").read_text())
    slow_id = {n["name"]: n["operator_id"] for n in ids["stream_nodes"]}["slow"]
    _, sm = _findings(_doc("jobgraph.json", fx, _no_keyby), _checkpoint(fx))
    assert sm == [
        (
            "plan-mismatch",
            "slow",
            "slow holds keyed state, but the plan feeds its vertex 'slow' by no keyed edge (inputs: REBALANCE): "
            f"{NOT_THIS}",
        )
    ]
    assert all(slow_id not in m for finding in sm for m in finding)
