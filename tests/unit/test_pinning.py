"""A moved source's files are named where they are now (spillway/storage/pinning.py), in-process: the real
RocksDB-incremental and file-merging fixtures, moved (tests/support/written.py), then pinned. Expected names
are the files' places in the moved copy; the prefixes are the job directory as the source named it and as
it is now."""

from __future__ import annotations

import dataclasses
import os
from pathlib import Path

import pytest
from support.damaged import copy_fixture
from support.fixtures import fixture_named
from support.written import moved_job

from spillway.formats.metadata_codec import decode_metadata, encode_metadata
from spillway.model.checkpoint import CheckpointMetadata, is_file_backed
from spillway.model.walk import all_stream_handles, transform_stream_handles
from spillway.storage.load import load_checkpoint
from spillway.storage.pinning import pin_found_paths


def _names(cp: CheckpointMetadata, relative: bool = False) -> list[str]:
    return sorted(h.file_name for _, h in all_stream_handles(cp) if is_file_backed(h) and h.relative == relative)


def _dirs(cp: CheckpointMetadata) -> list[str]:
    return sorted(
        text
        for op in cp.operators
        for sub in op.subtasks
        for h in (sub.managed_operator_state, sub.raw_operator_state)
        if h is not None and h.file_merging is not None
        for text in (h.file_merging.task_owned_dir, h.file_merging.shared_dir)
    )


def test_a_moved_jobs_absolute_paths_name_the_files_where_they_are(tmp_path: Path) -> None:
    chk, gone = moved_job(tmp_path, "2.3.0-rocksdb-incremental")
    job = chk.parent
    loaded = load_checkpoint(chk)
    source_names = _names(loaded.checkpoint)
    pinned = pin_found_paths(loaded.checkpoint, loaded)
    old = f"file:{gone}/{job.name}"
    assert [n for n in source_names if not n.startswith(old + "/")] == []
    assert _names(pinned.checkpoint) == sorted(f"file:{job}" + n[len(old) :] for n in source_names)
    assert all(os.path.isfile(n[len("file:") :]) for n in _names(pinned.checkpoint))
    assert _names(pinned.checkpoint, relative=True) == _names(loaded.checkpoint, relative=True)
    assert _names(loaded.checkpoint) == source_names, "the source's checkpoint is not changed"
    occurrences = sum(1 for _, h in all_stream_handles(loaded.checkpoint) if is_file_backed(h) and not h.relative)
    assert occurrences == 14 and pinned.paths == 14
    assert pinned.prefixes == {(old, str(job)): 14}
    assert pinned.notes() == [
        f"14 paths the source names under {old} were written as {job}, where the files are now "
        "(the source checkpoint was moved)"
    ]
    again = pin_found_paths(pinned.checkpoint, loaded)
    assert again.paths == 0 and again.notes() == [] and _names(again.checkpoint) == _names(pinned.checkpoint)


