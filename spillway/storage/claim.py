"""One writer per output: a run claims its output before it copies a byte, and only the claim's holder
ever writes or deletes there.

The claim is a lock file beside the output, ``.NAME.spillway.lock``, created if missing and held with
``flock`` for the whole run (the kernel lets go of it when the process dies, ``kill -9`` included). It
holds one JSON line naming the run (pid, the process's start time from ``/proc`` so a reused pid is told
apart, host, since when, its staging directory), then a journal: every file and directory the run is
about to create outside its staging directory (``copy_data`` destinations), so that a later run can
remove exactly those if this one is killed.

The run writes into its own staging directory ``.NAME.spillway-<run>.partial`` (created by ``mkdir``:
exclusive) and publishes it with a rename that cannot replace anything (``renameat2(RENAME_NOREPLACE)``
on Linux; elsewhere, a check that the name is free just before the rename, which other spillway runs
cannot race because they need the claim). The lock goes last.

A second run on the same output is refused with a message naming the first. A run that finds the claim
of a run that is gone (its lock no longer held, or its pid dead or reused) on this host says so and
removes what that run left — its staging directory and the entries of its journal, each only while it
still is what that run made — then proceeds. A claim from another host is refused with what to remove.

``copy_data``'s destination root (relocate's ``--to``) is an output too, claimed the same way with
:func:`claim_destination` (a lock beside it, its journal there): it may exist and hold other files, and its
run stages copies in ``ROOT/.spillway-<run>.partial`` (inside the root: one file system with the final
names, which a root that is a mount point would not give beside it). A run claims its output first, then
the destination root, each without waiting, so two runs can never wait on each other.
"""

from __future__ import annotations

import contextlib
import ctypes
import ctypes.util
import errno
import fcntl
import json
import os
import re
import shutil
import signal
import socket
import stat
import threading
import time
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from functools import cache
from pathlib import Path
from typing import Any, ClassVar

from spillway import notices
from spillway.errors import ExitStatus, Message, Named
from spillway.storage.guard import OutputIOError, WriteError, cannot_write, make_missing_dirs

_ATTEMPTS = 5
LEFT_NOTHING = "; nothing was left behind"


class OutputBusy(WriteError):
    """Another run holds the output (exit 3: the checkpoint is fine; try again when that run is done)."""

    exit_code: ClassVar[ExitStatus] = ExitStatus.STORAGE


def lock_path(out: Path) -> Path:
    return out.parent / f".{out.name}.spillway.lock"


def _staging_pattern(out: Path) -> re.Pattern[str]:
    return re.compile(rf"^\.{re.escape(out.name)}\.spillway-[0-9a-f]+\.partial(\.staging)?$")


def process_start(pid: int) -> str | None:
    """The process's start time in clock ticks since boot (``/proc/PID/stat`` field 22); None where unknown."""
    try:
        text = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    fields = text[text.rfind(")") + 2 :].split()
    return fields[19] if len(fields) > 19 else None  # field 22 overall; 3 is the first after ")"


def _alive(pid: int, start: str | None) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        pass  # exists, someone else's
    now = process_start(pid)
    return start is None or now is None or now == start


