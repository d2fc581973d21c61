"""Open a checkpoint the way every command does: locate, read, decode, set up path resolution."""

from __future__ import annotations

import atexit
import os
from dataclasses import dataclass, field, replace
from pathlib import Path

from spillway import notices, progress
from spillway.errors import Message
from spillway.formats.errors import CheckpointFormatError
from spillway.formats.metadata_codec import decode_metadata
from spillway.model.checkpoint import CheckpointMetadata, RelativeFileHandle, is_file_backed
from spillway.model.walk import MERGING_DIR_FIELDS, file_names, file_path_of, leaf_stream_handles, merging_dirs
from spillway.safe_io import read_regular
from spillway.storage import remote_copies
from spillway.storage.locate import (
    CheckpointLocation,
    FileResolver,
    Rebase,
    ResolvedFile,
    job_checkpoint_dirs,
    locate_checkpoint,
    rebase_rule,
    strip_file_scheme,
)
from spillway.storage.names import METADATA, is_remote


@dataclass
class LoadedCheckpoint:
    location: CheckpointLocation
    checkpoint: CheckpointMetadata
    resolver: FileResolver
    size: int
    unmatched_rebase: list[str] = field(default_factory=list)  # --rebase rules that apply to no path

    def resolve_files(self) -> dict[str, ResolvedFile]:
        """Every file the checkpoint references, resolved (this records any rebasing applied)."""
        out: dict[str, ResolvedFile] = {}
        for handle in leaf_stream_handles(self.checkpoint):
            name = file_path_of(handle)
            if name is not None and name not in out:
                resolved = self.resolver.resolve(handle)
                if resolved is not None:
                    out[name] = resolved
        return out

    def survey_files(self) -> tuple[int, int]:
        """(files referenced, files not found) — cheap: resolves by directory, records rebases."""
        absolute, relative = file_names(self.checkpoint)
        missing = self.resolver.survey(absolute)
        for rel in relative:
            local = self.resolver.resolve(RelativeFileHandle(rel, 0))
            if local is None or local.local_text is None or remote_copies.size_of(local.local_text) is None:
                missing += 1
        return len(absolute) + len(relative), missing


def remote_workdir() -> Path:
    """A new local working directory for remote checkpoints, removed when the process ends. Checkpoints
    of one job loaded into the same one share their files: each is downloaded once (never reused across
    calls: the store may have changed since)."""
    import shutil  # here: a local checkpoint (every small command's start) needs neither
    import tempfile

    workdir = Path(tempfile.mkdtemp(prefix="spillway-remote-"))
    atexit.register(shutil.rmtree, workdir, True)
    return workdir


def load_checkpoint(
    path: str | os.PathLike[str],
    rebase: list[str] | None = None,
    *,
    internal: list[str] | None = None,
    workdir: Path | None = None,
) -> LoadedCheckpoint:
    """Open a checkpoint (a local path or a URI). ``rebase``: the user's OLD=NEW rules; ``internal``:
    spillway's own rules (to local copies, to an output being checked: applied, never shown nor warned
    about); ``workdir``: where remote files are copied (default: a new :func:`remote_workdir`)."""
    user = [Rebase.parse(r) for r in rebase or []]
    copies = [Rebase.parse(r, internal=True) for r in internal or []]
    decoded: CheckpointMetadata | None = None
    if is_remote(path):
        # An object-store checkpoint is read from a local working copy.
        from spillway.storage import fs

        workdir = workdir or remote_workdir()
        copy = fs.materialize(str(path), workdir, user)
        location = CheckpointLocation(copy.checkpoint_dir / METADATA, copy.note, copy.metadata_uri)
        copies += [Rebase.parse(r, internal=True) for r in copy.rebase]
        decoded = copy.checkpoint  # decoded there already: it had to know the files to stand in for
    else:
        # A local checkpoint may be named as Flink names it (file:/x, file:///x), as the repairs always took it.
        location = locate_checkpoint(strip_file_scheme(str(path)) or path)
    data = read_regular(location.metadata_path)
    checkpoint = decoded if decoded is not None else _decoded(data, location.shown)
    if any(is_remote(r.new) for r in user) and not is_remote(path):
        # A local checkpoint whose files were moved to a store (--rebase file:/x=s3://b/x): copy them here.
        from spillway.storage import fs

        names = _absolute_names(checkpoint)
        mirror = (workdir or remote_workdir()) / "mirror"
        sink = fs.Materialized(str(path), location.checkpoint_dir, [])
        fetched = fs.fetch_referenced(names, list(user), mirror, sink, location.shown)
        copies += [Rebase.parse(r, internal=True) for r in fetched]
    loaded = LoadedCheckpoint(location, checkpoint, FileResolver(location, [*user, *copies]), len(data))
    loaded.unmatched_rebase = unmatched_rules(checkpoint, user)
    for rule in loaded.unmatched_rebase:
        notices.warn(Message(rebase_rule(rule), f": matches no path in {location.shown} (nothing was rebased by it)"))
    return loaded