def test_a_bare_path_stays_bare_and_a_relative_job_directory_becomes_absolute(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    chk, gone = moved_job(tmp_path, "2.3.0-rocksdb-incremental")
    cp = decode_metadata((chk / "_metadata").read_bytes())
    transform_stream_handles(
        cp, lambda h: h.with_file_name(h.file_name[len("file:") :]) if is_file_backed(h) and not h.relative else h
    )
    (chk / "_metadata").write_bytes(encode_metadata(cp))
    monkeypatch.chdir(tmp_path)
    loaded = load_checkpoint(os.path.relpath(chk))
    pinned = pin_found_paths(loaded.checkpoint, loaded)
    job = chk.parent
    assert _names(pinned.checkpoint) == sorted(str(job) + n[len(f"{gone}/{job.name}") :] for n in _names(cp))
    assert pinned.prefixes == {(f"{gone}/{job.name}", str(job)): 14}


def test_paths_the_user_rebased_are_written_as_the_source_names_them(tmp_path: Path) -> None:
    chk, gone = moved_job(tmp_path, "2.3.0-rocksdb-incremental")
    loaded = load_checkpoint(chk, [f"{gone}={chk.parent.parent}"])
    assert _names(loaded.checkpoint)[0].startswith(f"file:{gone}/")
    pinned = pin_found_paths(loaded.checkpoint, loaded)
    assert pinned.paths == 0 and _names(pinned.checkpoint) == _names(loaded.checkpoint)


def test_a_remote_source_is_never_pinned(tmp_path: Path) -> None:
    chk, _ = moved_job(tmp_path, "2.3.0-rocksdb-incremental")
    loaded = load_checkpoint(chk)
    remote = dataclasses.replace(
        loaded, location=dataclasses.replace(loaded.location, uri="s3://bucket/checkpoints/job/chk-3")
    )
    pinned = pin_found_paths(loaded.checkpoint, remote)
    assert pinned.paths == 0 and _names(pinned.checkpoint) == _names(loaded.checkpoint)


def test_a_moved_path_that_climbs_is_left_as_the_source_names_it(tmp_path: Path) -> None:
    chk, _ = moved_job(tmp_path, "2.3.0-rocksdb-incremental")
    job = chk.parent
    cp = decode_metadata((chk / "_metadata").read_bytes())
    first = _names(cp)[0]
    climbing = first.replace(f"/{job.name}/shared/", f"/{job.name}/shared/../shared/")
    transform_stream_handles(
        cp, lambda h: h.with_file_name(climbing) if is_file_backed(h) and h.file_name == first else h
    )
    (chk / "_metadata").write_bytes(encode_metadata(cp))
    loaded = load_checkpoint(chk)
    pinned = pin_found_paths(loaded.checkpoint, loaded)
    assert climbing in _names(pinned.checkpoint)
    assert all(n.startswith(f"file:{job}/") for n in _names(pinned.checkpoint) if n != climbing)


def _merging_copy(tmp_path: Path) -> tuple[Path, str]:
    """A copy of the file-merging fixture: its segment files name the place Flink wrote them, which this
    machine does not have (a moved job); returns (chk-N directory, the job directory the source names)."""
    c = copy_fixture("2.3.0-file-merging", tmp_path)
    written = fixture_named("2.3.0-file-merging").info["generated_at"]
    assert not os.path.exists(written)
    return c.chk, f"{written}/checkpoints/{c.chk.parent.name}"


def test_file_merging_directories_move_with_their_files(tmp_path: Path) -> None:
    chk, old = _merging_copy(tmp_path)
    job = chk.parent
    cp = decode_metadata((chk / "_metadata").read_bytes())
    spelled = {}
    for i, sub in enumerate(sub for op in cp.operators for sub in op.subtasks):
        dirs = sub.managed_operator_state.file_merging  # type: ignore[union-attr]
        assert dirs is not None and dirs.task_owned_dir.startswith(f"file:{old}/")
        if i % 2:  # the task-owned directory spelled bare on every other subtask
            dirs.task_owned_dir = dirs.task_owned_dir[len("file:") :]
        if i == 2:  # and once as the job directory itself
            dirs.task_owned_dir = f"file:{old}"
    (chk / "_metadata").write_bytes(encode_metadata(cp))
    spelled = _dirs(cp)
    loaded = load_checkpoint(chk)
    pinned = pin_found_paths(loaded.checkpoint, loaded)
    assert pinned.prefixes == {(f"file:{old}", str(job)): 12}

    def moved(text: str) -> str:
        scheme = "file:" if text.startswith("file:") else ""
        assert text.startswith(scheme + old)
        return scheme + str(job) + text[len(scheme + old) :]

    assert _dirs(pinned.checkpoint) == sorted(moved(t) for t in spelled)
    assert _dirs(loaded.checkpoint) == spelled, "the source's checkpoint is not changed"


def test_a_file_merging_directory_outside_the_moved_job_is_kept(tmp_path: Path) -> None:
    chk, old = _merging_copy(tmp_path)
    loaded = load_checkpoint(chk)
    elsewhere = ["file:/data/other-job/shared", f"file:{old}-other/shared"]  # the second shares the text only
    for i, sub in enumerate(sub for op in loaded.checkpoint.operators for sub in op.subtasks):
        sub.managed_operator_state.file_merging.shared_dir = elsewhere[i % 2]  # type: ignore[union-attr]
    pinned = pin_found_paths(loaded.checkpoint, loaded)
    assert pinned.paths == 12
    assert {d for d in _dirs(pinned.checkpoint) if "/shared" in d} == set(elsewhere)


def test_file_merging_directories_of_raw_operator_state_move_too(tmp_path: Path) -> None:
    chk, old = _merging_copy(tmp_path)
    job = chk.parent
    loaded = load_checkpoint(chk)
    for op in loaded.checkpoint.operators:
        for sub in op.subtasks:
            sub.raw_operator_state, sub.managed_operator_state = sub.managed_operator_state, None
    before = _dirs(loaded.checkpoint)
    pinned = pin_found_paths(loaded.checkpoint, loaded)
    assert before and all(d.startswith(f"file:{old}/") for d in before)
    assert _dirs(pinned.checkpoint) == sorted(f"file:{job}" + d[len(f"file:{old}") :] for d in before)
