"""Unsafe handle paths are classified from the text alone (spillway.model.paths), the resolver never looks
them up, and a checkpoint holding one still decodes and encodes back byte for byte."""

from __future__ import annotations

from pathlib import Path

import pytest
from support.damaged import copy_fixture, rewrite

from spillway.formats.metadata_codec import decode_metadata, encode_metadata
from spillway.inspect.validate import validate
from spillway.model.checkpoint import FileHandle, IncrementalHandle, RelativeFileHandle
from spillway.model.paths import checkpoint_path_problems, path_problem, shown_path
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
