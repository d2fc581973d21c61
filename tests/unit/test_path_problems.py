"""Unsafe handle paths are classified from the text alone (spillway.model.paths), the resolver never looks
them up, and a checkpoint holding one still decodes and encodes back byte for byte."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from support.damaged import copy_fixture, rewrite
from support.fixtures import fixture_named

from spillway.formats.metadata_codec import decode_metadata, encode_metadata
from spillway.inspect.validate import validate
from spillway.model.checkpoint import ChangelogHandle, FileHandle, IncrementalHandle, RelativeFileHandle
from spillway.model.paths import (
    checkpoint_path_problems,
    local_path_problem,
    named_path_problems,
    path_problem,
    shown_path,
    unsafe_names,
)
from spillway.storage.load import load_checkpoint

ESCAPES = [
    "/ckpts/J/chk-3/../../../../tmp/victim/state-1",
    "file:/ckpts/J/chk-3/../../x",
    "file:///ckpts/J/../x",
    "s3://bucket/flink/J/chk-3/../../../other/x",
    "hdfs://namenode:8020/flink/..",
]
SAFE = [
    "file:/tmp/spillway-fixtures/2.3.0-prod/checkpoints/J/shared/279754bf-6399",
    "s3://bucket/flink/J/chk-3/a..b",  # ".." inside a name is a name
    "hdfs://namenode:8020/flink/J/taskowned/x",
    "/data/..hidden/x",
]


@pytest.mark.parametrize("path", ESCAPES)
def test_a_dotdot_component_is_an_escape(path: str) -> None:
    problem = path_problem(path)
    assert problem is not None and problem.rule == "path-escape"


@pytest.mark.parametrize("path", SAFE)
def test_ordinary_absolute_paths_are_safe(path: str) -> None:
    assert path_problem(path) is None


@pytest.mark.parametrize("path", ["../x", "a/../../x", "a/../b", "/etc/passwd", ".."])
def test_a_relative_path_that_leaves_the_checkpoint_directory(path: str) -> None:
    problem = path_problem(path, relative=True)
    assert problem is not None and problem.rule == "path-escape"


@pytest.mark.parametrize("path", ["a//b", "./a", "a/.", "chk-3..x"])
def test_other_spellings_of_a_file_inside_are_safe(path: str) -> None:
    assert path_problem(path, relative=True) is None


@pytest.mark.parametrize("path", ["a\0b", "file:/x/\0", "\udc80x", ""])
def test_what_no_file_system_accepts_is_a_bad_path(path: str) -> None:
    for relative in (False, True):
        problem = path_problem(path, relative)
        assert problem is not None and problem.rule == "bad-path"


def test_shown_path_escapes_control_characters_only() -> None:
    assert shown_path("a\0b\nc") == "a\\x00b\\x0ac"
    assert shown_path("/données/ключ") == "/données/ключ"
    assert shown_path("\udc80") == "\\udc80"


def test_an_unsafe_path_round_trips_and_is_never_resolved(tmp_path: Path) -> None:
    c = copy_fixture("2.3.0-rocksdb-incremental", tmp_path)
    escape = "file:" + str(c.chk) + "/../../../../../../../../../../etc/hostname"

    def mutate(cp: object) -> None:
        for op in cp.operators:  # type: ignore[attr-defined]
            for sub in op.subtasks:
                h = sub.managed_keyed_state
                if isinstance(h, IncrementalHandle):
                    h.shared_state[0].handle = FileHandle(escape, 1)
                    h.private_state[0].local_path = "../../MANIFEST-000001"
                    h.meta_state_handle = RelativeFileHandle("meta\0", 1)
                    return

    rewrite(c, mutate)
    data = c.metadata().read_bytes()
    assert encode_metadata(decode_metadata(data)) == data
    loaded = load_checkpoint(c.chk)
    problems = {(p.field, p.rule, p.path) for p in checkpoint_path_problems(loaded.checkpoint)}
    assert problems == {
        ("file", "path-escape", escape),
        ("file", "bad-path", "meta\0"),
        ("local file name", "path-escape", "../../MANIFEST-000001"),
    }
    resolved = loaded.resolver.resolve_path(escape)
    assert (resolved.local_text, resolved.path_rule) == (None, "path-escape")
    assert loaded.resolver.resolve(RelativeFileHandle("meta\0", 1)).path_rule == "bad-path"  # type: ignore[union-attr]
    assert loaded.resolver.survey({escape}) == 1
    errors = {(f.rule, f.file) for f in validate(loaded).errors if f.rule in ("path-escape", "bad-path")}
    assert errors == {("path-escape", escape), ("bad-path", "meta\\x00"), ("path-escape", "../../MANIFEST-000001")}


def test_a_file_merging_directory_with_dotdot_is_an_escape(tmp_path: Path) -> None:
    c = copy_fixture("2.3.0-file-merging", tmp_path)
    shared = "file:/ckpts/J/shared/../../../etc"

    def mutate(cp: object) -> None:
        for op in cp.operators:  # type: ignore[attr-defined]
            for sub in op.subtasks:
                h = sub.managed_operator_state
                if h is not None and h.file_merging is not None:
                    h.file_merging.shared_dir = shared
                    return

    rewrite(c, mutate)
    data = c.metadata().read_bytes()
    assert encode_metadata(decode_metadata(data)) == data
    loaded = load_checkpoint(c.chk)
    assert [(p.field, p.rule) for p in checkpoint_path_problems(loaded.checkpoint)] == [
        ("file-merging shared dir", "path-escape")
    ]
    assert [(f.rule, f.file) for f in validate(loaded).errors] == [("path-escape", shared)]


# The scheme rules are RFC 3986's (a scheme starts with a letter and holds no '/'); a path's '..' counts
# only in its path part, never in a URI's authority.
@pytest.mark.parametrize(
    "path",
    [
        "file:../x",  # a scheme with a relative path part that climbs
        "s3:../x",  # a scheme holding a digit
        "file:../a:b",  # a second ':' later in the path
        "s3://bucket/../x",  # '..' as the first component after the authority
        "file:///../x",  # an empty authority
    ],
)
def test_a_dotdot_in_the_path_part_of_a_uri_is_an_escape(path: str) -> None:
    problem = path_problem(path)
    assert problem is not None and (problem.rule, problem.reason) == (
        "path-escape",
        "path has a '..' component: it escapes the directory it names",
    )


@pytest.mark.parametrize(
    "path",
    [
        "s3://../x",  # '..' is the authority (a bucket's name), not a path component
        "a/b:../x",  # not a URI: '/' before the first ':', so "b:.." is one name
        "1:../x",  # not a URI: a scheme starts with a letter, so "1:.." is one name
        "/données/ключ/x",  # non-ASCII text that is valid Unicode
    ],
)
def test_what_only_looks_like_a_climbing_uri_is_safe(path: str) -> None:
    assert path_problem(path) is None


def test_a_local_file_name_must_stay_inside_the_instance_directory() -> None:
    reason = "local file name escapes the RocksDB instance directory on restore"
    for local in ("/tmp/MANIFEST-000001", "../MANIFEST-000001"):
        problem = local_path_problem(local)
        assert problem is not None and (problem.rule, problem.reason) == ("path-escape", reason)
    assert local_path_problem("db/000012.sst") is None
    bad = local_path_problem("a\0b")
    assert bad is not None and bad.rule == "bad-path"


def test_shown_path_escapes_a_non_printable_character_beyond_the_basic_plane() -> None:
    assert shown_path("a\U000e0001b") == "a\\U000e0001b"  # LANGUAGE TAG, a format character


def _incremental_subtasks() -> tuple[object, list[IncrementalHandle]]:
    cp = decode_metadata(fixture_named("2.3.0-rocksdb-incremental").metadata.read_bytes())
    (slow,) = [op for op in cp.operators if op.label() == "slow"]
    handles = [sub.managed_keyed_state for sub in slow.subtasks]
    assert all(isinstance(h, IncrementalHandle) for h in handles)
    return cp, handles  # type: ignore[return-value]


def _operator_id(uid: str) -> str:
    ids = json.loads((fixture_named("2.3.0-rocksdb-incremental").root / "ids.json").read_text())
    (node,) = [n for n in ids["stream_nodes"] if n["uid"] == uid]
    return str(node["operator_id"])


def test_each_unsafe_path_names_its_operator_subtask_kind_and_field() -> None:
    cp, (_, second) = _incremental_subtasks()
    escape = "file:/ckpts/J/chk-3/../../x"
    second.shared_state[0].handle = FileHandle(escape, 1)
    second.meta_state_handle = RelativeFileHandle("/etc/hostname", 1)  # absolute, though relative
    second.private_state[0].local_path = "../MANIFEST-000001"
    slow = _operator_id("slow")
    sites = [
        (p.path, p.rule, p.operator, p.operator_id, p.subtask, p.kind, p.field)
        for p in checkpoint_path_problems(cp)  # type: ignore[arg-type]
    ]
    assert sorted(sites) == sorted(
        [
            (escape, "path-escape", "slow", slow, 1, "managed_keyed_state", "file"),
            ("/etc/hostname", "path-escape", "slow", slow, 1, "managed_keyed_state", "file"),
            ("../MANIFEST-000001", "path-escape", "slow", slow, 1, "managed_keyed_state", "local file name"),
        ]
    )


def test_a_local_file_name_inside_a_changelog_handle_is_found() -> None:
    cp, (_, second) = _incremental_subtasks()
    second.private_state[0].local_path = "../MANIFEST-000001"
    (slow,) = [op for op in cp.operators if op.label() == "slow"]  # type: ignore[attr-defined]
    slow.subtasks[1].managed_keyed_state = ChangelogHandle(second.key_groups, 1, [second], [], 1, 1, "id")
    assert [(p.path, p.subtask, p.field) for p in named_path_problems(cp)] == [  # type: ignore[arg-type]
        ("../MANIFEST-000001", 1, "local file name")
    ]


def test_a_task_owned_directory_with_dotdot_is_an_escape() -> None:
    cp = decode_metadata(fixture_named("2.3.0-file-merging").metadata.read_bytes())
    owned = "file:/ckpts/J/taskowned/../../../etc"
    (src,) = [op for op in cp.operators if op.label() == "src"]
    dirs = src.subtasks[1].managed_operator_state.file_merging  # type: ignore[union-attr]
    assert dirs is not None
    dirs.task_owned_dir = owned
    assert [(p.path, p.rule, p.subtask, p.field) for p in checkpoint_path_problems(cp)] == [
        (owned, "path-escape", 1, "file-merging task-owned dir")
    ]


def test_unsafe_names_lists_each_distinct_name_once_files_first() -> None:
    cp, (first, second) = _incremental_subtasks()
    first.shared_state[0].handle = FileHandle("file:/b/../x", 1)
    second.shared_state[0].handle = FileHandle("file:/a/../x", 1)
    first.meta_state_handle = RelativeFileHandle("meta\0", 1)
    second.meta_state_handle = RelativeFileHandle("../M", 1)
    first.private_state[0].local_path = "../M"  # the same text as a file above: listed once
    second.private_state[0].local_path = "../M"
    first.shared_state[1].local_path = "/abs"
    second.shared_state[1].local_path = "/abs"  # a local file name in two subtasks: listed once
    got = [(name, p.rule, p.reason) for name, p in unsafe_names(cp)]  # type: ignore[arg-type]
    dotdot = "path has a '..' component: it escapes the directory it names"
    assert got == [
        ("file:/a/../x", "path-escape", dotdot),
        ("file:/b/../x", "path-escape", dotdot),
        ("../M", "path-escape", "relative path escapes the checkpoint directory"),
        ("meta\0", "bad-path", "bad path: contains a NUL byte"),
        ("/abs", "path-escape", "local file name escapes the RocksDB instance directory on restore"),
    ]


def test_a_checkpoint_without_unsafe_paths_has_no_unsafe_names() -> None:
    cp, _ = _incremental_subtasks()
    assert unsafe_names(cp) == []  # type: ignore[arg-type]
