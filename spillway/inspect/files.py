"""Every file a checkpoint depends on, where it lives, and — across retained checkpoints of a job —
which files they share and which become unreferenced when one checkpoint is dropped.

A file is known by where it is on this machine (its resolved local path) when it is there, else by
the name its handles give it; so one file named absolutely by one checkpoint and relatively by
another is still one file. Each file sits in one *area* of the job directory: a ``chk-N`` directory,
``shared/`` or ``taskowned/``; or it is ``external`` (another job, bucket or location).

Where a file is is decided by its real path (symlinks and ``..`` resolved), never by the name alone: a
handle path that climbs out of the job directory, or a symlink that leads out of it, names an
``external`` file, flagged ``outside_job_dir``, and no external file is ever listed as freed by dropping a
checkpoint. A path no file system accepts (a NUL byte) is reported as bad and never looked up.
"""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from spillway.formats.errors import CheckpointFormatError
from spillway.model.checkpoint import is_file_backed
from spillway.model.paths import BAD_PATH, PathProblem, path_problem, shown_path
from spillway.model.walk import all_stream_handles
from spillway.storage import remote_copies
from spillway.storage.load import (
    Damaged,
    LoadedCheckpoint,
    job_checkpoints,
    load_checkpoint,
    remote_workdir,
)
from spillway.storage.locate import ESCAPES_CHECKPOINT, LocateError, strip_file_scheme
from spillway.storage.names import CHK_DIR, is_remote

SCHEMA = "spillway.files/1"
_ANCHORS = ("shared", "taskowned")
GROUPS = ("own", "shared", "taskowned", "other checkpoint", "external")


@dataclass
class FileEntry:
    """One file, as the checkpoints that reference it see it."""

    key: str  # identity: the local path when the file is here, else the name as written
    name: str  # as the first handle naming it wrote it
    area: str  # "chk-N", "shared", "taskowned" or "external"
    directory: str  # the directory it is in (as local as known)
    local: str | None
    size: int | None  # on disk; None when not found
    shown: str = ""  # short name: job-relative inside the job directory, the full name outside it
    handles: int = 0
    referenced_bytes: int = 0  # what the handles name (segments: their part of the file)
    operators: set[str] = field(default_factory=set)
    kinds: set[str] = field(default_factory=set)
    checkpoints: set[int] = field(default_factory=set)  # indexes into FilesReport.checkpoints
    path_problem: PathProblem | None = None  # the name as written is unsafe (spillway.model.paths)

    @property
    def exists(self) -> bool:
        return self.size is not None

    @property
    def outside_job_dir(self) -> bool:
        """Not in the job directory (another job, bucket or location; reached by ``..`` or a symlink)."""
        return self.area == "external"

    @property
    def freed_with_checkpoint(self) -> bool:
        """Whether dropping the checkpoints referencing it may free it: never for a file outside the job
        directory (another job's, or anyone's file a crafted path names) or one named by an unsafe path."""
        return not self.outside_job_dir and self.path_problem is None

    def group(self, chk_name: str) -> str:
        """Where the file lives seen from the checkpoint ``chk_name``."""
        if self.area == chk_name:
            return "own"
        if self.area.startswith("chk-"):
            return "other checkpoint"
        return self.area

    @property
    def shown_name(self) -> str:
        """The name as its handle wrote it, fit for a terminal (a NUL or control character escaped)."""
        return shown_path(self.name)

    def display(self) -> str:
        """Short name: job-relative inside the job directory, the full name outside it."""
        return self.shown or self.local or self.name


@dataclass
class CheckpointFiles:
    loaded: LoadedCheckpoint
    source: str  # the PATH given (or the chk-N directory it expanded to)
    keys: set[str] = field(default_factory=set)
    #: Operator id -> the name a bound plan gives it (``JobBinding.names``), for operators stored by id only.
    plan_names: Mapping[str, str] = field(default_factory=dict)

    @property
    def chk_name(self) -> str:
        return self.loaded.location.checkpoint_dir.name

    @property
    def metadata_path(self) -> str:
        """As the user knows it: a remote checkpoint's URI, never its local working copy."""
        return self.loaded.location.shown


