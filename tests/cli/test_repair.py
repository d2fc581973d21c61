"""repair commands through the CLI on copies of real fixtures: the source never changes, the output
is self-checked, failures leave nothing behind. (Restores in real Flink: tests/integration/test_flink_restore.py.)"""

from __future__ import annotations

import hashlib
import json
import shutil
from pathlib import Path

import pytest
from click.testing import CliRunner
from support.fixtures import Fixture, fixture_named, fixture_params

from spillway.cli.app import app
from spillway.formats.metadata_codec import decode_metadata
from spillway.inspect.analyze import analyze
from spillway.inspect.topology import load_plan
from spillway.storage.load import load_checkpoint

runner = CliRunner()


def _tree_digest(root: Path) -> str:
    h = hashlib.sha256()
    for p in sorted(root.rglob("*")):
        if p.is_file():
            h.update(str(p.relative_to(root)).encode() + p.read_bytes())
    return h.hexdigest()


def _invoke(*args: str) -> tuple[int, str]:
    res = runner.invoke(app, list(args))
    return res.exit_code, res.output


@pytest.mark.parametrize("fx", fixture_params())
def test_identity_relocation_is_byte_exact(fx: Fixture, tmp_path: Path) -> None:
    before = _tree_digest(fx.root)
    code, output = _invoke(
        "repair",
        "relocate",
        str(fx.checkpoint_dir),
        "--out",
        str(tmp_path / "out"),
        "--from",
        "file:/",
        "--to",
        "file:/",
    )
    assert code == 0, output
    assert (tmp_path / "out" / "_metadata").read_bytes() == fx.metadata.read_bytes()
    assert _tree_digest(fx.root) == before, "the source must not change"


def test_relocate_copy_data_moves_a_rocksdb_checkpoint(tmp_path: Path) -> None:
    fx = fixture_named("2.3.0-rocksdb-incremental")
    old = "file:" + fx.info["generated_at"] + "/checkpoints/" + fx.info["job_id"]
    new_job = tmp_path / "new" / fx.info["job_id"]
    out = new_job / fx.checkpoint_dir.name
    code, output = _invoke(
        "repair",
        "relocate",
        str(fx.checkpoint_dir),
        "--out",
        str(out),
        "--from",
        old,
        "--to",
        f"file:{new_job}",
        "--copy-data",
        "--json",
    )
    assert code == 0, output
    doc = json.loads(output)
    assert {c["what"]: c["count"] for c in doc["changes"]}["paths rewritten in FileStateHandle"] == 14
    assert len(list((new_job / "shared").iterdir())) == 14
    # The relocated checkpoint stands alone: validate without any rebasing.
    code, output = _invoke("validate", str(out), "--json")
    assert code == 0 and json.loads(output)["summary"]["files_checked"] == 15


def test_relocate_relative_turns_in_place_files_into_relative_handles(tmp_path: Path) -> None:
    fx = fixture_named("1.10.3-aligned")  # V2 cannot hold relative handles
    code, output = _invoke(
        "repair",
        "relocate",
        str(fx.checkpoint_dir),
        "--out",
        str(tmp_path / "o"),
        "--from",
        "file:/",
        "--to",
        "file:/",
        "--relative",
    )
    assert code == 1 and "V3" in output
    assert not (tmp_path / "o").exists()


def test_output_is_never_overwritten_and_failures_leave_nothing(tmp_path: Path) -> None:
    fx = fixture_named("2.3.0-unaligned")
    (tmp_path / "taken").mkdir()
    code, output = _invoke(
        "repair", "relocate", str(fx.checkpoint_dir), "--out", str(tmp_path / "taken"), "--from", "x", "--to", "y"
    )
    assert code == 1 and "never overwrites" in output
    assert list(tmp_path.iterdir()) == [tmp_path / "taken"]


def _oracle_channel_handles(fx: Fixture, operator: str, key: str) -> list[tuple[int, dict, dict]]:
    """(subtask, channel handle, holder) of ``operator``'s handles under ``key`` as Flink reported them
    (oracle.json; a V6 merged handle lists its channels, which share the holder's delegate)."""
    doc = json.loads(fx.oracle.read_text())
    op = next(o for o in doc["operators"] if o["name"] == operator)
    return [(s["index"], ch, h) for s in op["subtasks"] for h in s[key] for ch in h.get("channels", [h])]


def _payload(chk: Path, ch: dict, holder: dict) -> bytes:
    """A handle's bytes: each chunk is a 4-byte big-endian length and that many bytes."""
    blob = (chk / holder["delegate"]["relative_path"]).read_bytes()
    return b"".join(blob[o + 4 : o + 4 + int.from_bytes(blob[o : o + 4], "big")] for o in ch["offsets"])


def _elements(stream: bytes) -> int:
    """Whole length-prefixed stream elements of a stream that starts and ends on an element boundary."""
    count = pos = 0
    while pos < len(stream):
        pos += 4 + int.from_bytes(stream[pos : pos + 4], "big", signed=True)
        count += 1
    assert pos == len(stream)
    return count


