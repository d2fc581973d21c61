"""Files a reading command writes for the user (``report``'s page, ``analyze``'s Parquet views), through the
guard like every other write: each is streamed under a staged name beside its target, then given its name
by a link that never replaces anything; an existing target is refused before any work (exit 2, naming it),
and on any failure, Ctrl-C included, every file and directory the run made is removed again."""

from __future__ import annotations

import os
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import BinaryIO

from spillway.storage.guard import WRITE_ERRNOS, Guard, TargetExists, cannot_write, plain_parts


def refuse_existing(targets: list[Path], hint: str = "") -> None:
    """``TargetExists`` naming the first of ``targets`` that exists (a dangling symlink included)."""
    for target in targets:
        if os.path.lexists(target):
            raise TargetExists(f"{target}: exists; spillway never overwrites{hint}")


class NewFiles:
    """New files in ``directory`` (created with its missing parents if need be), all or none."""

    def __init__(self, directory: Path) -> None:
        self.guard = Guard.opening(directory)
        self.run = uuid.uuid4().hex[:8]
        self.staged: list[tuple[tuple[str, ...], tuple[str, ...]]] = []

    @contextmanager
    def writing(self, name: str) -> Iterator[BinaryIO]:
        """A new file to stream ``name``'s bytes into, under its staged name until :meth:`publish`."""
        parts = plain_parts(name)
        staged = (*parts[:-1], f".{parts[-1]}.spillway-{self.run}.partial")
        target = self.guard.shown_path(parts)
        fh = self.guard.open_new(staged)
        self.staged.append((staged, parts))
        try:
            with fh:
                yield fh
                fh.flush()
                os.fsync(fh.fileno())
        except OSError as exc:
            if exc.errno in WRITE_ERRNOS and exc.filename is None:
                raise cannot_write(target, exc) from None
            raise

    def publish(self, replace: bool = False) -> list[Path]:
        """Every staged file under its final name (``replace``: over an existing one, the user asked for it)."""
        for staged, parts in self.staged:
            self.guard.rename_new(staged, parts, replace)
        return [self.guard.shown_path(parts) for _, parts in self.staged]

    def abandon(self) -> None:
        self.guard.remove_all()

    def close(self) -> None:
        self.guard.close()


@contextmanager
def new_files(directory: Path) -> Iterator[NewFiles]:
    """:class:`NewFiles` for the block; unless it published, everything it made is removed."""
    files = NewFiles(directory)
    try:
        yield files
    except BaseException:
        files.abandon()
        raise
    finally:
        files.close()


def write_new_file(target: Path, data: bytes, replace: bool = False) -> Path:
    """``data`` as the new file ``target`` (see the module's doc); ``replace``: the user asked to replace it."""
    if not replace:
        refuse_existing([target])
    with new_files(target.parent) as files:
        with files.writing(target.name) as fh:
            fh.write(data)
        return files.publish(replace)[0]
