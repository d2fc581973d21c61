"""Write a new checkpoint safely (every writer: repair and rescale).

The output is claimed first (``spillway.storage.claim``: one run per output, a lock beside it) and goes
to the claim's staging directory; every file of it is created through the one door for writing
(``spillway.storage.guard``: confined to that directory, never over anything). Only after a self-check
(re-read and decode the written ``_metadata``, then the caller's check, e.g. ``validate`` with a plan) is
it renamed into place, by a rename that cannot replace anything. A crash or a failed check leaves the
input untouched and no directory under the output name; any failure, Ctrl-C and SIGTERM included,
removes everything the run made (a ``kill -9`` leaves the claim, which the next run clears).

Durability (POSIX): every file and every directory of the output is fsynced before the check, and the
output's parent directory after the rename — a file's data reaches the disk with its own fsync, but a
directory entry (a new file's name, the rename itself) only with an fsync of the directory holding it.
"""

from __future__ import annotations

import errno
import os
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import TypeVar

from spillway import progress
from spillway.formats.metadata_codec import decode_metadata, encode_metadata
from spillway.model.checkpoint import CheckpointMetadata
from spillway.storage.claim import LEFT_NOTHING, Claim, claimed, terminate_as_exit
from spillway.storage.guard import WRITE_ERRNOS, Guard, OutputIOError, WriteError, cannot_write, plain_parts
from spillway.storage.names import METADATA

R = TypeVar("R")

__all__ = ["OutputIOError", "PlannedOutput", "WriteError", "write_checkpoint"]


@dataclass
class PlannedOutput:
    """What to write: the new metadata plus files to copy (source path -> path relative to the output)."""

    checkpoint: CheckpointMetadata
    copies: dict[Path, str] = field(default_factory=dict)
    # Absolute prefix the new metadata uses for the output directory (for the self-check's rebasing).
    final_prefix: str | None = None


def write_checkpoint(
    plan: PlannedOutput,
    out: Path,
    check: Callable[[Path, PlannedOutput], R],
    produce: Callable[[Path], CheckpointMetadata | None] | None = None,
    claim: Claim | None = None,
) -> R:
    """Write, self-check, rename; returns what ``check`` returned.

    ``check(tmp, plan)`` inspects the written temporary directory and raises ``WriteError`` to refuse
    it. ``produce(tmp)`` writes data files into the temporary directory first (rescale's channel
    state) and may return the final metadata, replacing ``plan.checkpoint``. ``claim``: the output's claim
    when the caller took it earlier (before copying data elsewhere); released here either way, and on a
    failure everything it recorded is removed."""
    if claim is None:
        with claimed(out) as own:
            result = _write_or_undo(plan, own, check, produce)
    else:
        with terminate_as_exit():
            result = _write_or_undo(plan, claim, check, produce)
    # The output is in place now: make its name durable. A failure here cannot undo the rename, so it says so.
    try:
        _fsync_dir(out.parent)
    except OSError as exc:
        raise WriteError(
            f"{out}: written, checked and renamed into place, but syncing {out.parent} failed ({exc}): "
            "the rename may not survive a crash"
        ) from exc
    return result


def _write_or_undo(
    plan: PlannedOutput,
    claim: Claim,
    check: Callable[[Path, PlannedOutput], R],
    produce: Callable[[Path], CheckpointMetadata | None] | None,
) -> R:
    """:func:`_write`; on any failure everything the claim holds is removed, and a failed write names the
    output path it was for."""
    try:
        return _write(plan, claim, check, produce)
    except OSError as exc:
        claim.abandon()
        failure = _as_output_error(exc, claim.staging, claim.out)
        if failure is None:
            raise
        raise OutputIOError(f"{failure}{LEFT_NOTHING}") from None
    except OutputIOError as exc:
        claim.abandon()
        raise OutputIOError(f"{exc}{LEFT_NOTHING}") from None
    except BaseException:
        claim.abandon()
        raise


def _write(
    plan: PlannedOutput,
    claim: Claim,
    check: Callable[[Path, PlannedOutput], R],
    produce: Callable[[Path], CheckpointMetadata | None] | None,
) -> R:
    tmp, out = claim.staging, claim.out
    guard = Guard(tmp, shown=out, sync=False)  # _fsync_tree syncs it all, then the directories
    try:
        if produce is not None:
            produced = produce(tmp)
            if produced is not None:
                plan.checkpoint = produced
        data = encode_metadata(plan.checkpoint)
        bar = progress.stage("copying files", sum(Path(s).stat().st_size for s in plan.copies)) if plan.copies else None
        for source, relative in plan.copies.items():
            guard.copy_file(Path(source), plain_parts(relative))
            if bar is not None:
                bar.advance(Path(source).stat().st_size)
        guard.write_file((METADATA,), [data])
    finally:
        guard.close()
    _fsync_tree(tmp)
    # Self-check: the bytes on disk decode to what we meant, and validate finds no error.
    reread = (tmp / METADATA).read_bytes()
    if reread != data or encode_metadata(decode_metadata(reread, str(tmp / METADATA))) != data:
        raise WriteError("self-check: the written _metadata does not read back identically")
    result = check(tmp, plan)
    claim.publish()
    return result


def _as_output_error(exc: OSError, tmp: Path, out: Path) -> OutputIOError | None:
    """A failed write in the staging directory, named by the output path it was for; None: not the output's."""
    name = exc.filename
    if name is not None:
        path = Path(os.fsdecode(name))
        if path != tmp and tmp not in path.parents:
            return None
        return cannot_write(out / path.relative_to(tmp) if path != tmp else out, exc)
    return cannot_write(out, exc) if exc.errno in WRITE_ERRNOS else None


def _fsync_tree(root: Path) -> None:
    """Every file's data, then every directory's entries, deepest first (the root last)."""
    directories = [root]
    for path in root.rglob("*"):
        if path.is_symlink():
            # Nothing a writer makes is a symlink: one here was planted, and could send readers anywhere.
            raise WriteError(f"{path}: a symlink in the output being written; refused")
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
