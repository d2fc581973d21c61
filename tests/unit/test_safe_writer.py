"""The safe writer's contract (spillway/storage/safe_writer.py), checked on real Flink checkpoints:
never overwrite, write into a hidden sibling, self-check what is on disk, rename only a checked output,
leave nothing behind on any failure — including a disk that returns other bytes than were written.

Expected bytes come from the fixtures (Flink wrote them), never from the code under test."""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import pytest
from support.fixtures import Fixture, fixture_named

from spillway.formats.errors import CheckpointFormatError
from spillway.formats.metadata_codec import decode_metadata
from spillway.model.checkpoint import CheckpointMetadata
from spillway.storage import claim, guard, safe_writer
from spillway.storage.claim import OutputBusy, claim_output
from spillway.storage.safe_writer import PlannedOutput, WriteError, write_checkpoint

FX = fixture_named("2.3.0-unaligned")
OTHER = fixture_named("1.20.3-unaligned")


def _checkpoint(fx: Fixture = FX) -> CheckpointMetadata:
    return decode_metadata(fx.metadata.read_bytes(), str(fx.metadata))


def _channel_file(fx: Fixture = FX) -> Path:
    return next(p for p in sorted(fx.checkpoint_dir.iterdir()) if p.name != "_metadata")


def _siblings(out: Path) -> set[str]:
    return {p.name for p in out.parent.iterdir()} if out.parent.exists() else set()


def _ok(tmp: Path, plan: PlannedOutput) -> str:
    return "checked"


def test_writes_flinks_bytes_and_copies_then_renames(tmp_path: Path) -> None:
    out = tmp_path / "job" / "chk-3"
    src = _channel_file()
    plan = PlannedOutput(_checkpoint(), {src: src.name, FX.oracle: "deep/er/oracle.json", FX.metadata: "deep/er/m"})
    seen: list[tuple[Path, set[str]]] = []

    def check(tmp: Path, p: PlannedOutput) -> int:
        assert p is plan and not out.exists(), "the check runs before the rename"
        seen.append((tmp, {str(f.relative_to(tmp)) for f in tmp.rglob("*") if f.is_file()}))
        return 42

    assert write_checkpoint(plan, out, check) == 42
    tmp, files = seen[0]
    assert tmp.parent == out.parent and tmp.name.startswith(".") and out.name in tmp.name and tmp != out
    assert files == {"_metadata", src.name, "deep/er/oracle.json", "deep/er/m"}
    # An unchanged checkpoint re-encodes to the bytes Flink wrote; copies are byte-exact.
    assert (out / "_metadata").read_bytes() == FX.metadata.read_bytes()
    assert (out / src.name).read_bytes() == src.read_bytes()
    assert (out / "deep/er/oracle.json").read_bytes() == FX.oracle.read_bytes()
    assert _siblings(out) == {"chk-3"}, "no temporary directory left beside the output"


