"""The one door for writing (spillway/storage/guard.py) and the output's claim (spillway/storage/claim.py).

Each test plants something outside the root — a sentinel directory — and checks it is byte-identical
afterwards, so it fails if the confinement, the identity check, the claim or the clean-up is removed."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
from pathlib import Path

import pytest
from support.fixtures import fixture_named
from support.trees import tree

from spillway.notices import collecting
from spillway.storage import claim as claims
from spillway.storage.claim import OutputBusy, claim_output, claimed, lock_path, rename_noreplace
from spillway.storage.guard import EscapeError, Guard, OutputIOError, WriteError, plain_parts

FX = fixture_named("2.3.0-unaligned")
DATA = next(p for p in sorted(FX.checkpoint_dir.iterdir()) if p.name != "_metadata")


@pytest.fixture
def sentinel(tmp_path: Path) -> Path:
    s = tmp_path / "sentinel"
    (s / "victim").mkdir(parents=True)
    (s / "victim" / "state-1").write_bytes(b"precious, not spillway's")
    return s


@pytest.mark.parametrize("name", ["", ".", "..", "a/../b", "/etc/passwd", "a//b", "nul\0byte", "a/./b"])
def test_a_name_that_is_not_plain_is_refused(name: str) -> None:
    with pytest.raises(EscapeError, match="not a plain relative path"):
        plain_parts(name)


def test_targets_escaping_by_dots_absolute_paths_or_symlinks_are_refused_before_any_write(
    tmp_path: Path, sentinel: Path
) -> None:
    root = tmp_path / "to"
    (root / "J").mkdir(parents=True)
    (root / "J" / "shared").symlink_to(sentinel / "victim")  # planted in the output tree
    before = tree(sentinel)
    guard = Guard(root)
    escaping = [
        f"{root}/J/chk-3/../../../sentinel/victim/state-1",  # a '..' from a handle
        str(sentinel / "victim" / "state-1"),  # an absolute path elsewhere
        f"{root}/J/shared/state-1",  # below the root as written, but resolves through the symlink
        f"{root}/J/x\0y",
    ]
    for target in escaping:
        with pytest.raises(EscapeError):
            guard.parts_of(target)
    # Even a target that slips past the path check (a symlink swapped in after it) cannot be followed: every
    # directory is opened relative to its parent, without following a symlink.
    with pytest.raises(EscapeError, match="a symlink or non-directory in the output tree"):
        guard.copy_file(DATA, ("J", "shared", "state-1"))
    guard.close()
    assert tree(sentinel) == before
    assert guard.parts_of(f"{root}/J/chk-3/a") == ("J", "chk-3", "a")


def test_an_existing_file_is_never_opened_for_writing(tmp_path: Path) -> None:
    (tmp_path / "f").write_bytes(b"theirs")
    guard = Guard(tmp_path)
    with pytest.raises(WriteError, match="already exists; spillway never overwrites"):
        guard.write_file(("f",), [b"ours"])
    assert (tmp_path / "f").read_bytes() == b"theirs"


def test_undo_removes_only_what_the_run_made_and_still_is(tmp_path: Path) -> None:
    root = tmp_path / "to"
    guard = Guard.opening(root / "deep")
    guard.copy_file(DATA, ("a", "mine"))
    guard.copy_file(DATA, ("a", "replaced"))
    guard.copy_file(DATA, ("b", "c"))
    # Meanwhile someone else replaces one of our files and puts a file of theirs into one of our directories.
    # (ours is moved aside, not deleted: a freed inode number may be given to the next new file at once)
    os.rename(root / "deep" / "a" / "replaced", tmp_path / "aside")
    (root / "deep" / "a" / "replaced").write_bytes(b"someone else's")
    (root / "deep" / "b" / "theirs").write_bytes(b"someone else's")
    guard.remove_all()
    guard.close()
    assert tree(root) == {
        "deep": "dir",
        "deep/a": "dir",
        "deep/a/replaced": b"someone else's",
        "deep/b": "dir",
        "deep/b/theirs": b"someone else's",
    }
    empty = Guard.opening(tmp_path / "x" / "y")
    empty.copy_file(DATA, ("z",))
    empty.remove_all()
    empty.close()
    assert not (tmp_path / "x").exists(), "directories the run made above the root go too"


def test_place_copy_links_into_place_keeps_identical_files_and_refuses_different_ones(tmp_path: Path) -> None:
    guard = Guard(tmp_path)
    assert guard.place_copy(DATA, ("s", "one"), "0123abcd") is True
    assert (tmp_path / "s" / "one").read_bytes() == DATA.read_bytes()
    assert [p.name for p in (tmp_path / "s").iterdir()] == ["one"], "the staged name is gone"
    assert guard.place_copy(DATA, ("s", "one"), "0123abcd") is False, "an identical file is kept"
    (tmp_path / "s" / "two").write_bytes(b"other bytes")
    with pytest.raises(WriteError, match="exists with different content; not overwritten"):
        guard.place_copy(DATA, ("s", "two"), "0123abcd")
    assert (tmp_path / "s" / "two").read_bytes() == b"other bytes"
    guard.close()


def test_a_write_the_disk_refuses_names_the_output_path(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from spillway.storage import guard as door

    def full(fd: int, data: bytes) -> None:
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(door, "write_all", full)
    (tmp_path / "staging").mkdir()
    guard = Guard(tmp_path / "staging", shown=Path("/out/chk-3"))
    with pytest.raises(OutputIOError) as info:
        guard.write_file(("op", "file"), [b"x"])
    assert str(info.value) == "/out/chk-3/op/file: cannot write: No space left on device (errno 28)"
    assert info.value.exit_code == 3
    guard.remove_all()
    guard.close()
    assert not any((tmp_path / "staging").iterdir()), "the half-made file and its directory are gone"


# ------------------------------------------------------------------------------------------------ the claim


def test_one_claim_per_output_and_the_loser_touches_nothing(tmp_path: Path) -> None:
    out = tmp_path / "out"
    with claimed(out) as first:
        (first.staging / "data").write_bytes(b"the winner's")
        header = json.loads(lock_path(out).read_text().splitlines()[0])
        assert (header["pid"], header["host"], header["staging"]) == (
            os.getpid(),
            socket.gethostname(),
            first.staging.name,
        )
        assert header["start"] == claims.process_start(os.getpid()) is not None
        other = subprocess.run(
            [sys.executable, "-c", "import sys, pathlib, spillway.storage.claim as c;"
             "c.claim_output(pathlib.Path(sys.argv[1]))", str(out)],
            capture_output=True, text=True, env={**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)},
        )  # fmt: skip
        assert other.returncode == 1 and "OutputBusy" in other.stderr
        assert f"spillway run {first.run} (pid {os.getpid()} on {socket.gethostname()}" in other.stderr
        assert (first.staging / "data").read_bytes() == b"the winner's"
        first.publish()
    assert sorted(p.name for p in tmp_path.iterdir()) == ["out"] and (out / "data").read_bytes() == b"the winner's"


def test_a_loser_never_removes_the_empty_lock_the_winner_holds(tmp_path: Path) -> None:
    """The window between the winner's flock and its header: the lock file is still empty. A loser that removed
    it made the winner lose its lock by name, and both runs gave up (the concurrency fault suite saw it)."""
    import fcntl

    out = tmp_path / "out"
    lock = lock_path(out)
    holder = subprocess.Popen(
        [sys.executable, "-c", "import fcntl, os, sys, time; fd = os.open(sys.argv[1], os.O_RDWR | os.O_CREAT);"
         "fcntl.flock(fd, fcntl.LOCK_EX); print('held', flush=True); time.sleep(60)", str(lock)],
        stdout=subprocess.PIPE, text=True,
    )  # fmt: skip
    try:
        assert holder.stdout is not None and holder.stdout.readline().strip() == "held"
        before = os.stat(lock)
        assert before.st_size == 0
        with pytest.raises(OutputBusy):
            claim_output(out)
        after = os.stat(lock)
        assert (after.st_dev, after.st_ino) == (before.st_dev, before.st_ino)
        fd = os.open(lock, os.O_RDONLY)
        try:
            with pytest.raises(BlockingIOError):
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)  # still the holder's
        finally:
            os.close(fd)
    finally:
        holder.kill()
        holder.wait()


def test_a_stale_claim_of_a_dead_run_is_cleared_with_a_notice(tmp_path: Path, sentinel: Path) -> None:
    out = tmp_path / "out"
    dead = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True, text=True)
    pid = int(dead.stdout)
    staging = tmp_path / ".out.spillway-deadbeef.partial"
    (staging / "half").mkdir(parents=True)
    copied = tmp_path / "to" / "shared" / "f"
    copied.parent.mkdir(parents=True)
    copied.write_bytes(b"copied by the dead run")
    st = copied.stat()
    replaced = tmp_path / "to" / "shared" / "g"
    replaced.write_bytes(b"someone else's file where the dead run had one")
    before = tree(sentinel)
    entries = [
        {"run": "deadbeef", "pid": pid, "start": "1", "host": socket.gethostname(), "staging": staging.name},
        {"dir": str(tmp_path / "to" / "shared")},
        {"file": str(copied), "dev": st.st_dev, "ino": st.st_ino},
        {"file": str(replaced), "dev": st.st_dev, "ino": st.st_ino + 10**9},  # not the entry that run made
        {"file": str(sentinel / "victim" / "state-1"), "dev": 0, "ino": 0},  # a journal naming a stranger's file
    ]
    lock_path(out).write_text("".join(json.dumps(e) + "\n" for e in entries) + '{"torn')
    with collecting() as notes:
        fresh = claim_output(out)
    assert not staging.exists() and not copied.exists()
    assert replaced.read_bytes() == b"someone else's file where the dead run had one"
    assert tree(sentinel) == before
    assert len(notes) == 1 and f"pid {pid} on {socket.gethostname()}" in notes[0] and staging.name in notes[0]
    assert "and 1 files it had copied" in notes[0]
    fresh.abandon()
    assert sorted(p.name for p in tmp_path.iterdir()) == ["sentinel", "to"]


def test_a_claim_from_another_host_is_refused_with_what_to_remove(tmp_path: Path) -> None:
    out = tmp_path / "out"
    staging = tmp_path / ".out.spillway-deadbeef.partial"
    staging.mkdir()
    head = {"run": "deadbeef", "pid": 1, "start": "1", "host": "elsewhere.example", "staging": staging.name}
    lock_path(out).write_text(json.dumps(head) + "\n")
    with pytest.raises(OutputBusy, match=rf"another host.*delete {lock_path(out)} and {staging}"):
        claim_output(out)
    assert staging.is_dir() and lock_path(out).is_file(), "nothing of the other host's run is touched"


def test_publishing_never_replaces_even_an_empty_directory(tmp_path: Path) -> None:
    out = tmp_path / "out"
    c = claim_output(out)
    out.mkdir()  # appears while the run writes (a plain rename would replace an empty directory)
    with pytest.raises(WriteError, match="appeared while this run was writing"):
        c.publish()
    c.abandon()
    assert sorted(p.name for p in tmp_path.iterdir()) == ["out"] and not any(out.iterdir())
    (tmp_path / "a").mkdir()
    with pytest.raises(FileExistsError):
        rename_noreplace(tmp_path / "a", out)


def test_a_staging_directory_no_lock_names_is_removed_with_a_notice(tmp_path: Path) -> None:
    out = tmp_path / "out"
    orphan = tmp_path / ".out.spillway-0badc0de.partial"
    (orphan / "sub").mkdir(parents=True)
    (orphan / "_metadata").write_bytes(b"a killed run's")
    other = tmp_path / ".other.spillway-0badc0de.partial"  # another output's: not this claim's to judge
    other.mkdir()
    with collecting() as notes:
        c = claim_output(out)
    assert not orphan.exists() and other.is_dir()
    assert notes == [f"{out}: removed 1 staging directories left behind by runs that are gone: {orphan.name}"]
    c.abandon()