@dataclass
class FilesReport:
    checkpoints: list[CheckpointFiles]
    files: dict[str, FileEntry]
    damaged: list[Damaged] = field(default_factory=list)  # checkpoints left out: _metadata does not decode

    def of(self, index: int) -> list[FileEntry]:
        return sorted((f for f in self.files.values() if index in f.checkpoints), key=_order)

    def exclusive(self, index: int) -> list[FileEntry]:
        """Files only checkpoint ``index`` references, in the job directory: unreferenced once it is dropped
        (files outside the job directory are never listed: see ``outside``)."""
        return [f for f in self.of(index) if f.checkpoints == {index} and f.freed_with_checkpoint]

    def outside(self, index: int) -> list[FileEntry]:
        """Files checkpoint ``index`` references outside the job directory or by an unsafe path: never
        to be deleted with it."""
        return [f for f in self.of(index) if not f.freed_with_checkpoint]

    def unsafe(self) -> list[FileEntry]:
        """Files named by a path with a ``..`` component or a byte no file system accepts."""
        return sorted((f for f in self.files.values() if f.path_problem is not None), key=_order)

    def shared(self) -> list[FileEntry]:
        """Files more than one of the checkpoints reference."""
        return sorted((f for f in self.files.values() if len(f.checkpoints) > 1), key=_order)

    def missing(self) -> list[FileEntry]:
        return sorted((f for f in self.files.values() if not f.exists), key=_order)

    def to_json(self) -> dict[str, object]:
        return files_json(self)


def _order(f: FileEntry) -> tuple[int, str, str]:
    rank = 0 if f.area.startswith("chk-") else 1 + (_ANCHORS.index(f.area) if f.area in _ANCHORS else 2)
    return rank, f.area, f.display()


def _bytes(files: Sequence[FileEntry]) -> int:
    return sum(f.size or 0 for f in files)


# --------------------------------------------------------------------------------------------------
# opening several checkpoints


def expand_paths(paths: Sequence[str]) -> list[str]:
    """A job directory holding several ``chk-N`` stands for all of them (oldest first), local or remote;
    anything else (a ``chk-N`` directory, a ``_metadata`` file) for itself."""
    out: list[str] = []
    for p in paths:
        chks = job_checkpoints(p)
        out.extend(chks if len(chks) > 1 else [p])
    return out


def open_checkpoints(
    paths: Sequence[str], rebase: list[str] | None = None, damaged: list[Damaged] | None = None
) -> list[tuple[str, LoadedCheckpoint]]:
    """Load every checkpoint PATHs stand for. With ``damaged`` (a list to fill), a checkpoint whose
    ``_metadata`` does not decode is recorded there and left out, as long as another one loads."""
    if not paths:
        raise LocateError("name at least one checkpoint")
    workdir: Path | None = None  # remote checkpoints share one working copy: shared files come once
    opened: list[tuple[str, LoadedCheckpoint]] = []
    first_error: CheckpointFormatError | None = None
    for p in expand_paths(paths):
        if is_remote(p) and workdir is None:
            workdir = remote_workdir()
        try:
            opened.append((p, load_checkpoint(p, rebase, workdir=workdir)))
        except CheckpointFormatError as exc:
            if damaged is None:
                raise
            first_error = first_error or exc
            damaged.append(Damaged(p, str(exc)))
    if not opened and first_error is not None:
        raise first_error
    return opened


# --------------------------------------------------------------------------------------------------
# collecting


