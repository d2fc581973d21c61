"""The output's claim (spillway/storage/claim.py), rule by rule: what the lock says about its run, when a
run named there counts as alive, what a stale claim's journal may remove, the messages a refused run
gives, and a clean-up that leaves nothing of its own and nothing of anyone else's. Expected values come
from the module's documented contract, proc(5) and the paths each test makes."""

from __future__ import annotations

import errno
import json
import os
import re
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from support.trees import tree

from spillway.notices import collecting
from spillway.storage import claim as claims
from spillway.storage.claim import OutputBusy, claim_output, lock_path, process_start, rename_noreplace
from spillway.storage.guard import OutputIOError, WriteError


def _lines(path: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in path.read_text().splitlines()]


@pytest.fixture
def child(tmp_path: Path) -> Iterator[subprocess.Popen[str]]:
    """A live process whose name holds ') ' (proc(5): the name is in parentheses and may hold anything), which a
    SIGHUP would end (its default action, even when this run was started with the signal ignored)."""
    odd = tmp_path / "a) b c) d"
    odd.symlink_to(sys.executable)
    code = (
        "import signal, time; signal.signal(signal.SIGHUP, signal.SIG_DFL); print('ready', flush=True); time.sleep(60)"
    )
    proc = subprocess.Popen([str(odd), "-c", code], stdout=subprocess.PIPE, text=True)
    try:
        assert proc.stdout is not None and proc.stdout.readline().strip() == "ready"
        assert "(a) b c) d)" in Path(f"/proc/{proc.pid}/stat").read_text()
        yield proc
    finally:
        proc.kill()
        proc.wait()


def _start_by_proc5(pid: int) -> str:
    """Field 22 (starttime) of /proc/PID/stat: the fields after the name, whose closing ')' is the last one."""
    text = Path(f"/proc/{pid}/stat").read_text()
    match = re.fullmatch(r"(\d+) \((.*)\) (.*)\n?", text, re.DOTALL)
    assert match is not None
    return match.group(3).split(" ")[22 - 3]


def test_a_process_start_is_field_22_even_when_its_name_holds_parentheses(child: subprocess.Popen[str]) -> None:
    assert process_start(child.pid) == _start_by_proc5(child.pid)
    assert process_start(os.getpid()) == _start_by_proc5(os.getpid())


def test_a_run_is_alive_while_its_pid_lives_with_the_same_start(child: subprocess.Popen[str]) -> None:
    start = _start_by_proc5(child.pid)
    assert claims._alive(child.pid, start) is True
    assert claims._alive(child.pid, None) is True, "no start recorded: the pid alone decides"
    assert claims._alive(child.pid, str(int(start) + 1)) is False, "a reused pid is another process"
    with pytest.raises(subprocess.TimeoutExpired):
        child.wait(timeout=0.5)  # asking must not signal the process
    dead = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True, text=True)
    assert claims._alive(int(dead.stdout), None) is False