def _decoded(data: bytes, shown: str) -> CheckpointMetadata:
    # One stage for the whole decode: a large _metadata (100 MB: seconds) shows a bar while it is read.
    bar = progress.stage("decoding _metadata", len(data), "bytes")
    try:
        checkpoint = decode_metadata(data, shown)
        bar.update(len(data))
    finally:
        bar.done()
    return checkpoint


def _absolute_names(checkpoint: CheckpointMetadata) -> set[str]:
    """Every absolute file path the checkpoint's handles name."""
    return {
        h.file_name for h in leaf_stream_handles(checkpoint, coordinator=True) if is_file_backed(h) and not h.relative
    }


def unmatched_rules(checkpoint: CheckpointMetadata, rules: list[Rebase]) -> list[str]:
    """The rules (as ``OLD=NEW``) that apply to none of the absolute paths the checkpoint names."""
    if not rules:
        return []
    names = _absolute_names(checkpoint) | set(file_merging_dirs(checkpoint))
    left = list(rules)
    for name in names:
        left = [r for r in left if not r.matches(name)]
        if not left:
            break
    return [str(r) for r in left]


def file_merging_dirs(checkpoint: CheckpointMetadata) -> list[str]:
    """The directories file-merging operator state names (paths too, though no handle opens them)."""
    return [getattr(dirs, name) for dirs in merging_dirs(checkpoint) for name in MERGING_DIR_FIELDS]


@dataclass(frozen=True)
class Damaged:
    """A checkpoint of a job directory whose ``_metadata`` does not decode: left out, reported."""

    checkpoint: str  # the chk-N directory, as the user knows it (a URI for a remote one)
    error: str

    def to_json(self) -> dict[str, str]:
        return {"checkpoint": self.checkpoint, "error": self.error}


def job_checkpoints(path: str | os.PathLike[str]) -> list[str]:
    """Every ``chk-N`` (oldest first) of a job's checkpoint directory, local or remote, as paths or
    URIs to load; empty when ``path`` names one checkpoint (a chk-N directory, a ``_metadata``)."""
    if is_remote(path):
        from spillway.storage import fs

        return [loc.uri for loc in fs.checkpoint_dirs(str(path))]
    local = strip_file_scheme(str(path))
    return [str(c) for c in job_checkpoint_dirs(local)] if local is not None else []


def load_newest_readable(
    path: str | os.PathLike[str], rebase: list[str] | None = None
) -> tuple[LoadedCheckpoint, list[Damaged]]:
    """Like :func:`load_checkpoint`, but a job directory whose newest ``chk-N`` does not decode gives the
    newest one that does, with the damaged newer ones (raises the newest's error when none decodes)."""
    chks = job_checkpoints(path)
    if len(chks) <= 1:
        return load_checkpoint(path, rebase), []
    damaged: list[Damaged] = []
    first_error: CheckpointFormatError | None = None
    for chk in reversed(chks):
        try:
            loaded = load_checkpoint(chk, rebase)
        except CheckpointFormatError as exc:
            first_error = first_error or exc
            damaged.append(Damaged(chk, str(exc)))
            continue
        name = chk.rstrip("/").rpartition("/")[2]
        note = f"picked the newest of {len(chks)} checkpoints: {name}"
        if damaged:
            note = f"picked the newest readable of {len(chks)} checkpoints: {name} ({len(damaged)} newer damaged)"
        loaded.location = replace(loaded.location, note=note)
        return loaded, damaged
    assert first_error is not None
    raise first_error