def test_strip_selected_operator_drops_whole_channels_and_reports_the_loss(tmp_path: Path) -> None:
    """The channels into len are slow's output side only (len holds no input state; an output-only channel
    starts and ends on a record boundary, docs/format/record-framing.md): the expected loss is counted from
    Flink's handles and the bytes themselves, not from the analyze the strip uses."""
    fx = fixture_named("2.3.0-unaligned")
    plan = str(fx.root / "jobgraph.json")
    into_len = {
        f"slow#{sub} -> len#{ch['subpartition_index']} (gate 0)": _payload(fx.checkpoint_dir, ch, holder)
        for sub, ch, holder in _oracle_channel_handles(fx, "slow", "result_subpartition_state")
    }
    assert not _oracle_channel_handles(fx, "len", "input_channel_state")
    code, output = _invoke(
        "repair",
        "strip-channel-state",
        str(fx.checkpoint_dir),
        "--out",
        str(tmp_path / "s"),
        "--plan",
        plan,
        "--operator",
        "len",
        "--json",
    )
    assert code == 0, output
    doc = json.loads(output)
    assert doc["records_dropped"] == sum(_elements(p) for p in into_len.values()) > 0  # no fixture has watermarks
    assert doc["bytes_dropped"] == sum(len(p) for p in into_len.values())
    assert sorted(c["channel"] for c in doc["channels"]) == sorted(into_len)
    # Handles removed: len holds no input side, so exactly slow's output-side channel handles go, while the
    # rest of each of slow's merged handles stays (oracle.json counts them).
    removed = next(ch["count"] for ch in doc["changes"] if ch["what"] == "channel handles removed")
    assert removed == len(into_len) == len(_oracle_channel_handles(fx, "slow", "result_subpartition_state"))
    before = analyze(load_checkpoint(fx.checkpoint_dir), load_plan(plan))
    after = analyze(load_checkpoint(tmp_path / "s"), load_plan(plan))
    assert {c.label for c in after.channels} == {c.label for c in before.channels} - set(into_len)
    # Nothing else changed: coordinator and operator state of the source survive.
    src_before = decode_metadata(fx.metadata.read_bytes()).operator("f362c87ffabe89c8a91fa7d0a523ba6c")
    src_after = decode_metadata((tmp_path / "s" / "_metadata").read_bytes()).operator(
        "f362c87ffabe89c8a91fa7d0a523ba6c"
    )
    assert src_after == src_before and src_after.coordinator_state is not None


def test_strip_all_without_plan_names_what_it_drops_without_question_marks(tmp_path: Path) -> None:
    """Without a plan the other end of each channel is unknown: the warning says so, never "?" or "None"
    (issue 21); the input side's records are counted (from Flink's handles), the output side's are unknown."""
    fx = fixture_named("2.3.0-unaligned")
    res = runner.invoke(
        app, ["repair", "strip-channel-state", str(fx.checkpoint_dir), "--out", str(tmp_path / "s"), "--dry-run"]
    )
    assert res.exit_code == 0, res.output
    warning = " ".join(res.stderr.split()) if res.stderr else " ".join(res.output.split())
    inputs = [
        _payload(fx.checkpoint_dir, ch, h) for _, ch, h in _oracle_channel_handles(fx, "slow", "input_channel_state")
    ]
    assert f"(other end unknown: no --plan) -> slow: {sum(_whole(p) for p in inputs)} records" in warning
    assert "tostr -> (other end unknown: no --plan): an unknown number of records" in warning
    assert "?" not in res.output and "None" not in res.output


def _whole(stream: bytes) -> int:
    """Whole elements of an input side (it may end inside one, whose rest is upstream)."""
    count = pos = 0
    while pos + 4 <= len(stream):
        pos += 4 + int.from_bytes(stream[pos : pos + 4], "big", signed=True)
        if pos > len(stream):
            break
        count += 1
    return count


def test_strip_some_operators_without_plan_is_refused(tmp_path: Path) -> None:
    fx = fixture_named("2.3.0-unaligned")
    code, output = _invoke(
        "repair", "strip-channel-state", str(fx.checkpoint_dir), "--out", str(tmp_path / "s"), "--operator", "slow"
    )
    assert code == 1 and "--plan" in output and not (tmp_path / "s").exists()


def test_strip_all_without_plan(tmp_path: Path) -> None:
    fx = fixture_named("2.3.0-unaligned-p3")
    code, output = _invoke("repair", "strip-channel-state", str(fx.checkpoint_dir), "--out", str(tmp_path / "s"))
    assert code == 0, output
    cp = decode_metadata((tmp_path / "s" / "_metadata").read_bytes())
    assert not any(s.input_channel_state or s.result_subpartition_state for o in cp.operators for s in o.subtasks)
    assert [p.name for p in (tmp_path / "s").iterdir()] == ["_metadata"], "unreferenced channel files are not copied"


def test_dry_run_writes_nothing(tmp_path: Path) -> None:
    fx = fixture_named("2.3.0-unaligned")
    code, output = _invoke(
        "repair", "strip-channel-state", str(fx.checkpoint_dir), "--out", str(tmp_path / "s"), "--dry-run"
    )
    assert code == 0 and "would write" in output and not (tmp_path / "s").exists()


