"""The writing commands (rescale, repair *) through the installed console script: each is one call of
``spillway.api`` — its ``--json`` is the API result's ``to_json()`` — prints the restore instructions after a
write, and answers ``--json`` failures with ``spillway.error/1``. Expected values come from the fixtures'
own files (ids.json: the job as Flink built it; oracle.json: what Flink's classes read from the _metadata;
fixture.json: the release that wrote it), never from spillway's output."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from support.console import run
from support.fixtures import fixture_named

import spillway
from spillway.api import ClearFinishedOptions, DropOperatorOptions, RescaleOptions, StripOptions
from spillway.flink.features import parse_release

UNALIGNED = fixture_named("2.3.0-unaligned")
FINISHED = fixture_named("2.3.0-finished")
COUNTED = fixture_named("2.3.0-counted")


def _built(fx: Any) -> list[dict[str, Any]]:
    return list(json.loads((fx.root / "ids.json").read_text())["stream_nodes"])


def _release(fx: Any) -> str:
    return str(json.loads((fx.root / "fixture.json").read_text())["release"])


def _check_restore(restore: dict[str, Any], out: Path, release: str) -> None:
    assert restore["path"] == str(out.absolute()) and (out / "_metadata").is_file()
    first, _, last = restore["release_line"].partition("-")
    assert parse_release(first) <= parse_release(release) <= parse_release(last or first)
    assert restore["config"] == {"execution.state-recovery.path": restore["path"]}  # 2.x reads the new key only
    assert restore["command"].startswith(f"flink run -s {out.absolute()}")


def _json(args: list[str]) -> dict[str, Any]:
    code, stdout, stderr = run([*args, "--json"])
    assert code == 0, stderr
    return dict(json.loads(stdout))


def test_clear_finished_prints_how_to_restore_its_output(tmp_path: Path) -> None:
    marks = {o["uid"]: o for o in json.loads((FINISHED.root / "oracle.json").read_text())["operators"]}
    assert marks["bsrc"]["fully_finished"] and any(s["finished"] for s in marks["psrc"]["subtasks"])
    out = tmp_path / "cleared"
    args = ["repair", "clear-finished", str(FINISHED.checkpoint_dir), "--operator", "bsrc", "--operator", "psrc"]
    doc = _json([*args, "--out", str(out)])
    _check_restore(doc["restore"], out, _release(FINISHED))
    # clearing keeps every operator at the parallelism Flink ran it with (2.x names operators by uid)
    assert doc["restore"]["parallelism"] == {n["uid"]: n["parallelism"] for n in _built(FINISHED)}
    code, text, stderr = run([*args, "--out", str(tmp_path / "again")], columns=300)
    assert code == 0, stderr
    assert f"flink run -s {(tmp_path / 'again').absolute()}" in text
    assert f"execution.state-recovery.path: {(tmp_path / 'again').absolute()}" in text


def test_drop_operator_prints_how_to_restore_without_the_dropped_operator(tmp_path: Path) -> None:
    out = tmp_path / "dropped"
    plan = str(UNALIGNED.root / "jobgraph.json")
    args = ["repair", "drop-operator", str(UNALIGNED.checkpoint_dir), "--operator", "tostr", "--plan", plan]
    doc = _json([*args, "--out", str(out)])
    _check_restore(doc["restore"], out, _release(UNALIGNED))
    assert doc["restore"]["parallelism"] == {
        n["uid"]: n["parallelism"] for n in _built(UNALIGNED) if n["uid"] != "tostr"
    }
    tostr = next(n["operator_id"] for n in _built(UNALIGNED) if n["uid"] == "tostr")
    assert any(c["detail"] == tostr for c in doc["changes"])  # the id Flink computed for it
    code, text, stderr = run([*args, "--out", str(tmp_path / "again")], columns=300)
    assert code == 0, stderr
    assert f"flink run -s {(tmp_path / 'again').absolute()}" in text and "tostr=" not in text


def test_relocate_text_ends_with_how_to_restore(tmp_path: Path) -> None:
    out = tmp_path / "moved"
    args = ["repair", "relocate", str(UNALIGNED.checkpoint_dir), "--from", "file:/nowhere", "--to", "file:/x"]
    code, text, stderr = run([*args, "--out", str(out)], columns=300)
    assert code == 0, stderr
    last = text.rstrip().splitlines()[-3:]
    first, _, final = last[0].removeprefix("restore with Flink ").partition(" ")[0].partition("-")
    assert parse_release(first) <= parse_release(_release(UNALIGNED)) <= parse_release(final or first)
    assert last[1] == f"  flink run -s {out.absolute()} …   or   execution.state-recovery.path: {out.absolute()}"
    listed = last[2].removeprefix("  parallelism per operator: ").split(", ")
    assert sorted(listed) == sorted(f"{n['uid']}={n['parallelism']}" for n in _built(UNALIGNED))


def test_the_cli_json_is_the_api_result(tmp_path: Path) -> None:
    """One door: the command's --json is the document of the API call it makes, for the same inputs."""
    plan = str(UNALIGNED.root / "jobgraph.json")
    cli = _json(["repair", "strip-channel-state", str(UNALIGNED.checkpoint_dir), "--plan", plan, "--operator", "slow",
                 "--out", str(tmp_path / "o"), "--dry-run"])  # fmt: skip
    cp = spillway.open(UNALIGNED.checkpoint_dir, plan=plan)
    api = cp.strip_channel_state(StripOptions(tmp_path / "o", operators=["slow"], dry_run=True))
    assert cli == api.to_json()
    # the records dropped are those of slow's input channels: every byte of them framed, none unknown
    assert api.loss is not None and api.loss.records_dropped == cli["records_dropped"] is not None
    cli = _json(["rescale", str(COUNTED.checkpoint_dir), "--plan", str(COUNTED.root / "jobgraph.json"), "-p",
                 "count=3", "--key", "count=tuple:0:long", "--master", "inprocess", "--dry-run"])  # fmt: skip
    cp = spillway.open(COUNTED.checkpoint_dir, plan=COUNTED.root / "jobgraph.json")
    doc = cp.rescale(RescaleOptions({"count": 3}, keys={"count": "tuple:0:long"}, master=None, dry_run=True)).to_json()
    cli.pop("timings"), doc.pop("timings")
    assert cli == doc
    count = next(n for n in _built(COUNTED) if n["uid"] == "count")
    assert doc["vertices"] == [{"vertex": "count", "old_parallelism": count["parallelism"], "new_parallelism": 3}]


