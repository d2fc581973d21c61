"""Finding the checkpoint a user means, and the files its handles name (spillway.storage.locate).

Every expectation follows from the directory tree the test builds: which _metadata exists where, which
file sits under which name, which prefix Flink would have written. The path-escape guard is checked on
every way out: '..', absolute relative paths, empty components, a symlink, a rebase tail with '..'.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from spillway.model.checkpoint import ByteStreamHandle, FileHandle, RelativeFileHandle
from spillway.storage.locate import (
    CheckpointLocation,
    FileResolver,
    LocateError,
    Rebase,
    locate_checkpoint,
    strip_file_scheme,
)

JOB = "0123456789abcdef0123456789abcdef"


def _checkpoint(root: Path, job: str = JOB, n: int = 3) -> Path:
    chk = root / job / f"chk-{n}"
    chk.mkdir(parents=True)
    (chk / "_metadata").write_bytes(b"m")
    return chk


# ---------------------------------------------------------------------------------------------- locate


def test_a_metadata_file_a_chk_dir_and_a_job_dir_all_lead_to_the_metadata(tmp_path: Path) -> None:
    chk = _checkpoint(tmp_path)
    meta = chk / "_metadata"
    assert locate_checkpoint(meta) == CheckpointLocation(meta)
    assert locate_checkpoint(chk) == CheckpointLocation(meta)
    assert locate_checkpoint(chk.parent) == CheckpointLocation(meta)  # one chk-N: no note
    assert locate_checkpoint(str(chk)).checkpoint_dir == chk


def test_the_newest_checkpoint_is_picked_by_number_and_said(tmp_path: Path) -> None:
    for n in (9, 12, 3):
        _checkpoint(tmp_path, n=n)
    (tmp_path / JOB / "chk-40").mkdir()  # no _metadata: not a checkpoint
    (tmp_path / JOB / "chk-x").mkdir()
    loc = locate_checkpoint(tmp_path / JOB)
    assert loc.metadata_path == tmp_path / JOB / "chk-12" / "_metadata"
    assert loc.note == "picked the newest of 3 checkpoints: chk-12"


def test_a_checkpoint_root_with_one_job_is_accepted(tmp_path: Path) -> None:
    _checkpoint(tmp_path, n=1)
    _checkpoint(tmp_path, n=2)
    (tmp_path / "not-a-job").mkdir()
    (tmp_path / "stray-file").write_text("x")
    loc = locate_checkpoint(tmp_path)
    assert loc.metadata_path == tmp_path / JOB / "chk-2" / "_metadata"
    assert loc.note == "picked the newest of 2 checkpoints: chk-2"


def test_a_root_with_several_jobs_names_them(tmp_path: Path) -> None:
    _checkpoint(tmp_path, job="bbb")
    _checkpoint(tmp_path, job="aaa")
    with pytest.raises(LocateError) as err:
        locate_checkpoint(tmp_path)
    assert str(err.value) == f"{tmp_path}: holds checkpoints of several jobs (aaa, bbb); name one of them"


def test_nothing_there_is_a_usage_error(tmp_path: Path) -> None:
    with pytest.raises(LocateError, match=r": no such file or directory$"):
        locate_checkpoint(tmp_path / "missing")
    (tmp_path / "empty").mkdir()
    with pytest.raises(LocateError) as err:
        locate_checkpoint(tmp_path / "empty")
    assert str(err.value) == f"{tmp_path / 'empty'}: no _metadata here, and no chk-N directory holding one"
    assert LocateError("x").exit_code == 2


def test_rebase_rules_need_both_sides() -> None:
    assert Rebase.parse("file:/a=/b") == Rebase("file:/a", "/b")
    assert Rebase.parse("s3://b/x=/l=m") == Rebase("s3://b/x", "/l=m")  # the first '=' splits
    for bad in ("nothing", "=/b", "/a="):
        with pytest.raises(LocateError) as err:
            Rebase.parse(bad)
        assert str(err.value) == f"rebase rule {bad!r}: expected OLD_PREFIX=NEW_PREFIX"


@pytest.mark.parametrize(
    ("written", "local"),
    [
        ("file:/a/b", "/a/b"),
        ("file:///a/b", "/a/b"),
        ("file://host/a/b", "/a/b"),  # an authority is not part of the local path
        ("file://", "/"),
        ("/a/b", "/a/b"),
        ("a/b", "a/b"),
        ("s3://bucket/a", None),
        ("hdfs://nn:8020/a", None),
    ],
)
def test_strip_file_scheme(written: str, local: str | None) -> None:
    assert strip_file_scheme(written) == local


# ---------------------------------------------------------------------------------------------- relative


def _resolver(tmp_path: Path, *rules: str) -> FileResolver:
    chk = _checkpoint(tmp_path)
    return FileResolver(CheckpointLocation(chk / "_metadata"), [Rebase.parse(r) for r in rules])


def test_relative_files_resolve_inside_the_checkpoint(tmp_path: Path) -> None:
    r = _resolver(tmp_path)
    chk = tmp_path / JOB / "chk-3"
    assert r.checkpoint_dir == chk and r.job_dir == tmp_path / JOB
    got = r.resolve(RelativeFileHandle("sub/file", 1))
    assert got is not None and got.local_text == str(chk / "sub/file") and got.problem is None
    assert got.original == "sub/file"
    assert got.local == chk / "sub/file"
    assert r.resolve(RelativeFileHandle("sub/file", 1)) is got  # cached per name
    assert r.resolve(ByteStreamHandle("inline", b"")) is None
    assert r.resolve(None) is None


@pytest.mark.parametrize("name", ["../escape", "/etc/passwd", "a/../../x", "a/../b", ".."])
def test_a_relative_path_may_not_leave_the_checkpoint(tmp_path: Path, name: str) -> None:
    got = _resolver(tmp_path).resolve(RelativeFileHandle(name, 1))
    assert got is not None and got.local is None and got.local_text is None
    assert got.problem == "relative path escapes the checkpoint directory" and got.original == name


@pytest.mark.parametrize(("name", "inside"), [("a//b", "a/b"), ("./a", "a"), ("a/.", "a")])
def test_harmless_spellings_stay_inside(tmp_path: Path, name: str, inside: str) -> None:
    got = _resolver(tmp_path).resolve(RelativeFileHandle(name, 1))
    assert got is not None and got.problem is None and got.local == tmp_path / JOB / "chk-3" / inside


def test_a_symlink_out_of_the_checkpoint_is_an_escape(tmp_path: Path) -> None:
    r = _resolver(tmp_path)
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "secret").write_text("x")
    os.symlink(outside, tmp_path / JOB / "chk-3" / "link")
    got = r.resolve(RelativeFileHandle("link/secret", 1))
    assert got is not None and got.problem == "relative path escapes the checkpoint directory"
    os.symlink("inner", tmp_path / JOB / "chk-3" / "ok")  # a link that stays inside is fine
    (tmp_path / JOB / "chk-3" / "inner").mkdir()
    got = r.resolve(RelativeFileHandle("ok/f", 1))
    assert got is not None and got.problem is None


# ---------------------------------------------------------------------------------------------- absolute


def test_explicit_rules_win_and_are_counted_per_distinct_path(tmp_path: Path) -> None:
    r = _resolver(tmp_path, "s3://bucket/ck=/data/ck", "s3://bucket=/never")
    a = r.resolve(FileHandle("s3://bucket/ck/x/1", 1))
    assert a is not None and a.local_text == "/data/ck/x/1" and a.problem is None
    assert (a.rebased_from, a.rebased_to) == ("s3://bucket/ck", "/data/ck")
    r.resolve_path("s3://bucket/ck/x/1")
    r.resolve_path("s3://bucket/ck/x/2")
    r.resolve_path("s3://bucket/other")
    assert r.rebases() == [
        {"from": "s3://bucket", "to": "/never", "paths": 1},
        {"from": "s3://bucket/ck", "to": "/data/ck", "paths": 2},
    ]


def test_a_rule_to_a_remote_place_is_not_local(tmp_path: Path) -> None:
    got = _resolver(tmp_path, "/old=hdfs://nn/new").resolve_path("/old/f")
    assert got.local_text is None
    assert got.problem == "rebased path 'hdfs://nn/new/f' is not local"
    assert (got.rebased_from, got.rebased_to) == ("/old", "hdfs://nn/new")


@pytest.mark.parametrize("tail", ["/./x", "/x/"])
def test_a_rebased_tail_may_not_climb_out_of_its_new_prefix(tmp_path: Path, tail: str) -> None:
    got = _resolver(tmp_path, "/old=/new").resolve_path("/old" + tail)
    assert got.local_text is None and got.problem == "rebased path escapes its new prefix"
    assert got.original == "/old" + tail


@pytest.mark.parametrize("tail", ["/../etc/passwd", "/a/../../b", "/a/../b"])
def test_a_path_with_dotdot_is_never_rebased_nor_looked_up(tmp_path: Path, tail: str) -> None:
    got = _resolver(tmp_path, "/old=/new").resolve_path("/old" + tail)
    assert got.local_text is None and got.path_rule == "path-escape" and got.rebased_from is None
    assert got.problem is not None and "'..'" in got.problem and got.original == "/old" + tail


def test_a_path_that_exists_as_written_is_used_as_written(tmp_path: Path) -> None:
    r = _resolver(tmp_path)
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    (elsewhere / "f").write_text("x")
    for written in (f"file:{elsewhere}/f", str(elsewhere / "f"), f"file://{elsewhere}/f"):
        got = r.resolve_path(written)
        assert got.local_text == str(elsewhere / "f") and got.rebased_from is None and got.problem is None
    assert r.rebases() == []


def test_a_moved_checkpoint_is_rebased_by_its_trailing_components(tmp_path: Path) -> None:
    r = _resolver(tmp_path)
    job = tmp_path / JOB
    (job / "chk-3" / "own").write_text("x")
    (job / "shared").mkdir()
    (job / "shared" / "sst").write_text("x")
    (job / "taskowned").mkdir()
    (job / "taskowned" / "t").write_text("x")
    old = f"file:/flink/old-place/{JOB}"
    own = r.resolve_path(f"{old}/chk-3/own")
    assert own.local_text == f"{job}/chk-3/own" and (own.rebased_from, own.rebased_to) == (old, str(job))
    assert r.resolve_path(f"{old}/shared/sst").local_text == f"{job}/shared/sst"
    assert r.resolve_path(f"{old}/taskowned/t").local_text == f"{job}/taskowned/t"
    s3 = r.resolve_path(f"s3://bucket/x/{JOB}/shared/sst")  # a remote original whose copy is here
    assert s3.local_text == f"{job}/shared/sst" and s3.rebased_from == f"s3://bucket/x/{JOB}"
    assert r.rebases() == [
        {"from": old, "to": str(job), "paths": 3},
        {"from": f"s3://bucket/x/{JOB}", "to": str(job), "paths": 1},
    ]


def test_the_nearest_anchor_decides(tmp_path: Path) -> None:
    """`…/shared/…/chk-3/f`: the component nearest the file is the anchor."""
    r = _resolver(tmp_path)
    (tmp_path / JOB / "chk-3" / "f").write_text("x")
    got = r.resolve_path(f"/x/shared/y/{JOB}/chk-3/f")
    assert got.local_text == f"{tmp_path / JOB}/chk-3/f" and got.rebased_from == f"/x/shared/y/{JOB}"


def test_an_outer_anchor_never_serves_a_file_missing_at_the_nearest(tmp_path: Path) -> None:
    """`…/shared/…/chk-3/f` is rebased by `chk-3/f` only: a file that exists under the outer `shared/…` tail but not
    under the nearest one is missing, not found somewhere the handle never pointed."""
    r = _resolver(tmp_path)
    outer = tmp_path / JOB / "shared" / "y" / JOB / "chk-3"
    outer.mkdir(parents=True)
    (outer / "f").write_text("x")
    got = r.resolve_path(f"/x/shared/y/{JOB}/chk-3/f")
    assert got.problem == "file does not exist" and got.local_text == f"/x/shared/y/{JOB}/chk-3/f"
    assert r.rebases() == []


def test_a_file_found_nowhere_says_why(tmp_path: Path) -> None:
    r = _resolver(tmp_path)
    local = r.resolve_path(f"/flink/old/{JOB}/chk-3/missing")
    assert local.problem == "file does not exist" and local.local_text == f"/flink/old/{JOB}/chk-3/missing"
    remote = r.resolve_path("s3://bucket/elsewhere/f")
    assert remote.problem == "not a local path" and remote.local_text is None
    assert r.rebases() == []


def test_survey_counts_the_missing_and_records_rebases(tmp_path: Path) -> None:
    r = _resolver(tmp_path, "s3://ruled=/ruled")
    job = tmp_path / JOB
    for name in ("a", "b"):
        (job / "chk-3" / name).write_text("x")
    old = f"/flink/old/{JOB}"
    missing = r.survey({f"{old}/chk-3/a", f"{old}/chk-3/b", f"{old}/chk-3/c", "s3://nowhere/d", "s3://ruled/e"})
    assert missing == 2  # c and d; e is served by the rule
    assert r.rebases() == [
        {"from": old, "to": str(job), "paths": 2},
        {"from": "s3://ruled", "to": "/ruled", "paths": 1},
    ]


def test_results_keep_the_original_name(tmp_path: Path) -> None:
    r = _resolver(tmp_path, "s3://ruled=/ruled", "s3://far=hdfs://nn/x")
    (tmp_path / JOB / "chk-3" / "own").write_text("x")
    for original in ("s3://ruled/a", "s3://far/b", f"/flink/old/{JOB}/chk-3/own", "/nowhere/f"):
        assert r.resolve_path(original).original == original


def test_a_file_in_the_root_directory_is_found_as_written(tmp_path: Path) -> None:
    r = _resolver(tmp_path)
    name = sorted(os.listdir("/"))[0]  # something that exists in /
    got = r.resolve_path(f"/{name}")
    assert got.local_text == f"/{name}" and got.problem is None and got.rebased_from is None


def test_a_checkpoint_written_at_the_top_of_the_file_system_is_rebased(tmp_path: Path) -> None:
    """Anchors are looked for down to the first component: a chk-3 right under / still rebases."""
    r = _resolver(tmp_path)
    (tmp_path / JOB / "chk-3" / "own").write_text("x")
    got = r.resolve_path("file:/chk-3/own")
    assert got.local_text == f"{tmp_path / JOB}/chk-3/own" and got.rebased_from == "file:"


def test_the_old_prefix_is_cut_exactly_at_the_anchor(tmp_path: Path) -> None:
    r = _resolver(tmp_path)
    (tmp_path / JOB / "chk-3" / "own").write_text("x")
    got = r.resolve_path("/data/BOX/chk-3/own")
    assert got.rebased_from == "/data/BOX" and got.local_text == f"{tmp_path / JOB}/chk-3/own"


def test_files_in_subdirectories_of_an_anchor_are_rebased(tmp_path: Path) -> None:
    r = _resolver(tmp_path)
    job = tmp_path / JOB
    (job / "chk-3" / "sub").mkdir()
    (job / "chk-3" / "sub" / "own").write_text("x")
    (job / "shared" / "a" / "b").mkdir(parents=True)
    (job / "shared" / "a" / "b" / "sst").write_text("x")
    old = f"file:/flink/old/{JOB}"
    assert r.resolve_path(f"{old}/chk-3/sub/own").local_text == f"{job}/chk-3/sub/own"
    got = r.resolve_path(f"{old}/shared/a/b/sst")
    assert got.local_text == f"{job}/shared/a/b/sst" and got.rebased_from == old


def test_local_text_is_what_resolve_gives(tmp_path: Path) -> None:
    """The fast lookup the JSON view uses, on every kind of path, before and after a resolve was cached."""
    job = tmp_path / JOB
    r = _resolver(tmp_path)
    (job / "chk-3" / "own").write_text("x")
    old = f"file:/flink/old/{JOB}"
    handles = [
        FileHandle(f"{old}/chk-3/own", 1),  # rebased onto this job
        FileHandle(f"{old}/chk-3/missing", 1),  # local, not found: the path as written
        FileHandle("s3://bucket/f", 1),  # remote, not found: nothing local
        RelativeFileHandle("own", 1),
        RelativeFileHandle("../x", 1),  # escapes: nothing local
    ]
    fresh = [r.local_text(h) for h in handles]
    assert fresh == [f"{job}/chk-3/own", f"/flink/old/{JOB}/chk-3/missing", None, f"{job}/chk-3/own", None]
    assert r.rebases() == [{"from": old, "to": str(job), "paths": 1}]
    again = _resolver(tmp_path / "again")
    (tmp_path / "again" / JOB / "chk-3" / "own").write_text("x")
    for h in handles[:3]:
        again.resolve(h)  # now cached
    assert [again.local_text(h) for h in handles[:3]] == [
        f"{tmp_path / 'again' / JOB}/chk-3/own",
        f"/flink/old/{JOB}/chk-3/missing",
        None,
    ]
    assert r.local_text(ByteStreamHandle("inline", b"")) is None and r.local_text(None) is None
    ruled = _resolver(tmp_path / "ruled", "s3://bucket=/data")
    assert ruled.local_text(FileHandle("s3://bucket/f", 1)) == "/data/f"


def test_a_symlink_as_the_last_component_is_followed_before_the_check(tmp_path: Path) -> None:
    r = _resolver(tmp_path)
    chk = tmp_path / JOB / "chk-3"
    (tmp_path / "secret").write_text("x")
    os.symlink(tmp_path / "secret", chk / "leaf")
    got = r.resolve(RelativeFileHandle("leaf", 1))
    assert got is not None and got.problem == "relative path escapes the checkpoint directory"
    sibling = tmp_path / JOB / "chk-30"  # shares the prefix "chk-3" but is another directory
    sibling.mkdir()
    (sibling / "f").write_text("x")
    os.symlink(sibling / "f", chk / "near")
    got = r.resolve(RelativeFileHandle("near", 1))
    assert got is not None and got.problem == "relative path escapes the checkpoint directory"
