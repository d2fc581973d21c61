"""The one door for writing: every file and directory a writing command creates, and every delete, goes
through a :class:`Guard` opened on the root it belongs to (a claimed staging directory, the destination
root of ``copy_data``).

Targets are confined to the root before a byte is written: a path is taken apart into plain names (no
``''``, ``.``, ``..``, ``/`` or NUL) and created component by component, relative to descriptors of the
directories above it, each opened with ``O_NOFOLLOW`` — so neither a ``..`` in a path from a ``_metadata``
nor a symlink planted (or swapped in mid-run) in the output tree can send a write elsewhere. Files are
created with ``O_CREAT | O_EXCL``: nothing that exists is ever opened for writing.

A delete removes only what this run created: the guard remembers each entry's identity (``st_dev``,
``st_ino``) and unlinks a name only while it still is that entry. Nothing is ever deleted by a path
computed from a handle.

Write failures (a full disk, a refused permission) become :class:`OutputIOError` (exit 3) naming the
output path that could not be written, not the source.
"""

from __future__ import annotations

import contextlib
import errno
import os
import stat
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any, BinaryIO, ClassVar

from spillway.errors import ExitStatus, SpillwayError
from spillway.safe_io import open_regular

CHUNK = 8 << 20
_DIR_FLAGS = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC
_NEW_FILE = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC

Journal = Callable[[dict[str, Any]], None]


class WriteError(SpillwayError):
    """The output could not be written or did not pass its self-check (nothing was left behind)."""


class OutputIOError(WriteError):
    """The output's file system refused a write: full disk, quota, permissions, read-only (exit 3: the
    checkpoint is fine, the place it was written to is not)."""

    exit_code: ClassVar[ExitStatus] = ExitStatus.STORAGE


class TargetExists(WriteError):
    """A file to write exists already: spillway never overwrites it (exit 2: choose another name)."""

    exit_code: ClassVar[ExitStatus] = ExitStatus.USAGE


class EscapeError(WriteError):
    """A target that would lie outside the root it must be written under (refused before any write)."""


# A write with no file name attached (os.write, a buffered flush) failing with one of these is about the output.
WRITE_ERRNOS = frozenset({errno.ENOSPC, errno.EDQUOT, errno.EROFS, errno.EFBIG, errno.EACCES, errno.EPERM, errno.EIO})


def cannot_write(path: str | os.PathLike[str], exc: OSError) -> OutputIOError:
    """``/out/chk-3/op/file: cannot write: No space left on device (errno 28)``."""
    reason = exc.strerror or str(exc)
    code = f" (errno {exc.errno})" if exc.errno is not None else ""
    return OutputIOError(f"{os.fspath(path)}: cannot write: {reason}{code}")


def plain_parts(relative: str | os.PathLike[str]) -> tuple[str, ...]:
    """The names of a relative path, each a plain directory entry; ``EscapeError`` otherwise."""
    text = os.fspath(relative)
    parts = tuple(text.split("/"))
    if "\0" in text or text.startswith("/") or any(p in ("", ".", "..") for p in parts):
        raise EscapeError(f"{text!r}: not a plain relative path (no '', '.', '..', leading '/', NUL); nothing written")
    return parts


def make_missing_dirs(directory: Path, journal: Journal | None = None) -> list[tuple[Path, os.stat_result]]:
    """Make ``directory`` and its missing parents, outermost first; each one made (another run may make one
    meanwhile: that one is not ours) with its identity, so that only those are ever removed again. ``journal``
    hears of each before it is made."""
    missing = []
    for d in [directory, *directory.parents]:
        if os.path.lexists(d):
            break
        missing.append(d)
    created: list[tuple[Path, os.stat_result]] = []
    for d in reversed(missing):
        if journal is not None:
            journal({"dir": str(d)})
        try:
            os.mkdir(d)
        except FileExistsError:
            continue
        except OSError as exc:
            raise cannot_write(d, exc) from None
        created.append((d, os.lstat(d)))
    return created


@dataclass(frozen=True)
class Made:
    """One entry this run created: where (names under the root), what (identity), and whether a directory."""

    parts: tuple[str, ...]
    dev: int
    ino: int
    directory: bool


