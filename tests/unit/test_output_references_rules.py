"""The reference check's edges (spillway/inspect/references.py): the exact line a missing file gets, a
relative and an absolute name that read alike, a rule for the root directory, names ending in the letters a
careless strip would eat, a remote name no file system here knows, an unreadable ``_metadata``. Built on the
real RocksDB-incremental fixture "written" by tests/support/written.py."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest
from support.written import written

from spillway.errors import SpillwayError
from spillway.formats.metadata_codec import decode_metadata, encode_metadata
from spillway.inspect.references import missing_references
from spillway.model.checkpoint import FileHandle, is_file_backed
from spillway.model.walk import all_stream_handles, transform_stream_handles

FINAL = "file:/final/place/chk-3"


def _sites(staging: Path) -> list[tuple[str, bool, str]]:
    """(name, relative, "operator subtask N kind") of every file-backed handle, from the written _metadata."""
    cp = decode_metadata((staging / "_metadata").read_bytes())
    return [
        (h.file_name, h.relative, f"{s.operator.label()} subtask {s.subtask.index} {s.kind}")
        for s, h in all_stream_handles(cp)
        if is_file_backed(h) and s.subtask is not None
    ]


def _rename_all(staging: Path, old: str, new: str) -> None:
    cp = decode_metadata((staging / "_metadata").read_bytes())
    transform_stream_handles(
        cp,
        lambda h: (
            h.with_file_name(new + h.path[len(old) :]) if isinstance(h, FileHandle) and h.path.startswith(old) else h
        ),
    )
    (staging / "_metadata").write_bytes(encode_metadata(cp))


def test_a_missing_file_gets_one_exact_line_per_handle(tmp_path: Path) -> None:
    staging, _ = written(tmp_path, "2.3.0-rocksdb-incremental")
    sites = _sites(staging)
    gone = next(name for name, relative, _ in sites if not relative)
    Path(gone[len("file:") :]).unlink()
    assert missing_references(staging, FINAL) == [
        f"{gone}: referenced by {where}, which does not exist ({gone[len('file:') :]})"
        for name, relative, where in sites
        if name == gone and not relative
    ]


def test_an_absolute_name_that_reads_like_a_relative_one_is_looked_for_apart(tmp_path: Path) -> None:
    staging, _ = written(tmp_path, "2.3.0-rocksdb-incremental")
    sites = _sites(staging)
    relative = next(name for name, rel, _ in sites if rel)
    assert (staging / relative).is_file()
    cp = decode_metadata((staging / "_metadata").read_bytes())
    first_absolute = next(h.file_name for _, h in all_stream_handles(cp) if is_file_backed(h) and not h.relative)
    transform_stream_handles(
        cp,
        lambda h: h.with_file_name(relative) if isinstance(h, FileHandle) and h.path == first_absolute else h,
    )
    (staging / "_metadata").write_bytes(encode_metadata(cp))
    # the absolute name "relative" is not in the checkpoint's directory (a restoring Flink reads it as it stands)
    problems = missing_references(staging, FINAL)
    expected = [
        f"{relative}: referenced by {where}, which does not exist ({relative})"
        for name, rel, where in sites
        if name == first_absolute and not rel
    ]
    assert problems == expected


def test_a_rule_for_the_root_directory_maps_every_absolute_path(tmp_path: Path) -> None:
    staging, job = written(tmp_path, "2.3.0-rocksdb-incremental")
    image = tmp_path / "image"  # the job's files as a copy of the whole file system would hold them
    shutil.copytree(job, image / job.relative_to("/"))
    shutil.rmtree(job)
    n = sum(1 for _, rel, _ in _sites(staging) if not rel)
    assert len(missing_references(staging, FINAL)) == n
    assert missing_references(staging, FINAL, [f"/={image}"]) == []
    assert missing_references(staging, FINAL, [f"file:/={image}"]) == []


def test_directory_names_ending_in_x_are_compared_whole(tmp_path: Path) -> None:
    staging, job = written(tmp_path, "2.3.0-rocksdb-incremental")
    jobx = tmp_path / "jobX"
    job.rename(jobx)
    _rename_all(staging, f"file:{job}/", f"file:{jobx}/")
    movedx = tmp_path / "movedXX"
    jobx.rename(movedx)
    assert missing_references(staging, FINAL, [f"{jobx}={movedx}"]) == []


def test_a_file_that_cannot_be_looked_at_gives_the_reason_only(tmp_path: Path) -> None:
    staging, job = written(tmp_path, "2.3.0-rocksdb-incremental")
    (job / "shared").rename(tmp_path / "elsewhere")
    (job / "shared").write_bytes(b"a file where a directory should be")
    problems = missing_references(staging, FINAL)
    assert problems
    for line in problems:
        name = line.split(": referenced by ", 1)[0]
        assert line.endswith(f", which cannot be looked at ({name[len('file:') :]}: Not a directory)"), line


def test_a_remote_name_no_file_system_here_knows_cannot_be_looked_at(tmp_path: Path) -> None:
    staging, job = written(tmp_path, "2.3.0-rocksdb-incremental")
    _rename_all(staging, f"file:{job}/", "nosuchscheme://bucket/job/")
    problems = missing_references(staging, FINAL)
    assert problems and all(
        line.startswith("nosuchscheme://bucket/job/") and ", which cannot be looked at (nosuchscheme://" in line
        for line in problems
    ), problems


def test_an_unreadable_metadata_is_named(tmp_path: Path) -> None:
    staging, _ = written(tmp_path, "2.3.0-rocksdb-incremental")
    (staging / "_metadata").write_bytes(b"\x00\x00\x00\x01 not a checkpoint")
    with pytest.raises(SpillwayError) as info:
        missing_references(staging, FINAL)
    assert str(staging / "_metadata") in str(info.value)
