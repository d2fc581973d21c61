"""Write a new checkpoint safely (every writer: repair and rescale).

The output goes to a temporary sibling directory first; only after a self-check (re-read and decode
the written ``_metadata``, then the caller's check, e.g. ``validate`` with a plan) is it renamed into
place. A crash or a failed check leaves the input untouched and no directory under the output name.

Durability (POSIX): every file and every directory of the output is fsynced before the check, and the
output's parent directory after the rename — a file's data reaches the disk with its own fsync, but a
directory entry (a new file's name, the rename itself) only with an fsync of the directory holding it.
"""

from __future__ import annotations

import errno
import os
import shutil
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import TypeVar

from spillway import progress
from spillway.errors import SpillwayError
from spillway.formats.metadata_codec import decode_metadata, encode_metadata
from spillway.model.checkpoint import Checkpoint

R = TypeVar("R")


class WriteError(SpillwayError):
    """The output could not be written or did not pass its self-check (nothing was left behind)."""


@dataclass
class PlannedOutput:
    """What to write: the new metadata plus files to copy (source path -> path relative to the output)."""

    checkpoint: Checkpoint
    copies: dict[Path, str] = field(default_factory=dict)
    # Absolute prefix the new metadata uses for the output directory (for the self-check's rebasing).
    final_prefix: str | None = None


def prepare_output(out: Path) -> Path:
    """Refuse to overwrite anything; return the temporary directory to write into."""
    if out.exists():
        raise WriteError(f"{out}: already exists; spillway never overwrites (choose a new out=...)")
    parent = out.parent
    parent.mkdir(parents=True, exist_ok=True)
    tmp = parent / f".{out.name}.spillway-{uuid.uuid4().hex[:8]}.partial"
    tmp.mkdir()
    return tmp


def write_checkpoint(
    plan: PlannedOutput,
    out: Path,
    check: Callable[[Path, PlannedOutput], R],
    produce: Callable[[Path], Checkpoint | None] | None = None,
) -> R:
    """Write, self-check, rename; returns what ``check`` returned.

    ``check(tmp, plan)`` inspects the written temporary directory and raises ``WriteError`` to refuse
    it. ``produce(tmp)`` writes data files into the temporary directory first (rescale's channel
    state) and may return the final metadata, replacing ``plan.checkpoint``."""
    tmp = prepare_output(out)
    try:
        if produce is not None:
            produced = produce(tmp)
            if produced is not None:
                plan.checkpoint = produced
        data = encode_metadata(plan.checkpoint)
        bar = progress.stage("copying files", sum(Path(s).stat().st_size for s in plan.copies)) if plan.copies else None
        for source, relative in plan.copies.items():
            target = tmp / relative
            target.parent.mkdir(parents=True, exist_ok=True)
            shutil.copyfile(source, target)
            if bar is not None:
                bar.advance(Path(source).stat().st_size)
        (tmp / "_metadata").write_bytes(data)
        _fsync_tree(tmp)
        # Self-check: the bytes on disk decode to what we meant, and validate finds no error.
        reread = (tmp / "_metadata").read_bytes()
        if reread != data or encode_metadata(decode_metadata(reread, str(tmp / "_metadata"))) != data:
            raise WriteError("self-check: the written _metadata does not read back identically")
        result = check(tmp, plan)
        os.rename(tmp, out)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    # The output is in place now: make its name durable. A failure here cannot undo the rename, so it says so.
    try:
        _fsync_dir(out.parent)
    except OSError as exc:
        raise WriteError(
            f"{out}: written, checked and renamed into place, but syncing {out.parent} failed ({exc}): "
            "the rename may not survive a crash"
        ) from exc
    return result


def _fsync_tree(root: Path) -> None:
    """Every file's data, then every directory's entries, deepest first (the root last)."""
    directories = [root]
    for path in root.rglob("*"):
        if path.is_file():
            with open(path, "rb") as fh:
                os.fsync(fh.fileno())
        elif path.is_dir():
            directories.append(path)
    for directory in sorted(directories, key=lambda d: len(d.parts), reverse=True):
        _fsync_dir(directory)


# File systems that cannot fsync a directory say so with these; there is nothing more to do on them.
_DIR_FSYNC_UNSUPPORTED = frozenset({errno.EINVAL, errno.ENOTSUP, errno.EOPNOTSUPP})


def _fsync_dir(directory: Path) -> None:
    """fsync a directory's entries (POSIX: open it read-only, fsync the descriptor); a no-op where directories
    cannot be opened (not POSIX) or the file system does not sync them."""
    if os.name != "posix":
        return
    fd = os.open(directory, os.O_RDONLY | getattr(os, "O_DIRECTORY", 0))
    try:
        os.fsync(fd)
    except OSError as exc:
        if exc.errno not in _DIR_FSYNC_UNSUPPORTED:
            raise
    finally:
        os.close(fd)
