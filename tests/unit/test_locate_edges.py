"""Edges of finding a checkpoint and its files (spillway/storage/locate.py) the main tests (test_locate.py) do not
reach: a directory that is itself a checkpoint, the order of a job's checkpoints, a rule's words, a rebase onto a
store served from spillway's local copy, and where a file is shown. Expectations follow from the tree each test
builds and the rules the module documents."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from spillway.errors import Named
from spillway.model.checkpoint import FileHandle, RelativeFileHandle
from spillway.storage.locate import (
    CheckpointLocation,
    FileResolver,
    LocalTree,
    LocateError,
    Rebase,
    job_checkpoint_dirs,
    locate_checkpoint,
)


def _chk(directory: Path) -> Path:
    directory.mkdir(parents=True, exist_ok=True)
    (directory / "_metadata").write_bytes(b"")
    return directory


def test_a_directory_holding_its_own_metadata_is_one_checkpoint_whatever_else_it_holds(tmp_path: Path) -> None:
    savepoint = _chk(tmp_path / "savepoint-1")
    _chk(savepoint / "chk-7")
    assert job_checkpoint_dirs(savepoint) == []
    assert locate_checkpoint(savepoint).metadata_path == savepoint / "_metadata"
    assert job_checkpoint_dirs(savepoint / "_metadata") == []


def test_a_jobs_checkpoints_come_oldest_first_by_number(tmp_path: Path) -> None:
    job = tmp_path / "job"
    for n in (10, 2, 33):
        _chk(job / f"chk-{n}")
    (job / "chk-5").mkdir()  # no _metadata: not a checkpoint
    (job / "shared").mkdir()
    assert job_checkpoint_dirs(job) == [job / "chk-2", job / "chk-10", job / "chk-33"]
    assert job_checkpoint_dirs(str(job)) == [job / "chk-2", job / "chk-10", job / "chk-33"]


def test_a_bad_rule_names_the_rebase_option() -> None:
    with pytest.raises(LocateError) as raised:
        Rebase.parse("/only-old")
    assert str(raised.value) == "rebase rule '/only-old': expected OLD_PREFIX=NEW_PREFIX"
    (named,) = [p for p in raised.value.args[0].parts if isinstance(p, Named)]
    assert (named.argument, named.value) == ("rebase", "/only-old")


def test_a_rule_is_spillways_own_only_when_said() -> None:
    assert Rebase.parse("/a=/b").internal is False
    assert Rebase.parse("/a=/b", internal=True).internal is True


def test_a_path_rebased_onto_a_store_is_read_from_spillways_local_copy(tmp_path: Path) -> None:
    """``--rebase file:/old=s3://b/x``: the file is on the store; spillway fetched it into a local mirror (its own,
    unseen rule from the store's place to the mirror). The handle reads the copy and is shown as the store's URI."""
    chk = _chk(tmp_path / "job" / "chk-1")
    mirror = tmp_path / "mirror"
    mirror.mkdir()
    (mirror / "f").write_bytes(b"x")
    rules = [Rebase.parse("/old=s3://b/x"), Rebase.parse(f"s3://b/x={mirror}", internal=True)]
    resolver = FileResolver(CheckpointLocation(chk / "_metadata"), rules)
    resolved = resolver.resolve_path("/old/f")
    assert (resolved.local_text, resolved.via, resolved.problem) == (str(mirror / "f"), "s3://b/x/f", None)
    assert resolver.shown_text(FileHandle("/old/f", 1)) == "s3://b/x/f"
    assert resolver.rebases() == [{"from": "/old", "to": "s3://b/x", "paths": 1}]
    alone = FileResolver(CheckpointLocation(chk / "_metadata"), rules[:1])  # nothing fetched: not local
    assert alone.resolve_path("/old/f").problem == "rebased path 's3://b/x/f' is not local"


def test_a_file_is_shown_where_the_user_knows_it(tmp_path: Path) -> None:
    chk = _chk(tmp_path / "job" / "chk-1")
    (chk / "state").write_bytes(b"x")
    local = FileResolver(CheckpointLocation(chk / "_metadata"))
    assert local.shown_text(RelativeFileHandle("state", 1)) == str(chk / "state")
    assert local.shown_text(FileHandle(str(chk / "state"), 1)) == str(chk / "state")
    assert local.shown_text(None) is None
    remote = FileResolver(CheckpointLocation(chk / "_metadata", uri="s3://b/job/chk-1/_metadata"))
    assert remote.shown_text(RelativeFileHandle("state", 1)) == "s3://b/job/chk-1/state"  # never the local copy
    ruled = FileResolver(CheckpointLocation(chk / "_metadata"), [Rebase.parse(f"/elsewhere={chk}")])
    assert ruled.shown_text(FileHandle("/elsewhere/state", 1)) == str(chk / "state")  # a local rule: the file


def test_a_remote_checkpoints_files_read_from_the_local_copy_are_shown_by_their_uri(tmp_path: Path) -> None:
    """spillway's own rule from a store's place to its local copy: the file read is the copy, ``via`` the URI."""
    chk = _chk(tmp_path / "copy" / "chk-1")
    (chk / "f").write_bytes(b"x")
    resolver = FileResolver(CheckpointLocation(chk / "_metadata"), [Rebase.parse(f"s3://b/job/chk-1={chk}", True)])
    resolved = resolver.resolve_path("s3://b/job/chk-1/f")
    assert (resolved.local_text, resolved.via) == (str(chk / "f"), "s3://b/job/chk-1/f")
    assert resolver.rebases() == []  # spillway's own rule is never shown


def test_every_unsafe_path_counts_as_missing(tmp_path: Path) -> None:
    chk = _chk(tmp_path / "job" / "chk-1")
    resolver = FileResolver(CheckpointLocation(chk / "_metadata"))
    assert resolver.survey({"/a/../x", "/b/../y", f"{chk}/_metadata"}) == 2


def test_what_is_neither_file_nor_directory_is_other(tmp_path: Path) -> None:
    fifo = tmp_path / "pipe"
    os.mkfifo(fifo)
    assert LocalTree().kind(str(fifo)) == "other"
    assert LocalTree().kind(str(tmp_path)) == "dir" and LocalTree().kind(str(tmp_path / "none")) is None