@pytest.mark.parametrize(
    "args",
    [
        ["rescale", "{gone}", "--plan", "{plan}", "-p", "count=3", "--dry-run"],
        ["repair", "relocate", "{gone}", "--out", "{out}", "--from", "file:/a", "--to", "file:/b"],
        ["repair", "strip-channel-state", "{gone}", "--out", "{out}"],
        ["repair", "clear-finished", "{gone}", "--out", "{out}", "--operator", "bsrc"],
        ["repair", "drop-operator", "{gone}", "--out", "{out}", "--operator", "tostr"],
    ],
    ids=lambda a: " ".join(a[:2]),
)
def test_json_failures_are_spillway_error_documents(args: list[str], tmp_path: Path) -> None:
    names = {"gone": str(tmp_path / "gone"), "out": str(tmp_path / "o"), "plan": str(COUNTED.root / "jobgraph.json")}
    code, stdout, stderr = run([*(a.format(**names) for a in args), "--json"])
    assert code == 2 and "Traceback" not in stderr
    doc = json.loads(stdout)
    assert doc["schema"] == "spillway.error/1" and doc["category"] == "usage" and "gone" in doc["error"]
    assert not (tmp_path / "o").exists()


def test_options_fail_before_any_storage_is_touched(tmp_path: Path) -> None:
    for bad in (
        lambda: RescaleOptions({"count": 0}),
        lambda: RescaleOptions({"count": 3}),  # no out, not a dry run
        lambda: RescaleOptions({"count": 3}, dry_run=True, keys={"count": "nonsense"}),
        lambda: RescaleOptions({"count": 3}, dry_run=True, key_fns={"count": "no-colon"}),
        lambda: RescaleOptions({"count": 3}, dry_run=True, buffer_size=10),
        lambda: DropOperatorOptions(tmp_path / "o"),
        lambda: ClearFinishedOptions(tmp_path / "o", operators="bsrc"),  # a string is not a list of operators
    ):
        with pytest.raises(spillway.UsageError) as caught:
            bad()
        assert "--" not in str(caught.value)  # Python's words, not the CLI's
    with pytest.raises(spillway.UsageError, match="plan"):
        spillway.open(COUNTED.checkpoint_dir).rescale(RescaleOptions({"count": 3}, dry_run=True))
