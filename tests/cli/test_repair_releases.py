"""Repairs on an unaligned checkpoint of every release line 1.11-2.3 (restored in real Flink on 1.15, 1.20,
2.0 and 2.3 by tests/integration/test_repair_restore.py): the output is written, validates clean under the
job's plan and reports exactly the records validate frames in the source."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from click.testing import CliRunner
from support.fixtures import all_fixtures, fixture_named

from spillway.cli.app import app

UNALIGNED = [f.name for f in all_fixtures() if f.info["scenario"] == "unaligned"]


@pytest.mark.parametrize("name", UNALIGNED)
def test_strip_every_channel_on_every_release(name: str, tmp_path: Path) -> None:
    fx = fixture_named(name)
    plan = str(fx.root / "jobgraph.json")
    source = json.loads(CliRunner().invoke(app, ["validate", str(fx.checkpoint_dir), "--plan", plan, "--json"]).output)
    out = tmp_path / "stripped"
    res = CliRunner().invoke(
        app, ["repair", "strip-channel-state", str(fx.checkpoint_dir), "--plan", plan, "--out", str(out), "--json"]
    )
    assert res.exit_code == 0, res.output
    assert json.loads(res.output)["records_dropped"] == source["summary"]["records"] > 0
    after = json.loads(CliRunner().invoke(app, ["validate", str(out), "--plan", plan, "--json"]).output)
    assert after["ok"] and after["summary"]["records"] == 0
