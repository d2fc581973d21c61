"""Relocate: rewrite every path prefix in every handle kind, so a checkpoint can move.

Inline handles' names look like paths (``file:/…/chk-5/<uuid>``) but are identifiers Flink never
opens; they are kept exactly as they are, like everything else that is not a path.

``old`` is matched as a location (``spillway.storage.rules``): ``/srv/x``, ``file:/srv/x`` and
``file:///srv/x`` name the same prefix, whole path components only; a plain ``new`` keeps the
``file:`` spelling of the path it replaces.
"""

from __future__ import annotations

import copy
from dataclasses import dataclass, field

from spillway.model.checkpoint import CheckpointMetadata, RelativeFileHandle, StreamHandle, StreamLeaf, is_file_backed
from spillway.model.walk import MERGING_DIR_FIELDS, merging_dirs, transform_stream_handles
from spillway.storage.rules import PathRule


@dataclass
class RelocateResult:
    checkpoint: CheckpointMetadata
    rewritten: dict[str, int] = field(default_factory=dict)  # handle kind -> paths rewritten
    made_relative: int = 0
    untouched: int = 0  # absolute paths that did not start with the old prefix


def relocate(cp: CheckpointMetadata, old: str, new: str, relative_under: str | None = None) -> RelocateResult:
    """Rewrite ``old`` → ``new`` at the start of every path. With ``relative_under`` (the new
    checkpoint directory as Flink would write it, e.g. ``file:/ckpt/job/chk-5``), files directly in
    that directory become relative handles (metadata V3+ only)."""
    out = copy.deepcopy(cp)
    result = RelocateResult(out)
    rule = PathRule(old, new)

    def count(kind: str) -> None:
        result.rewritten[kind] = result.rewritten.get(kind, 0) + 1

    def fix(h: StreamLeaf) -> StreamHandle:
        if not is_file_backed(h) or h.relative:
            return h
        moved = rule.apply(h.file_name)
        if moved is not None:
            h = h.with_file_name(moved)
            count(h.flink_class)
        else:
            result.untouched += 1
        if relative_under and h.whole_file:
            parent, _, name = h.file_name.rpartition("/")
            if parent == relative_under.rstrip("/") and name:
                result.made_relative += 1
                return RelativeFileHandle(name, h.state_size)
        return h

    transform_stream_handles(out, fix)
    for dirs in merging_dirs(out):
        for attr in MERGING_DIR_FIELDS:
            moved = rule.apply(getattr(dirs, attr))
            if moved is not None:
                setattr(dirs, attr, moved)
                count("FileMergingOperatorStreamStateHandle." + attr)
    return result