class Guard:
    """Writes confined to ``root`` (an existing directory), remembered for an exact undo.

    ``shown`` is the path messages name for the root (the final output path while ``root`` is its staging
    directory). ``sync``: fsync each file as it is written (False: the caller syncs the whole tree). ``journal``
    (the output's claim) hears of each entry before and after it is created, so a later run can remove what a
    killed one made (``spillway.storage.claim``)."""

    def __init__(
        self, root: Path, shown: Path | None = None, journal: Journal | None = None, sync: bool = True
    ) -> None:
        self.root = root
        self.sync = sync
        self.real_root = Path(os.path.realpath(root))
        self.shown = shown or root
        self.journal = journal
        self.made: list[Made] = []
        self.above: list[tuple[Path, os.stat_result]] = []  # directories above the root that opening() made
        self.fd = os.open(root, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)

    @classmethod
    def opening(cls, root: Path, journal: Journal | None = None) -> Guard:
        """A guard on ``root``, creating it and its missing parents first (those are undone with the rest)."""
        created = make_missing_dirs(root, journal)
        guard = cls(root, journal=journal)
        guard.above = created
        return guard

    def close(self) -> None:
        fd, self.fd = self.fd, -1
        if fd >= 0:
            _close(fd)

    # ------------------------------------------------------------------------------------------- targets

    def parts_of(self, target: str | os.PathLike[str]) -> tuple[str, ...]:
        """The names of an absolute ``target`` below the root; ``EscapeError`` when it is not below it as
        written, or resolves (symlinks, ``..``) elsewhere."""
        text = os.fspath(target)
        if "\0" in text:
            raise EscapeError(f"{text!r}: a NUL byte in a target path; nothing written")
        for base in (os.fspath(self.root).rstrip("/"), str(self.real_root).rstrip("/")):
            if text.startswith(base + "/"):
                try:
                    parts = plain_parts(text[len(base) + 1 :].rstrip("/"))
                except EscapeError:
                    raise EscapeError(
                        f"{text}: a '..' or '.' below {self.root}, where this run writes; nothing written"
                    ) from None
                break
        else:
            raise EscapeError(f"{text}: outside {self.root}, where this run writes; nothing written")
        resolved = Path(os.path.realpath(text))
        if resolved != self.real_root and self.real_root not in resolved.parents:
            raise EscapeError(f"{text}: resolves to {resolved}, outside {self.root}; nothing written")
        return parts

    def shown_path(self, parts: Iterable[str]) -> Path:
        return self.shown.joinpath(*parts)

    # ------------------------------------------------------------------------------------------- creating

    def _directory(self, parts: tuple[str, ...], create: bool) -> int:
        """A descriptor of the directory ``parts`` under the root, each step opened without following a
        symlink; missing directories are created (and remembered) when ``create``."""
        fd = os.dup(self.fd)
        try:
            for i, name in enumerate(parts):
                try:
                    nxt = os.open(name, _DIR_FLAGS, dir_fd=fd)
                except FileNotFoundError:
                    if not create:
                        raise
                    self._note({"dir": str(self.root.joinpath(*parts[: i + 1]))})
                    try:
                        os.mkdir(name, 0o755, dir_fd=fd)
                    except FileExistsError:
                        pass  # made meanwhile by someone else: opened below (not ours, never removed)
                    else:
                        st = os.stat(name, dir_fd=fd, follow_symlinks=False)
                        self.made.append(Made(parts[: i + 1], st.st_dev, st.st_ino, True))
                    nxt = os.open(name, _DIR_FLAGS, dir_fd=fd)
                except OSError as exc:
                    if exc.errno in (errno.ELOOP, errno.ENOTDIR):
                        raise _planted(self.shown_path(parts[: i + 1])) from None
                    raise
                fd, above = nxt, fd
                os.close(above)
            return fd
        except BaseException:
            _close(fd)
            raise

    def _note(self, entry: dict[str, Any]) -> None:
        if self.journal is not None:
            self.journal(entry)

    def _failed(self, parts: tuple[str, ...], exc: OSError, named: Path | None = None) -> WriteError:
        where = named or self.shown_path(parts)
        if exc.errno in (errno.ELOOP, errno.ENOTDIR):
            return _planted(where)
        if isinstance(exc, FileExistsError):
            return WriteError(f"{where}: already exists; spillway never overwrites")
        return cannot_write(where, exc)

    def write_file(self, parts: tuple[str, ...], chunks: Iterable[bytes], named: Path | None = None) -> Made:
        """Create the new file ``parts`` (never an existing one) holding ``chunks``. ``named``: the path
        messages give (the file a staged copy is for)."""
        try:
            dfd = self._directory(parts[:-1], create=True)
        except OSError as exc:
            raise self._failed(parts, exc, named) from None
        try:
            try:
                fd = os.open(parts[-1], _NEW_FILE, 0o644, dir_fd=dfd)
            except OSError as exc:
                raise self._failed(parts, exc, named) from None
            st = os.fstat(fd)
            made = Made(parts, st.st_dev, st.st_ino, False)
            self.made.append(made)
            try:
                for chunk in chunks:
                    write_all(fd, chunk)
                if self.sync:
                    os.fsync(fd)
            except OSError as exc:
                if exc.filename is not None:
                    raise  # a source that cannot be read: the source's own error
                raise self._failed(parts, exc, named) from None
            finally:
                _close(fd)
            return made
        finally:
            _close(dfd)

    def copy_file(self, source: Path, parts: tuple[str, ...], named: Path | None = None) -> Made:
        """A byte-exact copy of the regular file ``source`` as the new file ``parts``."""
        with open_regular(source) as src:
            return self.write_file(parts, _read_chunks(src), named)

    def place_copy(self, source: Path, parts: tuple[str, ...], run: str) -> bool:
        """Copy ``source`` to ``parts`` through a staged name beside it, then link it into place, which
        fails rather than replace anything that appeared meanwhile. An existing file with the same bytes is
        kept as it is (False: nothing placed); one with other bytes is refused."""
        target = self.shown_path(parts)
        if self._same_existing(source, parts):
            return False
        staged = (*parts[:-1], f".{parts[-1]}.spillway-{run}.partial")
        self._note({"tmp": str(self.root.joinpath(*staged))})
        made = self.copy_file(source, staged, named=target)
        self._note({"file": str(self.root.joinpath(*parts)), "dev": made.dev, "ino": made.ino})
        dfd = self._directory(parts[:-1], create=False)
        try:
            try:
                os.link(staged[-1], parts[-1], src_dir_fd=dfd, dst_dir_fd=dfd, follow_symlinks=False)
            except FileExistsError:
                self.remove(staged)
                if self._same_existing(source, parts):
                    return False
                raise WriteError(f"{target}: exists with different content; not overwritten") from None
            except OSError as exc:
                raise self._failed(parts, exc) from None
            self.made.append(Made(parts, made.dev, made.ino, False))
            self.remove(staged)
            return True
        finally:
            _close(dfd)

    def open_new(self, parts: tuple[str, ...]) -> BinaryIO:
        """The new file ``parts`` (never an existing one), open for writing by a caller that streams into it
        (a Parquet writer); the caller closes it. Remembered like any file this run made."""
        try:
            dfd = self._directory(parts[:-1], create=True)
        except OSError as exc:
            raise self._failed(parts, exc) from None
        try:
            fd = os.open(parts[-1], _NEW_FILE, 0o644, dir_fd=dfd)
        except OSError as exc:
            raise self._failed(parts, exc) from None
        finally:
            _close(dfd)
        st = os.fstat(fd)
        self.made.append(Made(parts, st.st_dev, st.st_ino, False))
        return os.fdopen(fd, "wb")

    def rename_new(self, staged: tuple[str, ...], parts: tuple[str, ...], replace: bool = False) -> None:
        """Give the file this run made at ``staged`` its final name ``parts`` in the same directory: a link that
        fails rather than replace anything (``WriteError`` naming it), then the staged name goes. ``replace``:
        the user asked to replace ``parts`` (an atomic rename over it)."""
        made = next((m for m in reversed(self.made) if m.parts == staged), None)
        if made is None or staged[:-1] != parts[:-1]:
            raise WriteError(f"{self.shown_path(parts)}: not a file this run made beside it; not renamed")
        dfd = self._directory(parts[:-1], create=False)
        try:
            try:
                if replace:
                    os.replace(staged[-1], parts[-1], src_dir_fd=dfd, dst_dir_fd=dfd)
                else:
                    os.link(staged[-1], parts[-1], src_dir_fd=dfd, dst_dir_fd=dfd, follow_symlinks=False)
            except FileExistsError:
                raise TargetExists(f"{self.shown_path(parts)}: exists; spillway never overwrites") from None
            except OSError as exc:
                raise self._failed(parts, exc) from None
            self.made.append(Made(parts, made.dev, made.ino, False))
            if replace:
                self.made.remove(made)
            else:
                self.remove(staged)
        finally:
            _close(dfd)

    def refuse_different(self, source: Path, parts: tuple[str, ...]) -> None:
        """Refuse (``WriteError``) when ``parts`` exists with other bytes than ``source``'s."""
        self._same_existing(source, parts)

    def make_directory(self, parts: tuple[str, ...]) -> None:
        """The directory ``parts`` and its missing parents (each remembered, and journaled, as made)."""
        try:
            _close(self._directory(parts, create=True))
        except OSError as exc:
            raise self._failed(parts, exc) from None

    def made_at(self, parts: tuple[str, ...]) -> Made:
        """The entry this run made at ``parts``."""
        made = next((m for m in reversed(self.made) if m.parts == parts), None)
        if made is None:
            raise WriteError(f"{self.shown_path(parts)}: not an entry this run made")
        return made

    def link_into_place(
        self, staged: tuple[str, ...], parts: tuple[str, ...], source: Path, noted: bool = False
    ) -> bool:
        """Give the file this run made at ``staged`` the name ``parts`` too (a link: it never replaces
        anything). An identical file already at ``parts`` is kept (False); one with other bytes is refused.
        ``noted``: the journal has heard of it already."""
        made = self.made_at(staged)
        if not noted:
            self._note({"file": str(self.root.joinpath(*parts)), "dev": made.dev, "ino": made.ino})
        sfd = self._directory(staged[:-1], create=False)
        try:
            try:
                dfd = self._directory(parts[:-1], create=True)
            except OSError as exc:
                raise self._failed(parts, exc) from None
            try:
                os.link(staged[-1], parts[-1], src_dir_fd=sfd, dst_dir_fd=dfd, follow_symlinks=False)
            except FileExistsError:
                if self._same_existing(source, parts):  # identical: kept as it is; other bytes: refused
                    return False
                raise WriteError(f"{self.shown_path(parts)}: gone while being placed") from None
            except OSError as exc:
                raise self._failed(parts, exc) from None
            finally:
                _close(dfd)
            self.made.append(Made(parts, made.dev, made.ino, False))
            return True
        finally:
            _close(sfd)

    def _same_existing(self, source: Path, parts: tuple[str, ...]) -> bool:
        """Whether ``parts`` exists (False if not) and holds exactly ``source``'s bytes (refused if not)."""
        try:
            dfd = self._directory(parts[:-1], create=False)
        except FileNotFoundError:
            return False
        except OSError as exc:
            raise self._failed(parts, exc) from None
        try:
            try:
                fd = os.open(parts[-1], os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC, dir_fd=dfd)
            except FileNotFoundError:
                return False
            except OSError as exc:
                raise self._failed(parts, exc) from None
            with os.fdopen(fd, "rb") as have:
                if not stat.S_ISREG(os.fstat(have.fileno()).st_mode) or not _same_bytes(source, have):
                    raise WriteError(f"{self.shown_path(parts)}: exists with different content; not overwritten")
            return True
        finally:
            _close(dfd)

    # ------------------------------------------------------------------------------------------- deleting

    def remove(self, parts: tuple[str, ...]) -> None:
        """Delete the entry ``parts`` this run made, if it still is that entry (else leave it)."""
        for made in reversed(self.made):
            if made.parts == parts:
                self.made.remove(made)
                _remove_identical(self.fd, made)
                return

    def remove_all(self) -> None:
        """Undo: every entry this run made, newest first, while it is still the entry made (a directory only
        once empty: what someone else put into it stays); then the directories above the root."""
        for made in reversed(self.made):
            with contextlib.suppress(OSError):  # best effort: the original failure is what the user must see
                _remove_identical(self.fd, made)
        self.made.clear()
        for d, st in reversed(self.above):
            try:
                now = os.lstat(d)
                if (now.st_dev, now.st_ino) == (st.st_dev, st.st_ino):
                    os.rmdir(d)
            except OSError:
                pass
        self.above = []