@dataclass
class Claim:
    """This run's hold on ``out``: the lock (held), the staging directory (created by the claim)."""

    out: Path
    run: str
    lock: Path
    staging: Path
    fd: int
    staging_id: tuple[int, int] | None  # None: a destination claim's staging, made by its guard when needed
    done: bool = field(default=False)
    entries: list[dict[str, Any]] = field(default_factory=list)
    parents: list[Path] = field(default_factory=list)  # directories above the output the claim made

    def journal(self, entry: dict[str, Any]) -> None:
        """Note an entry the run is about to create outside its staging directory (written and synced
        before it is created: a kill right after still leaves it on record)."""
        self.entries.append(entry)
        os.lseek(self.fd, 0, os.SEEK_END)
        os.write(self.fd, (json.dumps(entry) + "\n").encode())
        os.fsync(self.fd)

    def journal_all(self, entries: list[dict[str, Any]]) -> None:
        """:meth:`journal` of many entries with one write and one sync."""
        if not entries:
            return
        self.entries.extend(entries)
        os.lseek(self.fd, 0, os.SEEK_END)
        os.write(self.fd, "".join(json.dumps(e) + "\n" for e in entries).encode())
        os.fsync(self.fd)

    def remove_journaled(self) -> int:
        """Remove what the journal names (each only while it is what this run made); the files removed."""
        removed = _undo_journal(self.entries)
        self.entries = []
        return removed

    def publish(self) -> None:
        """Rename the staging directory to the output name, never over anything; then let go of the claim."""
        with _signals_held():  # a Ctrl-C between the rename and ``done`` would undo a published output
            try:
                rename_noreplace(self.staging, self.out)
            except FileExistsError:
                raise WriteError(
                    f"{self.out}: appeared while this run was writing; spillway never overwrites (nothing there "
                    "touched)"
                ) from None
            except OSError as exc:
                raise cannot_write(self.out, exc) from None
            self.done = True
        self.release()

    def settle(self) -> None:
        """A destination claim whose copies are all in place: remove its (now spent) staging directory and let go
        of the claim; the copies stay."""
        if self.fd < 0:
            return
        with _signals_held():
            self.done = True
            _remove_dir_if(self.staging, self.staging_id)
            self.release()

    def abandon(self) -> None:
        """Remove everything this run made (staging directory, journaled copies) and let go of the claim.
        Best effort, idempotent: the original failure is what the user must see."""
        if self.fd < 0:
            return
        if not self.done:
            _remove_dir_if(self.staging, self.staging_id)
            _remove_dir_if(Path(f"{self.staging}.staging"), None)
            self.remove_journaled()
        self.release()
        if not self.done:
            self.remove_parents()

    def remove_parents(self) -> None:
        """The directories above the output this claim made, deepest first, each once empty: one that still
        holds something (another run's files, or copies not yet undone) stays, for a later call."""
        kept = []
        for d in self.parents:
            try:
                os.rmdir(d)
            except FileNotFoundError:
                pass
            except OSError:
                kept.append(d)
        self.parents = kept

    def release(self) -> None:
        if self.fd < 0:
            return
        try:
            now = os.stat(self.lock, follow_symlinks=False)
            mine = os.fstat(self.fd)
            if (now.st_dev, now.st_ino) == (mine.st_dev, mine.st_ino):
                os.unlink(self.lock)  # while still holding it: a waiting run then finds no stale file
        except OSError:
            pass
        fd, self.fd = self.fd, -1
        with contextlib.suppress(OSError):
            os.close(fd)


def claim_output(out: Path) -> Claim:
    """Claim ``out`` for this run (see the module's doc); ``OutputBusy`` if another run holds it,
    ``WriteError`` if it exists."""
    _refuse_existing(out)
    return _claim(out, destination=False)


def claim_destination(root: Path) -> Claim:
    """Claim the directory ``root`` that copies go into (it may exist); ``OutputBusy`` if another run holds
    it. A dead run's claim there is cleared (its staged and placed copies removed, with a notice), whichever
    output that run wrote. The staging directory ``root/.spillway-<run>.partial`` is not made here."""
    return _claim(root, destination=True)


def _claim(out: Path, destination: bool) -> Claim:
    lock = lock_path(out)
    made: list[Path] = []
    try:
        for _ in range(_ATTEMPTS):
            made += _make_parents(out.parent)
            flags = os.O_RDWR | os.O_NOFOLLOW | os.O_CLOEXEC
            found = False  # the lock file was there already (a run holds it, or one killed as it began left it)
            try:
                try:
                    fd = os.open(lock, flags | os.O_CREAT | os.O_EXCL, 0o644)
                except FileExistsError:
                    fd, found = os.open(lock, flags), True
            except FileNotFoundError:
                continue  # a parent (or the lock) was removed meanwhile by a run that gave up: again
            except OSError as exc:
                raise cannot_write(out, exc) from None  # the output's place: its lock is ours, not the user's
            try:
                claim = _take(out, lock, fd, destination, found)
            except BaseException:
                _drop_if_empty(lock, fd)
                raise
            if claim is not None:
                claim.parents = sorted(made, key=lambda p: len(p.parts), reverse=True)
                return claim
            os.close(fd)
    except BaseException:
        for d in sorted(made, key=lambda p: len(p.parts), reverse=True):
            with contextlib.suppress(OSError):
                os.rmdir(d)
        raise
    raise OutputBusy(f"{out}: its lock {lock} keeps changing hands; another spillway run is writing it")