def test_clear_finished(tmp_path: Path) -> None:
    fx = fixture_named("2.3.0-finished")
    plan = str(fx.root / "jobgraph.json")
    code, output = _invoke(
        "repair", "clear-finished", str(fx.checkpoint_dir), "--out", str(tmp_path / "c"), "--plan", plan
    )
    assert code == 1 and "nothing to clear" in output
    code, output = _invoke(
        "repair", "clear-finished", str(fx.checkpoint_dir), "--out", str(tmp_path / "c"), "--operator", "slow"
    )
    assert code == 1 and "not finished" in output
    code, output = _invoke(
        "repair",
        "clear-finished",
        str(fx.checkpoint_dir),
        "--out",
        str(tmp_path / "c"),
        "--operator",
        "bsrc",
        "--operator",
        "psrc",
    )
    assert code == 0, output
    cp = decode_metadata((tmp_path / "c" / "_metadata").read_bytes())
    assert not cp.operator("422cbfa16d9df46125bf9f0ca550f6e2").fully_finished
    assert not any(s.finished for s in cp.operator("9fb621cfbecf96a557c3ffc11ab9ad39").subtasks)


def test_drop_operator(tmp_path: Path) -> None:
    fx = fixture_named("2.3.0-unaligned")
    plan = str(fx.root / "jobgraph.json")
    code, output = _invoke(
        "repair", "drop-operator", str(fx.checkpoint_dir), "--out", str(tmp_path / "d"), "--operator", "tostr"
    )
    assert code == 1 and "--plan" in output
    code, output = _invoke(
        "repair",
        "drop-operator",
        str(fx.checkpoint_dir),
        "--out",
        str(tmp_path / "d"),
        "--operator",
        "tostr",
        "--plan",
        plan,
        "--json",
    )
    assert code == 0, output
    cp = decode_metadata((tmp_path / "d" / "_metadata").read_bytes())
    assert cp.operator("d8cec9b362de91fa6281b2882b1d6f93") is None
    keyby = [s for o in cp.operators for s in o.subtasks if o.uid == "slow" and s.input_channel_state]
    assert not keyby, "the input halves of tostr's channels went with it"


def test_source_is_untouched_by_every_command(tmp_path: Path) -> None:
    fx = fixture_named("2.3.0-unaligned")
    copy = tmp_path / "src"
    shutil.copytree(fx.root, copy)
    chk = copy / fx.info["checkpoint"]
    before = _tree_digest(copy)
    plan = str(copy / "jobgraph.json")
    for i, args in enumerate(
        [
            ["relocate", "--from", "file:/tmp", "--to", "file:/elsewhere"],
            ["strip-channel-state", "--plan", plan, "--operator", "slow"],
            ["drop-operator", "--plan", plan, "--operator", "len"],
        ]
    ):
        code, output = _invoke("repair", args[0], str(chk), "--out", str(tmp_path / f"o{i}"), *args[1:])
        assert code == 0, output
    assert _tree_digest(copy) == before


@pytest.mark.parametrize(
    ("args", "code", "message"),
    [
        (["relocate", "{missing}", "--from", "a", "--to", "b"], 2, "no such file or directory"),
        (["relocate", "{src}", "--from", "", "--to", "b"], 2, "--from: the path prefix must not be empty"),
        (["drop-operator", "{src}", "--operator", "nosuch"], 2, "no operator with id, uid or name 'nosuch'"),
        (["drop-operator", "{src}"], 2, "--operator: name the operator(s) to drop"),
        (["clear-finished", "{src}"], 2, "name the operators to clear (--operator)"),
        (["strip-channel-state", "{src}", "--plan", "{missing}"], 2, "no such plan file"),
        (["strip-channel-state", "{src}", "--rebase", "nonsense"], 2, "--rebase expects OLD_PREFIX=NEW_PREFIX"),
        (["drop-operator", "{src}", "--operator", "tostr"], 1, "--plan is needed"),
        (["clear-finished", "{src}", "--operator", "slow"], 1, "not finished, nothing to clear"),
        (["strip-channel-state", "{corrupt}"], 1, "_metadata"),
    ],
)
def test_failure_modes_are_one_clear_line(tmp_path: Path, args: list[str], code: int, message: str) -> None:
    fx = fixture_named("2.3.0-unaligned")
    corrupt = tmp_path / "corrupt" / "chk-3"
    corrupt.mkdir(parents=True)
    (corrupt / "_metadata").write_bytes(fx.metadata.read_bytes()[:100])
    names = {"src": str(fx.checkpoint_dir), "missing": str(tmp_path / "missing"), "corrupt": str(corrupt)}
    argv = ["repair", *(a.format(**names) for a in args), "--out", str(tmp_path / "out")]
    res = runner.invoke(app, argv)
    assert res.exit_code == code, res.output
    assert message in res.output and "Traceback" not in res.output
    assert res.output.startswith("error: ")
    assert not (tmp_path / "out").exists()
    assert [p.name for p in tmp_path.iterdir()] == ["corrupt"], "nothing left behind"
