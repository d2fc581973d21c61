"""`spillway dump` end to end through the CLI, on real fixtures."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
from click.testing import CliRunner
from support.fixtures import Fixture, fixture_named, fixture_params

from spillway.cli.app import app
from spillway.formats.metadata_codec import decode_metadata, encode_metadata
from spillway.model.checkpoint import FileHandle
from spillway.model.walk import all_stream_handles

runner = CliRunner()


def _json(*args: str) -> dict:
    result = runner.invoke(app, ["dump", *args, "--json"])
    assert result.exit_code == 0, result.output
    return json.loads(result.output)


@pytest.mark.parametrize("fx", fixture_params())
def test_dump_table_and_json_on_every_fixture(fx: Fixture) -> None:
    table = runner.invoke(app, ["dump", str(fx.checkpoint_dir)])
    assert table.exit_code == 0, table.output
    assert f"format V{fx.info.get('metadata_version', '')}" in table.output
    doc = _json(str(fx.metadata))
    assert doc["schema"] == "spillway.dump/1"
    for op in doc["operators"]:
        assert len(op["operator_id"]) == 32 and set(op["operator_id"]) <= set("0123456789abcdef")
        for key in ("name", "uid", "parallelism", "max_parallelism", "fully_finished", "subtasks"):
            assert key in op
        for sub in op["subtasks"]:
            for key in ("index", "finished", "managed_keyed_state", "input_channel_state", "result_subpartition_state"):
                assert key in sub


def test_path_forms_job_dir_chk_dir_and_metadata_file(tmp_path: Path) -> None:
    fx = fixture_named("2.3.0-unaligned")
    job_dir = fx.checkpoint_dir.parent
    older = tmp_path / "job"
    shutil.copytree(job_dir, older)
    shutil.copytree(older / fx.checkpoint_dir.name, older / "chk-1")  # an older checkpoint beside it
    result = runner.invoke(app, ["dump", str(older)])
    assert result.exit_code == 0 and f"picked the newest of 2 checkpoints: {fx.checkpoint_dir.name}" in result.output
    assert _json(str(fx.checkpoint_dir))["checkpoint_id"] == _json(str(fx.metadata))["checkpoint_id"]


def test_filters_and_names() -> None:
    fx = fixture_named("2.0.0-unaligned")
    doc = _json(str(fx.checkpoint_dir), "--operator", "slow", "--subtask", "1")
    (op,) = doc["operators"]
    assert (op["uid"], op["name"]) == ("slow", "slow")
    assert [s["index"] for s in op["subtasks"]] == [1]
    assert op["subtasks"][0]["managed_keyed_state"][0]["type"] == "KeyGroupsStateHandle"
    bad = runner.invoke(app, ["dump", str(fx.checkpoint_dir), "--operator", "nope"])
    assert bad.exit_code == 2 and "known:" in bad.output


def test_moved_checkpoint_paths_are_rebased_and_reported(tmp_path: Path) -> None:
    fx = fixture_named("2.3.0-rocksdb-incremental")
    job = tmp_path / fx.info["job_id"]
    shutil.copytree(fx.checkpoint_dir.parent, job)
    chk = job / fx.checkpoint_dir.name
    # Point every absolute path at a place that cannot exist on any machine.
    old_prefix = "file:" + fx.info["generated_at"] + "/checkpoints"
    gone = "file:/nonexistent-spillway-test/ckpts"
    meta = chk / "_metadata"
    cp = decode_metadata(meta.read_bytes())
    for _, h in all_stream_handles(cp):
        if isinstance(h, FileHandle):
            h.path = h.path.replace(old_prefix, gone)
    meta.write_bytes(encode_metadata(cp))
    doc = _json(str(chk))
    (rebase,) = doc["rebased"]
    assert rebase["from"] == f"{gone}/{fx.info['job_id']}" and rebase["to"] == str(job)
    local = [
        item["handle"]["local_path"]
        for op in doc["operators"]
        for s in op["subtasks"]
        for h in s["managed_keyed_state"]
        for item in h.get("shared_state", [])
        if item["handle"]["type"] == "FileStateHandle"
    ]
    assert local and all(Path(p).is_file() and p.startswith(str(job)) for p in local)
    table = runner.invoke(app, ["dump", str(chk)])
    assert f"rebased {rebase['paths']} paths" in table.output


def test_explicit_rebase_wins(tmp_path: Path) -> None:
    fx = fixture_named("2.3.0-rocksdb-incremental")
    moved = tmp_path / "elsewhere"
    shutil.copytree(fx.checkpoint_dir.parent, moved)
    old = "file:" + fx.info["generated_at"] + "/checkpoints/" + fx.info["job_id"]
    doc = _json(str(moved / fx.checkpoint_dir.name), "--rebase", f"{old}=file:{moved}")
    assert doc["rebased"] == [{"from": old, "to": f"file:{moved}", "paths": doc["rebased"][0]["paths"]}]
    result = runner.invoke(app, ["validate", str(moved / fx.checkpoint_dir.name), "--rebase", f"{old}=file:{moved}"])
    assert result.exit_code == 0, result.output


def test_help_has_examples() -> None:
    for cmd in ("dump", "validate"):
        result = runner.invoke(app, [cmd, "--help"])
        assert result.exit_code == 0 and "Examples" in result.output


def _moved_with_gone_paths(fx: Fixture, tmp_path: Path) -> Path:
    """A copy of the fixture's job whose absolute paths name a place that does not exist (rebased)."""
    job = tmp_path / fx.info["job_id"]
    shutil.copytree(fx.checkpoint_dir.parent, job)
    chk = job / fx.checkpoint_dir.name
    old_prefix = "file:" + fx.info["generated_at"] + "/checkpoints"
    cp = decode_metadata((chk / "_metadata").read_bytes())
    for _, h in all_stream_handles(cp):
        if isinstance(h, FileHandle):
            h.path = h.path.replace(old_prefix, "file:/nonexistent-spillway-test/ckpts")
    (chk / "_metadata").write_bytes(encode_metadata(cp))
    return chk


