"""Files a checkpoint names relative to its own directory travel with ``_metadata``
(spillway/storage/relative.py): which they are (from Flink's own decode of the fixture, oracle.json), and where
each is copied from."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest
from support.fixtures import fixture_named, flink_files

from spillway.model.checkpoint import RelativeFileHandle
from spillway.storage.load import load_checkpoint
from spillway.storage.relative import relative_copies, relative_names
from spillway.storage.safe_writer import WriteError

FIXTURE = "2.3.0-unaligned"


def test_the_relative_files_are_those_flink_named() -> None:
    loaded = load_checkpoint(fixture_named(FIXTURE).checkpoint_dir)
    assert relative_names(loaded.checkpoint) == flink_files(FIXTURE)[1] != set()
    keyed = load_checkpoint(fixture_named("1.10.3-aligned").checkpoint_dir)
    assert relative_names(keyed.checkpoint) == set()  # absolute paths only


def test_each_is_copied_from_the_source_checkpoint(tmp_path: Path) -> None:
    fx = fixture_named(FIXTURE)
    loaded = load_checkpoint(fx.checkpoint_dir)
    names = flink_files(FIXTURE)[1]
    assert relative_copies(loaded, loaded.checkpoint) == {fx.checkpoint_dir / n: n for n in names}


def test_a_missing_one_is_refused_by_name(tmp_path: Path) -> None:
    fx = fixture_named(FIXTURE)
    root = tmp_path / fx.name
    shutil.copytree(fx.root, root)
    chk = root / fx.info["checkpoint"]
    loaded = load_checkpoint(chk)
    gone = sorted(flink_files(FIXTURE)[1])[0]
    (chk / gone).unlink()
    with pytest.raises(WriteError) as raised:
        relative_copies(loaded, loaded.checkpoint)
    assert str(raised.value) == f"{gone}: referenced relative file is missing in {chk}"
    (chk / gone).mkdir()  # a directory is no file to copy either
    with pytest.raises(WriteError, match="referenced relative file is missing"):
        relative_copies(loaded, loaded.checkpoint)


def test_a_relative_name_leading_out_of_the_checkpoint_is_refused_as_missing() -> None:
    """A name the checkpoint directory cannot hold (``..``) is never looked up, so there is nothing to copy."""
    loaded = load_checkpoint(fixture_named(FIXTURE).checkpoint_dir)
    (handle,) = [
        h
        for op in loaded.checkpoint.operators
        for sub in op.subtasks
        for state in sub.input_channel_state
        for h in [state.delegate]
        if isinstance(h, RelativeFileHandle)
    ][:1]
    handle.relative_path = "../../escape"
    with pytest.raises(WriteError) as raised:
        relative_copies(loaded, loaded.checkpoint)
    assert str(raised.value) == f"../../escape: referenced relative file is missing in {loaded.location.checkpoint_dir}"
