"""Find the ``_metadata`` a user means, and find the files its handles name.

Users point at a job's checkpoint directory, a ``chk-N`` directory or a ``_metadata`` file. Flink
writes absolute paths into ``_metadata``; a checkpoint copied elsewhere (or into this repository's
fixtures) still names the old place. A path that does not exist is rebased by its trailing
components (``<job-id>/chk-N/<file>``, ``<job-id>/shared/…``, ``<job-id>/taskowned/…``, ``<job-id>/dstl/…``) onto the
checkpoint being read, and every such rewrite is reported. Explicit ``--rebase OLD=NEW`` rules win.
No resolved path may leave the directory it was rebased into, and a path ``spillway.model.paths`` calls
unsafe (a ``..`` component, a NUL byte) is never looked up at all: it resolves to nothing, with the reason.
"""

from __future__ import annotations

import os
import stat
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path, PurePosixPath
from typing import Protocol

from spillway.errors import Message, Named, UsageError
from spillway.model.checkpoint import FILE_BACKED_TYPES, Handle
from spillway.model.paths import PathProblem, path_problem
from spillway.safe_io import real_path
from spillway.storage import remote_copies
from spillway.storage.names import CHK_DIR, METADATA
from spillway.storage.rules import PathRule

# dstl: the changelog backend's files, <base-path>/<job-id>/dstl/ (StateChangeFsUploader.PATH_SUB_DIR).
_ANCHORS = ("shared", "taskowned", "dstl")
ESCAPES_CHECKPOINT = "relative path escapes the checkpoint directory"  # e.g. a symlink leading out of it


class LocateError(UsageError):
    """The path given does not lead to a checkpoint (a usage error, exit code 2)."""


@dataclass(frozen=True)
class CheckpointLocation:
    metadata_path: Path
    note: str | None = None  # e.g. "picked newest of 3 checkpoints: chk-12"
    uri: str | None = None  # a remote checkpoint: its _metadata's URI (metadata_path is a local copy)

    @property
    def checkpoint_dir(self) -> Path:
        return self.metadata_path.parent

    @property
    def shown(self) -> str:
        """``_metadata`` as the user knows it: the URI of a remote one, never the local working copy."""
        return self.uri or str(self.metadata_path)

    @property
    def shown_dir(self) -> str:
        return self.uri.rstrip("/").rpartition("/")[0] if self.uri else str(self.checkpoint_dir)


class Tree(Protocol):
    """What finding a checkpoint needs of a file system: local disk (:class:`LocalTree`) and a store
    (``spillway.storage.fs.StoreTree``) answer alike, so one lookup serves both."""

    def kind(self, path: str) -> str | None:
        """``"file"``, ``"dir"`` or None (nothing there)."""
        ...

    def subdirs(self, path: str) -> list[str]:
        """The names of the directories directly in ``path``."""
        ...

    def child(self, path: str, name: str) -> str: ...


class LocalTree:
    def kind(self, path: str) -> str | None:
        try:
            st = os.stat(path)
        except (OSError, ValueError):
            return None
        return "file" if stat.S_ISREG(st.st_mode) else "dir" if stat.S_ISDIR(st.st_mode) else "other"

    def subdirs(self, path: str) -> list[str]:
        try:
            return [e.name for e in os.scandir(path) if e.is_dir()]
        except OSError:
            return []

    def child(self, path: str, name: str) -> str:
        return os.path.join(path, name)


def _chk_dirs(tree: Tree, directory: str) -> list[str]:
    """The ``chk-N`` directories directly in ``directory`` that hold a ``_metadata``, oldest first."""
    found = []
    for name in tree.subdirs(directory):
        m = CHK_DIR.match(name)
        if m and tree.kind(tree.child(tree.child(directory, name), METADATA)) == "file":
            found.append((int(m.group(1)), tree.child(directory, name)))
    return [c for _, c in sorted(found)]


