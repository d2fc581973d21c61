"""What every repair shares: load the source, plan the output files, write safely, report changes."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from spillway.inspect.load import LoadedCheckpoint
from spillway.inspect.model import Checkpoint, RelativeFileHandle
from spillway.inspect.walk import transform_stream_handles
from spillway.rescale.writer import PlannedOutput


class RepairError(Exception):
    """The repair cannot be done as asked (exit code 1, nothing written)."""


@dataclass
class Change:
    what: str
    count: int
    detail: str = ""


@dataclass
class RepairPlan:
    output: PlannedOutput
    changes: list[Change] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)
    self_check_rebase: list[str] = field(default_factory=list)


def relative_names(checkpoint: Checkpoint) -> set[str]:
    """Every file the checkpoint names relative to its own directory."""
    names: set[str] = set()

    def note(h: object) -> object:
        if isinstance(h, RelativeFileHandle):
            names.add(h.relative_path)
        return h

    transform_stream_handles(checkpoint, note)
    return names


def relative_copies(loaded: LoadedCheckpoint, checkpoint: Checkpoint) -> dict[Path, str]:
    """Files the new checkpoint names relative to its own directory: copy them from the source."""
    copies: dict[Path, str] = {}
    for name in sorted(relative_names(checkpoint)):
        resolved = loaded.resolver.resolve(RelativeFileHandle(name, 0))
        if resolved is None or resolved.local is None or not resolved.local.is_file():
            raise RepairError(f"{name}: referenced relative file is missing in {loaded.location.checkpoint_dir}")
        copies[resolved.local] = name
    return copies
