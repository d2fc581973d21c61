"""Every file a checkpoint depends on, where it lives, and — across retained checkpoints of a job —
which files they share and which become unreferenced when one checkpoint is dropped.

A file is known by where it is on this machine (its resolved local path) when it is there, else by
the name its handles give it; so one file named absolutely by one checkpoint and relatively by
another is still one file. Each file sits in one *area* of the job directory: a ``chk-N`` directory,
``shared/`` or ``taskowned/``; or it is ``external`` (another job, bucket or location).
"""

from __future__ import annotations

import os
import re
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

from spillway.formats.errors import CheckpointFormatError
from spillway.model.checkpoint import is_file_backed
from spillway.model.walk import all_stream_handles
from spillway.storage.load import (
    Damaged,
    LoadedCheckpoint,
    is_remote_path,
    job_checkpoints,
    load_checkpoint,
    remote_workdir,
)
from spillway.storage.locate import LocateError, strip_file_scheme

SCHEMA = "spillway.files/1"
_CHK = re.compile(r"^chk-\d+$")
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

    @property
    def exists(self) -> bool:
        return self.size is not None

    def group(self, chk_name: str) -> str:
        """Where the file lives seen from the checkpoint ``chk_name``."""
        if self.area == chk_name:
            return "own"
        if self.area.startswith("chk-"):
            return "other checkpoint"
        return self.area

    def display(self) -> str:
        """Short name: job-relative inside the job directory, the full name outside it."""
        return self.shown or self.local or self.name


@dataclass
class CheckpointFiles:
    loaded: LoadedCheckpoint
    source: str  # the PATH given (or the chk-N directory it expanded to)
    keys: set[str] = field(default_factory=set)

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
        """Files only checkpoint ``index`` references: unreferenced once it is dropped."""
        return [f for f in self.of(index) if f.checkpoints == {index}]

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
        if is_remote_path(p) and workdir is None:
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


def collect_files(checkpoints: Sequence[tuple[str, LoadedCheckpoint]]) -> FilesReport:
    report = FilesReport([CheckpointFiles(loaded, source) for source, loaded in checkpoints], {})
    stats: dict[str, int | None] = {}
    for index, cf in enumerate(report.checkpoints):
        loaded = cf.loaded
        job_dir = os.path.abspath(loaded.resolver.job_dir)
        chk_name = cf.chk_name
        remote = loaded.location.uri is not None
        # A remote checkpoint is read from a local working copy: its job is named by the URI.
        chk_uri = loaded.location.shown_dir if remote else None
        job_id = chk_uri.rstrip("/").rsplit("/", 2)[-2] if chk_uri else os.path.basename(job_dir)
        for site, handle in all_stream_handles(loaded.checkpoint):
            if not is_file_backed(handle):
                continue
            name = handle.file_name
            resolved = loaded.resolver.resolve(handle)
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
                    directory = name.rsplit("/", 1)[0] if not handle.relative else (chk_uri or directory)
                shown_local = None if remote or via else local  # a remote file's local copy: a temporary detail
                entry = report.files[key] = FileEntry(key, name, area, directory, shown_local, size, shown)
            entry.handles += 1
            entry.referenced_bytes += handle.state_size
            entry.operators.add(site.operator.operator_id)
            entry.kinds.add(site.kind)
            entry.checkpoints.add(index)
            cf.keys.add(key)
    return report


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
        try:
            st = os.stat(local)
            stats[local] = st.st_size if os.path.isfile(local) else None
        except OSError:
            stats[local] = None
    return stats[local]


def _exists(local: str, stats: dict[str, int | None]) -> bool:
    return _size(local, stats) is not None


def _other_checkpoint(name: str, job_dir: str) -> str | None:
    """A file in another ``chk-M`` of this job (a retained checkpoint referencing an older one's
    files): where it is when the job directory was moved."""
    text = strip_file_scheme(name) or name.split("://", 1)[-1]
    parts = text.split("/")
    for i in range(len(parts) - 2, 0, -1):
        if _CHK.match(parts[i]) and parts[i - 1] == os.path.basename(job_dir):
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
        if first in _ANCHORS or _CHK.match(first):
            return first, os.path.dirname(local), inside
    # Not found here (or outside this job directory): judge by the name as written.
    text = strip_file_scheme(name) or name.split("://", 1)[-1]
    parts = text.split("/")
    for i in range(len(parts) - 2, 0, -1):
        if (parts[i] in _ANCHORS or _CHK.match(parts[i])) and parts[i - 1] == job_id:
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
                "rebased": cf.loaded.resolver.rebases(),
                "rebase_unmatched": cf.loaded.unmatched_rebase,
                # who the ids in files[].operators are: the name Flink stored (V5+), the bound --plan's
                "operators": [
                    {"operator_id": o.operator_id, "name": o.name, "plan_name": o.plan_name, "uid": o.uid}
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
            }
            for f in sorted(report.files.values(), key=_order)
        ],
        "shared": {"files": len(shared), "bytes": _bytes(shared), "paths": [f.key for f in shared]},
        "missing": [f.key for f in report.missing()],
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