def checkpoint_dirs_in(tree: Tree, path: str) -> list[str]:
    """The ``chk-N`` directories (oldest first) of what ``path`` names when it is a job's checkpoint
    directory, or a checkpoint root holding exactly one job; empty for anything else."""
    if tree.kind(path) != "dir" or tree.kind(tree.child(path, METADATA)) == "file":
        return []
    chks = _chk_dirs(tree, path)
    if not chks:
        # A checkpoint root: <root>/<job-id>/chk-N. Accept it when exactly one job is inside.
        jobs = [
            (name, found) for name in sorted(tree.subdirs(path)) if (found := _chk_dirs(tree, tree.child(path, name)))
        ]
        if len(jobs) > 1:
            names = ", ".join(name for name, _ in jobs)
            raise LocateError(f"{path}: holds checkpoints of several jobs ({names}); name one of them")
        if jobs:
            chks = jobs[0][1]
    return chks


def find_metadata_in(tree: Tree, path: str) -> tuple[str, str | None]:
    """``_metadata`` of what ``path`` names — the file itself, a chk-N / savepoint directory, a job's checkpoint
    directory (its newest chk-N) or a root holding one job — and a note when a newest chk-N was picked."""
    kind = tree.kind(path)
    if kind is None:
        raise LocateError(f"{path}: no such file or directory")
    if kind == "file":
        return path, None
    meta = tree.child(path, METADATA)
    if tree.kind(meta) == "file":
        return meta, None
    chks = checkpoint_dirs_in(tree, path)
    if not chks:
        raise LocateError(f"{path}: no _metadata here, and no chk-N directory holding one")
    newest = chks[-1].rstrip("/").rpartition("/")[2]
    note = None if len(chks) == 1 else f"picked the newest of {len(chks)} checkpoints: {newest}"
    return tree.child(chks[-1], METADATA), note


def job_checkpoint_dirs(path: str | os.PathLike[str]) -> list[Path]:
    """:func:`checkpoint_dirs_in` on local disk."""
    return [Path(c) for c in checkpoint_dirs_in(LocalTree(), str(Path(path)))]


def locate_checkpoint(path: str | os.PathLike[str]) -> CheckpointLocation:
    """:func:`find_metadata_in` on local disk."""
    meta, note = find_metadata_in(LocalTree(), str(Path(path)))
    return CheckpointLocation(Path(meta), note)


# Path rewrites as a caller gives them, winning over automatic rebasing: {old_prefix: new_prefix}, or "OLD=NEW".
RebaseRules = Mapping[str, str] | Sequence[str] | None


def rebase_rule(text: str) -> Named:
    """A rebase rule as messages name it: ``rebase rule 'A=B'`` (the front end: its option and the rule)."""
    return Named("rebase", text, python=f"rebase rule {text!r}")


def rebase_rules(rebase: RebaseRules) -> list[str] | None:
    """``rebase`` as the locator's ``OLD=NEW`` rules; a wrong shape is a ``UsageError`` in Python's words."""
    if rebase is None:
        return None
    pairs: list[tuple[object, object]]
    if isinstance(rebase, Mapping):
        pairs = list(rebase.items())
    elif isinstance(rebase, Sequence) and not isinstance(rebase, str):
        pairs = [(r.partition("=")[0], r.partition("=")[2]) if isinstance(r, str) else (r, None) for r in rebase]
    else:
        raise UsageError(f"rebase: expected a mapping {{old_prefix: new_prefix}}, got {type(rebase).__name__}")
    rules = []
    for old, new in pairs:
        if not isinstance(old, str) or not isinstance(new, str) or not old or not new:
            raise UsageError(
                f"rebase: {old!r}: expected non-empty prefixes, {{old_prefix: new_prefix}} or 'OLD_PREFIX=NEW_PREFIX'"
            )
        rules.append(f"{old}={new}")
    return rules


