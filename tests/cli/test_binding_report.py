"""Every command that takes a plan says how each plan operator was bound; ids checked against Flink's
own (ids.json, written by the generator from the graphs Flink built)."""

from __future__ import annotations

import json

import pytest
from click.testing import CliRunner
from support.fixtures import fixture_named

from spillway.cli.app import app


def _flink_ids(name: str) -> dict[str, str]:
    ids = json.loads((fixture_named(name).root / "ids.json").read_text())
    return {n["name"]: n["operator_id"] for n in ids["stream_nodes"]}


@pytest.mark.parametrize("command", ["validate", "analyze"])
def test_binding_in_json_on_1x_with_a_stream_graph_plan(command: str) -> None:
    fx = fixture_named("1.20.3-unaligned")
    res = CliRunner().invoke(app, [command, str(fx.checkpoint_dir), "--plan", str(fx.root / "plan.json"), "--json"])
    assert res.exit_code == 0, res.output
    binding = {b["operator"]: b for b in json.loads(res.output)["binding"]}
    flink = _flink_ids("1.20.3-unaligned")
    for name in ("tostr", "slow", "len"):
        assert binding[name]["method"] == "uid-hash" and binding[name]["exact"]
        assert binding[name]["operator_id"] == flink[name]
    # uid "src" is not its name: no hash finds it, but the one id left holds a source reader's state and the
    # only plan operator left is the source: every consistent assignment agrees, and it is Flink's id.
    source = binding["Source: seq"]
    assert source["method"] == "deduced" and source["exact"]
    assert source["operator_id"] == flink["Source: seq"]
    assert "source-reader state" in source["reason"]


def test_binding_with_the_uid_is_exact_for_every_operator() -> None:
    fx = fixture_named("1.20.3-unaligned")
    res = CliRunner().invoke(
        app,
        [
            "validate",
            str(fx.checkpoint_dir),
            "--plan",
            str(fx.root / "plan.json"),
            "--uid",
            "Source: seq=src",
            "--json",
        ],
    )
    binding = json.loads(res.output)["binding"]
    flink = _flink_ids("1.20.3-unaligned")
    assert all(b["exact"] for b in binding if b["in_checkpoint"])
    assert {b["operator"]: b["operator_id"] for b in binding if b["in_checkpoint"]}.items() <= flink.items()


def test_no_uid_job_binds_by_flinks_deterministic_hash() -> None:
    fx = fixture_named("1.20.3-no-uid")
    res = CliRunner().invoke(app, ["validate", str(fx.checkpoint_dir), "--plan", str(fx.root / "plan.json"), "--json"])
    binding = json.loads(res.output)["binding"]
    flink = _flink_ids("1.20.3-no-uid")
    hashed = [b for b in binding if b["method"] == "deterministic-hash"]
    assert hashed and all(b["exact"] and b["operator_id"] == flink[b["operator"]] for b in hashed)


def test_binding_in_text_output() -> None:
    fx = fixture_named("1.20.3-unaligned")
    args = ["validate", str(fx.checkpoint_dir), "--plan", str(fx.root / "plan.json")]
    binding = json.loads(CliRunner().invoke(app, [*args, "--json"]).output)["binding"]
    flink = _flink_ids("1.20.3-unaligned")
    exact = [b for b in binding if b["exact"] and b["operator_id"] == flink[b["operator"]]]
    text = " ".join(CliRunner().invoke(app, args).output.split())
    assert f"plan operators found in the checkpoint for certain: {len(exact)} of {len(binding)} (" in text
    # the console says how in words; the method's name stays in --json only
    methods = {b["method"] for b in binding}
    assert methods and not any(f" by {m}" in text or f"{m})" in text for m in methods), text


@pytest.mark.parametrize("command", ["rescale", "strip"])
def test_rescale_and_repair_report_the_binding(command: str, tmp_path) -> None:
    fx = fixture_named("1.20.3-unaligned")
    chk, plan = str(fx.checkpoint_dir), str(fx.root / "plan.json")
    args = {
        "rescale": [
            "rescale",
            chk,
            "--plan",
            plan,
            "--uid",
            "Source: seq=src",
            "-p",
            "slow=3",
            "--key-fn",
            "slow=support.keyfns:key_of",
            "--master",
            "inprocess",
            "--dry-run",
        ],
        "strip": ["repair", "strip-channel-state", chk, "--plan", plan, "--dry-run"],
    }[command]
    res = CliRunner().invoke(app, [*args, "--out", str(tmp_path / "o"), "--json"])
    assert res.exit_code == 0, res.output
    binding = {b["operator"]: b for b in json.loads(res.output)["binding"]}
    flink = _flink_ids("1.20.3-unaligned")
    assert binding["slow"]["exact"] and binding["slow"]["operator_id"] == flink["slow"]
    text = CliRunner().invoke(app, [*args, "--out", str(tmp_path / "o")])
    assert f"plan operators found in the checkpoint for certain: {len(binding)} of {len(binding)}" in " ".join(
        text.output.split()
    )