def test_every_written_file_is_fsynced_before_the_check_and_the_rename(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """In order: every file of the output (its _metadata and each copy, by name) is fsynced, then every directory
    of the output, deepest first (POSIX makes a new name durable only with an fsync of its directory), then the
    caller's check runs, then the one rename publishes the directory, then the output's parent directory is
    fsynced (the rename is an entry of the parent) — a crash can never leave a renamed output whose bytes or
    names are not on disk, nor a check that read bytes not yet synced."""
    out = tmp_path / "job" / "o"
    events: list[tuple[str, str]] = []
    real_fsync, real_rename = os.fsync, os.rename

    def fsync(fd: int) -> None:
        path = os.readlink(f"/proc/self/fd/{fd}")
        if not path.endswith(".spillway.lock"):  # the claim's own record, not the output
            events.append(("fsync", path))
        real_fsync(fd)

    def rename(a: Path, b: Path) -> None:
        events.append(("rename", f"{a} -> {b}"))
        real_rename(a, b)

    def check(tmp: Path, p: PlannedOutput) -> None:
        events.append(("check", str(tmp)))

    monkeypatch.setattr(safe_writer.os, "fsync", fsync)
    monkeypatch.setattr(claim, "rename_noreplace", rename)
    src = _channel_file()
    write_checkpoint(PlannedOutput(_checkpoint(), {src: "a/b", FX.oracle: "a/c"}), out, check)
    kinds = [k for k, _ in events]
    assert kinds == ["fsync"] * 5 + ["check", "rename", "fsync"], events
    tmp = Path(events[5][1])
    assert sorted(path for _, path in events[:3]) == sorted(str(tmp / n) for n in ("_metadata", "a/b", "a/c"))
    assert [path for _, path in events[3:5]] == [str(tmp / "a"), str(tmp)], "directories after files, deepest first"
    assert events[6][1] == f"{tmp} -> {out}"
    assert events[7][1] == str(out.parent), "the parent directory, which holds the renamed name"
    assert (out / "a" / "b").read_bytes() == src.read_bytes()


def test_a_parent_directory_that_cannot_be_synced_is_reported_after_the_rename(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """fsync of the parent fails with EIO after the rename: the output is in place (the rename is not undone,
    nothing deleted) and the error says so; a file system that cannot sync directories (EINVAL) is not an
    error."""
    import errno

    out = tmp_path / "o"
    real_fsync = os.fsync

    def failing(code: int) -> object:
        def fsync(fd: int) -> None:
            if os.readlink(f"/proc/self/fd/{fd}") == str(tmp_path):
                raise OSError(code, os.strerror(code))
            real_fsync(fd)

        return fsync

    monkeypatch.setattr(safe_writer.os, "fsync", failing(errno.EIO))
    with pytest.raises(WriteError, match=r"renamed into place, but syncing .* failed .*may not survive a crash"):
        write_checkpoint(PlannedOutput(_checkpoint()), out, _ok)
    assert (out / "_metadata").read_bytes() == FX.metadata.read_bytes() and _siblings(out) == {"o"}
    monkeypatch.setattr(safe_writer.os, "fsync", failing(errno.EINVAL))
    assert write_checkpoint(PlannedOutput(_checkpoint()), tmp_path / "p", _ok) == "checked"
    assert (tmp_path / "p" / "_metadata").read_bytes() == FX.metadata.read_bytes()


def test_never_overwrites(tmp_path: Path) -> None:
    out = tmp_path / "taken"
    out.mkdir()
    (out / "keep").write_text("mine")
    with pytest.raises(WriteError, match="already exists") as info:
        write_checkpoint(PlannedOutput(_checkpoint()), out, _ok)
    assert str(out) in str(info.value)
    assert [p.name for p in out.iterdir()] == ["keep"] and (out / "keep").read_text() == "mine"
    assert _siblings(out) == {"taken"}
    (tmp_path / "file").write_text("x")
    with pytest.raises(WriteError, match="already exists"):
        claim_output(tmp_path / "file")


def test_a_claim_makes_missing_parents_and_a_second_claim_is_refused(tmp_path: Path) -> None:
    out = tmp_path / "a" / "b" / "out"
    first = claim_output(out)
    assert first.staging.is_dir() and first.staging.parent == out.parent and not any(first.staging.iterdir())
    with pytest.raises(OutputBusy, match=rf"{out}: spillway run {first.run} \(pid {os.getpid()} on "):
        claim_output(out)  # the parent exists now; a second writer is refused, not given its own directory
    assert first.staging.is_dir() and not out.exists()
    first.abandon()
    assert _siblings(out) == set()


def test_a_refused_check_leaves_nothing(tmp_path: Path) -> None:
    out = tmp_path / "o"

    def refuse(tmp: Path, plan: PlannedOutput) -> None:
        assert (tmp / "_metadata").read_bytes() == FX.metadata.read_bytes()
        raise WriteError("validate found 1 error")

    with pytest.raises(WriteError, match="validate found 1 error"):
        write_checkpoint(PlannedOutput(_checkpoint(), {_channel_file(): "x/y"}), out, refuse)
    assert not out.exists() and _siblings(out) == set()


@pytest.mark.parametrize("exc", [KeyboardInterrupt, OSError, ValueError])
def test_any_failure_while_producing_leaves_nothing(tmp_path: Path, exc: type[BaseException]) -> None:
    out = tmp_path / "o"

    def produce(tmp: Path) -> None:
        (tmp / "part").write_bytes(b"half a channel file")
        raise exc("boom")

    with pytest.raises(exc):
        write_checkpoint(PlannedOutput(_checkpoint()), out, _ok, produce)
    assert _siblings(out) == set()


def test_a_missing_copy_source_leaves_nothing(tmp_path: Path) -> None:
    out = tmp_path / "o"
    with pytest.raises(FileNotFoundError):
        write_checkpoint(PlannedOutput(_checkpoint(), {tmp_path / "gone": "gone"}), out, _ok)
    assert _siblings(out) == set()


def test_produce_writes_data_and_may_replace_the_metadata(tmp_path: Path) -> None:
    plan = PlannedOutput(_checkpoint())

    def produce(tmp: Path) -> CheckpointMetadata:
        (tmp / "channel").write_bytes(_channel_file(OTHER).read_bytes())
        return _checkpoint(OTHER)

    write_checkpoint(plan, tmp_path / "o", _ok, produce)
    assert (tmp_path / "o" / "_metadata").read_bytes() == OTHER.metadata.read_bytes()
    assert (tmp_path / "o" / "channel").read_bytes() == _channel_file(OTHER).read_bytes()
    # produce returning None keeps the planned metadata.
    write_checkpoint(PlannedOutput(_checkpoint()), tmp_path / "p", _ok, lambda tmp: None)
    assert (tmp_path / "p" / "_metadata").read_bytes() == FX.metadata.read_bytes()


def test_a_disk_returning_other_bytes_is_refused(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The self-check reads back what is on disk: a write that silently changed one byte is refused."""
    real = guard.write_all

    def flaky(fd: int, data: bytes) -> None:
        if os.readlink(f"/proc/self/fd/{fd}").endswith("/_metadata"):
            data = data[:-1] + bytes([data[-1] ^ 1])
        real(fd, data)

    monkeypatch.setattr(guard, "write_all", flaky)
    called: list[Path] = []
    with pytest.raises(WriteError, match=r"^self-check: the written _metadata does not read back identically$"):
        write_checkpoint(PlannedOutput(_checkpoint()), tmp_path / "o", lambda t, p: called.append(t))
    assert not called, "a bad write is refused before the caller's check"
    assert _siblings(tmp_path / "o") == set()


def test_metadata_that_does_not_decode_to_itself_is_refused(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Bytes on disk are right but decode to another checkpoint (a codec bug): refused."""
    other = _checkpoint(OTHER)
    monkeypatch.setattr(safe_writer, "decode_metadata", lambda data, where="": other)
    with pytest.raises(WriteError, match="does not read back identically"):
        write_checkpoint(PlannedOutput(_checkpoint()), tmp_path / "o", _ok)
    assert _siblings(tmp_path / "o") == set()


def test_planned_output_defaults() -> None:
    plan = PlannedOutput(_checkpoint())
    assert plan.copies == {} and plan.final_prefix is None
    assert PlannedOutput(_checkpoint()).copies is not plan.copies


def test_written_metadata_that_does_not_decode_is_refused_naming_the_file(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """An encoder bug writing bytes that are no _metadata at all: the decode error names the written file
    (in the temporary directory) and the byte offset, and nothing is left."""
    monkeypatch.setattr(safe_writer, "encode_metadata", lambda cp: b"not a checkpoint")
    with pytest.raises(CheckpointFormatError) as info:
        write_checkpoint(PlannedOutput(_checkpoint()), tmp_path / "o", _ok)
    where = str(info.value).split(": ")[0]
    assert Path(where).name == "_metadata" and Path(where).parent.parent == tmp_path
    assert Path(where).parent.name.startswith(".o.") and "byte 0" in str(info.value)
    assert _siblings(tmp_path / "o") == set()


def test_the_original_failure_survives_a_failed_cleanup(tmp_path: Path) -> None:
    """If the temporary directory cannot be removed (here: already gone), the user still sees why the write
    failed, not an error from the clean-up."""

    def produce(tmp: Path) -> None:
        shutil.rmtree(tmp)
        raise WriteError("the channel files could not be written")

    with pytest.raises(WriteError, match="the channel files could not be written"):
        write_checkpoint(PlannedOutput(_checkpoint()), tmp_path / "o", _ok, produce)
    assert _siblings(tmp_path / "o") == set()


def test_copies_report_progress_in_bytes(tmp_path: Path) -> None:
    """A listener sees one "copying files" stage of the copies' total size, advanced by each file's size;
    without copies there is no stage."""
    from spillway import progress

    stages: list[tuple[str, int | None, str, list[int]]] = []

    class Recorder:
        def stage(self, description: str, total: int | None, unit: str) -> progress.Stage:
            steps: list[int] = []
            stages.append((description, total, unit, steps))

            class Step:
                def advance(self, n: int = 1) -> None:
                    steps.append(n)

                def update(self, completed: int, total: int | None = None) -> None:
                    raise AssertionError("copies advance, they do not jump")

                def done(self) -> None:
                    pass

            return Step()

    src, oracle = _channel_file(), FX.oracle
    sizes = [src.stat().st_size, oracle.stat().st_size]
    with progress.listening(Recorder()):
        write_checkpoint(PlannedOutput(_checkpoint(), {src: src.name, oracle: "o.json"}), tmp_path / "a", _ok)
        write_checkpoint(PlannedOutput(_checkpoint()), tmp_path / "b", _ok)
    assert stages == [("copying files", sum(sizes), "bytes", sizes)]
