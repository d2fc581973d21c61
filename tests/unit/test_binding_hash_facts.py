"""What a generated id proves, checked against Flink's own graph: the position and the count of chained outputs a
binding reads off each generated id it finds.

Every production-shaped, uid-less and SQL fixture with a stream-graph plan (``plan.json``) and Flink's ids
(``ids.json``, written by Flink's StreamGraphHasherV2 and JobGraph while the job was built). The expected values
are Flink's only: each node's chained out-edges are the edges whose two ends Flink put into one job vertex; each
node's inputs are Flink's in-edges in the order ids.json lists them; and a position is right exactly when Flink's
hash rule (``generateDeterministicHash``: Guava ``murmur3_128(0)`` over the position as a little-endian int, once,
and once more per chained out-edge; then per in-edge ``hash[j] = hash[j] * 37 ^ input[j]``) gives, from it, the id
Flink gave the node. The rule is written out here with ``mmh3``, not taken from spillway."""

from __future__ import annotations

import json
import re
import struct
from typing import Any

import mmh3
import pytest
from support.fixtures import Fixture, all_fixtures
from support.plan_nodes import plan_to_flink_nodes

from spillway.flink.deduction import DEDUCED, HASH_INPUT
from spillway.flink.operator_ids import DETERMINISTIC_HASH, Binding
from spillway.inspect.topology import bind_job, load_plan
from spillway.storage.load import load_checkpoint

WITH_PLAN = [
    pytest.param(f, id=f.name)
    for f in all_fixtures()
    if (f.root / "ids.json").exists()
    and (f.root / "plan.json").exists()
    and (f.info["scenario"].startswith(("shapes", "prod", "sql")) or f.info["scenario"].endswith("no-uid"))
]


def _flink_hash(position: int, chained: int, inputs: list[str]) -> str:
    digest = bytearray(mmh3.hash_bytes(struct.pack("<i", position) * (1 + chained), 0))
    for other in inputs:
        raw = bytes.fromhex(other)
        for j in range(16):
            digest[j] = ((digest[j] * 37) ^ raw[j]) & 0xFF
    return bytes(digest).hex()


class _Flink:
    """Flink's stream graph of a fixture: per node, its chained out-edges and its inputs' ids."""

    def __init__(self, fx: Fixture) -> None:
        doc = json.loads((fx.root / "ids.json").read_text())
        nodes = {n["id"]: n for n in doc["stream_nodes"]}
        self.chained: dict[int, int] = {}
        self.inputs: dict[int, list[str]] = {}
        for e in doc["stream_edges"]:
            src, dst = nodes[e["source"]], nodes[e["target"]]
            self.chained[src["id"]] = self.chained.get(src["id"], 0) + (src["vertex_id"] == dst["vertex_id"])
            self.inputs.setdefault(dst["id"], []).append(src["operator_id"])
        self.plan_nodes: dict[int, dict[str, Any]] = plan_to_flink_nodes(fx.root)

    def node(self, plan_node: int | None) -> dict[str, Any]:
        assert plan_node is not None
        return self.plan_nodes[plan_node]

    def rule_gives(self, plan_node: int | None, position: int) -> bool:
        node = self.node(plan_node)
        got = _flink_hash(position, self.chained.get(node["id"], 0), self.inputs.get(node["id"], []))
        return got == node["operator_id"]


def _binding(fx: Fixture) -> Binding:
    # computed afresh by every test, never cached: mutation testing runs each mutant in a process forked from one
    # that has run the tests on the unmutated code
    binding = bind_job(load_plan(fx.root / "plan.json"), load_checkpoint(fx.checkpoint_dir).checkpoint).operators
    assert binding is not None
    return binding


@pytest.mark.parametrize("fx", WITH_PLAN)
def test_every_chained_output_count_read_off_a_generated_id_is_the_number_flink_chained(fx: Fixture) -> None:
    flink = _Flink(fx)
    binding = _binding(fx)
    for i, count in binding.chained_outputs.items():
        b = binding.operators[i]
        assert count == flink.chained.get(flink.node(b.node_id)["id"], 0), (b.name, b.node_id, b.reason)


def test_the_counts_cover_operators_with_none_one_and_two_chained_outputs() -> None:
    """The fixtures above give the count test every case: a chain's end, one chained output, a fan-out of two (the
    window of the shapes jobs chains its sink and its side output's Map)."""
    seen: set[int] = set()
    for param in WITH_PLAN:
        seen |= set(_binding(param.values[0]).chained_outputs.values())
    assert seen == {0, 1, 2}


