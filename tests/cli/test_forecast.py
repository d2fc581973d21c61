"""The restore forecast end to end through the CLI on the real 2.3.0-counted fixture (count 2 -> 4).

Expected values come from what the real (non-dry) rescale then writes, read back with ``spillway analyze`` on
the output and from the files on disk, never from the forecast code. The Flink side is checked against the
mapping rules read from Flink's source (SubtaskStateMapper.RANGE over key groups, ROUND_ROBIN,
DemultiplexingRecordDeserializer.create); tests/integration/test_forecast_flink.py compares it with the
descriptors Flink itself logs when it rescales the same checkpoint.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

from spillway.cli.app import app
from spillway.flink.keygroups import key_group_range, operator_index

FIXTURE = Path(__file__).parents[1] / "fixtures" / "2.3.0-counted"
ARGS = ["-p", "count=4", "--key", "count=tuple:0:long", "--master", "inprocess"]


def checkpoint() -> str:
    return str(next(FIXTURE.glob("checkpoints/*/chk-*")))


def run_json(*args: str) -> dict[str, Any]:
    res = CliRunner().invoke(app, list(args))
    assert res.exit_code == 0, res.output
    return json.loads(res.stdout)


@pytest.fixture(scope="module")
def dry_and_real(tmp_path_factory: pytest.TempPathFactory) -> tuple[dict, dict, Path]:
    tmp = tmp_path_factory.mktemp("forecast")
    plan = str(FIXTURE / "jobgraph.json")
    dry = run_json("rescale", checkpoint(), "--plan", plan, *ARGS, "--out", str(tmp / "dry"), "--dry-run", "--json")
    assert not (tmp / "dry").exists()  # a dry run writes nothing
    assert not list(tmp.iterdir())
    out = tmp / "real"
    run_json("rescale", checkpoint(), "--plan", plan, *ARGS, "--out", str(out), "--json")
    written = run_json("analyze", str(out), "--plan", str(out / "rescaled-plan.json"), "--json")
    return dry, written, out


def test_dry_run_predicts_every_new_channel_the_rescale_writes(dry_and_real) -> None:  # type: ignore[no-untyped-def]
    dry, written, _ = dry_and_real
    predicted = {
        (c["operator_id"], c["subtask"], c["gate"], c["channel"]): (c["records"], c["bytes"])
        for c in dry["forecast"]["spillway"]["channels"]
    }
    actual = {
        (c["downstream"]["operator_id"], c["downstream"]["subtask"], c["gate"], c["upstream"]["subtask"]): (
            c["records"],
            c["bytes"],
        )
        for c in written["channels"]
        if any(Path(b["file"]).name.startswith("spillway-rescaled-") for b in c["buffer_sequence"])
    }  # the channels of the new channel-state files (edges between unchanged vertices keep their old files)
    assert predicted == actual
    assert dry["forecast"]["spillway"]["records"] == sum(r for r, _ in actual.values()) > 0
    # A dry run moves nothing: no "moved" counter beside the forecast (issue 21: records_moved 0 next to 91)
    assert [dry[k] for k in ("records_moved", "channel_files", "markers_kept", "dropped")] == [None] * 4


def test_dry_run_predicts_the_channel_state_files(dry_and_real) -> None:  # type: ignore[no-untyped-def]
    dry, _, out = dry_and_real
    predicted = {f["file"]: f["bytes"] for f in dry["forecast"]["spillway"]["files"]}
    on_disk = {p.name: p.stat().st_size for p in out.glob("spillway-rescaled-*.channels")}
    assert predicted == on_disk


def test_flink_side_follows_flinks_mappers(dry_and_real) -> None:  # type: ignore[no-untyped-def]
    dry, _, _ = dry_and_real
    flink = dry["forecast"]["flink"]
    assert flink["settings"] == {"segment_size": 32768, "buffers_per_channel": 2, "floating_buffers_per_gate": 8}
    edges = {e["edge"]: e for e in flink["edges"]}
    hash_edge = edges["parse -> count (HASH)"]
    assert hash_edge["downstream_mapper"] == "RANGE"
    for s in hash_edge["subtasks"]:
        # SubtaskStateMapper.RANGE: old owners of the new subtask's key-group range (max parallelism 32768)
        first, last = key_group_range(32768, 4, s["subtask"])
        olds = list(range(operator_index(32768, 2, first), operator_index(32768, 2, last) + 1))
        assert s["old_subtasks"] == olds
        assert s["ambiguous_old_subtasks"] == olds  # RANGE 2 -> 4 gives each old subtask to two new ones
        # DemultiplexingRecordDeserializer: old subtasks x old channels of each of parse's 2 (unchanged) channels
        assert s["virtual_channels"] == len(olds) * 2
        assert s["records_kept"] <= s["records_read"]
        assert s["bytes_filtered"] == s["bytes_read"] > 0  # every old subtask is ambiguous: all goes through
        assert s["bytes_kept"] < s["bytes_read"]  # ... and the filter keeps only what belongs here
        assert s["gate_buffers"] == 2 * 2 + 8
        assert s["over_budget"] is False
    # count's records kept by Flink's filter per new subtask = what spillway routes there (same key-group math)
    per_sub = {s["subtask"]: s["records_kept"] for s in hash_edge["subtasks"]}
    routed: dict[int, int] = {}
    for c in dry["forecast"]["spillway"]["channels"]:
        if c["vertex"] == "count":
            routed[c["subtask"]] = routed.get(c["subtask"], 0) + c["records"]
    assert per_sub == routed
    # ... and the bytes it keeps are those the real rescale wrote into each new subtask's channels (read back)
    _, written, _ = dry_and_real
    count_id = next(c["operator_id"] for c in dry["forecast"]["spillway"]["channels"] if c["vertex"] == "count")
    wrote: dict[int, int] = {}
    for c in written["channels"]:
        if c["downstream"]["operator_id"] == count_id:
            wrote[c["downstream"]["subtask"]] = wrote.get(c["downstream"]["subtask"], 0) + c["bytes"]
    assert {s["subtask"]: s["bytes_kept"] for s in hash_edge["subtasks"]} == wrote
    assert flink["bytes_kept"] == sum(s["bytes_kept"] for e in flink["edges"] for s in e["subtasks"])
    # count -> check: check keeps parallelism 2; count's output mapping 2 -> 4 is Flink's identity: no demultiplexing
    rebalance = edges["count -> check -> sink: Writer (REBALANCE)"]
    assert rebalance["rescaling"] is False
    assert [s["virtual_channels"] for s in rebalance["subtasks"]] == [0, 0]


def test_tiny_buffers_flag_the_gates(tmp_path: Path) -> None:
    doc = run_json(
        "rescale", checkpoint(), "--plan", str(FIXTURE / "jobgraph.json"), *ARGS, "--out", str(tmp_path / "x"),
        "--dry-run", "--json", "--buffer-size", "64", "--buffers-per-channel", "0", "--floating-buffers-per-gate", "1",
    )  # fmt: skip
    hash_edge = next(e for e in doc["forecast"]["flink"]["edges"] if "HASH" in e["edge"])
    assert all(s["gate_buffers"] == 1 for s in hash_edge["subtasks"])
    # count's input-side chunks (the fixture's parse#1 -> count#0 alone holds 833 bytes) need many 64-byte buffers
    assert all(s["recovered_buffers"] > 1 for s in hash_edge["subtasks"])
    assert all(s["over_budget"] for s in hash_edge["subtasks"])
    assert doc["forecast"]["flink"]["over_budget"] >= 4


def test_analyze_new_parallelism_gives_the_same_forecast(dry_and_real) -> None:  # type: ignore[no-untyped-def]
    dry, _, _ = dry_and_real
    doc = run_json(
        "analyze", checkpoint(), "--plan", str(FIXTURE / "jobgraph.json"), "--new-parallelism", "count=4",
        "--key", "count=tuple:0:long", "--json",
    )  # fmt: skip
    assert doc["schema"] == "spillway.analyze/1"
    assert doc["forecast"] == dry["forecast"]
    text = CliRunner().invoke(
        app, ["analyze", checkpoint(), "--plan", str(FIXTURE / "jobgraph.json"), "--new-parallelism", "count=4",
              "--key", "count=tuple:0:long"],
    )  # fmt: skip
    assert text.exit_code == 0, text.output
    assert "virtual channels" in text.stdout and "forecast" in text.stdout


def test_analyze_forecast_usage_errors() -> None:
    res = CliRunner().invoke(app, ["analyze", checkpoint(), "--new-parallelism", "count=4"])
    assert res.exit_code == 2
    res = CliRunner().invoke(
        app, ["analyze", checkpoint(), "--plan", str(FIXTURE / "jobgraph.json"), "--new-parallelism", "count=x"]
    )
    assert res.exit_code == 2
