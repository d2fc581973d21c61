"""Files a checkpoint names relative to its own directory (they travel with ``_metadata``)."""

from __future__ import annotations

from pathlib import Path

from spillway.model.checkpoint import CheckpointMetadata, RelativeFileHandle, is_file_backed
from spillway.model.walk import leaf_stream_handles
from spillway.storage import remote_copies
from spillway.storage.load import LoadedCheckpoint
from spillway.storage.safe_writer import WriteError


def relative_names(checkpoint: CheckpointMetadata) -> set[str]:
    """Every file the checkpoint names relative to its own directory."""
    handles = leaf_stream_handles(checkpoint, coordinator=True)
    return {h.file_name for h in handles if is_file_backed(h) and h.relative}


def relative_copies(loaded: LoadedCheckpoint, checkpoint: CheckpointMetadata) -> dict[Path, str]:
    """Files the new checkpoint names relative to its own directory: copy them from the source."""
    copies: dict[Path, str] = {}
    for name in sorted(relative_names(checkpoint)):
        resolved = loaded.resolver.resolve(RelativeFileHandle(name, 0))
        remote_copies.ensure_local(None if resolved is None else resolved.local_text)
        if resolved is None or resolved.local is None or not resolved.local.is_file():
            raise WriteError(f"{name}: referenced relative file is missing in {loaded.location.checkpoint_dir}")
        copies[resolved.local] = name
    return copies