def _drop_if_empty(lock: Path, fd: int) -> None:
    """Close ``fd``; a lock file it still names that holds nothing (this run stopped before writing to it)
    is removed — only while this run holds its flock: an empty lock another run holds is that run's, about to
    get its header (removing it let two runs each see the other as the holder, and both gave up)."""
    with contextlib.suppress(OSError):
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        mine, now = os.fstat(fd), os.stat(lock, follow_symlinks=False)
        if mine.st_size == 0 and (mine.st_dev, mine.st_ino) == (now.st_dev, now.st_ino):
            os.unlink(lock)
    with contextlib.suppress(OSError):
        os.close(fd)


def _make_parents(directory: Path) -> list[Path]:
    """Make ``directory`` and its missing parents; the ones made, outermost first."""
    return [d for d, _ in make_missing_dirs(directory)]


def _take(out: Path, lock: Path, fd: int, destination: bool, found: bool = False) -> Claim | None:
    """Hold the lock ``fd`` and set up the claim; None when the lock file was replaced meanwhile (retry)."""
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        header, _ = _parse(_read_all(fd))
        raise OutputBusy(f"{out}: {_describe(header)} is writing it; spillway lets one run write an output") from None
    mine = os.fstat(fd)
    try:
        now = os.stat(lock, follow_symlinks=False)
    except FileNotFoundError:
        return None
    if (now.st_dev, now.st_ino) != (mine.st_dev, mine.st_ino):
        return None
    owned = False
    staging: Path | None = None
    try:
        header, entries = _parse(_read_all(fd))
        if header is not None or entries:
            _clear_stale(out, lock, header, entries)
            os.ftruncate(fd, 0)
        elif found:
            # Empty, and no run holds it: its run was killed before it wrote a word (or gave up just now).
            notices.warn(f"{out}: an empty lock {lock.name} was left behind by a run that is gone; taken over")
        owned = True
        run = uuid.uuid4().hex[:8]
        if destination:
            _clear_unclaimed_inside(out)
            staging = out / f".spillway-{run}.partial"
        else:
            _clear_unclaimed(out)
            _refuse_existing(out)  # again, under the lock: a run that finished meanwhile
            staging = out.parent / f".{out.name}.spillway-{run}.partial"
        head = {
            "run": run,
            "pid": os.getpid(),
            "start": process_start(os.getpid()),
            "host": socket.gethostname(),
            "since": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
            "out": str(out),
            "staging": staging.name,
            **({"inside": True} if destination else {}),
        }
        os.lseek(fd, 0, os.SEEK_SET)
        os.write(fd, (json.dumps(head) + "\n").encode())
        os.fsync(fd)
        if destination:
            return Claim(out, run, lock, staging, fd, None)
        try:
            os.mkdir(staging)
        except OSError as exc:
            raise cannot_write(staging, exc) from None
        st = os.lstat(staging)
        return Claim(out, run, lock, staging, fd, (st.st_dev, st.st_ino))
    except BaseException:
        if owned:
            _unlink_if_same(lock, fd)  # never another's: the original error is what the user must see
            if staging is not None:
                _remove_dir_if(staging, None)  # its name is this run's: made by this run, if it exists
        raise


def _unlink_if_same(lock: Path, fd: int) -> None:
    with contextlib.suppress(OSError):
        mine, now = os.fstat(fd), os.stat(lock, follow_symlinks=False)
        if (mine.st_dev, mine.st_ino) == (now.st_dev, now.st_ino):
            os.unlink(lock)


def _refuse_existing(out: Path) -> None:
    if os.path.lexists(out):
        raise WriteError(Message(f"{out}: already exists; spillway never overwrites (choose a new ", Named("out"), ")"))


def _read_all(fd: int) -> bytes:
    os.lseek(fd, 0, os.SEEK_SET)
    chunks = []
    while chunk := os.read(fd, 1 << 16):
        chunks.append(chunk)
    return b"".join(chunks)


def _parse(data: bytes) -> tuple[dict[str, Any] | None, list[dict[str, Any]]]:
    """The lock's header and journal; a torn last line (a kill mid-write) is dropped."""
    rows: list[dict[str, Any]] = []
    for line in data.decode("utf-8", "replace").splitlines():
        try:
            row = json.loads(line)
        except ValueError:
            continue
        if isinstance(row, dict):
            rows.append(row)
    if rows and "run" in rows[0]:
        return rows[0], rows[1:]
    return None, rows


