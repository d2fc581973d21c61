"""The one door for writing (spillway/storage/guard.py), case by case: what the claim's journal hears, the
modes of what is made, the names errors give, staged copies placed under a race, and an undo that never
takes what is not the run's own. Expected values come from the paths each test makes and from the
guard's documented contract (module docstring), never from the guard's own output."""

from __future__ import annotations

import errno
import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from support.fixtures import fixture_named
from support.trees import tree

from spillway.storage import guard as door
from spillway.storage.guard import EscapeError, Guard, OutputIOError, TargetExists, WriteError, cannot_write

FX = fixture_named("2.3.0-unaligned")
DATA = next(p for p in sorted(FX.checkpoint_dir.iterdir()) if p.name != "_metadata")


@pytest.fixture
def umask0() -> Iterator[None]:
    old = os.umask(0)
    try:
        yield
    finally:
        os.umask(old)


def test_the_journal_hears_every_entry_and_the_undo_takes_them_all(tmp_path: Path) -> None:
    heard: list[dict[str, Any]] = []
    root = tmp_path / "p" / "q"
    guard = Guard.opening(root, journal=heard.append)
    guard.write_file(("a", "b", "f"), [b"x"])
    assert guard.place_copy(DATA, ("a", "b", "c"), "r1") is True
    placed = os.stat(root / "a" / "b" / "c")
    assert heard == [
        {"dir": str(tmp_path / "p")},
        {"dir": str(root)},
        {"dir": str(root / "a")},
        {"dir": str(root / "a" / "b")},
        {"tmp": str(root / "a" / "b" / ".c.spillway-r1.partial")},
        {"file": str(root / "a" / "b" / "c"), "dev": placed.st_dev, "ino": placed.st_ino},
    ]
    assert tree(root) == {"a": "dir", "a/b": "dir", "a/b/c": DATA.read_bytes(), "a/b/f": b"x"}
    guard.remove_all()
    guard.remove_all()  # a second undo finds nothing left to do
    guard.close()
    assert not (tmp_path / "p").exists()


def test_files_and_directories_are_made_with_modes_0644_and_0755(tmp_path: Path, umask0: None) -> None:
    guard = Guard(tmp_path)
    guard.write_file(("d", "f"), [b"x"])
    guard.close()
    assert (tmp_path / "d").stat().st_mode & 0o777 == 0o755
    assert (tmp_path / "d" / "f").stat().st_mode & 0o777 == 0o644


