"""Which paths in a decoded ``_metadata`` are unsafe to hand to a file system, decided in one place.

A ``_metadata`` is input, possibly crafted: a handle path may climb out of the directory it names (a ``..``
component, a "relative" path that is absolute) or hold what no file system accepts (a NUL byte, or text
that is not valid Unicode). Such a path is classified here, from the text as decoded, without touching a
file system: ``path-escape`` or ``bad-path``. The decoded text itself is never changed (a checkpoint is
written back byte for byte); readers, ``validate``, ``files`` and every writing command ask
``path_problem`` (or ``checkpoint_path_problems`` for a whole checkpoint) before they resolve or open a path.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from dataclasses import dataclass

from spillway.model.checkpoint import (
    CheckpointMetadata,
    Handle,
    IncrementalHandle,
    OperatorStreamHandle,
    is_file_backed,
    is_stream_leaf,
)
from spillway.model.walk import all_stream_handles, file_names, subtask_handles

PATH_ESCAPE = "path-escape"
BAD_PATH = "bad-path"
PATH_RULES = frozenset({PATH_ESCAPE, BAD_PATH})


@dataclass(frozen=True, slots=True)
class PathProblem:
    rule: str  # PATH_ESCAPE or BAD_PATH
    reason: str  # a few words, e.g. "has a '..' component"


_NUL = PathProblem(BAD_PATH, "bad path: contains a NUL byte")
_NOT_TEXT = PathProblem(BAD_PATH, "bad path: not valid Unicode text (a lone surrogate)")
_EMPTY = PathProblem(BAD_PATH, "bad path: empty")
_DOTDOT = PathProblem(PATH_ESCAPE, "path has a '..' component: it escapes the directory it names")
_RELATIVE_ESCAPE = PathProblem(PATH_ESCAPE, "relative path escapes the checkpoint directory")


def _not_text(path: str) -> bool:
    try:
        path.encode("utf-8")
    except UnicodeEncodeError:
        return True
    return False


def _path_part(path: str) -> str:
    """The path of a URI (``s3://bucket/a/b`` -> ``/a/b``, ``file:/x`` -> ``/x``); a bare path as it is."""
    scheme, sep, rest = path.partition(":")
    if not sep or "/" in scheme or not scheme.isascii() or not scheme[:1].isalpha():
        return path
    if rest.startswith("//"):
        return "/" + rest[2:].partition("/")[2]
    return rest


def path_problem(path: str, relative: bool = False) -> PathProblem | None:
    """Why ``path`` (as a handle names it; ``relative``: against the checkpoint directory) must not be
    resolved, or None for a path that is safe to look up."""
    if "\0" in path:
        return _NUL
    if not path.isascii() and _not_text(path):
        return _NOT_TEXT
    if not path:
        return _EMPTY
    if relative:
        # Flink resolves it against the checkpoint directory: an absolute one, or one that climbs, leaves it
        # ("a//b", "./a" are other spellings of a file inside).
        if path.startswith("/") or ".." in path.split("/"):
            return _RELATIVE_ESCAPE
        return None
    if ".." in path and ".." in _path_part(path).split("/"):
        return _DOTDOT
    return None


def local_path_problem(local_path: str) -> PathProblem | None:
    """An incremental (RocksDB) handle's local file name: Flink restores the file under this name inside
    the backend's instance directory, so it must stay there."""
    problem = path_problem(local_path, relative=True)
    if problem is _RELATIVE_ESCAPE:
        return PathProblem(PATH_ESCAPE, "local file name escapes the RocksDB instance directory on restore")
    return problem


def shown_path(path: str) -> str:
    """``path`` fit for a terminal and a one-line message: control characters (NUL included) and text that
    is not Unicode escaped as ``\\x00`` / ``\\udc80``; an ordinary path (any printable text) unchanged."""
    if path.isprintable():
        return path
    return "".join(c if c.isprintable() else _escape(c) for c in path)


def _escape(c: str) -> str:
    code = ord(c)
    return f"\\x{code:02x}" if code < 0x100 else f"\\u{code:04x}" if code < 0x10000 else f"\\U{code:08x}"


@dataclass(frozen=True, slots=True)
class PathSite:
    """One unsafe path in a checkpoint and where it is."""

    path: str
    problem: PathProblem
    operator: str  # the operator's label
    operator_id: str
    subtask: int | None  # None: coordinator state or a whole-operator field
    kind: str  # kind of state, e.g. "managed_keyed_state"
    field: str  # "file", "local file name", "file-merging shared dir", "file-merging task-owned dir"

    @property
    def rule(self) -> str:
        return self.problem.rule

    def message(self) -> str:
        return f"{shown_path(self.path)}: {self.problem.reason}"


def checkpoint_path_problems(checkpoint: CheckpointMetadata) -> list[PathSite]:
    """Every unsafe path the checkpoint names, in handle order: each file-backed handle's path, each
    incremental handle's local file names, each file-merging handle's directories."""
    return list(_problems(checkpoint))


def unsafe_names(checkpoint: CheckpointMetadata) -> list[tuple[str, PathProblem]]:
    """Each distinct unsafe path the checkpoint names, once (cheaper than ``checkpoint_path_problems``:
    no handle sites), files first."""
    absolute, relative = file_names(checkpoint, coordinator=True)
    out = [(n, p) for n in sorted(absolute) if (p := path_problem(n)) is not None]
    out += [(n, p) for n in sorted(relative) if (p := path_problem(n, relative=True)) is not None]
    seen = {n for n, _ in out}
    for site in _named_problems(checkpoint):
        if site.path not in seen:
            seen.add(site.path)
            out.append((site.path, site.problem))
    return out


def named_path_problems(checkpoint: CheckpointMetadata, plan_names: Mapping[str, str] | None = None) -> list[PathSite]:
    """The unsafe paths a checkpoint names besides its files (RocksDB local file names, file-merging
    directories): those no resolver is asked about. ``plan_names``: a bound plan's (``JobBinding.names``)."""
    return list(_named_problems(checkpoint, plan_names))


def _problems(checkpoint: CheckpointMetadata) -> Iterator[PathSite]:
    for site, h in all_stream_handles(checkpoint):
        if is_file_backed(h) and (problem := path_problem(h.file_name, h.relative)) is not None:
            op = site.operator
            sub = site.subtask.index if site.subtask else None
            yield PathSite(h.file_name, problem, op.label(), op.operator_id, sub, site.kind, "file")
    yield from _named_problems(checkpoint)


def _named_problems(checkpoint: CheckpointMetadata, plan_names: Mapping[str, str] | None = None) -> Iterator[PathSite]:
    for op in checkpoint.operators:
        for sub in op.subtasks:
            for kind, top in subtask_handles(sub):
                for field_name, text, problem in _named_paths(top):
                    yield PathSite(text, problem, op.label(plan_names), op.operator_id, sub.index, kind, field_name)


def _named_paths(handle: Handle) -> Iterator[tuple[str, str, PathProblem]]:
    """Paths a handle (or one it holds) names besides its files: RocksDB local file names, file-merging
    directories."""
    if isinstance(handle, IncrementalHandle):
        for entry in (*handle.shared_state, *handle.private_state):
            if (problem := local_path_problem(entry.local_path)) is not None:
                yield "local file name", entry.local_path, problem
    elif isinstance(handle, OperatorStreamHandle) and handle.file_merging is not None:
        dirs = handle.file_merging
        for field_name, text in (
            ("file-merging shared dir", dirs.shared_dir),
            ("file-merging task-owned dir", dirs.task_owned_dir),
        ):
            if text and (problem := path_problem(text)) is not None:
                yield field_name, text, problem
    elif not is_stream_leaf(handle):
        for _, child in handle.children():
            if child is not None:
                yield from _named_paths(child)
