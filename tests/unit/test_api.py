"""The Python API under the CLI (docs/api.md), on real fixtures; expected values from Flink's own
loader (oracle.json), Flink's uid hash (the spec's table, checked in real _metadata) and the job's data."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
from support.fixtures import fixture_named

import spillway
from spillway.api import AnalyzeOptions, StripOptions
from spillway.errors import ExitStatus


def test_open_decodes_what_flink_loaded() -> None:
    fx = fixture_named("1.20.3-unaligned")
    cp = spillway.open(fx.root / "checkpoints")
    flink = json.loads(fx.oracle.read_text())
    assert cp.model.checkpoint_id == flink["checkpoint_id"]
    assert sorted(o.operator_id for o in cp.model.operators) == sorted(o["operator_id"] for o in flink["operators"])
    assert cp.loaded.location.metadata_path == fx.metadata


def _logical_streams(fx) -> dict[tuple[str, int, int], bytes]:  # type: ignore[no-untyped-def]
    """The job's logical channels from Flink's own handles (oracle.json) and the bytes: (edge's upstream,
    upstream subtask, downstream subtask) -> the downstream's input side, then the upstream's output side."""
    doc = json.loads(fx.oracle.read_text())
    chk = fx.checkpoint_dir
    upstream_of = {"slow": "tostr"}
    parts: dict[tuple[str, int, int], list[tuple[int, bytes]]] = {}
    for op in doc["operators"]:
        for sub in op["subtasks"]:
            for key, order in (("input_channel_state", 0), ("result_subpartition_state", 1)):
                for holder in sub[key]:
                    blob = (chk / holder["delegate"]["relative_path"]).read_bytes()
                    for ch in holder.get("channels", [holder]):
                        data = b"".join(
                            blob[o + 4 : o + 4 + int.from_bytes(blob[o : o + 4], "big")] for o in ch["offsets"]
                        )
                        if order == 0:
                            k = (upstream_of[op["name"]], ch["input_channel_index"], sub["index"])
                        else:
                            k = (op["name"], sub["index"], ch["subpartition_index"])
                        parts.setdefault(k, []).append((order, data))
    return {k: b"".join(d for _, d in sorted(ps)) for k, ps in parts.items()}


def _records(stream: bytes) -> list[bytes]:
    """Each element's payload (tag first) of a whole logical channel."""
    out, pos = [], 0
    while pos < len(stream):
        n = int.from_bytes(stream[pos : pos + 4], "big", signed=True)
        out.append(stream[pos + 4 : pos + 4 + n])
        pos += 4 + n
    assert pos == len(stream)
    return out


def test_validate_and_analyze_of_an_opened_checkpoint() -> None:
    fx = fixture_named("2.3.0-unaligned")
    plan = fx.root / "jobgraph.json"
    cp = spillway.open(fx.checkpoint_dir, plan=plan)
    validated = cp.validate()
    by_text = spillway.open(str(fx.checkpoint_dir), plan=str(plan)).validate()
    assert validated.report == by_text.report and validated.report.errors == [] and validated.sound
    streams = _logical_streams(fx)
    assert validated.report.records == sum(len(_records(s)) for s in streams.values())  # every element, framed
    doc = validated.to_json()
    assert doc["schema"] == "spillway.validate/1" and doc["ok"] is True and doc["complete"] is True
    analyzed = cp.analyze(AnalyzeOptions(keep_records=3))
    analysis = analyzed.analysis
    assert cp.analyze().analysis.channels[0].records == analysis.channels[0].records
    expected = {
        f"{up}#{u} -> {'slow' if up == 'tostr' else 'len'}#{d} (gate 0)": _records(s)
        for (up, u, d), s in streams.items()
    }
    assert {c.label: c.records for c in analysis.channels} == {k: len(v) for k, v in expected.items()}
    # Records on the keyBy edge are tostr's "key:subtask:seq" Strings, sent by the channel's upstream subtask.
    for c in analysis.channels:
        if c.ship_strategy == "HASH":
            for r in c.record_list:
                assert r["value"] in {rec[9:] for rec in expected[c.label]}  # after tag and i64 timestamp
                # a Flink String: a length varint, then "key:subtask:seq" (ASCII): the middle field is the sender
                assert r["value"].split(b":")[1] == str(c.upstream["subtask"]).encode()
    assert analyzed.to_json()["schema"] == "spillway.analyze/1"


def test_errors_carry_the_cli_exit_codes(tmp_path: Path) -> None:
    with pytest.raises(spillway.UsageError) as missing:
        spillway.open(tmp_path / "nothing-here")
    assert missing.value.exit_code == ExitStatus.USAGE
    bad = tmp_path / "_metadata"
    bad.write_bytes(b"\x49\x60\x67\x2d\x00\x00\x00\x06garbage")
    with pytest.raises(spillway.SpillwayError) as damaged:
        spillway.open(bad)
    assert damaged.value.exit_code == ExitStatus.FINDINGS


def test_operator_found_by_uid_on_a_checkpoint_without_names(tmp_path: Path) -> None:
    # 1.20 metadata stores no uids; the uid "slow" is found through Flink's uid hash.
    from spillway.inspect.operators import select_operators

    fx = fixture_named("1.20.3-unaligned")
    cp = spillway.open(fx.checkpoint_dir).model
    assert [o.operator_id for o in select_operators(cp, "slow")] == ["59fa767824610e31f4a11d6125e09bf4"]


def test_repair_api_writes_nothing_on_dry_run_and_a_checked_copy_otherwise(tmp_path: Path) -> None:
    fx = fixture_named("2.3.0-unaligned")
    src = tmp_path / "src"
    shutil.copytree(fx.root / "checkpoints", src)
    chk = next(src.glob("*/chk-*"))
    cp = spillway.open(chk)
    dry = cp.strip_channel_state(StripOptions(str(tmp_path / "o1"), dry_run=True))
    assert dry.dry_run and not (tmp_path / "o1").exists()
    report = cp.strip_channel_state(StripOptions(str(tmp_path / "o2")))
    assert (tmp_path / "o2" / "_metadata").is_file()
    doc = report.to_json()
    assert doc["schema"] == "spillway.repair/1" and doc["bytes_dropped"] > 0
    written = spillway.open(tmp_path / "o2")
    assert written.validate().report.errors == []
    assert not any(s.input_channel_state for o in written.model.operators for s in o.subtasks)


def test_the_exit_status_enum_is_the_documented_table() -> None:
    """docs/cli.md "Exit codes" is the contract: one enum member per row, nothing else."""
    import re
    from pathlib import Path

    from spillway.api import ExitStatus

    text = (Path(__file__).parents[2] / "docs" / "cli.md").read_text()
    table = text[text.index("## Exit codes") : text.index("\n## ", text.index("## Exit codes") + 1)]
    documented = {int(code) for code in re.findall(r"^\| (\d+) \|", table, flags=re.M)}
    assert documented == {0, 1, 2, 3, 4, 130} == {int(s) for s in ExitStatus}
