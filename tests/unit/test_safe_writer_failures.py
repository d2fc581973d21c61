"""The safe writer (spillway/storage/safe_writer.py) on its failure paths, on real Flink checkpoints: a refused
check, an exception mid-copy, a SIGKILL mid-write, an existing output, and the rename only after the check.

Every test watches the output name *while* the writer works (not only afterwards), so it fails if the writer
wrote straight into the output (no temporary directory + rename) or skipped its check; checked by hand by
mutating the writer both ways (see the report of the change that added this file)."""

from __future__ import annotations

import os
import re
import shutil
import signal
import subprocess
import sys
from pathlib import Path

import pytest
from support.fixtures import fixture_named

from spillway.formats.metadata_codec import decode_metadata
from spillway.model.checkpoint import CheckpointMetadata
from spillway.notices import collecting
from spillway.storage import claim, guard
from spillway.storage.locate import locate_checkpoint
from spillway.storage.safe_writer import OutputIOError, PlannedOutput, WriteError, write_checkpoint

FX = fixture_named("2.3.0-unaligned")
REPO = Path(__file__).parents[2]
PARTIAL = re.compile(r"^\.(?P<out>.+)\.spillway-[0-9a-f]{8}\.partial$")


def _checkpoint() -> CheckpointMetadata:
    return decode_metadata(FX.metadata.read_bytes(), str(FX.metadata))


def _data_files() -> list[Path]:
    return sorted(p for p in FX.checkpoint_dir.iterdir() if p.name != "_metadata")


def _plan() -> PlannedOutput:
    """The fixture's own metadata and channel-state files: what a relocate or repair copies."""
    return PlannedOutput(_checkpoint(), {p: p.name for p in _data_files()})


def _names(parent: Path) -> set[str]:
    return {p.name for p in parent.iterdir()} if parent.exists() else set()


def test_an_output_the_check_rejects_is_never_renamed_into_place(tmp_path: Path) -> None:
    out = tmp_path / "chk-9"
    seen: list[Path] = []

    def refuse(tmp: Path, plan: PlannedOutput) -> None:
        # The check sees the complete output, under another name; nothing is under the output name yet.
        assert tmp != out and not out.exists() and PARTIAL.match(tmp.name)["out"] == out.name  # type: ignore[index]
        assert {p.name for p in tmp.iterdir()} == {"_metadata", *(p.name for p in _data_files())}
        seen.append(tmp)
        raise WriteError("self-check: validate found 1 error")

    with pytest.raises(WriteError, match="validate found 1 error"):
        write_checkpoint(_plan(), out, refuse)
    assert seen, "the check ran"
    assert not out.exists() and _names(tmp_path) == set(), "no output and no temporary directory"