def _planted(where: Path) -> EscapeError:
    return EscapeError(f"{where}: a symlink or non-directory in the output tree; nothing written there")


def _remove_identical(root_fd: int, made: Made) -> None:
    parent = os.dup(root_fd)
    try:
        for name in made.parts[:-1]:
            nxt = os.open(name, _DIR_FLAGS, dir_fd=parent)
            parent, above = nxt, parent
            os.close(above)
        try:
            st = os.stat(made.parts[-1], dir_fd=parent, follow_symlinks=False)
        except FileNotFoundError:
            return
        if (st.st_dev, st.st_ino) != (made.dev, made.ino):
            return  # not what this run made (replaced meanwhile): never ours to delete
        if made.directory:
            try:
                os.rmdir(made.parts[-1], dir_fd=parent)
            except OSError as exc:
                if exc.errno not in (errno.ENOTEMPTY, errno.EEXIST):
                    raise
        else:
            os.unlink(made.parts[-1], dir_fd=parent)
    finally:
        _close(parent)


def _close(fd: int) -> None:
    """Close on the way out of a failure: an error closing must not hide the failure being reported."""
    with contextlib.suppress(OSError):
        os.close(fd)


def write_all(fd: int, data: bytes) -> None:
    """Every byte of ``data`` to ``fd`` (the one low-level write of the door: a fault test replaces it)."""
    view = memoryview(data)
    while view:
        view = view[os.write(fd, view) :]


def _read_chunks(src: Any) -> Iterator[bytes]:
    while chunk := src.read(CHUNK):
        yield chunk


def _same_bytes(source: Path, have: Any) -> bool:
    with open_regular(source) as want:
        while True:
            a, b = want.read(CHUNK), have.read(CHUNK)
            if a != b:
                return False
            if not a:
                return True
