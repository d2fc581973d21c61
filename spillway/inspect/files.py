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

from spillway.model.checkpoint import is_file_backed
from spillway.model.walk import all_stream_handles
from spillway.storage.load import LoadedCheckpoint, load_checkpoint
from spillway.storage.locate import METADATA, LocateError, strip_file_scheme

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
        return str(self.loaded.location.metadata_path)


@dataclass
class FilesReport:
    checkpoints: list[CheckpointFiles]
    files: dict[str, FileEntry]

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
    """A job directory holding several ``chk-N`` stands for all of them (oldest first); anything else
    (a ``chk-N`` directory, a ``_metadata`` file, a URI) for itself."""
    out: list[str] = []
    for p in paths:
        local = Path(p)
        if "://" in p and not p.startswith("file:"):
            out.append(p)
            continue
        if local.is_dir() and not (local / METADATA).is_file():
            chks = _chk_dirs(local)
            if not chks:
                jobs = [c for c in sorted(local.iterdir()) if c.is_dir() and _chk_dirs(c)]
                if len(jobs) == 1:
                    chks = _chk_dirs(jobs[0])
            if len(chks) > 1:
                out.extend(str(c) for c in chks)
                continue
        out.append(p)
    return out


def _chk_dirs(directory: Path) -> list[Path]:
    found = [c for c in directory.iterdir() if _CHK.match(c.name) and (c / METADATA).is_file()]
    return sorted(found, key=lambda c: int(c.name[4:]))


def open_checkpoints(paths: Sequence[str], rebase: list[str] | None = None) -> list[tuple[str, LoadedCheckpoint]]:
    if not paths:
        raise LocateError("name at least one checkpoint")
    return [(p, load_checkpoint(p, rebase)) for p in expand_paths(paths)]


# --------------------------------------------------------------------------------------------------
# collecting


def collect_files(checkpoints: Sequence[tuple[str, LoadedCheckpoint]]) -> FilesReport:
    report = FilesReport([CheckpointFiles(loaded, source) for source, loaded in checkpoints], {})
    stats: dict[str, int | None] = {}
    for index, cf in enumerate(report.checkpoints):
        loaded = cf.loaded
        job_dir = os.path.abspath(loaded.resolver.job_dir)
        chk_name = cf.chk_name
        remote = _is_remote(cf.source)
        # A remote checkpoint is read from a local working copy: its job is named by the URI.
        chk_uri = _remote_chk_uri(cf.source, chk_name) if remote else None
        job_id = chk_uri.rstrip("/").rsplit("/", 2)[-2] if chk_uri else os.path.basename(job_dir)
        for site, handle in all_stream_handles(loaded.checkpoint):
            if not is_file_backed(handle):
                continue
            name = handle.file_name
            resolved = loaded.resolver.resolve(handle)
            local = None if resolved is None else resolved.local_text
            if local is not None:
                local = os.path.abspath(local)
            if local is None or not _exists(local, stats):
                local = _other_checkpoint(name, job_dir) or local
            key = local if local is not None and not remote else _name_key(name, handle.relative, chk_uri or cf.source)
            entry = report.files.get(key)
            if entry is None:
                size = _size(local, stats) if local is not None else None
                area, directory, shown = _area(
                    name, None if remote else local, job_dir, job_id, chk_name, handle.relative
                )
                if remote and area != "external":
                    directory = name.rsplit("/", 1)[0] if not handle.relative else (chk_uri or directory)
                entry = report.files[key] = FileEntry(key, name, area, directory, local, size, shown)
            entry.handles += 1
            entry.referenced_bytes += handle.state_size
            entry.operators.add(site.operator.operator_id)
            entry.kinds.add(site.kind)
            entry.checkpoints.add(index)
            cf.keys.add(key)
    return report


def checkpoint_files(paths: Sequence[str], rebase: list[str] | None = None) -> FilesReport:
    """``spillway files``: open PATHs (a job directory: every ``chk-N`` in it) and collect their files."""
    return collect_files(open_checkpoints(paths, rebase))


def _is_remote(source: str) -> bool:
    return "://" in source and not source.startswith("file:")


def _remote_chk_uri(source: str, chk_name: str) -> str:
    """The remote ``chk-N`` directory a URI given as PATH stands for."""
    uri = source.rstrip("/")
    if uri.endswith("/" + METADATA):
        return uri[: -len(METADATA) - 1]
    if uri.rsplit("/", 1)[-1] == chk_name:
        return uri
    return f"{uri}/{chk_name}"


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