def test_a_full_disk_mid_copy_leaves_nothing_and_names_the_output_file(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """ENOSPC injected at the writer's one low-level write, half-way into the second file: an I/O error
    (exit 3) naming the output path being written (not the source, not the staging name), and nothing left."""
    out = tmp_path / "chk-9"
    real = guard.write_all
    written: list[str] = []
    checked: list[Path] = []

    def write_all(fd: int, data: bytes) -> None:
        path = os.readlink(f"/proc/self/fd/{fd}")
        assert not out.exists(), "files are written under a temporary name, not into the output"
        if written and path not in written:
            real(fd, data[: len(data) // 2])
            raise OSError(28, "No space left on device")
        written.append(path)
        real(fd, data)

    monkeypatch.setattr(guard, "write_all", write_all)
    plan = _plan()
    plan.copies[FX.oracle] = "sub/oracle.json"  # a second file, in a directory of its own
    with pytest.raises(OutputIOError) as info:
        write_checkpoint(plan, out, lambda tmp, plan: checked.append(tmp))
    second = list(plan.copies.values())[1]
    expected = f"{out / second}: cannot write: No space left on device (errno 28); nothing was left behind"
    assert str(info.value) == expected
    assert info.value.exit_code == 3
    assert len(written) == 1 and not checked, "failed in the second file, before any check"
    assert not Path(written[0]).exists() and _names(tmp_path) == set()


_KILLED_WRITER = """
import os, sys, time
from pathlib import Path
from spillway.formats.metadata_codec import decode_metadata
from spillway.storage import guard, safe_writer

meta, big, out = map(Path, sys.argv[1:4])
real = guard.write_all

def slow_write_all(fd, data):  # a large copy on a slow disk: 1 MiB at a time
    real(fd, data)
    print("copied", os.lseek(fd, 0, os.SEEK_CUR), flush=True)
    time.sleep(0.02)

guard.CHUNK = 1 << 20
guard.write_all = slow_write_all
cp = decode_metadata(meta.read_bytes(), str(meta))
safe_writer.write_checkpoint(safe_writer.PlannedOutput(cp, {big: "big"}), out, lambda tmp, plan: None)
print("done", flush=True)
"""


def test_a_writer_killed_mid_write_leaves_no_output_and_the_next_run_is_not_fooled(tmp_path: Path) -> None:
    job = tmp_path / "job"
    shutil.copytree(FX.checkpoint_dir, job / "chk-3")  # the job's real, older checkpoint
    big = tmp_path / "big"
    big.write_bytes(os.urandom(1 << 20) * 64)  # 64 MiB
    out = job / "chk-9"
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(REPO), os.environ.get("PYTHONPATH", "")])}
    proc = subprocess.Popen(
        [sys.executable, "-c", _KILLED_WRITER, str(FX.metadata), str(big), str(out)],
        stdout=subprocess.PIPE,
        text=True,
        env=env,
    )
    assert proc.stdout is not None
    for _ in range(3):  # mid-copy: 3 of 64 MiB written
        assert proc.stdout.readline().startswith("copied")
    os.kill(proc.pid, signal.SIGKILL)
    assert proc.wait(timeout=30) == -signal.SIGKILL

    # Nothing under the output name; the killed writer's claim and hidden staging directory, without _metadata.
    assert not out.exists()
    assert (job / ".chk-9.spillway.lock").is_file()
    leftovers = _names(job) - {"chk-3", ".chk-9.spillway.lock"}
    assert len(leftovers) == 1 and PARTIAL.match(next(iter(leftovers)))["out"] == "chk-9"  # type: ignore[index]
    partial = job / next(iter(leftovers))
    assert not (partial / "_metadata").exists() and 0 < (partial / "big").stat().st_size < big.stat().st_size

    # Nothing mistakes the leftover for a checkpoint: the job's newest checkpoint is still chk-3 ...
    assert locate_checkpoint(job).metadata_path == job / "chk-3" / "_metadata"
    # ... and the next run writes chk-9 (the leftover is neither "already exists" nor reused), removing the dead
    # run's staging directory with a notice naming that run.
    with collecting() as notes:
        write_checkpoint(PlannedOutput(_checkpoint(), {big: "big"}), out, lambda tmp, plan: None)
    assert (out / "big").read_bytes() == big.read_bytes()
    assert (out / "_metadata").read_bytes() == FX.metadata.read_bytes()
    assert locate_checkpoint(job).metadata_path == out / "_metadata"
    assert _names(job) == {"chk-3", "chk-9"}, "the killed run's staging directory and claim are gone"
    assert len(notes) == 1 and f"pid {proc.pid} on " in notes[0] and partial.name in notes[0], notes


def test_an_existing_output_is_refused_and_left_as_it_was(tmp_path: Path) -> None:
    out = tmp_path / "chk-9"
    shutil.copytree(FX.checkpoint_dir, out)
    before = {p.name: p.read_bytes() for p in out.iterdir()}
    checked: list[Path] = []
    with pytest.raises(WriteError, match=r"chk-9: already exists; spillway never overwrites"):
        write_checkpoint(_plan(), out, lambda tmp, plan: checked.append(tmp))
    assert not checked
    assert {p.name: p.read_bytes() for p in out.iterdir()} == before
    assert _names(tmp_path) == {"chk-9"}, "no temporary directory either"


def test_the_rename_comes_only_after_the_check(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    out = tmp_path / "chk-9"
    events: list[str] = []
    real_rename = claim.rename_noreplace

    def rename(src: Path, dst: Path) -> None:
        events.append(f"rename {Path(src).name} -> {Path(dst).name}")
        real_rename(src, dst)

    def check(tmp: Path, plan: PlannedOutput) -> str:
        assert not out.exists(), "nothing under the output name while the check runs"
        events.append(f"check {tmp.name} ({len(list(tmp.iterdir()))} files)")
        return "ok"

    monkeypatch.setattr(claim, "rename_noreplace", rename)
    assert write_checkpoint(_plan(), out, check) == "ok"
    assert len(events) == 2 and events[0].startswith("check ") and events[1].startswith("rename ")
    tmp_name = events[0].split()[1]
    assert events[1] == f"rename {tmp_name} -> chk-9" and PARTIAL.match(tmp_name)
    assert events[0].endswith(f"({len(_data_files()) + 1} files)")
    assert _names(tmp_path) == {"chk-9"}
    assert (out / "_metadata").read_bytes() == FX.metadata.read_bytes()
    assert all((out / p.name).read_bytes() == p.read_bytes() for p in _data_files())
