"""relocate --copy-data moving a whole job directory (chk-N, shared/, taskowned/) to a new place, on copies
of real fixtures: Flink 1.10 (and some backends) write absolute files into their own chk-N, which land inside
the output directory; the safe writer writes those into its temporary directory (they appear with the checked
output or not at all). Any failure undoes every file copied before it, and leaves nothing under the output name."""

from __future__ import annotations

import hashlib
import json
import os
import shutil
from pathlib import Path

import pytest
from click.testing import CliRunner
from support.fixtures import Fixture, all_fixtures, fixture_named

from spillway.cli.app import app
from spillway.inspect.validate import validate
from spillway.model.checkpoint import is_file_backed
from spillway.model.walk import leaf_stream_handles
from spillway.repair import workflow
from spillway.storage import guard
from spillway.storage.load import load_checkpoint
from spillway.storage.relative import relative_names
from spillway.storage.safe_writer import WriteError

runner = CliRunner()

# Every fixture whose absolute files all sit in its own job directory (the case "move the job" is for).
MOVABLE = [
    f.name
    for f in all_fixtures()
    if f.info.get("job_id") and f.info.get("checkpoint", "").startswith("checkpoints/") and f.info.get("generated_at")
]


def _digest(root: Path) -> str:
    h = hashlib.sha256()
    for p in sorted(root.rglob("*")):
        if p.is_file():
            h.update(str(p.relative_to(root)).encode() + p.read_bytes())
    return h.hexdigest()


def _old_job(fx: Fixture) -> str:
    return "file:" + fx.info["generated_at"] + "/checkpoints/" + fx.info["job_id"]


def _move(fx: Fixture, new_job: Path, *extra: str) -> tuple[int, str]:
    out = new_job / fx.checkpoint_dir.name
    res = runner.invoke(
        app,
        [
            "repair", "relocate", str(fx.checkpoint_dir), "--out", str(out),
            "--from", _old_job(fx), "--to", f"file:{new_job}", "--copy-data", "--json", *extra,
        ],
    )  # fmt: skip
    return res.exit_code, res.output


def _absolute_files(chk: Path) -> list[str]:
    cp = load_checkpoint(chk).checkpoint
    return sorted(
        {h.file_name for h in leaf_stream_handles(cp, coordinator=True) if is_file_backed(h) and not h.relative}
    )


def _files(root: Path) -> list[Path]:
    return sorted(p for p in root.rglob("*") if p.is_file()) if root.exists() else []


@pytest.mark.parametrize("name", ["1.10.3-aligned", "1.10.3-rocksdb-incremental", "2.3.0-rocksdb-incremental"])
def test_moving_the_whole_job_directory_works_and_the_result_stands_alone(name: str, tmp_path: Path) -> None:
    fx = fixture_named(name)
    before = _digest(fx.root)
    new_job = tmp_path / "new" / fx.info["job_id"]
    out = new_job / fx.checkpoint_dir.name
    code, output = _move(fx, new_job)
    assert code == 0, output
    doc = json.loads(output)
    absolute = _absolute_files(out)
    assert absolute, "the fixture names absolute files"
    assert all(f.startswith(f"file:{new_job}/") for f in absolute), absolute
    copied = {c["what"]: c["count"] for c in doc["changes"]}["referenced files copied to their new location"]
    assert copied == len(absolute)
    # Every file is where the new metadata says, byte for byte the source's, and nothing else was written.
    src_job = fx.checkpoint_dir.parent
    for name_ in absolute:
        path = Path(name_.removeprefix("file:"))
        assert path.read_bytes() == (src_job / path.relative_to(new_job)).read_bytes()
    relative = {out / n for n in relative_names(load_checkpoint(out).checkpoint)}
    expected = {Path(f.removeprefix("file:")) for f in absolute} | relative | {out / "_metadata"}
    assert set(_files(new_job)) == expected
    assert not [p for p in new_job.rglob("*") if "partial" in p.name]
    # The moved checkpoint stands alone: validate without any rebasing finds nothing, with the plan too.
    report = validate(load_checkpoint(out), None)
    assert not report.errors and report.files_checked == len(absolute) + len(relative)
    assert _digest(fx.root) == before, "the source must not change"