def _describe(header: dict[str, Any] | None) -> str:
    if header is None:
        return "another spillway run"
    return (
        f"spillway run {header.get('run')} (pid {header.get('pid')} on {header.get('host')}, "
        f"process start {header.get('start')}, since {header.get('since')})"
    )


def _clear_stale(out: Path, lock: Path, header: dict[str, Any] | None, entries: list[dict[str, Any]]) -> None:
    """The lock is ours now but names a run: refuse it if that run may live, else remove what it left."""
    if header is None:
        raise OutputBusy(
            f"{out}: {lock} is not a lock spillway can read; if no spillway run is writing {out}, delete {lock}"
        )
    host = socket.gethostname()
    staging = str(header.get("staging", ""))
    if header.get("host") != host:
        raise OutputBusy(
            f"{out}: claimed by {_describe(header)}, another host, which this host cannot check; if that run is "
            f"gone, delete {lock} and {out.parent / staging}"
        )
    pid = header.get("pid")
    if isinstance(pid, int) and pid != os.getpid() and _alive(pid, header.get("start")):
        raise OutputBusy(f"{out}: {_describe(header)} is writing it; spillway lets one run write an output")
    removed = []
    if header.get("inside"):
        if _INSIDE_STAGING.match(staging) and _remove_dir_if(out / staging, None):
            removed.append(staging)
    elif _staging_pattern(out).match(staging):
        for name in (staging, f"{staging}.staging"):
            if _remove_dir_if(out.parent / name, None):
                removed.append(name)
    published = _published_output(entries)
    if published is not None:
        notices.warn(
            f"{out}: a stale claim of a spillway run that is gone ({_describe(header)}), which had published "
            f"{published}; removed its staging directory ({', '.join(removed) or 'none left'}) and kept the files it "
            "had copied (that output references them)"
        )
        return
    files = _undo_journal(entries)
    notices.warn(
        f"{out}: a stale claim of a spillway run that is gone ({_describe(header)}); removed what it left behind: "
        f"its staging directory ({', '.join(removed) or 'none left'}) and {files} files it had copied"
    )


def _published_output(entries: list[dict[str, Any]]) -> str | None:
    """The output a destination journal's copies were for, if it was published: its name is the very directory
    the run staged it in (a rename keeps the identity). Its copies are then that output's files, not leftovers."""
    for e in entries:
        if isinstance(e.get("output"), str):
            try:
                st = os.lstat(e["output"])
            except OSError:
                return None
            return e["output"] if (st.st_dev, st.st_ino) == (e.get("dev"), e.get("ino")) else None
    return None


def _clear_unclaimed(out: Path) -> None:
    """Staging directories of ``out`` no lock names (a run killed before this claim existed, or whose lock was
    deleted): with the claim held no live run can own one, so each is removed, with a notice."""
    pattern = _staging_pattern(out)
    try:
        names = sorted(n for n in os.listdir(out.parent) if pattern.match(n))
    except OSError:
        return
    removed = [n for n in names if _remove_dir_if(out.parent / n, None)]
    if removed:
        notices.warn(
            f"{out}: removed {len(removed)} staging directories left behind by runs that are gone: {', '.join(removed)}"
        )


_INSIDE_STAGING = re.compile(r"^\.spillway-[0-9a-f]+\.partial$")


def _clear_unclaimed_inside(root: Path) -> None:
    """A destination root's staging directories no lock names (its lock deleted by hand): with the root's
    claim held no live run can own one, so each is removed, with a notice."""
    try:
        names = sorted(n for n in os.listdir(root) if _INSIDE_STAGING.match(n))
    except OSError:
        return
    removed = [n for n in names if _remove_dir_if(root / n, None)]
    if removed:
        notices.warn(f"{root}: removed {len(removed)} staging directories no run claims any more: {', '.join(removed)}")


def _remove_dir_if(path: Path, identity: tuple[int, int] | None) -> bool:
    """rmtree of a real directory (not a symlink), only if it still is ``identity`` when one is given."""
    try:
        st = os.lstat(path)
    except FileNotFoundError:
        return False
    if not stat.S_ISDIR(st.st_mode) or (identity is not None and (st.st_dev, st.st_ino) != identity):
        return False
    shutil.rmtree(path, ignore_errors=True)  # fd-based on Linux: never follows a symlink inside
    return True


