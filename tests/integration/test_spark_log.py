"""Spark's log file (the JVM's stderr, kept out of the terminal) is removed after a successful run."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
from support.fixtures import fixture_named

pytestmark = [pytest.mark.integration, pytest.mark.slow]


def test_spark_log_is_removed_after_a_successful_rescale(tmp_path: Path) -> None:
    pytest.importorskip("pyspark")
    fx = fixture_named("2.3.0-counted")
    logs = tmp_path / "tmp"
    logs.mkdir()
    env = {k: v for k, v in os.environ.items() if k != "SPILLWAY_SPARK_LOG"} | {"TMPDIR": str(logs)}
    res = subprocess.run(
        [sys.executable, "-m", "spillway", "rescale", str(fx.checkpoint_dir), "--plan", str(fx.root / "jobgraph.json"),
         "-p", "count=3", "--key", "count=tuple:0:long", "--master", "local[1]", "--out", str(tmp_path / "o")],
        env=env, capture_output=True, text=True, timeout=300,
    )  # fmt: skip
    assert res.returncode == 0, res.stderr
    assert (tmp_path / "o" / "_metadata").exists()
    assert not list(logs.glob("spillway-spark-*.log")), "Spark's log was left behind"