def test_each_file_is_synced_unless_the_caller_syncs_thetree(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    synced: list[int] = []
    real = os.fsync
    monkeypatch.setattr(os, "fsync", lambda fd: (synced.append(fd), real(fd))[1])
    guard = Guard(tmp_path)
    guard.write_file(("f",), [b"x"])
    assert len(synced) == 1
    Guard(tmp_path, sync=False).write_file(("g",), [b"x"])
    assert len(synced) == 1
    guard.close()


def test_the_root_must_be_a_directory(tmp_path: Path) -> None:
    (tmp_path / "file").write_bytes(b"x")
    with pytest.raises(NotADirectoryError):
        Guard(tmp_path / "file")


def test_closing_twice_closes_nothing_else(tmp_path: Path) -> None:
    guard = Guard(tmp_path)
    guard.close()
    guard.close()
    for fd in (0, 1, 2):
        os.fstat(fd)  # still open: raises OSError if a second close took one of them


def test_a_descriptor_already_gone_does_not_fail_the_close(tmp_path: Path) -> None:
    guard = Guard(tmp_path)
    os.close(guard.fd)
    guard.close()


def test_cannot_write_gives_the_reason_and_the_errno_when_there_is_one() -> None:
    assert str(cannot_write("/o/f", OSError(errno.ENOSPC, "No space left on device"))) == (
        "/o/f: cannot write: No space left on device (errno 28)"
    )
    assert str(cannot_write(Path("/o/f"), OSError("bad sector"))) == "/o/f: cannot write: bad sector"


def test_a_directory_above_the_root_that_cannot_be_made_is_named(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    def refused(path: Any, *args: Any, **kwargs: Any) -> None:
        raise PermissionError(errno.EACCES, "Permission denied")

    monkeypatch.setattr(os, "mkdir", refused)
    with pytest.raises(OutputIOError) as info:
        Guard.opening(tmp_path / "out")
    assert str(info.value) == f"{tmp_path / 'out'}: cannot write: Permission denied (errno 13)"


def test_a_directory_above_the_root_made_meanwhile_by_another_run_is_used(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    real = os.mkdir

    def raced(path: Any, *args: Any, **kwargs: Any) -> None:
        real(path, *args, **kwargs)
        if Path(path) == tmp_path / "a":
            raise FileExistsError(errno.EEXIST, "File exists")

    monkeypatch.setattr(os, "mkdir", raced)
    guard = Guard.opening(tmp_path / "a" / "b" / "c")
    guard.remove_all()
    guard.close()
    assert tree(tmp_path) == {"a": "dir"}, "what the other run made stays; what this run made goes"


def test_parts_of_accepts_the_root_as_spelled_and_as_resolved(tmp_path: Path) -> None:
    (tmp_path / "real").mkdir()
    (tmp_path / "link").symlink_to(tmp_path / "real")
    guard = Guard(tmp_path / "link")
    assert guard.parts_of(f"{tmp_path}/link/a/b") == ("a", "b")
    assert guard.parts_of(f"{tmp_path}/real/a/b") == ("a", "b")
    assert guard.parts_of(f"{tmp_path}/link/dirX/") == ("dirX",), "a trailing '/' is dropped, names kept"
    guard.close()


def test_parts_of_names_the_target_and_the_root_when_it_refuses(tmp_path: Path) -> None:
    root = tmp_path / "to"
    root.mkdir()
    (root / "out").symlink_to(tmp_path)
    guard = Guard(root)
    with pytest.raises(EscapeError, match="a NUL byte in a target path"):
        guard.parts_of(f"{root}/a\0b")
    for target, says in [
        (f"{root}/a/../b", f"{root}/a/../b: a '..' or '.' below {root}"),
        ("/elsewhere/x", f"/elsewhere/x: outside {root}"),
        (f"{root}/out/x", f"{root}/out/x: resolves to {tmp_path / 'x'}, outside {root}"),
    ]:
        with pytest.raises(EscapeError) as info:
            guard.parts_of(target)
        assert str(info.value).startswith(says), str(info.value)
    guard.close()


def test_a_planted_symlink_is_named_where_it_is(tmp_path: Path) -> None:
    (tmp_path / "elsewhere").mkdir()
    (tmp_path / "root" / "a").mkdir(parents=True)
    (tmp_path / "root" / "a" / "b").symlink_to(tmp_path / "elsewhere")
    guard = Guard(tmp_path / "root")
    with pytest.raises(EscapeError) as info:
        guard.write_file(("a", "b", "c", "f"), [b"x"])
    assert (
        str(info.value)
        == f"{tmp_path / 'root' / 'a' / 'b'}: a symlink or non-directory in the output tree; nothing written there"
    )
    guard.close()
    assert not any((tmp_path / "elsewhere").iterdir())


@pytest.mark.parametrize("named", [None, Path("/out/chk-3/op/f")])
def test_a_refused_directory_names_the_file_written(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, named: Path | None
) -> None:
    def full(path: Any, *args: Any, **kwargs: Any) -> None:
        raise OSError(errno.ENOSPC, "No space left on device")

    guard = Guard(tmp_path)
    monkeypatch.setattr(os, "mkdir", full)
    with pytest.raises(OutputIOError) as info:
        guard.write_file(("op", "f"), [b"x"], named)
    assert str(info.value) == f"{named or tmp_path / 'op' / 'f'}: cannot write: No space left on device (errno 28)"
    guard.close()


def test_an_existing_file_and_a_full_disk_name_the_file_the_copy_is_for(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    named = Path("/out/chk-3/op/f")
    (tmp_path / "f").write_bytes(b"theirs")
    guard = Guard(tmp_path)
    with pytest.raises(WriteError) as info:
        guard.copy_file(DATA, ("f",), named)
    assert str(info.value) == f"{named}: already exists; spillway never overwrites"

    def full(fd: int, data: bytes) -> None:
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(door, "write_all", full)
    with pytest.raises(OutputIOError) as info2:
        guard.write_file(("g",), [b"x"], named)
    assert str(info2.value) == f"{named}: cannot write: No space left on device (errno 28)"
    with pytest.raises(OutputIOError) as info3:
        guard.place_copy(DATA, ("s", "t"), "r1")
    assert str(info3.value) == f"{tmp_path / 's' / 't'}: cannot write: No space left on device (errno 28)"
    guard.remove_all()
    guard.close()
    assert tree(tmp_path) == {"f": b"theirs"}


def test_place_copy_places_a_new_file_in_a_directory_that_exists(tmp_path: Path) -> None:
    (tmp_path / "a" / "b").mkdir(parents=True)
    guard = Guard(tmp_path)
    assert guard.place_copy(DATA, ("a", "b", "c"), "r1") is True
    assert guard.place_copy(DATA, ("a", "b", "c"), "r2") is False, "an identical file is kept"
    guard.close()
    assert tree(tmp_path) == {"a": "dir", "a/b": "dir", "a/b/c": DATA.read_bytes()}


@pytest.mark.parametrize("same", [True, False])
def test_a_file_that_appears_while_the_copy_is_staged_is_never_replaced(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, same: bool
) -> None:
    theirs = DATA.read_bytes() if same else b"someone else's"
    real = os.link

    def raced(src: Any, dst: Any, **kwargs: Any) -> None:
        (tmp_path / "a" / "b" / "c").write_bytes(theirs)
        real(src, dst, **kwargs)

    guard = Guard(tmp_path)
    monkeypatch.setattr(os, "link", raced)
    if same:
        assert guard.place_copy(DATA, ("a", "b", "c"), "r1") is False
    else:
        with pytest.raises(WriteError) as info:
            guard.place_copy(DATA, ("a", "b", "c"), "r1")
        assert str(info.value) == f"{tmp_path / 'a' / 'b' / 'c'}: exists with different content; not overwritten"
    guard.close()
    assert tree(tmp_path) == {"a": "dir", "a/b": "dir", "a/b/c": theirs}, "the staged copy is gone"


def test_a_link_the_file_system_refuses_names_the_target(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    def refused(src: Any, dst: Any, **kwargs: Any) -> None:
        raise OSError(errno.EMLINK, "Too many links")

    guard = Guard(tmp_path)
    monkeypatch.setattr(os, "link", refused)
    with pytest.raises(OutputIOError) as info:
        guard.place_copy(DATA, ("a", "b", "c"), "r1")
    assert str(info.value) == f"{tmp_path / 'a' / 'b' / 'c'}: cannot write: Too many links (errno 31)"
    guard.remove_all()
    guard.close()
    assert tree(tmp_path) == {}


def test_place_copy_never_follows_a_symlink_at_the_target_or_above_it(tmp_path: Path) -> None:
    (tmp_path / "outside").mkdir()
    (tmp_path / "outside" / "c").write_bytes(DATA.read_bytes())  # identical bytes: still not ours
    root = tmp_path / "root"
    (root / "a").mkdir(parents=True)
    (root / "a" / "c").symlink_to(tmp_path / "outside" / "c")
    (root / "d").symlink_to(tmp_path / "outside")
    guard = Guard(root)
    for parts, named in [(("a", "c"), root / "a" / "c"), (("d", "c"), root / "d")]:
        with pytest.raises(EscapeError) as info:
            guard.place_copy(DATA, parts, "r1")
        assert str(info.value).startswith(f"{named}: a symlink or non-directory"), str(info.value)
    guard.close()
    assert tree(tmp_path / "outside") == {"c": DATA.read_bytes()}


def test_place_copy_refuses_a_fifo_at_the_target_without_blocking(tmp_path: Path) -> None:
    os.mkfifo(tmp_path / "c")
    guard = Guard(tmp_path)
    with pytest.raises(WriteError, match="exists with different content"):
        guard.place_copy(DATA, ("c",), "r1")
    guard.close()


def test_files_that_differ_after_the_first_chunk_are_different(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(door, "CHUNK", 4)
    source = tmp_path / "source"
    source.write_bytes(b"0123456789")
    (tmp_path / "out").mkdir()
    (tmp_path / "out" / "same").write_bytes(b"0123456789")
    (tmp_path / "out" / "tail").write_bytes(b"0123456780")
    guard = Guard(tmp_path / "out")
    assert guard.place_copy(source, ("same",), "r1") is False
    with pytest.raises(WriteError, match="exists with different content"):
        guard.place_copy(source, ("tail",), "r1")
    assert guard.place_copy(source, ("new",), "r1") is True
    guard.close()
    assert (tmp_path / "out" / "new").read_bytes() == b"0123456789"


def test_remove_leaves_a_directory_someone_else_put_a_file_into(tmp_path: Path) -> None:
    guard = Guard(tmp_path)
    guard.write_file(("d", "f"), [b"x"])
    guard.remove(("d", "f"))
    (tmp_path / "d" / "theirs").write_bytes(b"someone else's")
    guard.remove(("d",))
    guard.close()
    assert tree(tmp_path) == {"d": "dir", "d/theirs": b"someone else's"}


def test_undo_leaves_a_symlink_put_in_place_of_a_file_it_made(tmp_path: Path) -> None:
    (tmp_path / "root").mkdir()
    guard = Guard(tmp_path / "root")
    guard.write_file(("f",), [b"x"])
    os.rename(tmp_path / "root" / "f", tmp_path / "aside")
    (tmp_path / "root" / "f").symlink_to(tmp_path / "aside")  # the same file, reached through a symlink
    guard.remove_all()
    guard.close()
    assert tree(tmp_path) == {"aside": b"x", "root": "dir", "root/f": f"-> {tmp_path / 'aside'}"}


def test_undo_goes_on_past_an_entry_it_cannot_remove(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    guard = Guard(tmp_path)
    guard.write_file(("a",), [b"x"])
    guard.write_file(("b",), [b"x"])
    real = os.unlink

    def busy(name: Any, *args: Any, **kwargs: Any) -> None:
        if name == "b":
            raise OSError(errno.EBUSY, "Device or resource busy")
        real(name, *args, **kwargs)

    monkeypatch.setattr(os, "unlink", busy)
    guard.remove_all()
    guard.close()
    assert tree(tmp_path) == {"b": b"x"}


# ------------------------------------------------------------------------------ files a caller streams into


def test_open_new_makes_a_new_file_the_undo_takes_back(tmp_path: Path, umask0: None) -> None:
    guard = Guard(tmp_path)
    with guard.open_new(("d", "f")) as fh:
        fh.write(b"streamed")
    assert (tmp_path / "d" / "f").read_bytes() == b"streamed"
    assert (tmp_path / "d" / "f").stat().st_mode & 0o777 == 0o644
    with pytest.raises(WriteError) as info:
        guard.open_new(("d", "f"))
    assert str(info.value) == f"{tmp_path / 'd' / 'f'}: already exists; spillway never overwrites"
    guard.remove_all()
    guard.close()
    assert tree(tmp_path) == {}


def test_open_new_names_the_file_when_its_directory_cannot_be_made(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    (tmp_path / "elsewhere").mkdir()
    (tmp_path / "link").symlink_to(tmp_path / "elsewhere")
    guard = Guard(tmp_path)
    with pytest.raises(EscapeError) as info:
        guard.open_new(("link", "f"))
    assert str(info.value).startswith(f"{tmp_path / 'link'}: a symlink or non-directory")

    def full(path: Any, *args: Any, **kwargs: Any) -> None:
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(os, "mkdir", full)
    with pytest.raises(OutputIOError) as info2:
        guard.open_new(("d", "f"))
    assert str(info2.value) == f"{tmp_path / 'd' / 'f'}: cannot write: No space left on device (errno 28)"
    guard.close()
    assert tree(tmp_path / "elsewhere") == {}


def _staged(guard: Guard, parts: tuple[str, ...], data: bytes) -> None:
    with guard.open_new(parts) as fh:
        fh.write(data)


def test_rename_new_gives_the_staged_file_its_name_and_the_undo_takes_it(tmp_path: Path) -> None:
    guard = Guard(tmp_path)
    _staged(guard, ("d", ".f.partial"), b"mine")
    guard.rename_new(("d", ".f.partial"), ("d", "f"))
    assert tree(tmp_path) == {"d": "dir", "d/f": b"mine"}
    guard.remove_all()
    guard.close()
    assert tree(tmp_path) == {}


def test_rename_new_renames_only_a_file_this_run_made_beside_it(tmp_path: Path) -> None:
    (tmp_path / "d").mkdir()
    (tmp_path / "d" / ".theirs").write_bytes(b"someone else's")
    guard = Guard(tmp_path)
    _staged(guard, ("d", ".f.partial"), b"mine")
    for staged, parts in [(("d", ".theirs"), ("d", "f")), (("d", ".f.partial"), ("e", "f"))]:
        with pytest.raises(WriteError) as info:
            guard.rename_new(staged, parts)
        assert str(info.value) == f"{tmp_path.joinpath(*parts)}: not a file this run made beside it; not renamed"
    guard.close()
    assert tree(tmp_path) == {"d": "dir", "d/.f.partial": b"mine", "d/.theirs": b"someone else's"}


def test_rename_new_never_replaces_unless_asked(tmp_path: Path) -> None:
    (tmp_path / "f").write_bytes(b"theirs")
    guard = Guard(tmp_path)
    _staged(guard, (".f.partial",), b"mine")
    with pytest.raises(TargetExists) as info:
        guard.rename_new((".f.partial",), ("f",))
    assert str(info.value) == f"{tmp_path / 'f'}: exists; spillway never overwrites"
    assert tree(tmp_path) == {".f.partial": b"mine", "f": b"theirs"}
    guard.rename_new((".f.partial",), ("f",), replace=True)
    assert tree(tmp_path) == {"f": b"mine"}
    guard.remove_all()
    guard.close()
    assert tree(tmp_path) == {}, "the replacing file is this run's: the undo takes it"


@pytest.mark.parametrize("replace", [False, True])
def test_a_rename_the_file_system_refuses_names_the_target(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, replace: bool
) -> None:
    def refused(*args: Any, **kwargs: Any) -> None:
        raise OSError(errno.EMLINK, "Too many links")

    guard = Guard(tmp_path)
    _staged(guard, (".f.partial",), b"mine")
    monkeypatch.setattr(os, "replace" if replace else "link", refused)
    with pytest.raises(OutputIOError) as info:
        guard.rename_new((".f.partial",), ("f",), replace)
    assert str(info.value) == f"{tmp_path / 'f'}: cannot write: Too many links (errno 31)"
    guard.remove_all()
    guard.close()
    assert tree(tmp_path) == {}


# ------------------------------------------------------------------------- staged copies linked into place


def test_link_into_place_journals_the_name_and_its_directories_then_links(tmp_path: Path) -> None:
    heard: list[dict[str, Any]] = []
    guard = Guard(tmp_path, journal=heard.append)
    guard.copy_file(DATA, ("stage", "f"))
    heard.clear()
    assert guard.link_into_place(("stage", "f"), ("a", "b", "f"), DATA) is True
    st = os.stat(tmp_path / "a" / "b" / "f")
    assert heard == [
        {"file": str(tmp_path / "a" / "b" / "f"), "dev": st.st_dev, "ino": st.st_ino},
        {"dir": str(tmp_path / "a")},
        {"dir": str(tmp_path / "a" / "b")},
    ]
    assert (st.st_dev, st.st_ino) == (
        os.stat(tmp_path / "stage" / "f").st_dev,
        os.stat(tmp_path / "stage" / "f").st_ino,
    )
    heard.clear()
    assert guard.link_into_place(("stage", "f"), ("a", "g"), DATA, noted=True) is True
    assert heard == [], "noted: the journal has heard of it already"
    assert guard.link_into_place(("stage", "f"), ("a", "b", "f"), DATA) is False, "identical: kept"
    guard.remove_all()
    guard.close()
    assert tree(tmp_path) == {}


def test_link_into_place_refuses_other_bytes_and_what_the_run_did_not_make(tmp_path: Path) -> None:
    (tmp_path / "a").mkdir()
    (tmp_path / "a" / "f").write_bytes(b"other bytes")
    guard = Guard(tmp_path)
    guard.copy_file(DATA, ("stage", "f"))
    with pytest.raises(WriteError) as info:
        guard.link_into_place(("stage", "f"), ("a", "f"), DATA)
    assert str(info.value) == f"{tmp_path / 'a' / 'f'}: exists with different content; not overwritten"
    with pytest.raises(WriteError) as info2:
        guard.link_into_place(("stage", "nothing"), ("a", "g"), DATA)
    assert str(info2.value) == f"{tmp_path / 'stage' / 'nothing'}: not an entry this run made"
    with pytest.raises(WriteError, match="exists with different content"):
        guard.refuse_different(DATA, ("a", "f"))
    guard.refuse_different(DATA, ("stage", "f"))
    guard.refuse_different(DATA, ("a", "missing"))
    guard.close()
    assert (tmp_path / "a" / "f").read_bytes() == b"other bytes"


@pytest.mark.parametrize("fails", ["link", "mkdir"])
def test_a_link_or_directory_the_file_system_refuses_names_the_target(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, fails: str
) -> None:
    def refused(*args: Any, **kwargs: Any) -> None:
        raise OSError(errno.ENOSPC, "No space left on device")

    guard = Guard(tmp_path)
    guard.copy_file(DATA, ("stage", "f"))
    monkeypatch.setattr(os, fails, refused)
    with pytest.raises(OutputIOError) as info:
        guard.link_into_place(("stage", "f"), ("a", "f"), DATA)
    assert str(info.value) == f"{tmp_path / 'a' / 'f'}: cannot write: No space left on device (errno 28)"
    if fails == "mkdir":
        with pytest.raises(OutputIOError) as info2:
            guard.make_directory(("x", "y"))
        assert str(info2.value) == f"{tmp_path / 'x' / 'y'}: cannot write: No space left on device (errno 28)"
    monkeypatch.undo()
    guard.remove_all()
    guard.close()
    assert tree(tmp_path) == {}


def test_make_directory_makes_the_parents_and_the_undo_takes_them(tmp_path: Path) -> None:
    heard: list[dict[str, Any]] = []
    guard = Guard(tmp_path, journal=heard.append)
    guard.make_directory(("x", "y"))
    assert heard == [{"dir": str(tmp_path / "x")}, {"dir": str(tmp_path / "x" / "y")}]
    assert tree(tmp_path) == {"x": "dir", "x/y": "dir"}
    guard.remove_all()
    guard.close()
    assert tree(tmp_path) == {}