@pytest.mark.parametrize("fx", WITH_PLAN)
def test_each_generated_id_reason_names_the_position_and_chaining_that_give_flinks_id(fx: Fixture) -> None:
    """Word for word: a traversal hit names its breadth-first position; a search hit its position, Flink's count of
    chained out-edges and whether input ids went in; an input bound by a search hit says so; a deduced operator
    whose id is its input's generated id names that position. Each position named gives Flink's id by Flink's
    rule, and every generated id found records Flink's count of chained outputs."""
    flink = _Flink(fx)
    binding = _binding(fx)
    for i, b in enumerate(binding.operators):
        node = flink.node(b.node_id)
        has_inputs = bool(flink.inputs.get(node["id"]))
        chained = flink.chained.get(node["id"], 0)
        if b.method == DETERMINISTIC_HASH:
            # a generated id found proves its chained count, also when it is none
            assert binding.chained_outputs.get(i) == chained, (b.name, b.reason)
            m = re.fullmatch(
                r"StreamGraphHasherV2 gives this id \(no uid(, breadth-first|;) position ([0-9/]+)(.*)", b.reason
            )
            assert m is not None, b.reason
            positions = [int(p) for p in m.group(2).split("/")]
            assert all(flink.rule_gives(b.node_id, p) for p in positions), (b.name, b.reason)
            if m.group(1) == ";":  # found by search
                assert len(positions) == 1
                inputs = ", from its inputs' ids" if has_inputs else ""
                assert m.group(3) == f", {chained} chained output(s){inputs})", b.reason
            else:  # a stream-graph plan numbers the nodes as Flink did: no source order was guessed
                assert m.group(3) == ")", b.reason
        elif b.method == HASH_INPUT:
            assert b.reason == "its id goes into a generated id found in the checkpoint"
            assert b.operator_id == node["operator_id"]
        elif b.method == DEDUCED and "no uid:" in b.reason:
            m = re.search(
                r"; no uid: the id is the one Flink generates from its input's id \(position ([0-9/]+)\)$", b.reason
            )
            assert m is not None, b.reason
            assert b.reason.startswith("the only checkpoint operator that fits ("), b.reason
            assert all(flink.rule_gives(b.node_id, int(p)) for p in m.group(1).split("/")), (b.name, b.reason)
            assert node["uid"] is None
            assert binding.chained_outputs.get(i) == chained, (b.name, b.reason)


def test_the_reasons_cover_traversal_and_search_hits_inputs_and_deduced_positions() -> None:
    """Every kind of reason above occurs on these fixtures (else the test above would prove nothing of it)."""
    kinds: set[str] = set()
    for param in WITH_PLAN:
        for b in _binding(param.values[0]).operators:
            if b.method == DETERMINISTIC_HASH:
                kinds.add("search" if "(no uid; position" in b.reason else "traversal")
                kinds |= {"from inputs"} if "from its inputs' ids" in b.reason else set()
            elif b.method == HASH_INPUT:
                kinds.add("input")
            elif b.method == DEDUCED and "no uid:" in b.reason:
                kinds.add("deduced position")
    assert kinds == {"search", "traversal", "from inputs", "input", "deduced position"}


JOB_GRAPH_TWO_SOURCES = [
    pytest.param(f, id=f.name)
    for f in all_fixtures()
    if f.info["scenario"] == "prod-no-uid" and f.release.startswith("1.") and (f.root / "jobgraph.json").exists()
]


@pytest.mark.parametrize("fx", JOB_GRAPH_TWO_SOURCES)
def test_a_job_graph_plan_with_two_sources_binds_generated_ids_under_the_one_source_order_flink_used(
    fx: Fixture,
) -> None:
    """The job-graph plan does not number the nodes, so both orders of the two sources are tried; only Flink's
    reproduces the ids of the vertex heads (the vertex ids), and every chained operator's id is taken under it, at
    the position that gives Flink's id by Flink's rule. Names are unique in these jobs: Flink's node by name."""
    doc = json.loads((fx.root / "ids.json").read_text())
    by_name = {n["name"]: n for n in doc["stream_nodes"]}
    assert sum(1 for n in doc["stream_nodes"] if not any(e["target"] == n["id"] for e in doc["stream_edges"])) == 2
    flink = _Flink(fx)
    binding = bind_job(load_plan(fx.root / "jobgraph.json"), load_checkpoint(fx.checkpoint_dir).checkpoint).operators
    assert binding is not None
    generated = [b for b in binding.operators if b.method == DETERMINISTIC_HASH]
    assert len(generated) >= 4  # every chained operator Flink stored
    for b in generated:
        node = by_name[b.name]
        assert b.operator_id == node["operator_id"] and b.exact
        m = re.fullmatch(
            r"StreamGraphHasherV2 gives this id \(no uid, breadth-first position (\d+)\); "
            r"same id under all 1 source orders that fit the known ids",
            b.reason,
        )
        assert m is not None, b.reason
        position = int(m.group(1))
        chained = flink.chained.get(node["id"], 0)
        assert _flink_hash(position, chained, flink.inputs.get(node["id"], [])) == node["operator_id"]


NO_UID_1X = [
    pytest.param(f, id=f.name)
    for f in all_fixtures()
    if f.info["scenario"] == "prod-no-uid" and f.release.startswith("1.") and (f.root / "plan.json").exists()
]


@pytest.mark.parametrize("fx", NO_UID_1X)
def test_a_job_without_uids_bound_whole_by_generated_ids_leaves_one_assignment_flinks(fx: Fixture) -> None:
    """No operator of these jobs has a uid (ids.json), so every id is generated and the plan gives every input of
    it: each operator Flink stored is bound to Flink's id, and exactly one assignment of operators to ids is left —
    Flink's."""
    flink = _Flink(fx)
    binding = _binding(fx)
    stored = {o.operator_id for o in load_checkpoint(fx.checkpoint_dir).checkpoint.operators}
    assert all(flink.node(b.node_id)["uid"] is None for b in binding.operators)
    for b in binding.operators:
        flink_id = flink.node(b.node_id)["operator_id"]
        if flink_id in stored:
            assert (b.operator_id, b.exact) == (flink_id, True), b
        else:  # 1.12 writes nothing for a stateless operator
            assert b.operator_id in (None, flink_id) and not b.exact, b
    assert binding.solutions == 1
    assert binding.unclaimed == ()