def test_the_lock_names_the_run_and_then_journals_each_entry(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("TZ", "Asia/Tokyo")  # "since" is UTC whatever the local zone
    time.tzset()
    out = tmp_path / "out"
    before = time.time()
    c = claim_output(out)
    assert re.fullmatch(r"[0-9a-f]+", c.run) and c.staging == tmp_path / f".out.spillway-{c.run}.partial"
    assert c.staging.is_dir()
    c.journal({"dir": str(tmp_path / "to")})
    c.journal({"tmp": str(tmp_path / "to" / ".f.spillway-x.partial")})
    head, *rest = _lines(lock_path(out))
    since = head.pop("since")
    assert head == {
        "run": c.run,
        "pid": os.getpid(),
        "start": _start_by_proc5(os.getpid()),
        "host": socket.gethostname(),
        "out": str(out),
        "staging": c.staging.name,
    }
    stamp = time.mktime(time.strptime(since, "%Y-%m-%dT%H:%M:%SZ")) - time.mktime(time.gmtime(0))
    assert before - 2 <= stamp <= time.time() + 1, since
    assert rest == [{"dir": str(tmp_path / "to")}, {"tmp": str(tmp_path / "to" / ".f.spillway-x.partial")}]
    assert c.entries == rest
    c.abandon()
    assert tree(tmp_path) == {}


@pytest.fixture(autouse=True)
def _local_zone_restored() -> Iterator[None]:
    yield
    time.tzset()  # after monkeypatch has put TZ back


def test_remove_journaled_removes_the_runs_copies_once_and_counts_them(tmp_path: Path) -> None:
    c = claim_output(tmp_path / "out")
    (tmp_path / "to").mkdir()
    copied = tmp_path / "to" / "f"
    copied.write_bytes(b"x")
    c.journal({"file": str(copied), "dev": copied.stat().st_dev, "ino": copied.stat().st_ino})
    assert c.remove_journaled() == 1
    assert c.remove_journaled() == 0
    c.abandon()
    assert tree(tmp_path) == {"to": "dir"}


def test_a_lock_file_is_made_with_mode_0644(tmp_path: Path) -> None:
    old = os.umask(0)
    try:
        c = claim_output(tmp_path / "out")
        assert lock_path(tmp_path / "out").stat().st_mode & 0o777 == 0o644
        c.abandon()
    finally:
        os.umask(old)


def test_a_symlink_planted_as_the_lock_is_never_followed(tmp_path: Path) -> None:
    (tmp_path / "victim").write_bytes(b"precious")
    lock_path(tmp_path / "out").symlink_to(tmp_path / "victim")
    with pytest.raises(OutputIOError) as info:
        claim_output(tmp_path / "out")
    assert str(info.value) == f"{tmp_path / 'out'}: cannot write: Too many levels of symbolic links (errno 40)"
    assert (tmp_path / "victim").read_bytes() == b"precious"


def test_parents_made_for_the_output_go_deepest_first_with_the_claim(tmp_path: Path) -> None:
    c = claim_output(tmp_path / "a" / "b" / "c" / "out")
    c.abandon()
    assert tree(tmp_path) == {}


def test_a_parent_someone_else_filled_meanwhile_stays(tmp_path: Path) -> None:
    c = claim_output(tmp_path / "a" / "b" / "out")
    (tmp_path / "a" / "theirs").write_bytes(b"someone else's")
    c.abandon()
    assert tree(tmp_path) == {"a": "dir", "a/theirs": b"someone else's"}


def test_a_claim_that_fails_leaves_no_lock_and_no_parents(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    def fails(*args: Any) -> None:
        raise WriteError("refused for the test")

    monkeypatch.setattr(claims, "_take", fails)
    with pytest.raises(WriteError, match="refused for the test"):
        claim_output(tmp_path / "a" / "b" / "out")
    assert tree(tmp_path) == {}


def test_a_failing_claim_keeps_its_own_error_when_a_parent_cannot_go(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    def fails(*args: Any) -> None:
        (tmp_path / "a" / "theirs").write_bytes(b"someone else's")
        raise WriteError("refused for the test")

    monkeypatch.setattr(claims, "_take", fails)
    with pytest.raises(WriteError, match="refused for the test"):
        claim_output(tmp_path / "a" / "b" / "out")
    assert tree(tmp_path) == {"a": "dir", "a/theirs": b"someone else's"}


def test_a_lock_that_keeps_changing_hands_is_refused_by_name(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(claims, "_take", lambda *args: None)
    out = tmp_path / "out"
    with pytest.raises(OutputBusy) as info:
        claim_output(out)
    assert str(info.value) == (
        f"{out}: its lock {lock_path(out)} keeps changing hands; another spillway run is writing it"
    )


def test_a_parent_that_cannot_be_made_is_named(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    def refused(path: Any, *args: Any, **kwargs: Any) -> None:
        raise PermissionError(errno.EACCES, "Permission denied")

    monkeypatch.setattr(os, "mkdir", refused)
    with pytest.raises(OutputIOError) as info:
        claim_output(tmp_path / "a" / "out")
    assert str(info.value) == f"{tmp_path / 'a'}: cannot write: Permission denied (errno 13)"


def test_a_staging_directory_that_cannot_be_made_is_named_and_the_lock_goes(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    real = os.mkdir

    def full(path: Any, *args: Any, **kwargs: Any) -> None:
        if ".spillway-" in str(path):
            os.unlink(lock_path(tmp_path / "out"))  # gone meanwhile: its clean-up must not hide the real error
            raise OSError(errno.ENOSPC, "No space left on device")
        real(path, *args, **kwargs)

    monkeypatch.setattr(os, "mkdir", full)
    with pytest.raises(OutputIOError) as info:
        claim_output(tmp_path / "out")
    assert re.fullmatch(
        rf"{re.escape(str(tmp_path))}/\.out\.spillway-[0-9a-f]+\.partial: cannot write: No space left on device "
        r"\(errno 28\)",
        str(info.value),
    ), str(info.value)
    assert tree(tmp_path) == {}


def test_a_claim_that_fails_after_making_its_staging_directory_removes_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    def fails(*args: Any) -> None:
        raise OSError(errno.EIO, "Input/output error")

    monkeypatch.setattr(claims, "Claim", fails)
    with pytest.raises(OSError):
        claim_output(tmp_path / "out")
    assert tree(tmp_path) == {}


def test_abandon_removes_only_the_staging_directory_the_claim_made(tmp_path: Path) -> None:
    c = claim_output(tmp_path / "out")
    os.rename(c.staging, tmp_path / "aside")
    c.staging.mkdir()  # another directory under the same name: not this claim's
    (c.staging / "theirs").write_bytes(b"someone else's")
    c.abandon()
    assert tree(tmp_path) == {"aside": "dir", c.staging.name: "dir", f"{c.staging.name}/theirs": b"someone else's"}


def test_publish_then_abandon_keeps_the_output_and_closes_nothing_else(tmp_path: Path) -> None:
    c = claim_output(tmp_path / "out")
    (c.staging / "_metadata").write_bytes(b"done")
    c.publish()
    c.abandon()
    c.release()
    assert tree(tmp_path) == {"out": "dir", "out/_metadata": b"done"}
    for fd in (0, 1, 2):
        os.fstat(fd)  # raises OSError if a second release closed one of them


def test_a_lock_descriptor_already_gone_does_not_fail_the_release(tmp_path: Path) -> None:
    c = claim_output(tmp_path / "out")
    os.close(c.fd)
    c.abandon()
    assert not c.staging.exists()


def test_release_leaves_a_symlink_put_in_place_of_the_lock(tmp_path: Path) -> None:
    out = tmp_path / "out"
    c = claim_output(out)
    os.rename(lock_path(out), tmp_path / "aside")
    lock_path(out).symlink_to(tmp_path / "aside")  # the same file, through a symlink: not the lock this run holds
    c.abandon()
    assert lock_path(out).is_symlink()


def test_a_publish_the_file_system_refuses_names_the_output(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    def refused(src: Path, dst: Path) -> None:
        raise OSError(errno.EXDEV, "Invalid cross-device link")

    out = tmp_path / "out"
    c = claim_output(out)
    monkeypatch.setattr(claims, "rename_noreplace", refused)
    with pytest.raises(OutputIOError) as info:
        c.publish()
    assert str(info.value) == f"{out}: cannot write: Invalid cross-device link (errno 18)"
    c.abandon()
    assert tree(tmp_path) == {}


def test_an_output_that_appears_meanwhile_is_named_and_untouched(tmp_path: Path) -> None:
    out = tmp_path / "out"
    c = claim_output(out)
    out.mkdir()
    with pytest.raises(WriteError) as info:
        c.publish()
    assert str(info.value) == (
        f"{out}: appeared while this run was writing; spillway never overwrites (nothing there touched)"
    )
    c.abandon()


def _hold(lock: Path, text: str) -> subprocess.Popen[str]:
    """Another process holding ``lock`` with ``text`` in it."""
    lock.write_text(text)
    holder = subprocess.Popen(
        [sys.executable, "-c", "import fcntl, os, sys, time; fd = os.open(sys.argv[1], os.O_RDWR);"
         "fcntl.flock(fd, fcntl.LOCK_EX); print('held', flush=True); time.sleep(60)", str(lock)],
        stdout=subprocess.PIPE, text=True,
    )  # fmt: skip
    assert holder.stdout is not None and holder.stdout.readline().strip() == "held"
    return holder


@pytest.mark.parametrize("header", [False, True])
def test_a_held_lock_is_refused_naming_the_run_that_holds_it(tmp_path: Path, header: bool) -> None:
    out = tmp_path / "out"
    head = {"run": "r1", "pid": 4242, "start": "777", "host": "h", "since": "2026-11-29T08:00:00Z", "staging": "s"}
    holder = _hold(lock_path(out), json.dumps(head) + "\n" if header else "")
    try:
        with pytest.raises(OutputBusy) as info:
            claim_output(out)
    finally:
        holder.kill()
        holder.wait()
    who = (
        "spillway run r1 (pid 4242 on h, process start 777, since 2026-11-29T08:00:00Z)"
        if header
        else "another spillway run"
    )
    assert str(info.value) == f"{out}: {who} is writing it; spillway lets one run write an output"


def _stale(out: Path, head: dict[str, Any], entries: list[dict[str, Any]], tail: bytes = b"") -> None:
    lock_path(out).write_bytes(b"".join((json.dumps(e) + "\n").encode() for e in [head, *entries]) + tail)


def _head(pid: int, start: str | None, staging: str = ".out.spillway-deadbeef.partial") -> dict[str, Any]:
    return {
        "run": "deadbeef",
        "pid": pid,
        "start": start,
        "host": socket.gethostname(),
        "since": "t",
        "staging": staging,
    }


def test_a_claim_whose_pid_lives_is_refused(tmp_path: Path, child: subprocess.Popen[str]) -> None:
    out = tmp_path / "out"
    start = _start_by_proc5(child.pid)
    _stale(out, _head(child.pid, start), [])
    with pytest.raises(OutputBusy) as info:
        claim_output(out)
    assert str(info.value) == (
        f"{out}: spillway run deadbeef (pid {child.pid} on {socket.gethostname()}, process start {start}, since t) "
        "is writing it; spillway lets one run write an output"
    )


def test_a_claim_whose_pid_was_reused_is_stale(tmp_path: Path, child: subprocess.Popen[str]) -> None:
    out = tmp_path / "out"
    _stale(out, _head(child.pid, str(int(_start_by_proc5(child.pid)) + 1)), [])
    with collecting() as notes:
        claim_output(out).abandon()
    assert len(notes) == 1 and "a stale claim of a spillway run that is gone" in notes[0]


def test_a_claim_naming_this_very_process_is_stale(tmp_path: Path) -> None:
    out = tmp_path / "out"
    _stale(out, _head(os.getpid(), _start_by_proc5(os.getpid())), [])
    with collecting() as notes:
        claim_output(out).abandon()
    assert len(notes) == 1 and "a stale claim" in notes[0]


def test_a_lock_without_a_header_is_refused_with_what_to_delete(tmp_path: Path) -> None:
    out = tmp_path / "out"
    lock_path(out).write_text(json.dumps({"dir": str(tmp_path / "d")}) + "\n")
    with pytest.raises(OutputBusy) as info:
        claim_output(out)
    lock = lock_path(out)
    assert str(info.value) == (
        f"{out}: {lock} is not a lock spillway can read; if no spillway run is writing {out}, delete {lock}"
    )


def test_a_claim_from_another_host_names_the_run_and_what_to_delete(tmp_path: Path) -> None:
    out = tmp_path / "out"
    head = {**_head(1, "1"), "host": "elsewhere.example"}
    _stale(out, head, [])
    with pytest.raises(OutputBusy) as info:
        claim_output(out)
    assert str(info.value) == (
        f"{out}: claimed by spillway run deadbeef (pid 1 on elsewhere.example, process start 1, since t), another "
        f"host, which this host cannot check; if that run is gone, delete {lock_path(out)} and "
        f"{tmp_path / '.out.spillway-deadbeef.partial'}"
    )


def _dead_pid() -> int:
    return int(
        subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True, text=True).stdout
    )


def test_a_stale_journal_is_undone_entry_by_entry(tmp_path: Path) -> None:
    """Every entry is judged on its own: one that names nothing, a missing file, a replaced file or a "staged"
    name that is not one never stops the entries after it."""
    out = tmp_path / "out"
    to = tmp_path / "to"
    (to / "d" / "e").mkdir(parents=True)
    files = {name: to / "d" / "e" / name for name in ("f1", "f2", "f3", "f4", "victim", ".g.spillway-r.partial")}
    for p in files.values():
        p.write_bytes(b"x")
    ids = {name: (p.stat().st_dev, p.stat().st_ino) for name, p in files.items()}
    (to / "d" / "e" / "replaced").write_bytes(b"someone else's")

    def file(name: str) -> dict[str, Any]:
        return {"file": str(files[name]), "dev": ids[name][0], "ino": ids[name][1]}

    entries = [
        {"dir": str(to / "d")},
        file("f1"),
        {"file": str(to / "missing"), "dev": 0, "ino": 0},
        {"file": str(to / "d"), "dev": 0, "ino": 0},  # a directory named as a file: never removed as one
        file("f2"),
        {"file": str(to / "d" / "e" / "replaced"), "dev": ids["f1"][0], "ino": ids["f1"][1]},
        file("f3"),
        {"tmp": str(files["victim"])},  # a "staged" name that is no staged name: never removed
        file("f4"),
        {"tmp": str(files[".g.spillway-r.partial"])},
        {"dir": str(to / "d" / "e")},
    ]
    _stale(out, _head(_dead_pid(), "1"), entries, tail=b'{"file": "\xff\xfe torn')
    with collecting() as notes:
        claim_output(out).abandon()
    assert tree(to) == {
        "d": "dir",
        "d/e": "dir",
        "d/e/replaced": b"someone else's",
        "d/e/victim": b"x",
    }
    assert len(notes) == 1 and notes[0].endswith("its staging directory (none left) and 4 files it had copied")


def test_a_stale_journal_of_empty_directories_is_undone_deepest_first(tmp_path: Path) -> None:
    out = tmp_path / "out"
    (tmp_path / "to" / "a" / "b").mkdir(parents=True)
    entries = [
        {"dir": str(tmp_path / "to")},
        {"dir": str(tmp_path / "to" / "a")},
        {"dir": str(tmp_path / "to" / "a" / "b")},
    ]
    _stale(out, _head(_dead_pid(), "1"), entries)
    claim_output(out).abandon()
    assert tree(tmp_path) == {}


def test_a_long_stale_journal_is_read_whole(tmp_path: Path) -> None:
    out = tmp_path / "out"
    (tmp_path / "to").mkdir()
    entries = []
    for i in range(800):  # well over one 64 KiB read
        p = tmp_path / "to" / f"file-{i:04d}-{'x' * 40}"
        p.write_bytes(b"x")
        entries.append({"file": str(p), "dev": p.stat().st_dev, "ino": p.stat().st_ino})
    _stale(out, _head(_dead_pid(), "1"), entries)
    with collecting() as notes:
        claim_output(out).abandon()
    assert not any((tmp_path / "to").iterdir())
    assert notes[0].endswith("and 800 files it had copied")


def test_a_stale_claims_staging_directories_are_listed_in_the_notice(tmp_path: Path) -> None:
    out = tmp_path / "out"
    name = ".out.spillway-deadbeef.partial"
    (tmp_path / name).mkdir()
    (tmp_path / f"{name}.staging").mkdir()
    _stale(out, _head(_dead_pid(), "1", staging=name), [])
    with collecting() as notes:
        claim_output(out).abandon()
    assert notes[0].endswith(f"its staging directory ({name}, {name}.staging) and 0 files it had copied")
    assert tree(tmp_path) == {}


def test_a_symlink_under_a_staging_name_is_never_followed(tmp_path: Path) -> None:
    out = tmp_path / "out"
    (tmp_path / "outside").mkdir()
    (tmp_path / "outside" / "precious").write_bytes(b"precious")
    name = ".out.spillway-deadbeef.partial"
    (tmp_path / name).symlink_to(tmp_path / "outside")
    _stale(out, _head(_dead_pid(), "1", staging=name), [])
    with collecting() as notes:
        claim_output(out).abandon()
    assert (tmp_path / "outside" / "precious").read_bytes() == b"precious" and (tmp_path / name).is_symlink()
    assert "its staging directory (none left)" in notes[0]


def test_unclaimed_staging_directories_are_all_named(tmp_path: Path) -> None:
    out = tmp_path / "out"
    names = [".out.spillway-0badc0de.partial", ".out.spillway-0badc0df.partial"]
    for n in names:
        (tmp_path / n).mkdir()
    with collecting() as notes:
        claim_output(out).abandon()
    assert notes == [f"{out}: removed 2 staging directories left behind by runs that are gone: {', '.join(names)}"]


def test_rename_noreplace_names_the_target_when_it_fails(tmp_path: Path) -> None:
    with pytest.raises(OSError) as info:
        rename_noreplace(tmp_path / "missing", tmp_path / "dst")
    assert (info.value.errno, info.value.strerror, info.value.filename) == (
        errno.ENOENT,
        os.strerror(errno.ENOENT),
        str(tmp_path / "dst"),
    )


def test_rename_noreplace_without_renameat2_checks_then_renames(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(claims, "_renameat2", lambda: None)
    (tmp_path / "src").mkdir()
    (tmp_path / "src" / "f").write_bytes(b"x")
    (tmp_path / "taken").mkdir()
    with pytest.raises(FileExistsError) as info:
        rename_noreplace(tmp_path / "src", tmp_path / "taken")
    assert (info.value.errno, info.value.strerror, info.value.filename) == (
        errno.EEXIST,
        os.strerror(errno.EEXIST),
        str(tmp_path / "taken"),
    )
    rename_noreplace(tmp_path / "src", tmp_path / "free")
    assert tree(tmp_path) == {"free": "dir", "free/f": b"x", "taken": "dir"}


# ------------------------------------------------------------------------------------- a destination root


def test_a_destination_root_is_claimed_beside_it_and_stages_inside_it(tmp_path: Path) -> None:
    root = tmp_path / "to"
    (root / "shared").mkdir(parents=True)
    (root / "shared" / "theirs").write_bytes(b"someone else's")
    c = claims.claim_destination(root)
    assert c.out == root
    assert c.staging == root / f".spillway-{c.run}.partial" and not c.staging.exists(), "made by its guard"
    head = _lines(lock_path(root))[0]
    assert (head["out"], head["staging"], head["inside"]) == (str(root), c.staging.name, True)
    c.staging.mkdir()
    (c.staging / "f").write_bytes(b"staged")
    c.journal_all([])
    c.journal_all([{"dir": str(root / "a")}, {"dir": str(root / "b")}])
    assert _lines(lock_path(root))[1:] == [{"dir": str(root / "a")}, {"dir": str(root / "b")}] == c.entries
    c.settle()
    c.settle()
    c.abandon()
    assert tree(tmp_path) == {"to": "dir", "to/shared": "dir", "to/shared/theirs": b"someone else's"}


def test_a_dead_runs_staging_inside_a_destination_root_is_removed_by_its_claim(tmp_path: Path) -> None:
    root = tmp_path / "to"
    name = ".spillway-deadbeef.partial"
    (root / name).mkdir(parents=True)
    (root / ".spillway-not-hex.partial").mkdir()
    (root / "keep").write_bytes(b"someone else's")
    _stale(root, {**_head(_dead_pid(), "1", staging=name), "inside": True}, [])
    with collecting() as notes:
        claims.claim_destination(root).abandon()
    assert notes[0].endswith(f"its staging directory ({name}) and 0 files it had copied")
    assert tree(root) == {".spillway-not-hex.partial": "dir", "keep": b"someone else's"}


def test_staging_directories_no_lock_names_inside_a_destination_root_are_all_named(tmp_path: Path) -> None:
    root = tmp_path / "to"
    names = [".spillway-0badc0de.partial", ".spillway-0badc0df.partial"]
    for n in names:
        (root / n).mkdir(parents=True)
    with collecting() as notes:
        claims.claim_destination(root).abandon()
    assert notes == [f"{root}: removed 2 staging directories no run claims any more: {', '.join(names)}"]
    assert tree(root) == {}


def test_a_dead_runs_copies_for_an_output_it_published_are_kept(tmp_path: Path) -> None:
    root = tmp_path / "to"
    root.mkdir()
    copied = root / "f"
    copied.write_bytes(b"the published output references me")
    out = tmp_path / "out"
    out.mkdir()
    file = {"file": str(copied), "dev": copied.stat().st_dev, "ino": copied.stat().st_ino}
    published = {"output": str(out), "dev": out.stat().st_dev, "ino": out.stat().st_ino}
    _stale(root, {**_head(_dead_pid(), "1", staging=".spillway-deadbeef.partial"), "inside": True}, [file, published])
    with collecting() as notes:
        claims.claim_destination(root).abandon()
    assert copied.read_bytes() == b"the published output references me"
    assert "which had published " + str(out) in notes[0] and notes[0].endswith("(that output references them)")
    assert "(spillway run deadbeef (pid " in notes[0]
    assert "; removed its staging directory (none left) and kept the files it had copied" in notes[0]
    # the same journal, but the output under that name is another directory: its copies are leftovers
    os.rename(out, tmp_path / "aside")
    out.mkdir()
    _stale(root, {**_head(_dead_pid(), "1", staging=".spillway-deadbeef.partial"), "inside": True}, [file, published])
    with collecting() as notes:
        claims.claim_destination(root).abandon()
    assert not copied.exists() and notes[0].endswith("and 1 files it had copied")


def test_an_empty_lock_no_run_holds_is_taken_over_with_a_notice(tmp_path: Path) -> None:
    out = tmp_path / "out"
    lock_path(out).write_bytes(b"")
    with collecting() as notes:
        claim_output(out).abandon()
    assert notes == [f"{out}: an empty lock {lock_path(out).name} was left behind by a run that is gone; taken over"]


def test_parents_that_still_hold_something_are_kept_for_a_later_call(tmp_path: Path) -> None:
    c = claim_output(tmp_path / "a" / "b" / "out")
    (tmp_path / "a" / "b" / "copy").write_bytes(b"not undone yet")
    c.abandon()
    assert c.parents == [tmp_path / "a" / "b", tmp_path / "a"]
    (tmp_path / "a" / "b" / "copy").unlink()
    c.remove_parents()
    assert c.parents == [] and tree(tmp_path) == {}


def test_a_stale_destination_claim_naming_no_staging_name_removes_nothing_by_it(tmp_path: Path) -> None:
    root = tmp_path / "to"
    (root / "precious").mkdir(parents=True)
    (root / "precious" / "f").write_bytes(b"someone else's")
    _stale(root, {**_head(_dead_pid(), "1", staging="precious"), "inside": True}, [])
    with collecting() as notes:
        claims.claim_destination(root).abandon()
    assert tree(root) == {"precious": "dir", "precious/f": b"someone else's"}
    assert "its staging directory (none left)" in notes[0]
