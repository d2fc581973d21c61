"""analyze / keygroup through the CLI; the finished-state verdict on real and modified plans."""

from __future__ import annotations

import json
from pathlib import Path

import pyarrow.parquet as pq
import pytest
from conftest import fixture_named, fixture_params
from typer.testing import CliRunner

from spillway.cli.app import app
from spillway.inspect.finished import check
from spillway.inspect.load import load_checkpoint
from spillway.inspect.topology import parse_plan

runner = CliRunner()


def test_analyze_json_schema_and_truth() -> None:
    fx = fixture_named("2.3.0-unaligned")
    res = runner.invoke(
        app,
        [
            "analyze",
            str(fx.checkpoint_dir),
            "--plan",
            str(fx.root / "jobgraph.json"),
            "--json",
            "--decode",
            "3",
            "--value-type",
            "string",
        ],
    )
    assert res.exit_code == 0, res.output
    doc = json.loads(res.output)
    assert doc["schema"] == "spillway.analyze/1"
    for op in doc["operators"]:
        assert {"operator_id", "finished_state", "finished_subtasks", "in_flight_bytes", "in_flight_records"} <= set(op)
        assert op["finished_state"] in ("FULLY_FINISHED", "PARTIALLY_FINISHED", "RUNNING", "NOT_RECORDED")
    tostr = next(o for o in doc["operators"] if o["uid"] == "tostr")
    assert tostr["in_flight_bytes"] > 0 and tostr["in_flight_records"] > 0
    ch = next(c for c in doc["channels"] if c["ship_strategy"] == "HASH")
    assert {"buffers", "records", "bytes", "upstream", "downstream"} <= set(ch)
    assert ch["upstream"]["subtask"] in (0, 1) and ch["downstream"]["subtask"] in (0, 1)
    first = ch["first_records"][0]["value"]
    assert first.startswith("'") and first.count(":") == 2
    assert doc["restore_verdict"]["restorable"] is True


def test_analyze_parquet(tmp_path: Path) -> None:
    fx = fixture_named("2.3.0-unaligned-p3")
    res = runner.invoke(
        app,
        [
            "analyze",
            str(fx.checkpoint_dir),
            "--plan",
            str(fx.root / "jobgraph.json"),
            "--parquet",
            str(tmp_path / "out"),
            "--records",
        ],
    )
    assert res.exit_code == 0, res.output
    channels = pq.read_table(tmp_path / "out" / "channels.parquet").to_pylist()
    records = pq.read_table(tmp_path / "out" / "records.parquet")
    assert sum(c["records"] or 0 for c in channels) == records.num_rows > 0
    assert not list((tmp_path / "out").glob("*.partial"))


def test_records_needs_parquet() -> None:
    fx = fixture_named("2.3.0-unaligned")
    res = runner.invoke(app, ["analyze", str(fx.checkpoint_dir), "--records"])
    assert res.exit_code == 2


def _plan_with(fx, edit) -> dict:
    plan = json.loads((fx.root / "jobgraph.json").read_text())
    edit({n["description"].split("<br/>")[0]: n for n in plan["nodes"]})
    return plan


def test_finished_verdict_accepts_the_original_topology() -> None:
    fx = fixture_named("2.3.0-finished")
    verdict = check(
        parse_plan(json.loads((fx.root / "jobgraph.json").read_text())), load_checkpoint(fx.checkpoint_dir).checkpoint
    )
    assert verdict.restorable
    assert verdict.classification["Source: bseq"] == "FULLY_FINISHED"
    assert verdict.classification["Source: pseq -> pmap -> psink: Writer"] == "PARTIALLY_FINISHED"


@pytest.mark.parametrize(
    ("edit", "rule"),
    [
        # A running vertex now feeds the fully finished sink.
        (
            lambda n: n["bsink: Writer"]["inputs"].append(
                {"id": n["slow"]["id"], "num": 1, "ship_strategy": "REBALANCE"}
            ),
            "fully-finished-predecessor",
        ),
        # The partially finished chain now reads from the running source over an all-to-all edge.
        (
            lambda n: (
                n["Source: pseq"]
                .setdefault("inputs", [])
                .append({"id": n["slow"]["id"], "num": 0, "ship_strategy": "REBALANCE"})
            ),
            "all-to-all-predecessor",
        ),
        (
            lambda n: (
                n["Source: pseq"]
                .setdefault("inputs", [])
                .append({"id": n["slow"]["id"], "num": 0, "ship_strategy": "FORWARD"})
            ),
            "pointwise-predecessor",
        ),
    ],
)
def test_finished_verdict_refuses_what_flink_refuses(edit, rule: str) -> None:
    fx = fixture_named("2.3.0-finished")
    verdict = check(parse_plan(_plan_with(fx, edit)), load_checkpoint(fx.checkpoint_dir).checkpoint)
    assert not verdict.restorable
    assert [v.rule for v in verdict.violations] == [rule]


# Spec 07 §7.4: values computed with Flink 2.3.0's own classes.
@pytest.mark.parametrize(
    ("key", "kind", "hash_code", "kg128", "p2", "p3", "kg32768"),
    [
        ("k17", "string", 104401, 64, 1, 1, 3520),
        ("k0", "string", 3365, 97, 1, 2, 5729),
        ("k578", "string", 3240331, 12, 0, 0, 16652),
        ("hello", "string", 99162322, 35, 0, 0, 31395),
        ("17", "int", 17, 81, 1, 1, 15313),
        ("17", "long", 17, 81, 1, 1, 15313),
        ("true", "boolean", 1231, 77, 1, 1, 11725),
        ("false", "boolean", 1237, 3, 0, 0, 32003),
    ],
)
def test_keygroup_matches_flink(key, kind, hash_code, kg128, p2, p3, kg32768) -> None:
    def run(maxp: int, p: int) -> dict:
        res = runner.invoke(
            app, ["keygroup", key, "--type", kind, "--max-parallelism", str(maxp), "--parallelism", str(p), "--json"]
        )
        assert res.exit_code == 0, res.output
        return json.loads(res.output)

    assert run(128, 2)["hash_code"] == hash_code
    assert (run(128, 2)["key_group"], run(128, 2)["subtask"], run(128, 3)["subtask"]) == (kg128, p2, p3)
    assert run(32768, 1)["key_group"] == kg32768


def test_keygroup_bad_arguments() -> None:
    assert runner.invoke(app, ["keygroup", "x", "--type", "long"]).exit_code == 2
    assert runner.invoke(app, ["keygroup", "x", "--parallelism", "300", "--max-parallelism", "128"]).exit_code == 2


@pytest.mark.parametrize("fx", fixture_params())
def test_analyze_runs_on_every_fixture(fx) -> None:
    res = runner.invoke(app, ["analyze", str(fx.checkpoint_dir), "--plan", str(fx.root / "jobgraph.json"), "--json"])
    assert res.exit_code == 0, res.output
    doc = json.loads(res.output)
    assert all(c["problem"] is None for c in doc["channels"]), [c["problem"] for c in doc["channels"]]
    total = sum(o["in_flight_bytes"] for o in doc["operators"])
    assert total == sum(c["bytes"] for c in doc["channels"])
