"""Where outputs may go, and what a failing --json command prints: each case failed before its fix."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
from click.testing import CliRunner
from support.fixtures import fixture_named

from spillway.cli.app import app

FX = fixture_named("2.3.0-unaligned")


def _tree_hash(root: Path) -> dict[str, bytes]:
    return {str(p.relative_to(root)): p.read_bytes() for p in sorted(root.rglob("*")) if p.is_file()}


@pytest.mark.parametrize("where", ["inside-chk", "sibling-chk", "job-dir-shared"])
def test_out_inside_the_source_job_directory_is_refused(tmp_path: Path, where: str) -> None:
    root = tmp_path / "fx"
    shutil.copytree(FX.root / "checkpoints", root)
    chk = next(root.glob("*/chk-*"))
    out = {
        "inside-chk": chk / "sub",
        "sibling-chk": chk.parent / "chk-999",
        "job-dir-shared": chk.parent / "shared" / "x",
    }[where]
    before = _tree_hash(root)
    res = CliRunner().invoke(app, ["repair", "strip-channel-state", str(chk), "--out", str(out)])
    assert res.exit_code == 2, res.output
    assert "inside the source's directory" in res.output
    assert _tree_hash(root) == before and not out.exists()
    # The job directory still picks the source's own newest checkpoint.
    dump = CliRunner().invoke(app, ["dump", str(chk.parent), "--json"])
    assert json.loads(dump.output)["source"]["checkpoint_dir"] == str(chk)


def test_rescale_out_inside_the_source_is_refused_too(tmp_path: Path) -> None:
    fx = fixture_named("2.3.0-counted")
    root = tmp_path / "fx"
    shutil.copytree(fx.root / "checkpoints", root)
    chk = next(root.glob("*/chk-*"))
    res = CliRunner().invoke(
        app,
        [
            "rescale",
            str(chk),
            "--plan",
            str(fx.root / "jobgraph.json"),
            "-p",
            "count=3",
            "--key",
            "count=tuple:0:long",
            "--master",
            "inprocess",
            "--out",
            str(chk.parent / "chk-999"),
        ],
    )
    assert res.exit_code == 2, res.output
    assert not (chk.parent / "chk-999").exists()


@pytest.mark.parametrize(
    "args,code",
    [
        (["validate", "/no/such/checkpoint", "--json"], 2),
        (["dump", "/no/such/checkpoint", "--json"], 2),
        (["analyze", "/no/such/checkpoint", "--json"], 2),
        (["repair", "strip-channel-state", "/no/such/checkpoint", "--out", "/tmp/never-written", "--json"], 2),
    ],
)
def test_a_failing_json_command_prints_a_json_error(args: list[str], code: int) -> None:
    res = CliRunner().invoke(app, args)
    assert res.exit_code == code
    doc = json.loads(res.stdout)
    assert doc["schema"] == "spillway.error/1" and doc["exit_code"] == code and "/no/such/checkpoint" in doc["error"]


def test_rescale_on_spark_without_pyspark_is_one_line(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    import importlib.util

    real = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec", lambda name, *a: None if name == "pyspark" else real(name, *a))
    fx = fixture_named("2.3.0-counted")
    res = CliRunner().invoke(
        app,
        [
            "rescale",
            str(fx.checkpoint_dir),
            "--plan",
            str(fx.root / "jobgraph.json"),
            "-p",
            "count=3",
            "--key",
            "count=tuple:0:long",
            "--master",
            "local[1]",
            "--out",
            str(tmp_path / "o"),
        ],
    )
    assert res.exit_code == 1, res.output
    assert "pip install 'spillway[spark]'" in res.output and "Traceback" not in res.output
    assert not (tmp_path / "o").exists()
