"""File resolution on real fixtures: the per-directory fast paths give what resolving file by file gives."""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import pytest
from support.fixtures import Fixture, fixture_named, fixture_params

from spillway.formats.metadata_codec import decode_metadata, encode_metadata
from spillway.model.checkpoint import FileHandle, RelativeFileHandle
from spillway.model.walk import all_stream_handles, leaf_stream_handles
from spillway.storage.load import load_checkpoint
from spillway.storage.locate import FileResolver


def _moved(fx: Fixture, into: Path) -> Path:
    """A copy of the fixture's job whose absolute paths name a place that does not exist."""
    job = into / fx.info["job_id"]
    shutil.copytree(fx.checkpoint_dir.parent, job)
    chk = job / fx.checkpoint_dir.name
    cp = decode_metadata((chk / "_metadata").read_bytes())
    old_prefix = "file:" + fx.info["generated_at"] + "/checkpoints"
    for _, h in all_stream_handles(cp):
        if isinstance(h, FileHandle):
            h.path = h.path.replace(old_prefix, "file:/nonexistent-spillway-test/ckpts")
    (chk / "_metadata").write_bytes(encode_metadata(cp))
    return chk


def _fresh(resolver: FileResolver) -> FileResolver:
    return FileResolver(resolver.location, resolver.rules)


@pytest.mark.parametrize("fx", fixture_params())
def test_local_text_and_survey_agree_with_resolve(fx: Fixture, tmp_path: Path) -> None:
    for chk in (fx.checkpoint_dir, _moved(fx, tmp_path)):
        loaded = load_checkpoint(chk)
        leaves = leaf_stream_handles(loaded.checkpoint)
        by_resolve = _fresh(loaded.resolver)
        expected = []
        for h in leaves:
            resolved = by_resolve.resolve(h)
            expected.append(resolved.local_text if resolved and resolved.local_text else None)
        by_local_text = _fresh(loaded.resolver)
        assert [by_local_text.local_text(h) for h in leaves] == expected
        assert by_local_text.rebases() == by_resolve.rebases()
        loaded.survey_files()
        assert loaded.resolver.rebases() == by_resolve.rebases()


def test_relative_file_through_a_symlink_out_of_the_checkpoint_is_refused(tmp_path: Path) -> None:
    fx = fixture_named("2.3.0-unaligned")
    chk = tmp_path / "chk"
    shutil.copytree(fx.checkpoint_dir, chk)
    loaded = load_checkpoint(chk)
    names = sorted(
        {h.relative_path for h in leaf_stream_handles(loaded.checkpoint) if isinstance(h, RelativeFileHandle)}
    )
    assert names
    outside = tmp_path / "outside"
    outside.write_bytes(b"x")
    os.remove(chk / names[0])
    os.symlink(outside, chk / names[0])
    (chk / "target").write_bytes(b"y")
    os.symlink(chk / "target", chk / "link-in")  # a link to a file of the checkpoint is fine
    resolver = _fresh(loaded.resolver)
    escaped = resolver.resolve(RelativeFileHandle(names[0], 1))
    kept = resolver.resolve(RelativeFileHandle("link-in", 1))
    assert escaped is not None and escaped.local_text is None and "escapes" in (escaped.problem or "")
    assert kept is not None and kept.local_text == str(chk / "link-in") and kept.problem is None
    _, missing = loaded.survey_files()
    assert missing == 1