@pytest.mark.parametrize("name", MOVABLE)
def test_every_fixture_moves_as_a_whole_job(name: str, tmp_path: Path) -> None:
    fx = fixture_named(name)
    new_job = tmp_path / "n" / fx.info["job_id"]
    code, output = _move(fx, new_job)
    assert code == 0, output
    assert not validate(load_checkpoint(new_job / fx.checkpoint_dir.name), None).errors


def _refusing_check(*args: object, **kwargs: object):
    def check(tmp: Path, plan: object) -> None:
        assert any(tmp.rglob("*")), "the check sees the written output"
        raise WriteError("self-check: injected failure")

    return check


@pytest.mark.parametrize("name", ["1.10.3-aligned", "1.10.3-rocksdb-incremental", "2.3.0-rocksdb-incremental"])
def test_a_failed_self_check_undoes_every_copy(name: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    fx = fixture_named(name)
    monkeypatch.setattr(workflow, "validated_output", _refusing_check)
    new_job = tmp_path / "new" / fx.info["job_id"]
    code, output = _move(fx, new_job)
    assert code == 1 and "injected failure" in output, output
    assert _files(tmp_path / "new") == [], "no copied file stays behind"
    assert not (new_job / fx.checkpoint_dir.name).exists()
    assert not (new_job / "shared").exists() and not (new_job / "taskowned").exists()


def test_a_full_disk_mid_copy_undoes_the_files_already_copied(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """ENOSPC injected at the writer's one low-level write, half-way into the third data file: an I/O error
    (exit 3) naming the destination being written, and no file left under --to nor under --out."""
    fx = fixture_named("1.10.3-rocksdb-incremental")
    real = guard.write_all
    files: list[str] = []

    def write_all(fd: int, data: bytes) -> None:
        path = os.readlink(f"/proc/self/fd/{fd}")
        if path not in files:
            files.append(path)
        if len(files) == 3:
            real(fd, data[: len(data) // 2])  # a partly written file
            raise OSError(28, "No space left on device")
        real(fd, data)

    monkeypatch.setattr(guard, "write_all", write_all)
    new_job = tmp_path / "new" / fx.info["job_id"]
    code, output = _move(fx, new_job)
    assert code == 3 and len(files) == 3, output
    error = json.loads(next(line for line in output.splitlines() if line.startswith("{")))  # stdout; stderr too
    assert error["category"] == "storage", error
    # The copy's staged name, in the run's staging directory under --to: the message names its destination.
    staging, *below = Path(files[2]).relative_to(new_job).parts
    assert staging.startswith(".spillway-") and staging.endswith(".partial"), files[2]
    destination = new_job.joinpath(*below)
    assert error["error"] == (
        f"{destination}: cannot write: No space left on device (errno 28); nothing was left behind"
    ), error
    assert _files(tmp_path / "new") == [] and not (new_job / fx.checkpoint_dir.name).exists()


def test_an_existing_output_is_refused_before_any_data_is_copied(tmp_path: Path) -> None:
    fx = fixture_named("1.10.3-rocksdb-incremental")
    new_job = tmp_path / "new" / fx.info["job_id"]
    (new_job / fx.checkpoint_dir.name).mkdir(parents=True)
    code, output = _move(fx, new_job)
    assert code == 1 and "already exists" in output
    assert [p.name for p in new_job.iterdir()] == [fx.checkpoint_dir.name], "no shared/ copied"


def test_files_already_at_the_destination_with_the_same_bytes_are_kept_and_not_undone(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    fx = fixture_named("1.10.3-rocksdb-incremental")
    new_job = tmp_path / "new" / fx.info["job_id"]
    shutil.copytree(fx.checkpoint_dir.parent / "shared", new_job / "shared")  # a previous move's shared files
    kept = _digest(new_job)
    monkeypatch.setattr(workflow, "validated_output", _refusing_check)
    code, _ = _move(fx, new_job)
    assert code == 1
    assert _digest(new_job) == kept, "files this run did not write are not deleted"
    one = next((new_job / "shared").iterdir())
    one.write_bytes(one.read_bytes()[:-1] + b"\x00")  # same size, other bytes
    monkeypatch.undo()
    code, output = _move(fx, new_job)
    assert code == 1 and "different content" in output
