"""validate says "sound" only when every byte it checks was checked (issue 21): input-side handles are framed
from their start even without a plan, with record lengths bounded by the channel-state bytes the checkpoint
holds; what could not be framed is named (text and ``--json`` ``unchecked``) and ``--strict`` exits 1 on it.
Expected handles and offsets come from Flink's own view of each fixture (oracle.json)."""

from __future__ import annotations

import dataclasses
import json
import struct
from pathlib import Path

import pytest
from click.testing import CliRunner
from support.damaged import copy_fixture, rewrite
from support.fixtures import Fixture, fixture_named, fixture_params

from spillway.cli.app import app
from spillway.inspect.validate import validate
from spillway.storage.load import load_checkpoint

BASE = "2.3.0-unaligned"
SIDES = {"input_channel_state": "input", "result_subpartition_state": "output"}


def _oracle_handles(fx: Fixture) -> list[tuple[str, int, str, dict, dict]]:
    """(operator id, subtask, side, channel handle, its holder) of every channel handle Flink reported; a merged
    handle (V6+) lists its channels, which share the holder's delegate."""
    doc = json.loads(fx.oracle.read_text())
    return [
        (op["operator_id"], sub["index"], side, ch, h)
        for op in doc["operators"]
        for sub in op["subtasks"]
        for key, side in SIDES.items()
        for h in sub.get(key, [])
        for ch in h.get("channels", [h])
    ]


def _run(*args: str) -> tuple[int, str]:
    result = CliRunner().invoke(app, ["validate", *args])
    return result.exit_code, result.output


def _damage_first_record_length(chk: Path, fx: Fixture) -> tuple[Path, int, str, int]:
    """Overwrite the first record length of the input handle with the longest first chunk by 7fffff00 (a
    length no channel of a 600 KB checkpoint can hold); returns (file, offset, operator id, subtask)."""
    candidates = [
        (op, index, ch, holder)
        for op, index, side, ch, holder in _oracle_handles(fx)
        if side == "input" and "relative_path" in holder["delegate"]
    ]

    def first_chunk(c: tuple) -> int:
        data = (chk / c[3]["delegate"]["relative_path"]).read_bytes()
        return struct.unpack_from(">i", data, c[2]["offsets"][0])[0]

    op, index, ch, holder = max(candidates, key=first_chunk)
    path = chk / holder["delegate"]["relative_path"]
    data = bytearray(path.read_bytes())
    at = ch["offsets"][0] + 4  # past the chunk's length: the first record's length field (input starts on one)
    data[at : at + 4] = bytes.fromhex("7fffff00")
    path.write_bytes(bytes(data))
    return path, at, op, index


def test_a_first_record_length_no_channel_can_hold_is_an_error_without_a_plan(tmp_path: Path) -> None:
    fx = fixture_named(BASE)
    c = copy_fixture(BASE, tmp_path)
    path, at, op, index = _damage_first_record_length(c.chk, fx)
    report = c.run(plan=False)
    hits = [(f.operator, f.subtask, f.file, f.offset) for f in report.errors if f.rule == "record-length"]
    assert hits == [("slow", index, str(path), at)]  # V6 labels an operator by its stored name
    assert any(key[0] == op and key[2] == index for key in report.damage)
    code, text = _run(str(c.chk))
    assert code == 1 and "sound" not in text


def test_intact_without_a_plan_is_not_called_sound_and_names_the_output_side() -> None:
    fx = fixture_named(BASE)
    outputs = [(sub, ch) for _, sub, side, ch, _ in _oracle_handles(fx) if side == "output"]
    code, text = _run(str(fx.checkpoint_dir))
    assert code == 0
    assert "sound" not in text and "no errors found, not all checked" in text
    assert f"unchecked: {len(outputs)} channel handles: output side: not framed without --plan" in text
    # "no errors found" is not "safe to restore": the reader is pointed at --plan and at preflight
    assert "(--plan FILE or --job JOB.jar)" in text and "spillway preflight CHECKPOINT --plan NEW_PLAN" in " ".join(
        text.split()
    )
    code, doc_text = _run(str(fx.checkpoint_dir), "--json")
    doc = json.loads(doc_text)
    assert code == 0 and doc["ok"] is True and doc["complete"] is False
    assert sorted((u["what"], u["subtask"], u["channel"]) for u in doc["unchecked"]) == sorted(
        ("channel-handle", sub, f"out({ch['partition_index']},{ch['subpartition_index']})") for sub, ch in outputs
    )
    assert _run(str(fx.checkpoint_dir), "--strict")[0] == 1