@dataclass(frozen=True)
class Rebase(PathRule):
    """A rebase rule ``OLD=NEW`` (OLD and NEW: a path or a URI; matched on any spelling of OLD's
    location, see ``spillway.storage.rules``). ``internal`` rules are spillway's own (to the local
    copies of remote files): they are applied like the others but never shown."""

    internal: bool = False

    @classmethod
    def parse(cls, text: str, internal: bool = False) -> Rebase:
        old, sep, new = text.partition("=")
        if not sep or not old or not new:
            raise LocateError(Message(rebase_rule(text), ": expected OLD_PREFIX=NEW_PREFIX"))
        return cls(old, new, internal)


@dataclass(frozen=True, slots=True)
class ResolvedFile:
    """Where a handle's bytes are on this machine. ``local`` is None when they cannot be reached."""

    original: str
    local_text: str | None  # kept as text: building Path objects for 300k files costs seconds
    rebased_from: str | None = None  # prefix replaced, when a rewrite happened
    rebased_to: str | None = None
    problem: str | None = None
    via: str | None = None  # the remote file (URI) ``local_text`` is a local copy of; show this, not the copy
    path_rule: str | None = None  # "path-escape" / "bad-path" when the path as written is unsafe to look up

    @classmethod
    def unsafe(cls, original: str, problem: PathProblem) -> ResolvedFile:
        return cls(original, None, problem=problem.reason, path_rule=problem.rule)

    @property
    def local(self) -> Path | None:
        return None if self.local_text is None else Path(self.local_text)


def strip_file_scheme(path: str) -> str | None:
    """Flink's ``Path.toString()`` for local files: ``file:/x``, ``file:///x`` or a bare ``/x``."""
    if path.startswith("file://"):
        rest = path[len("file://") :]
        return rest if rest.startswith("/") else "/" + rest.split("/", 1)[-1]
    if path.startswith("file:"):
        return path[len("file:") :]
    if "://" in path:
        return None
    return path


def _safe_tail(parts: tuple[str, ...]) -> bool:
    return all(p not in ("", ".", "..") for p in parts)


