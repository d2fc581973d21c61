"""The writers' last check before the rename: every file the written ``_metadata`` names exists where Flink
would look — after the output's own final prefix and the user's rules only (spillway.inspect.references)."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest
from support.written import written

from spillway.formats.metadata_codec import decode_metadata, encode_metadata
from spillway.inspect.references import missing_references
from spillway.model.checkpoint import FileHandle, is_file_backed
from spillway.model.walk import all_stream_handles, transform_stream_handles

FINAL = "file:/final/place/chk-3"  # where the output will be renamed to; its files sit in the staging copy


def names(staging: Path, relative: bool) -> list[str]:
    cp = decode_metadata((staging / "_metadata").read_bytes())
    return sorted({h.file_name for _, h in all_stream_handles(cp) if is_file_backed(h) and h.relative == relative})


def test_an_output_whose_files_are_all_there_passes(tmp_path: Path) -> None:
    staging, _ = written(tmp_path, "2.3.0-rocksdb-incremental")
    assert names(staging, relative=False) and names(staging, relative=True)
    assert missing_references(staging, FINAL) == []


def test_a_missing_shared_file_is_named_with_the_handle_that_needs_it(tmp_path: Path) -> None:
    staging, _ = written(tmp_path, "2.3.0-rocksdb-incremental")
    gone = names(staging, relative=False)[0]
    Path(gone[len("file:") :]).unlink()
    problems = missing_references(staging, FINAL)
    assert len(problems) == 1, problems
    assert problems[0].startswith(f"{gone}: referenced by slow subtask ")
    assert "managed_keyed_state" in problems[0] and "does not exist" in problems[0]


def test_a_missing_relative_file_is_named(tmp_path: Path) -> None:
    staging, _ = written(tmp_path, "2.3.0-rocksdb-incremental")
    gone = names(staging, relative=True)[0]
    (staging / gone).unlink()
    problems = missing_references(staging, FINAL)
    assert {p.split(":", 1)[0] for p in problems} == {gone}  # one line per handle that needs it


def test_a_directory_in_place_of_a_file_is_not_a_file(tmp_path: Path) -> None:
    staging, _ = written(tmp_path, "2.3.0-rocksdb-incremental")
    gone = names(staging, relative=True)[0]
    (staging / gone).unlink()
    (staging / gone).mkdir()
    assert "not a regular file" in missing_references(staging, FINAL)[0]


def test_files_inside_the_final_place_are_looked_for_in_the_staging_directory(tmp_path: Path) -> None:
    """Flink 1.10 and some backends name their own chk-N files absolutely: the final prefix maps to staging."""
    staging, job = written(tmp_path, "2.3.0-rocksdb-incremental")
    shutil.copytree(job / "shared", staging / "shared")
    cp = decode_metadata((staging / "_metadata").read_bytes())
    transform_stream_handles(
        cp,
        lambda h: (
            h.with_file_name(FINAL + h.path[len("file:" + str(job)) :])
            if isinstance(h, FileHandle) and h.path.startswith("file:" + str(job))
            else h
        ),
    )
    (staging / "_metadata").write_bytes(encode_metadata(cp))
    shutil.rmtree(job / "shared")
    assert missing_references(staging, FINAL) == []
    assert len(missing_references(staging, None)) == len(names(staging, relative=False))


def test_only_the_rules_given_are_applied(tmp_path: Path) -> None:
    """A file found only where spillway would look by itself (a moved job directory) is missing unless the
    user's own rule says where it is."""
    staging, job = written(tmp_path, "2.3.0-rocksdb-incremental")
    moved = tmp_path / "moved"
    job.rename(moved)
    n = len(names(staging, relative=False))
    assert len(missing_references(staging, FINAL)) == n
    assert missing_references(staging, FINAL, [f"{job}={moved}"]) == []
    assert missing_references(staging, FINAL, [f"file://{job}=file:{moved}"]) == []
    assert len(missing_references(staging, FINAL, [f"{str(job)[:-1]}={moved}"])) == n  # whole components only


@pytest.mark.parametrize("fixture", ["1.10.3-rocksdb-incremental", "1.12.5-rocksdb-incremental"])
def test_older_formats_are_checked_the_same_way(tmp_path: Path, fixture: str) -> None:
    staging, _ = written(tmp_path, fixture)
    absolute = names(staging, relative=False)
    assert absolute
    assert missing_references(staging, FINAL) == []
    Path(absolute[-1][len("file:") :]).unlink()
    assert [p.split(": referenced", 1)[0] for p in missing_references(staging, FINAL)] == [absolute[-1]]


def test_a_rule_splits_at_its_first_equals_sign_and_trailing_slashes_do_not_matter(tmp_path: Path) -> None:
    """As ``--rebase OLD=NEW`` is parsed everywhere: NEW may hold '=' (a partitioned path like ``dt=1``)."""
    staging, job = written(tmp_path, "2.3.0-rocksdb-incremental")
    moved = tmp_path / "dt=1" / "job"
    moved.parent.mkdir()
    job.rename(moved)
    n = len(names(staging, relative=False))
    assert missing_references(staging, FINAL, [f"{job}={moved}"]) == []
    assert missing_references(staging, FINAL, [f"{job}/={moved}/"]) == []
    assert len(missing_references(staging, FINAL, [f"{job}={tmp_path}/dt"])) == n


def test_a_file_that_cannot_be_looked_at_is_reported_with_the_reason(tmp_path: Path) -> None:
    staging, job = written(tmp_path, "2.3.0-rocksdb-incremental")
    blocked = job / "shared"
    blocked.rename(tmp_path / "elsewhere")
    blocked.write_bytes(b"a file where a directory should be")
    problems = missing_references(staging, FINAL)
    assert problems and all("cannot be looked at" in p and "Not a directory" in p for p in problems), problems