def test_with_the_plan_everything_is_checked_and_strict_passes() -> None:
    fx = fixture_named(BASE)
    plan = str(fx.root / "jobgraph.json")
    code, text = _run(str(fx.checkpoint_dir), "--plan", plan, "--strict")
    assert code == 0 and any(line.startswith("sound · ") for line in text.splitlines())
    assert "spillway preflight" not in text
    doc = json.loads(_run(str(fx.checkpoint_dir), "--plan", plan, "--json")[1])
    assert (doc["ok"], doc["complete"], doc["unchecked"]) == (True, True, [])


@pytest.mark.parametrize("fx", fixture_params())
def test_framing_input_handles_alone_finds_no_error_in_any_fixture(fx: Fixture) -> None:
    """Input state starts on a record boundary in every release: framed alone (no plan) it never gives a false
    error, and exactly the output-side handles are left unchecked."""
    report = validate(load_checkpoint(fx.checkpoint_dir), None)
    assert not report.errors, [f.to_json() for f in report.errors]
    handles = _oracle_handles(fx)
    assert report.handles_framed_alone == sum(1 for h in handles if h[2] == "input")
    assert [u.what for u in report.unchecked] == ["channel-handle"] * sum(1 for h in handles if h[2] == "output")


def test_a_bad_channel_file_header_is_reported_once_and_its_handles_unchecked(tmp_path: Path) -> None:
    fx = fixture_named(BASE)
    c = copy_fixture(BASE, tmp_path)
    handles = _oracle_handles(fx)
    path = c.chk / handles[0][4]["delegate"]["relative_path"]  # the fixture's one channel-state file
    data = bytearray(path.read_bytes())
    data[0:4] = struct.pack(">i", 7)
    path.write_bytes(bytes(data))
    report = c.run()
    assert [(f.rule, f.file, f.offset) for f in report.errors] == [("channel-header", str(path), 0)]
    assert len(report.unchecked) == len(handles)
    assert {u.why for u in report.unchecked} == {"its file has no valid channel-state header (channel-header)"}
    assert len(report.damage) == len(handles)  # every channel in the file is damaged, by that one finding


def test_files_that_are_not_local_are_unchecked(tmp_path: Path) -> None:
    """A keyed-state file named by a remote URI in _metadata is not read when validating a local checkpoint
    (file-not-local): validate says so instead of "sound", and --strict exits 1."""
    c = copy_fixture("1.10.3-aligned", tmp_path)  # slow's keyed state in files named by absolute path
    remote = "hdfs://namenode:8020/flink/chk-3/keyed"

    def elsewhere(cp) -> None:  # type: ignore[no-untyped-def]
        op = next(o for o in cp.operators if any(s.managed_keyed_state for s in o.subtasks))
        h = min(op.subtasks, key=lambda s: s.index).managed_keyed_state
        h.delegate = dataclasses.replace(h.delegate, path=remote)

    rewrite(c, elsewhere)
    code, text = _run(str(c.chk), "--plan", str(c.plan), "--json")
    out = json.loads(text)
    assert code == 0 and out["ok"] is True and out["complete"] is False
    assert [(u["what"], u["file"]) for u in out["unchecked"]] == [("file", remote)]
    assert _run(str(c.chk), "--plan", str(c.plan), "--strict")[0] == 1


def _stream_handles(node: object) -> list[dict]:
    """Every file handle in the dump (the oracle nests handles at several depths)."""
    found: list[dict] = []
    if isinstance(node, dict):
        if node.get("type") == "FileStateHandle":
            found.append(node)
        for v in node.values():
            found.extend(_stream_handles(v))
    elif isinstance(node, list):
        for v in node:
            found.extend(_stream_handles(v))
    return found


def test_a_short_channel_file_is_reported_once_not_per_handle(tmp_path: Path) -> None:
    """Cut inside a chunk: the file is short (file-size, at the cut) and its chain breaks at that chunk
    (chunk-chain) — two findings. Handles whose chunks lie past the cut are damaged and unchecked, not each
    reported again as a bad offset, a wrong size or a record that runs past the end."""
    fx = fixture_named(BASE)
    handles = _oracle_handles(fx)
    c = copy_fixture(BASE, tmp_path)
    path = c.chk / handles[0][4]["delegate"]["relative_path"]
    data = path.read_bytes()
    victim = next(ch for op, sub, side, ch, _ in handles if side == "output" and len(ch["offsets"]) > 3)
    broken = victim["offsets"][2]
    path.write_bytes(data[: broken + 10])
    report = c.run()
    assert sorted((f.rule, f.offset) for f in report.errors) == [("chunk-chain", broken), ("file-size", broken + 10)]
    past = [ch for _, _, _, ch, _ in handles if max(ch["offsets"]) >= broken]
    assert len(report.damage) == len(handles)  # one file: every handle in it is distrusted
    assert len([u for u in report.unchecked if "past where its file's chunk chain breaks" in u.why]) == len(past)
