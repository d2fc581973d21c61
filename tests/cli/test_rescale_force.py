"""``rescale --force`` on a damaged source: the damaged logical channels of the moved edges are left out
whole and listed; everything else is moved exactly once; damage it cannot leave out is still refused.

Built from the real 2.3.0 ``unaligned`` fixture (src -> tostr -HASH-> slow -REBALANCE-> len -> sink). The
damaged channel is located with Flink's own decode of ``_metadata`` (oracle.json: handle offsets and
sizes); the record counts come from ``analyze`` of the undamaged source, not from the rescale."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

from click.testing import CliRunner
from support.fixtures import fixture_named

from spillway.cli.app import app

FX = fixture_named("2.3.0-unaligned")
DAMAGED = "tostr#0 -> slow#1 (gate 0)"  # input channel 0 of slow's subtask 1, gate 0


def _run(*args: str) -> tuple[int, str]:
    res = CliRunner().invoke(app, list(args))
    assert "Traceback" not in res.output
    return res.exit_code, res.output


def _oracle_handle(operator: str, subtask: int, side: str, first: int, second: int) -> dict:
    oracle = json.loads(FX.oracle.read_text())
    op = next(o for o in oracle["operators"] if o["name"] == operator)
    sub = next(s for s in op["subtasks"] if s["index"] == subtask)
    fields = ("gate_index", "input_channel_index") if side == "input" else ("partition_index", "subpartition_index")
    for merged in sub["input_channel_state" if side == "input" else "result_subpartition_state"]:
        for ch in merged["channels"]:
            if (ch[fields[0]], ch[fields[1]]) == (first, second):
                return ch
    raise AssertionError(f"no {side} handle {first},{second} of {operator}#{subtask} in oracle.json")


def _damaged_copy(tmp_path: Path) -> Path:
    """The fixture with the first record of slow#1's input channel 0 given an impossible length (the chunk
    chain stays intact, so only that logical channel fails to frame)."""
    root = tmp_path / "fx"
    shutil.copytree(FX.root, root)
    (channel_file,) = [p for p in (root / FX.info["checkpoint"]).iterdir() if p.name != "_metadata"]
    chunk = _oracle_handle("slow", 1, "input", 0, 0)["offsets"][0]
    data = bytearray(channel_file.read_bytes())
    data[chunk + 4 : chunk + 8] = (0x7FFFFFF0).to_bytes(4, "big")  # record length field after the chunk length
    channel_file.write_bytes(bytes(data))
    return root


def _rescale(root: Path, out: Path, *extra: str) -> list[str]:
    return [
        "rescale",
        str(root / "checkpoints"),
        "--plan",
        str(root / "jobgraph.json"),
        "--key-fn",
        "slow=support.keyfns:key_of",  # the job's KeyOf: the String's prefix
        "--master",
        "inprocess",
        "--out",
        str(out),
        *extra,
    ]


def _analyze(path: Path, plan: Path) -> dict:
    code, output = _run("analyze", str(path), "--plan", str(plan), "--json")
    assert code == 0, output
    return json.loads(output)


def test_the_damage_is_a_framing_fault_in_exactly_one_channel(tmp_path: Path) -> None:
    root = _damaged_copy(tmp_path)
    code, output = _run("validate", str(root / "checkpoints"), "--plan", str(root / "jobgraph.json"), "--json")
    assert code == 1
    errors = [f for f in json.loads(output)["findings"] if f["severity"] == "error"]
    assert {(f["rule"], f["channel"]) for f in errors} == {("record-length", DAMAGED)}


def test_without_force_a_damaged_source_is_refused(tmp_path: Path) -> None:
    root = _damaged_copy(tmp_path)
    out = tmp_path / "out"
    code, output = _run(*_rescale(root, out, "-p", "slow=3"))
    assert code == 1 and "1 validate errors" in output and "--force" in output
    assert not out.exists()


def test_force_leaves_out_the_damaged_channel_and_moves_every_other_record(tmp_path: Path) -> None:
    root = _damaged_copy(tmp_path)
    out = tmp_path / "out"
    code, output = _run(*_rescale(root, out, "-p", "slow=3", "--force", "--json"))
    assert code == 0, output
    doc = json.loads(output)
    (lost,) = doc["lost_channels"]
    assert lost["channel"] == DAMAGED
    assert (lost["upstream_subtask"], lost["downstream_subtask"]) == (0, 1)
    inp, outp = _oracle_handle("slow", 1, "input", 0, 0), _oracle_handle("tostr", 0, "output", 0, 1)
    stated = sum(h["state_size"] - 4 * len(h["offsets"]) for h in (inp, outp))  # Flink's handle sizes
    assert lost["stated_bytes"] == stated == doc["lost_bytes"]
    assert any(r.startswith("record-length:") for r in lost["reasons"])

    before = _analyze(FX.root / "checkpoints", FX.root / "jobgraph.json")
    by_label = {c["label"]: c["records"] for c in before["channels"]}
    expected = sum(by_label.values()) - by_label[DAMAGED]  # both edges touch slow: both are moved
    assert doc["records_moved"] == expected

    plan = out / "rescaled-plan.json"
    code, output = _run("validate", str(out), "--plan", str(plan))
    assert code == 0, output
    after = _analyze(out, plan)
    assert sum(c["records"] for c in after["channels"]) == expected


def test_force_text_report_names_the_lost_channel_and_bytes(tmp_path: Path) -> None:
    root = _damaged_copy(tmp_path)
    code, output = _run(*_rescale(root, tmp_path / "out", "-p", "slow=3", "--force", "--dry-run"))
    assert code == 0, output
    flat = " ".join(output.split())
    assert "would leave out 1 damaged logical channels" in flat and DAMAGED in flat
    assert "record-length" in flat


def test_force_still_refuses_damage_on_a_channel_that_is_not_moved(tmp_path: Path) -> None:
    """Only len is rescaled: tostr -> slow is not moved, so its damaged channel would be carried into the
    output as it is. --force cannot leave it out: refused, nothing written."""
    root = _damaged_copy(tmp_path)
    out = tmp_path / "out"
    code, output = _run(*_rescale(root, out, "-p", "len=3", "--force"))
    assert code == 1, output
    flat = " ".join(output.split())
    assert "--force cannot leave out" in flat and "record-length" in flat
    assert not out.exists()


def test_force_on_a_sound_source_changes_nothing(tmp_path: Path) -> None:
    out1, out2 = tmp_path / "a", tmp_path / "b"
    root = tmp_path / "fx"
    shutil.copytree(FX.root, root)
    code1, o1 = _run(*_rescale(root, out1, "-p", "slow=3", "--json"))
    code2, o2 = _run(*_rescale(root, out2, "-p", "slow=3", "--force", "--json"))
    assert code1 == code2 == 0, o1 + o2
    assert json.loads(o2)["lost_channels"] == [] and json.loads(o2)["lost_bytes"] == 0
    assert (out1 / "_metadata").read_bytes() == (out2 / "_metadata").read_bytes()


def test_a_file_with_a_bad_header_loses_every_channel_in_it(tmp_path: Path) -> None:
    """All channel state of this checkpoint is in one file: an unknown header version condemns every
    logical channel; both edges are moved (slow is rescaled), so --force writes a checkpoint with no
    in-flight records and says so."""
    root = tmp_path / "fx"
    shutil.copytree(FX.root, root)
    (channel_file,) = [p for p in (root / FX.info["checkpoint"]).iterdir() if p.name != "_metadata"]
    data = bytearray(channel_file.read_bytes())
    data[0:4] = (99).to_bytes(4, "big")
    channel_file.write_bytes(bytes(data))
    out = tmp_path / "out"
    code, output = _run(*_rescale(root, out, "-p", "slow=3", "--force", "--json"))
    assert code == 0, output
    doc = json.loads(output)
    before = _analyze(FX.root / "checkpoints", FX.root / "jobgraph.json")
    assert sorted(lost["channel"] for lost in doc["lost_channels"]) == sorted(c["label"] for c in before["channels"])
    assert doc["lost_bytes"] == sum(c["bytes"] for c in before["channels"])
    assert all(any(r.startswith("channel-header:") for r in lost["reasons"]) for lost in doc["lost_channels"])
    assert doc["records_moved"] == 0
    code, output = _run("validate", str(out), "--plan", str(out / "rescaled-plan.json"))
    assert code == 0, output


def test_a_missing_channel_file_loses_every_channel_in_it(tmp_path: Path) -> None:
    root = tmp_path / "fx"
    shutil.copytree(FX.root, root)
    (channel_file,) = [p for p in (root / FX.info["checkpoint"]).iterdir() if p.name != "_metadata"]
    channel_file.unlink()
    out = tmp_path / "out"
    code, output = _run(*_rescale(root, out, "-p", "slow=3", "--force", "--json"))
    assert code == 0, output
    doc = json.loads(output)
    assert len(doc["lost_channels"]) == 8  # the 8 logical channels analyze shows for this fixture
    assert all(any(r.startswith("file-exists:") for r in lost["reasons"]) for lost in doc["lost_channels"])
    code, output = _run("validate", str(out), "--plan", str(out / "rescaled-plan.json"))
    assert code == 0, output


def test_a_missing_keyed_state_file_is_refused_even_with_force(tmp_path: Path) -> None:
    """Keyed state cannot be left out (its key groups would be empty after restore): a missing RocksDB file
    is not channel damage, so --force still refuses, naming it, and writes nothing."""
    fx = fixture_named("2.3.0-rocksdb-incremental")
    root = tmp_path / "fx"
    shutil.copytree(fx.root, root)
    victim = sorted(root.glob("checkpoints/*/shared/*"))[0]
    victim.unlink()
    out = tmp_path / "out"
    args = _rescale(root, out, "-p", "slow=4", "--force")
    code, output = _run(*args)
    assert code == 1, output
    flat = " ".join(output.split())
    assert "--force cannot leave out" in flat and "file-exists" in flat and victim.name in flat
    assert not out.exists()


def _elements(payload: bytes) -> int:
    """Length-prefixed StreamElements in a whole logical channel (docs/format/record-framing.md)."""
    count = pos = 0
    while pos < len(payload):
        pos += 4 + int.from_bytes(payload[pos : pos + 4], "big", signed=True)
        count += 1
    assert pos == len(payload)
    return count


def test_a_short_channel_file_loses_its_channels_with_force_counted_where_whole(tmp_path: Path) -> None:
    """docs/rescale.md: a short channel file's channels are left out. The file is cut inside tostr#1's output
    chunks: every channel in it is distrusted; the one channel whose bytes all lie before the cut
    (tostr#0 -> slow#0: only tostr#0's output side, no input side on slow#0 for channel 0) is reported in
    records, counted here from Flink's handle offsets on the intact bytes; the others as unknown, in bytes."""
    root = tmp_path / "fx"
    shutil.copytree(FX.root, root)
    (channel_file,) = [p for p in (root / FX.info["checkpoint"]).iterdir() if p.name != "_metadata"]
    intact = channel_file.read_bytes()
    cut = _oracle_handle("tostr", 1, "output", 0, 0)["offsets"][2] + 10
    channel_file.write_bytes(intact[:cut])
    out = tmp_path / "out"
    assert _run(*_rescale(root, out, "-p", "slow=3"))[0] == 1 and not out.exists()
    code, output = _run(*_rescale(root, out, "-p", "slow=3", "--force", "--json"))
    assert code == 0, output
    doc = json.loads(output)
    whole = _oracle_handle("tostr", 0, "output", 0, 0)
    assert max(whole["offsets"]) < cut
    payload = b"".join(
        intact[o + 4 : o + 4 + int.from_bytes(intact[o : o + 4], "big", signed=True)] for o in whole["offsets"]
    )
    by_channel = {lost["channel"]: lost for lost in doc["lost_channels"]}
    assert len(by_channel) == 8  # every logical channel of the fixture has a part in the file
    assert by_channel["tostr#0 -> slow#0 (gate 0)"]["records"] == _elements(payload)
    assert [c for c, lost in by_channel.items() if lost["records"] is not None] == ["tostr#0 -> slow#0 (gate 0)"]
    assert doc["lost_records"] == _elements(payload)
    assert doc["lost_uncounted_bytes"] == doc["lost_bytes"] - len(payload)
    assert any(r.startswith("file-size:") for lost in by_channel.values() for r in lost["reasons"])
    code, output = _run("validate", str(out), "--plan", str(out / "rescaled-plan.json"))
    assert code == 0, output


def test_force_text_names_the_lost_records_and_bytes(tmp_path: Path) -> None:
    root = _damaged_copy(tmp_path)
    code, output = _run(*_rescale(root, tmp_path / "out", "-p", "slow=3", "--force", "--dry-run"))
    assert code == 0, output
    inp, outp = _oracle_handle("slow", 1, "input", 0, 0), _oracle_handle("tostr", 0, "output", 0, 1)
    stated = sum(h["state_size"] - 4 * len(h["offsets"]) for h in (inp, outp))
    flat = " ".join(output.split())
    # The channel's framing broke at its first record: its records cannot be counted.
    assert f"(--force): records unknown, {stated} bytes of in-flight data" in flat