def collect_files(
    checkpoints: Sequence[tuple[str, LoadedCheckpoint]], plan_names: Sequence[Mapping[str, str]] = ()
) -> FilesReport:
    """The files of ``checkpoints``; ``plan_names[i]``: the names a plan bound to checkpoint ``i`` gives."""
    named = list(plan_names) + [{}] * (len(checkpoints) - len(plan_names))
    report = FilesReport(
        [CheckpointFiles(ld, src, plan_names=n) for (src, ld), n in zip(checkpoints, named, strict=True)], {}
    )
    stats: dict[str, int | None] = {}
    for index, cf in enumerate(report.checkpoints):
        loaded = cf.loaded
        job_dir = os.path.abspath(loaded.resolver.job_dir)
        chk_name = cf.chk_name
        remote = loaded.location.uri is not None
        # A remote checkpoint is read from a local working copy: its job is named by the URI.
        chk_uri = loaded.location.shown_dir if remote else None
        job_id = chk_uri.rstrip("/").rsplit("/", 2)[-2] if chk_uri else os.path.basename(job_dir)
        inside = _Inside(job_dir)
        for site, handle in all_stream_handles(loaded.checkpoint):
            if not is_file_backed(handle):
                continue
            name = handle.file_name
            resolved = loaded.resolver.resolve(handle)
            problem = path_problem(name, handle.relative)
            escaped = problem is not None or (resolved is not None and resolved.problem == ESCAPES_CHECKPOINT)
            if escaped:
                key, made = _escaped_entry(name, handle.relative, problem, cf, remote, inside, stats)
                entry = report.files.get(key)
                if entry is None:
                    entry = report.files[key] = made
                _count(entry, handle.state_size, site.operator.operator_id, site.kind, index)
                cf.keys.add(key)
                continue
            local = None if resolved is None else resolved.local_text
            # a file read from a store (a remote checkpoint's, or rebased onto s3://…) is known by its URI
            via = None if resolved is None else resolved.via
            if local is not None:
                local = os.path.abspath(local)
            if local is None or not _exists(local, stats):
                local = _other_checkpoint(name, job_dir) or local
            if via is not None:
                key = via
            elif local is not None and not remote:
                key = local
            else:
                key = _name_key(name, handle.relative, chk_uri or cf.source)
            entry = report.files.get(key)
            if entry is None:
                size = _size(local, stats) if local is not None else None
                area, directory, shown = _area(
                    name, None if remote else (via or local), job_dir, job_id, chk_name, handle.relative
                )
                if remote and area != "external":
                    # where the file is: a rebased one's new place, as on local disk
                    directory = (via or name).rsplit("/", 1)[0] if not handle.relative else (chk_uri or directory)
                elif remote and via is not None:
                    # outside the anchors (e.g. the changelog backend's dstl/) but rebased: its new place too
                    directory, shown = via.rsplit("/", 1)[0], via
                if not remote and via is None and local is not None and size is not None and not inside(local):
                    # found here, but its real path (a symlink followed) is outside the job directory
                    area, directory, shown = "external", os.path.dirname(local), local
                shown_local = None if remote or via else local  # a remote file's local copy: a temporary detail
                entry = report.files[key] = FileEntry(key, name, area, directory, shown_local, size, shown)
            _count(entry, handle.state_size, site.operator.operator_id, site.kind, index)
            cf.keys.add(key)
    return report


def _count(entry: FileEntry, size: int, operator_id: str, kind: str, index: int) -> None:
    entry.handles += 1
    entry.referenced_bytes += size
    entry.operators.add(operator_id)
    entry.kinds.add(kind)
    entry.checkpoints.add(index)


class _Inside:
    """Whether a local path's real path (symlinks and ``..`` resolved) is in the job directory. Real
    paths of directories are computed once each: a checkpoint names thousands of files in a few."""

    def __init__(self, job_dir: str):
        self.root = os.path.realpath(job_dir)
        self.dirs: dict[str, str] = {}

    def real(self, local: str) -> str:
        parent, name = os.path.split(local)
        real_parent = self.dirs.get(parent)
        if real_parent is None:
            real_parent = self.dirs[parent] = os.path.realpath(parent)
        joined = os.path.join(real_parent, name)
        return os.path.realpath(joined) if os.path.islink(joined) or name in ("", ".", "..") else joined

    def __call__(self, local: str) -> bool:
        return self.real(local).startswith(self.root.rstrip("/") + "/")


