"""A real checkpoint as a writer leaves it in its staging directory before the rename, for the reference check's
tests: relative files copied in, shared files named absolutely where they exist."""

from __future__ import annotations

import os
import shutil
import uuid
from pathlib import Path

from spillway.formats.metadata_codec import decode_metadata, encode_metadata
from spillway.model.checkpoint import FileHandle, StreamHandle, StreamLeaf
from spillway.model.walk import transform_stream_handles
from support.fixtures import Fixture, fixture_named


def written(tmp: Path, fixture: str) -> tuple[Path, Path]:
    """A real checkpoint "written" to ``tmp/staging``: its own files (relative) copied in, its shared files
    named absolutely at ``tmp/job/shared`` (they exist there). Returns (staging directory, job directory)."""
    fx = fixture_named(fixture)
    job = tmp / "job"
    shutil.copytree(next((fx.root / "checkpoints").iterdir()), job)
    chk = next(job.glob("chk-*"))
    prefix = "file:" + fx.info["generated_at"] + "/checkpoints/" + fx.info["job_id"]
    staging = tmp / "staging"
    shutil.copytree(chk, staging)

    def here(leaf: StreamLeaf) -> StreamHandle:
        if isinstance(leaf, FileHandle) and leaf.path.startswith(prefix + "/"):
            return leaf.with_file_name("file:" + str(job) + leaf.path[len(prefix) :])
        return leaf

    cp = decode_metadata((staging / "_metadata").read_bytes())
    transform_stream_handles(cp, here)
    (staging / "_metadata").write_bytes(encode_metadata(cp))
    return staging, job


def moved_job(tmp: Path, fixture: str) -> tuple[Path, str]:
    """The fixture's job directory copied under ``tmp``, its absolute paths naming a directory that does not
    exist (as after moving it); returns (chk-N directory, the prefix its _metadata names)."""
    fx = fixture_named(fixture)
    root = tmp / "moved"
    shutil.copytree(fx.root / "checkpoints", root)
    gone = f"/nonexistent-{uuid.uuid4().hex[:8]}/checkpoints"
    old = "file:" + fx.info["generated_at"] + "/checkpoints"

    def move(leaf: StreamLeaf) -> StreamHandle:
        if isinstance(leaf, FileHandle) and leaf.path.startswith(old + "/"):
            return leaf.with_file_name("file:" + gone + leaf.path[len(old) :])
        return leaf

    chk = next(root.glob("*/chk-*"))
    cp = decode_metadata((chk / "_metadata").read_bytes())
    transform_stream_handles(cp, move)
    (chk / "_metadata").write_bytes(encode_metadata(cp))
    assert not os.path.exists(gone)
    return chk, gone


def local_job(base: Path, fx: Fixture) -> Path:
    """``fx``'s job copied to ``base/src/JOB`` by ``spillway repair relocate --copy-data`` (its _metadata naming the
    local files); returns that job directory."""
    from support.console import spillway

    job = fx.info["job_id"]
    src = base / "src" / job
    old = "file:" + fx.info["generated_at"] + "/checkpoints/" + job
    run = spillway("repair", "relocate", str(fx.checkpoint_dir), "--out", str(src / fx.checkpoint_dir.name),
                   "--from", old, "--to", f"file:{src}", "--copy-data")  # fmt: skip
    assert run.code == 0, run.output
    return src
