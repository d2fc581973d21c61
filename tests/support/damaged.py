"""Damaged copies of real fixtures for validate's tests: copy a fixture's tree, rewrite its ``_metadata`` or
its files, run validate (tests/cli/test_validate.py, tests/cli/test_validate_rules.py)."""

from __future__ import annotations

import shutil
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from spillway.formats.metadata_codec import decode_metadata, encode_metadata
from spillway.inspect.topology import load_plan
from spillway.inspect.validate import Report, validate
from spillway.inspect.validate_engine import Engine
from spillway.model.checkpoint import RelativeFileHandle, channel_handles
from spillway.storage.load import load_checkpoint
from support.fixtures import fixture_named


@dataclass
class Copy:
    root: Path
    chk: Path
    plan: Path

    def metadata(self) -> Path:
        return self.chk / "_metadata"

    def checkpoint(self) -> Any:
        return decode_metadata(self.metadata().read_bytes())

    def channel_files(self) -> list[tuple[Path, list]]:
        """Each channel-state file with the (operator, handle) pairs that point into it."""
        files: dict[str, list] = {}
        for op in self.checkpoint().operators:
            for sub in op.subtasks:
                for h in channel_handles(sub.input_channel_state) + channel_handles(sub.result_subpartition_state):
                    if isinstance(h.delegate, RelativeFileHandle):
                        files.setdefault(h.delegate.relative_path, []).append((op, h))
        return [(self.chk / name, hs) for name, hs in sorted(files.items(), key=lambda kv: -len(kv[1]))]

    def run(self, plan: bool = True) -> Report:
        """Validate the copy on the calling thread and on a pool of three: the reports must be equal, down
        to the order of the findings (the pool only runs the byte work ahead of the serial loop); and equal
        to the report without the framing done while the files are walked (a guess the engine keeps only
        where it frames what the ordinary framing would)."""
        serial = validate(load_checkpoint(self.chk), load_plan(self.plan) if plan else None, workers=1)
        pooled = validate(load_checkpoint(self.chk), load_plan(self.plan) if plan else None, workers=3)
        assert pooled == serial
        Engine.frame_while_walking = False
        try:
            ordinary = validate(load_checkpoint(self.chk), load_plan(self.plan) if plan else None, workers=3)
        finally:
            Engine.frame_while_walking = True
        assert ordinary == pooled
        return pooled


def copy_fixture(name: str, into: Path) -> Copy:
    fx = fixture_named(name)
    root = into / fx.name
    shutil.copytree(fx.root, root)
    return Copy(root, root / fx.info["checkpoint"], root / "jobgraph.json")


def rewrite(copy: Copy, mutate: Callable[[Any], object]) -> None:
    """Decode the copy's ``_metadata``, let ``mutate`` change the checkpoint, encode it back."""
    cp = copy.checkpoint()
    mutate(cp)
    copy.metadata().write_bytes(encode_metadata(cp))
