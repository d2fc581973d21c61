"""Where a written checkpoint names the files it keeps: where they are now, not where a moved source said.

A checkpoint directory that was moved or copied still names its shared and task-owned files by the absolute
paths of the machine that wrote it; spillway finds them by their place in the job directory (automatic
rebasing, ``FileResolver``). A rescale or repair that kept those names would write a checkpoint whose
references do not exist, and Flink would fail to restore it. So the writer pins each such path to the file
spillway found: ``file:/old/job/shared/x`` becomes ``file:/new/job/shared/x``.

Only automatic rebases of a local source are pinned. A ``--rebase`` rule the user gave says where the files are
*on this machine*, not where the job that restores the output will find them (a checkpoint copied from HDFS for
inspection keeps its ``hdfs://`` names); and a remote source's files resolve to temporary local copies.
"""

from __future__ import annotations

import copy
import os
from dataclasses import dataclass, field

from spillway.model.checkpoint import CheckpointMetadata, StreamHandle, StreamLeaf, is_file_backed
from spillway.model.walk import MERGING_DIR_FIELDS, merging_dirs, transform_stream_handles
from spillway.storage.load import LoadedCheckpoint


@dataclass
class Pinned:
    """The checkpoint with its moved paths pinned, and which prefixes were rewritten (old -> new, paths)."""

    checkpoint: CheckpointMetadata
    prefixes: dict[tuple[str, str], int] = field(default_factory=dict)

    @property
    def paths(self) -> int:
        return sum(self.prefixes.values())

    def notes(self) -> list[str]:
        return [
            f"{n} paths the source names under {old} were written as {new}, where the files are now "
            "(the source checkpoint was moved)"
            for (old, new), n in sorted(self.prefixes.items())
        ]


def pin_found_paths(checkpoint: CheckpointMetadata, loaded: LoadedCheckpoint) -> Pinned:
    """A copy of ``checkpoint`` whose absolute file paths that ``loaded`` found only by automatic rebasing name
    the files where they are now (the ``file:`` spelling of the original is kept)."""
    out = copy.deepcopy(checkpoint)
    pinned = Pinned(out)
    if loaded.location.uri is not None:
        return pinned  # a remote source resolves to temporary copies: nothing to pin to
    resolver = loaded.resolver
    declared = {(r.old, r.new) for r in resolver.rules}

    def pin(h: StreamLeaf) -> StreamHandle:
        if not is_file_backed(h) or h.relative:
            return h
        found = resolver.resolve_path(h.file_name)
        if found.rebased_from is None or found.rebased_to is None or found.local_text is None:
            return h
        if (found.rebased_from, found.rebased_to) in declared or found.via is not None or found.path_rule:
            return h
        # The job directory as the user named it may be relative; Flink needs the absolute path.
        new = ("file:" if h.file_name.startswith("file:") else "") + os.path.abspath(found.local_text)
        key = (found.rebased_from, os.path.abspath(found.rebased_to))
        pinned.prefixes[key] = pinned.prefixes.get(key, 0) + 1
        return h.with_file_name(new)

    transform_stream_handles(out, pin)
    _pin_merging_dirs(out, pinned.prefixes)
    return pinned


def _pin_merging_dirs(checkpoint: CheckpointMetadata, prefixes: dict[tuple[str, str], int]) -> None:
    """File-merging operator state names its shared and task-owned directories too: moved like its files."""
    for dirs in merging_dirs(checkpoint):
        for attr in MERGING_DIR_FIELDS:
            value = getattr(dirs, attr)
            for old, new in prefixes:
                bare, base = _bare(value), _bare(old).rstrip("/")
                if bare == base or bare.startswith(base + "/"):
                    scheme = "file:" if value.startswith("file:") else ""
                    setattr(dirs, attr, scheme + new + bare[len(base) :])
                    break


def _bare(path: str) -> str:
    return path[len("file:") :] if path.startswith("file:") else path