def _undo_journal(entries: list[dict[str, Any]]) -> int:
    """Remove what a journal says a run created: a file only while it still is that file, a staged name of
    that run, a directory only once empty (deepest first). Returns the files removed."""
    removed = 0
    for e in entries:
        path = e.get("file") or e.get("tmp")
        if not isinstance(path, str):
            continue
        try:
            st = os.lstat(path)
        except OSError:
            continue
        if not stat.S_ISREG(st.st_mode):
            continue
        if "file" in e and (st.st_dev, st.st_ino) != (e.get("dev"), e.get("ino")):
            continue  # not the copy that run made
        if "tmp" in e and ".spillway-" not in os.path.basename(path):
            continue
        try:
            os.unlink(path)
            removed += "file" in e
        except OSError:
            pass
    dirs = sorted({e["dir"] for e in entries if isinstance(e.get("dir"), str)}, key=len, reverse=True)
    for d in dirs:
        with contextlib.suppress(OSError):  # not empty (someone else's files) or gone
            os.rmdir(d)
    return removed


# ------------------------------------------------------------------------------------------------ renaming

_RENAME_NOREPLACE = 1
_AT_FDCWD = -100


@cache
def _renameat2() -> Any:
    name = ctypes.util.find_library("c")
    if not name:
        return None
    try:
        fn = ctypes.CDLL(name, use_errno=True).renameat2
    except (OSError, AttributeError):
        return None
    fn.argtypes = [ctypes.c_int, ctypes.c_char_p, ctypes.c_int, ctypes.c_char_p, ctypes.c_uint]
    fn.restype = ctypes.c_int
    return fn


def rename_noreplace(src: Path, dst: Path) -> None:
    """Rename ``src`` to ``dst``; ``FileExistsError`` if ``dst`` exists (even as an empty directory, which a
    plain rename would replace)."""
    fn = _renameat2()
    if fn is not None:
        if fn(_AT_FDCWD, os.fsencode(src), _AT_FDCWD, os.fsencode(dst), _RENAME_NOREPLACE) == 0:
            return
        code = ctypes.get_errno()
        if code not in (errno.EINVAL, errno.ENOSYS, errno.ENOTSUP):
            raise OSError(code, os.strerror(code), str(dst))
    # No renameat2 here (or not on this file system): the claim keeps other spillway runs away; check, then rename.
    if os.path.lexists(dst):
        raise FileExistsError(errno.EEXIST, os.strerror(errno.EEXIST), str(dst))
    os.rename(src, dst)


# ------------------------------------------------------------------------------------------------ signals


@contextmanager
def _signals_held() -> Iterator[None]:
    """Ctrl-C and SIGTERM wait until the block is over (it is short): it runs whole or not at all. Held at
    Python's level, not with a signal mask: a mask holds a signal for one thread only, and the kernel hands it
    to any other (a reader's pool); Python runs its handlers in the main thread, whichever thread caught it."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    pending: list[int] = []

    def hold(signum: int, frame: object) -> None:
        pending.append(signum)

    held = (signal.SIGINT, signal.SIGTERM)
    previous: dict[int, Any] = {s: signal.signal(s, hold) for s in held}
    try:
        yield
    finally:
        for s, handler in previous.items():
            signal.signal(s, handler)
        if pending:
            handler = previous[pending[0]]
            if callable(handler):
                handler(pending[0], None)  # e.g. KeyboardInterrupt, or terminate_as_exit's SystemExit
            elif handler == signal.SIG_DFL:
                os.kill(os.getpid(), pending[0])


@contextmanager
def terminate_as_exit() -> Iterator[None]:
    """While the block runs, SIGTERM unwinds like Ctrl-C (so the clean-up runs) and exits 143."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return

    def stop(signum: int, frame: object) -> None:
        raise SystemExit(128 + signal.SIGTERM)

    previous = signal.signal(signal.SIGTERM, stop)
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, previous)


@contextmanager
def claimed(out: Path) -> Iterator[Claim]:
    """Claim ``out`` for the block; everything the run made is removed unless it was published. Ctrl-C and
    SIGTERM wait while the claim is taken, so there is never a claim nobody will clear."""
    with terminate_as_exit():
        taken: list[Claim] = []
        try:
            with _signals_held():
                taken.append(claim_output(out))
            yield taken[0]
        except OutputIOError as exc:
            for claim in taken:
                claim.abandon()
            if str(exc).endswith(LEFT_NOTHING):
                raise
            raise OutputIOError(f"{exc}{LEFT_NOTHING}") from None
        finally:
            for claim in taken:
                claim.abandon()  # a no-op once published
