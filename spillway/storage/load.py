"""Open a checkpoint the way every command does: locate, read, decode, set up path resolution."""

from __future__ import annotations

import atexit
import os
import shutil
import tempfile
from dataclasses import dataclass
from pathlib import Path

from spillway import progress
from spillway.formats.metadata_codec import decode_metadata
from spillway.model.checkpoint import FILE_BACKED_TYPES, Checkpoint, RelativeFileHandle
from spillway.model.walk import file_path_of, leaf_stream_handles
from spillway.safe_io import read_regular
from spillway.storage.locate import CheckpointLocation, FileResolver, Rebase, ResolvedFile, locate_checkpoint


@dataclass
class LoadedCheckpoint:
    location: CheckpointLocation
    checkpoint: Checkpoint
    resolver: FileResolver
    size: int

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
        absolute: set[str] = set()
        relative: set[str] = set()
        for handle in leaf_stream_handles(self.checkpoint):
            if isinstance(handle, FILE_BACKED_TYPES):
                (relative if handle.relative else absolute).add(handle.file_name)
        missing = self.resolver.survey(absolute)
        for rel in relative:
            local = self.resolver.resolve(RelativeFileHandle(rel, 0))
            if local is None or local.local_text is None or not os.path.exists(local.local_text):
                missing += 1
        return len(absolute) + len(relative), missing


def working_copy(uri: str, workdir: Path) -> tuple[Path, list[str]]:
    """Copy a remote checkpoint (and every remote file it references) under ``workdir``; return the
    local checkpoint directory and the rebase rules that lead its absolute paths to the copies."""
    from spillway.storage import fs  # pyarrow.fs only when needed: it costs every command start-up time

    copy = fs.materialize(uri, workdir)
    return copy.checkpoint_dir, list(copy.rebase)


def load_checkpoint(path: str | os.PathLike[str], rebase: list[str] | None = None) -> LoadedCheckpoint:
    if "://" in str(path) and not str(path).startswith("file:"):
        # An object-store checkpoint is read from a local working copy (removed when the process ends).
        workdir = Path(tempfile.mkdtemp(prefix="spillway-remote-"))
        atexit.register(shutil.rmtree, workdir, True)
        local, copy_rules = working_copy(str(path), workdir)
        path, rebase = local, [*(rebase or []), *copy_rules]
    location = locate_checkpoint(path)
    rules = [Rebase.parse(r) for r in rebase or []]
    data = read_regular(location.metadata_path)
    # One stage for the whole decode: a large _metadata (100 MB: seconds) shows a bar while it is read.
    bar = progress.stage("decoding _metadata", len(data), "bytes")
    try:
        checkpoint = decode_metadata(data, str(location.metadata_path))
        bar.update(len(data))
    finally:
        bar.done()
    return LoadedCheckpoint(location, checkpoint, FileResolver(location, rules), len(data))