def _escaped_entry(
    name: str,
    relative: bool,
    problem: PathProblem | None,
    cf: CheckpointFiles,
    remote: bool,
    inside: _Inside,
    stats: dict[str, int | None],
) -> tuple[str, FileEntry]:
    """The entry of a file named by a path that leaves its directory (``..``, a symlink) or that no file system
    accepts. An escaping local path is looked up as the operating system would (its real existence and size,
    known by its real path); a bad one never is."""
    written = f"{cf.chk_name}/{name}" if relative else name
    if problem is not None and problem.rule == BAD_PATH:
        return written, FileEntry(written, name, "external", "", None, None, shown_path(written), path_problem=problem)
    as_written = (
        None
        if remote
        else (os.path.join(cf.loaded.location.checkpoint_dir, name) if relative else strip_file_scheme(name))
    )
    size = _size(as_written, stats) if as_written is not None else None
    if as_written is None or size is None:
        return written, FileEntry(
            written, name, "external", name.rsplit("/", 1)[0], None, None, shown_path(written), path_problem=problem
        )
    real = os.path.realpath(as_written)  # as the kernel walks it: each symlink followed before a ".." applies
    root = inside.root.rstrip("/") + "/"
    first = real[len(root) :].split("/", 1)[0] if real.startswith(root) else ""
    if first in _ANCHORS or CHK_DIR.match(first):
        return real, FileEntry(
            real, name, first, os.path.dirname(real), real, size, real[len(root) :], path_problem=problem
        )
    return real, FileEntry(real, name, "external", os.path.dirname(real), real, size, real, path_problem=problem)


def checkpoint_files(paths: Sequence[str], rebase: list[str] | None = None) -> FilesReport:
    """``spillway files``: open PATHs (a job directory: every ``chk-N`` in it) and collect their files;
    a checkpoint whose ``_metadata`` does not decode is reported in ``damaged``, the others answered."""
    damaged: list[Damaged] = []
    report = collect_files(open_checkpoints(paths, rebase, damaged))
    report.damaged = damaged
    return report


def _name_key(name: str, relative: bool, source: str) -> str:
    if relative:
        return f"{source.rstrip('/')}/{name}"
    return strip_file_scheme(name) or name


def _size(local: str, stats: dict[str, int | None]) -> int | None:
    if local not in stats:
        stats[local] = remote_copies.size_of(local)  # a remote checkpoint's file: its listed size, not read
    return stats[local]


def _exists(local: str, stats: dict[str, int | None]) -> bool:
    return _size(local, stats) is not None


def _other_checkpoint(name: str, job_dir: str) -> str | None:
    """A file in another ``chk-M`` of this job (a retained checkpoint referencing an older one's
    files): where it is when the job directory was moved."""
    text = strip_file_scheme(name) or name.split("://", 1)[-1]
    parts = text.split("/")
    for i in range(len(parts) - 2, 0, -1):
        if CHK_DIR.match(parts[i]) and parts[i - 1] == os.path.basename(job_dir):
            tail = parts[i:]
            if all(p not in ("", ".", "..") for p in tail):
                candidate = os.path.join(job_dir, *tail)
                return candidate if os.path.isfile(candidate) else None
    return None


