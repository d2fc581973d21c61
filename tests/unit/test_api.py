"""The Python API under the CLI (docs/api.md), on real fixtures; expected values from Flink's own
loader (oracle.json), Flink's uid hash (the spec's table, checked in real _metadata) and the job's data."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
from support.fixtures import fixture_named

import spillway
from spillway.errors import EXIT_FINDINGS, EXIT_USAGE


def test_open_checkpoint_decodes_what_flink_loaded() -> None:
    fx = fixture_named("1.20.3-unaligned")
    cp = spillway.open_checkpoint(fx.root / "checkpoints")
    flink = json.loads(fx.oracle.read_text())
    assert cp.checkpoint.checkpoint_id == flink["checkpoint_id"]
    assert sorted(o.operator_id for o in cp.checkpoint.operators) == sorted(
        o["operator_id"] for o in flink["operators"]
    )
    assert cp.location.metadata_path == fx.metadata


def test_validate_and_analyze_take_paths_or_loaded_checkpoints() -> None:
    fx = fixture_named("2.3.0-unaligned")
    plan = fx.root / "jobgraph.json"
    loaded = spillway.open_checkpoint(fx.checkpoint_dir)
    assert spillway.validate(loaded, plan).errors == []
    assert spillway.validate(str(fx.checkpoint_dir), str(plan)).errors == []
    doc = spillway.validate_json(spillway.validate(loaded, plan), "m", [])
    assert doc["schema"] == "spillway.validate/1" and doc["ok"] is True
    analysis = spillway.analyze(loaded, plan)
    # Records carry "key:subtask:seq": every record on the keyBy edge is one the job produced.
    assert sum(c.records for c in analysis.channels) > 0
    assert spillway.analyze_json(analysis, None, 0, "hex")["schema"] == "spillway.analyze/1"


def test_errors_carry_the_cli_exit_codes(tmp_path: Path) -> None:
    with pytest.raises(spillway.UsageError) as missing:
        spillway.open_checkpoint(tmp_path / "nothing-here")
    assert missing.value.exit_code == EXIT_USAGE
    bad = tmp_path / "_metadata"
    bad.write_bytes(b"\x49\x60\x67\x2d\x00\x00\x00\x06garbage")
    with pytest.raises(spillway.SpillwayError) as damaged:
        spillway.open_checkpoint(bad)
    assert damaged.value.exit_code == EXIT_FINDINGS


def test_operator_found_by_uid_on_a_checkpoint_without_names(tmp_path: Path) -> None:
    # 1.20 metadata stores no uids; the uid "slow" is found through Flink's uid hash.
    from spillway.inspect.operators import select_operators

    fx = fixture_named("1.20.3-unaligned")
    cp = spillway.open_checkpoint(fx.checkpoint_dir).checkpoint
    assert [o.operator_id for o in select_operators(cp, "slow")] == ["59fa767824610e31f4a11d6125e09bf4"]


def test_repair_api_writes_nothing_on_dry_run_and_a_checked_copy_otherwise(tmp_path: Path) -> None:
    fx = fixture_named("2.3.0-unaligned")
    src = tmp_path / "src"
    shutil.copytree(fx.root / "checkpoints", src)
    chk = next(src.glob("*/chk-*"))
    dry = spillway.repair.strip_channel_state(str(chk), str(tmp_path / "o1"), dry_run=True)
    assert dry.dry_run and not (tmp_path / "o1").exists()
    report = spillway.repair.strip_channel_state(str(chk), str(tmp_path / "o2"))
    assert (tmp_path / "o2" / "_metadata").is_file()
    doc = report.to_json()
    assert doc["schema"] == "spillway.repair/1" and doc["bytes_dropped"] > 0
    assert spillway.validate(tmp_path / "o2").errors == []
    assert not any(
        s.input_channel_state
        for o in spillway.open_checkpoint(tmp_path / "o2").checkpoint.operators
        for s in o.subtasks
    )