@pytest.mark.parametrize("args", [[], ["--operator", "len"], ["--subtask", "0"]])
def test_streamed_json_is_the_whole_document_at_once(tmp_path: Path, args: list[str]) -> None:
    """In a pipe, ``dump --json`` writes operator by operator; the bytes are those of the whole
    document encoded at once, with every file resolved (and every rebase counted) up front."""
    from spillway.inspect.jsonview import JsonView
    from spillway.inspect.operators import select_operators
    from spillway.storage.load import load_checkpoint

    chk = _moved_with_gone_paths(fixture_named("2.3.0-rocksdb-incremental"), tmp_path)
    result = runner.invoke(app, ["dump", str(chk), "--json", *args])
    assert result.exit_code == 0, result.output
    loaded = load_checkpoint(chk)
    loaded.resolve_files()
    operators = select_operators(loaded.checkpoint, args[1] if args[:1] == ["--operator"] else None)
    subtask = int(args[1]) if args[:1] == ["--subtask"] else None
    doc = JsonView(loaded.resolver).checkpoint(loaded.checkpoint, operators, subtask)
    doc["source"] = {
        "metadata_path": str(loaded.location.metadata_path),
        "checkpoint_dir": str(loaded.location.checkpoint_dir),
        "size": loaded.size,
        "damaged": [],
        "unsafe_paths": [],  # a checkpoint Flink wrote names no path with ".." or a NUL
    }
    doc["rebased"] = loaded.resolver.rebases()
    doc["rebase_unmatched"] = []
    assert doc["rebased"] and doc["rebased"][0]["paths"] > 1
    assert result.output == json.dumps(doc, separators=(",", ":")) + "\n"