def _area(
    name: str, local: str | None, job_dir: str, job_id: str, chk_name: str, relative: bool
) -> tuple[str, str, str]:
    if relative:
        return chk_name, os.path.dirname(local) if local else chk_name, f"{chk_name}/{name}"
    if local is not None and local.startswith(job_dir + os.sep):
        inside = local[len(job_dir) + 1 :]
        first = inside.split(os.sep, 1)[0]
        if first in _ANCHORS or CHK_DIR.match(first):
            return first, os.path.dirname(local), inside
    # Not found here (or outside this job directory): judge by the name as written.
    text = strip_file_scheme(name) or name.split("://", 1)[-1]
    parts = text.split("/")
    for i in range(len(parts) - 2, 0, -1):
        if (parts[i] in _ANCHORS or CHK_DIR.match(parts[i])) and parts[i - 1] == job_id:
            return parts[i], name.rsplit("/", 1)[0], "/".join(parts[i:])
    return "external", (os.path.dirname(local) if local else name.rsplit("/", 1)[0]), local or name


# --------------------------------------------------------------------------------------------------
# JSON


def files_json(report: FilesReport) -> dict[str, object]:
    """The ``spillway.files/1`` document (docs/cli.md#spillway-files)."""
    checkpoints = []
    for i, cf in enumerate(report.checkpoints):
        mine = report.of(i)
        groups: dict[str, dict[str, int]] = {g: {"files": 0, "bytes": 0} for g in GROUPS}
        for f in mine:
            g = groups[f.group(cf.chk_name)]
            g["files"] += 1
            g["bytes"] += f.size or 0
        exclusive = report.exclusive(i)
        outside = report.outside(i)
        checkpoints.append(
            {
                "index": i,
                "path": cf.source,
                "metadata": cf.metadata_path,
                "checkpoint_id": cf.loaded.checkpoint.checkpoint_id,
                "format_version": cf.loaded.checkpoint.format_version,
                "directory": cf.chk_name,
                "files": len(mine),
                "bytes": _bytes(mine),
                "missing": sum(1 for f in mine if not f.exists),
                "groups": groups,
                "unreferenced_if_dropped": {
                    "files": len(exclusive),
                    "bytes": _bytes(exclusive),
                    "paths": [f.key for f in exclusive],
                },
                # listed apart: never freed by dropping this checkpoint, whoever else references them
                "outside_job_dir": {
                    "files": len(outside),
                    "bytes": _bytes(outside),
                    "paths": [f.key for f in outside],
                },
                "rebased": cf.loaded.resolver.rebases(),
                "rebase_unmatched": cf.loaded.unmatched_rebase,
                # who the ids in files[].operators are: the name Flink stored (V5+), the bound --plan's
                "operators": [
                    {
                        "operator_id": o.operator_id,
                        "name": o.name,
                        "plan_name": cf.plan_names.get(o.operator_id),
                        "uid": o.uid,
                    }
                    for o in cf.loaded.checkpoint.operators
                ],
            }
        )
    shared = report.shared()
    return {
        "schema": SCHEMA,
        "checkpoints": checkpoints,
        "files": [
            {
                "path": f.key,
                "name": f.name,
                "shown": f.display(),
                "area": f.area,
                "directory": f.directory,
                "local": f.local,
                "exists": f.exists,
                "size": f.size,
                "handles": f.handles,
                "referenced_bytes": f.referenced_bytes,
                "operators": sorted(f.operators),
                "state_kinds": sorted(f.kinds),
                "checkpoints": sorted(f.checkpoints),
                "outside_job_dir": f.outside_job_dir,
                "path_problem": None
                if f.path_problem is None
                else {"rule": f.path_problem.rule, "reason": f.path_problem.reason},
            }
            for f in sorted(report.files.values(), key=_order)
        ],
        "shared": {"files": len(shared), "bytes": _bytes(shared), "paths": [f.key for f in shared]},
        "missing": [f.key for f in report.missing()],
        "unsafe_paths": [f.key for f in report.unsafe()],
        "damaged": [d.to_json() for d in report.damaged],
    }


__all__ = [
    "SCHEMA",
    "CheckpointFiles",
    "FileEntry",
    "FilesReport",
    "checkpoint_files",
    "collect_files",
    "expand_paths",
    "files_json",
    "open_checkpoints",
]
