"""What a rescale leaves beside the new checkpoint: the rescaled job's plan (validate --plan works on the
output) and a loud note when the output still reads files outside itself."""

from __future__ import annotations

import json
from pathlib import Path

from click.testing import CliRunner
from support.fixtures import fixture_named

from spillway.cli.app import app


def test_rescaled_plan_is_written_and_validates_the_output(tmp_path: Path) -> None:
    fx = fixture_named("2.3.0-counted")
    out = tmp_path / "p4"
    res = CliRunner().invoke(
        app,
        [
            "rescale",
            str(fx.checkpoint_dir),
            "--plan",
            str(fx.root / "jobgraph.json"),
            "-p",
            "count=4",
            "--key",
            "count=tuple:0:long",
            "--master",
            "inprocess",
            "--out",
            str(out),
            "--json",
        ],
    )
    assert res.exit_code == 0, res.output
    doc = json.loads(res.output)
    plan = json.loads((out / "rescaled-plan.json").read_text())
    assert doc["plan_file"] == str(out / "rescaled-plan.json") and doc["external_files"] == []
    original = json.loads((fx.root / "jobgraph.json").read_text())
    changed = {n["id"]: n["parallelism"] for n in plan["nodes"]}
    before = {n["id"]: n["parallelism"] for n in original["nodes"]}
    assert [k for k in changed if changed[k] != before[k]] and all(
        changed[k] == 4 for k in changed if changed[k] != before[k]
    )
    v = CliRunner().invoke(app, ["validate", str(out), "--plan", str(out / "rescaled-plan.json"), "--json"])
    assert v.exit_code == 0, v.output
    # Rescaling moves records, never adds or drops one: the output frames exactly the source's in-flight records.
    src = CliRunner().invoke(
        app, ["validate", str(fx.checkpoint_dir), "--plan", str(fx.root / "jobgraph.json"), "--json"]
    )
    assert json.loads(v.output)["summary"]["records"] == json.loads(src.output)["summary"]["records"] > 0
    # validating the output with the OLD plan finds the mismatch (parallelism 2 vs 4)
    old = CliRunner().invoke(app, ["validate", str(out), "--plan", str(fx.root / "jobgraph.json"), "--json"])
    assert old.exit_code == 1


def test_output_that_still_reads_shared_files_says_so(tmp_path: Path) -> None:
    fx = fixture_named("2.3.0-rocksdb-incremental")
    out = tmp_path / "p4"
    res = CliRunner().invoke(
        app,
        [
            "rescale",
            str(fx.checkpoint_dir),
            "--plan",
            str(fx.root / "jobgraph.json"),
            "-p",
            "slow=4",
            "--key-fn",
            "slow=support.keyfns:key_of",
            "--master",
            "inprocess",
            "--out",
            str(out),
            "--json",
        ],
    )
    assert res.exit_code == 0, res.output
    doc = json.loads(res.output)
    oracle = json.loads(fx.oracle.read_text())
    shared = {p for p in json.dumps(oracle).split('"') if "/shared/" in p}
    # Flink's paths (oracle.json) name where the fixture was written. The output names each shared file where it
    # is on this machine: at Flink's path while another test has the fixture staged there, else in the fixture.
    names = {p.rpartition("/")[2] for p in shared}
    assert doc["external_files"]
    for name in doc["external_files"]:
        assert name.rpartition("/")[2] in names and Path(name.removeprefix("file:")).is_file(), name
    assert any(n.startswith("WARNING: the new checkpoint still reads") for n in doc["notes"])