@dataclass
class FileResolver:
    """Resolve the paths of one checkpoint's handles; remembers every rebase it applied.

    Results are cached per path and directory listings per directory: a 100 MB ``_metadata`` names
    hundreds of thousands of files, so resolution must be a dictionary lookup, not a syscall.
    """

    location: CheckpointLocation
    rules: list[Rebase] = field(default_factory=list)
    applied: dict[tuple[str, str], set[str]] = field(default_factory=dict)
    _cache: dict[str, ResolvedFile] = field(default_factory=dict)
    _listings: dict[str, frozenset[str]] = field(default_factory=dict)
    _dirs: dict[str, list[tuple[str, str | None, str | None]]] = field(default_factory=dict)
    _listed: dict[str, list[tuple[frozenset[str], str, str | None, str | None]]] = field(default_factory=dict)
    _real: dict[str, str] = field(default_factory=dict)  # directory -> its real path ("": the checkpoint's)

    @property
    def checkpoint_dir(self) -> Path:
        return self.location.checkpoint_dir

    @property
    def job_dir(self) -> Path:
        return self.checkpoint_dir.parent

    def resolve(self, handle: Handle | None) -> ResolvedFile | None:
        """Where a file-backed handle's file is (None for any other handle)."""
        if not isinstance(handle, FILE_BACKED_TYPES):
            return None
        name = handle.file_name
        if handle.relative:
            key = "\0rel:" + name  # a NUL never starts a path that resolves: no clash with absolute names
            hit = self._cache.get(key)
            if hit is None:
                hit = self._cache[key] = self._relative(name)
            return hit
        return self.resolve_path(name)

    def _relative(self, relative: str) -> ResolvedFile:
        if (unsafe := path_problem(relative, relative=True)) is not None:
            return ResolvedFile.unsafe(relative, unsafe)
        rel = PurePosixPath(relative)
        local = self.checkpoint_dir / rel
        if rel.is_absolute() or not _safe_tail(rel.parts) or not self._inside_checkpoint(local):
            return ResolvedFile(relative, None, problem=ESCAPES_CHECKPOINT)
        return ResolvedFile(relative, str(local))

    def _inside_checkpoint(self, local: Path) -> bool:
        """Whether ``local``'s real path (symlinks resolved) is inside the checkpoint directory's. The
        real path of each directory is computed once (a checkpoint names thousands of relative files in
        a few directories); only a symlink as the last component needs a resolution of its own."""
        real_dir = self._real.get("")
        if real_dir is None:
            real_dir = self._real[""] = str(real_path(self.checkpoint_dir))
        parent = str(local.parent)
        real_parent = self._real.get(parent)
        if real_parent is None:
            real_parent = self._real[parent] = str(real_path(parent))
        real = str(real_path(local)) if os.path.islink(local) else os.path.join(real_parent, local.name)
        return real == real_dir or real.startswith(real_dir.rstrip("/") + "/")

    def resolve_path(self, original: str) -> ResolvedFile:
        hit = self._cache.get(original)
        if hit is None:
            hit = self._cache[original] = self._resolve_path(original)
        if hit.rebased_from is not None and hit.rebased_to is not None:
            self._note(hit.rebased_from, hit.rebased_to, original)
        return hit

    def _resolve_path(self, original: str) -> ResolvedFile:
        if (unsafe := path_problem(original)) is not None:
            return ResolvedFile.unsafe(original, unsafe)
        for rule in self.rules:
            rewritten = rule.apply(original)
            if rewritten is None:
                continue
            local_text = strip_file_scheme(rewritten)
            via = original if rule.internal else None
            if local_text is None:
                # Rebased onto another store (file: -> s3://): its local copy, when one was made.
                local_text, via = self._through_internal(rewritten), rewritten
            if local_text is None:
                return ResolvedFile(original, None, rule.old, rule.new, f"rebased path {rewritten!r} is not local")
            tail = rule.tail(original) or ""
            if not _safe_tail(tuple(tail.lstrip("/").split("/"))) and tail:
                return ResolvedFile(original, None, problem="rebased path escapes its new prefix")
            return ResolvedFile(original, local_text, rule.old, rule.new, via=via)
        found = self._find(original)
        if found is not None:
            return ResolvedFile(original, *found)
        local_text = strip_file_scheme(original)
        why = "not a local path" if local_text is None else "file does not exist"
        return ResolvedFile(original, local_text or None, problem=why)

    def _through_internal(self, rewritten: str) -> str | None:
        for rule in self.rules:
            if rule.internal and (copy := rule.apply(rewritten)) is not None:
                return strip_file_scheme(copy)
        return None

    def _find(self, original: str) -> tuple[str, str | None, str | None] | None:
        """(local path, old prefix, new prefix) of an absolute path no rule applies to, if found."""
        # Files of one directory resolve alike: decide per directory, then look the name up.
        parent, _, name = original.rpartition("/")
        listed = self._listed.get(parent)
        if listed is None:
            candidates = self._dirs.get(parent)
            if candidates is None:
                candidates = self._dirs[parent] = self._candidate_dirs(parent)
            # only the candidates that list anything (none, for a checkpoint whose files are remote)
            listed = [(self._listing(d), d, old, new) for d, old, new in candidates]
            listed = self._listed[parent] = [c for c in listed if c[0]]
        for names, local_dir, old_prefix, new_prefix in listed:
            if name in names:
                return f"{local_dir}/{name}", old_prefix, new_prefix
        return None

    def local_text(self, handle: Handle | None) -> str | None:
        """``resolve(handle).local_text`` (None also for an empty one), recording rebases alike, but
        without building and caching a ``ResolvedFile`` per file: the JSON view asks this for every
        file handle of a checkpoint, hundreds of thousands of distinct paths."""
        if not isinstance(handle, FILE_BACKED_TYPES):
            return None
        if handle.relative or self.rules:
            resolved = self.resolve(handle)
            return resolved.local_text if resolved is not None and resolved.local_text else None
        original = handle.file_name
        hit = self._cache.get(original)
        if hit is not None or path_problem(original) is not None:
            return self.resolve_path(original).local_text or None
        found = self._find(original)
        if found is None:
            return strip_file_scheme(original) or None
        local, old_prefix, new_prefix = found
        if old_prefix is not None and new_prefix is not None:
            self._note(old_prefix, new_prefix, original)
        return local

    def shown_text(self, handle: Handle | None) -> str | None:
        """Where the handle's file is, as the user knows it: ``local_text`` for a file on this machine,
        the URI for one read from a store (a remote checkpoint's, or rebased onto ``s3://…``), never
        the temporary local copy."""
        if not isinstance(handle, FILE_BACKED_TYPES):
            return None
        if handle.relative and self.location.uri is not None:
            return f"{self.location.shown_dir.rstrip('/')}/{handle.file_name}"
        if self.rules:
            resolved = self.resolve(handle)
            if resolved is not None and resolved.via is not None:
                return resolved.via
        return self.local_text(handle)

    def survey(self, originals: set[str]) -> int:
        """Resolve many absolute paths at once, recording rebases; returns how many were not found.

        Works per directory and builds no per-file objects (for summaries of huge checkpoints)."""
        by_parent: dict[str, list[str]] = {}
        rules = self.rules
        missing = 0  # unsafe paths count as not found: they are never looked up
        for original in originals:
            if path_problem(original) is not None:
                missing += 1
                continue
            if rules and any(r.matches(original) for r in rules):
                self.resolve_path(original)
                continue
            parent, _, name = original.rpartition("/")
            names = by_parent.get(parent)
            if names is None:
                by_parent[parent] = [name]
            else:
                names.append(name)
        for parent, names in by_parent.items():
            candidates = self._dirs.get(parent)
            if candidates is None:
                candidates = self._dirs[parent] = self._candidate_dirs(parent)
            # Each name is found in the first candidate directory that lists it.
            left = set(names)
            for directory, old, new in candidates:
                found = left & self._listing(directory)
                if not found:
                    continue
                left -= found
                if old is not None and new is not None:
                    self.applied.setdefault((old, new), set()).update(f"{parent}/{name}" for name in found)
            missing += len(left)
        return missing

    def _candidate_dirs(self, parent: str) -> list[tuple[str, str | None, str | None]]:
        """Where files of the original directory ``parent`` may be: as written (if local), then
        rebased by trailing components ``…/{chk-N,shared,taskowned,dstl}/…`` onto this job directory."""
        out: list[tuple[str, str | None, str | None]] = []
        local_parent = strip_file_scheme(parent + "/x")
        if local_parent is not None:
            out.append((local_parent[:-2], None, None))
        text = local_parent[:-2] if local_parent is not None else parent.split("://", 1)[-1]
        parts = text.split("/")
        chk_name = self.checkpoint_dir.name
        for i in range(len(parts) - 1, 0, -1):
            if parts[i] in _ANCHORS or parts[i] == chk_name:
                tail = parts[i:]
                if _safe_tail(tuple(tail)):
                    old_prefix = parent[: len(parent) - len("/".join(tail))].rstrip("/")
                    out.append((f"{self.job_dir}/{'/'.join(tail)}", old_prefix, str(self.job_dir)))
                break
        return out

    def _listing(self, directory: str) -> frozenset[str]:
        names = self._listings.get(directory)
        if names is None:
            try:
                names = frozenset(os.listdir(directory or "/"))
            except OSError:
                names = frozenset()
            names |= remote_copies.names_in(directory)  # a remote checkpoint's files not fetched yet
            self._listings[directory] = names
        return names

    def _note(self, old: str, new: str, original: str) -> None:
        self.applied.setdefault((old, new), set()).add(original)

    def rebases(self) -> list[dict[str, object]]:
        """Each prefix rewrite applied, with how many distinct paths it served (spillway's own rules to
        local copies of remote files are not shown: they name temporary directories)."""
        hidden = {(r.old, r.new) for r in self.rules if r.internal}
        return [
            {"from": o, "to": n, "paths": len(c)} for (o, n), c in sorted(self.applied.items()) if (o, n) not in hidden
        ]
