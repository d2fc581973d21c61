"""Proof in real Flink: a rescale of a MOVED job directory (its _metadata names the shared SST files under a path
that does not exist) writes a checkpoint that Flink 2.3.0 restores, because the output names the files where
they are now. Before, the output named the old paths: it exited 0 and Flink could not have opened them."""

from __future__ import annotations

from pathlib import Path

import pytest
from support.flink_harness import restore
from support.written import moved_job

from spillway.inspect.topology import load_plan
from spillway.rescale.rescale import rescale
from spillway.storage.load import load_checkpoint

pytestmark = pytest.mark.timeout(900)


def test_a_rescaled_moved_rocksdb_incremental_job_restores(tmp_path: Path) -> None:
    chk, gone = moved_job(tmp_path, "2.3.0-rocksdb-incremental")
    fixture = Path(__file__).parents[1] / "fixtures" / "2.3.0-rocksdb-incremental"
    out = tmp_path / "p4"
    report = rescale(
        load_checkpoint(chk),
        load_plan(fixture / "jobgraph.json"),
        {"slow": 4, "tostr": 4, "len": 4},
        out,
        key_fns={"slow": "support.keyfns:key_of"},
        master=None,
    )
    doc = report.to_json()
    assert doc["records_moved"] > 0
    assert any("where the files are now" in n for n in doc["notes"]), doc["notes"]
    assert gone.encode() not in (out / "_metadata").read_bytes()
    result = restore("2.3.0", "rocksdb-incremental", out, parallelism=4, workdir=tmp_path / "run")
    assert result["outcome"] == "restored", result.get("error")
    log = Path(result["log"]).read_text(errors="replace")
    for lo, hi in ((0, 31), (32, 63), (64, 95), (96, 127)):
        assert f"target key-groups range [{lo}, {hi}]" in log
