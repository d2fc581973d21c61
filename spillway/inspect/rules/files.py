"""File rules: ``path-escape``, ``bad-path``, ``file-not-local`` (paths), ``file-exists``, ``file-size``,
``file-size-extra`` (what is on disk against what the handles need).

A changelog backend's DSTL file is one flag byte (1: Snappy-compressed) and then the change stream; Flink's
handle of it counts the stream's uncompressed bytes only (StateChangeFsUploader: the handle's size is the
position of the stream written after the flag byte). So an uncompressed one is exactly one byte longer than its
handle says, and a compressed one's size says nothing about the handle's.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

from spillway.errors import Message, Named
from spillway.inspect.findings import Finding
from spillway.model.checkpoint import (
    ChangelogFileIncrementHandle,
    ChangelogHandle,
    CheckpointMetadata,
    KeyedHandle,
    is_file_backed,
)
from spillway.model.paths import PATH_RULES, shown_path
from spillway.model.walk import all_stream_handles
from spillway.storage.locate import FileResolver


@dataclass(frozen=True, slots=True)
class Need:
    """What the handles need of one local file: its first ``end`` bytes (all of it if ``whole_file``)."""

    end: int
    whole_file: bool
    where: str  # the operator and kind of state of the handle that needs the most
    changelog_file: bool = False  # a DSTL file: a flag byte, then the ``end`` bytes the handles count


# The byte before a DSTL file's change stream when it is not compressed.
DSTL_UNCOMPRESSED = 0


@dataclass
class Referenced:
    """Every file the checkpoint's handles reference: the local ones with what they need, and the paths that
    name no local file, each with the finding that says why (original name, finding), in handle order."""

    needed: dict[str, Need] = field(default_factory=dict)
    unresolved: list[tuple[str, Finding]] = field(default_factory=list)


def referenced_files(
    cp: CheckpointMetadata, resolver: FileResolver, plan_names: Mapping[str, str] | None = None
) -> Referenced:
    """Every file ``cp`` needs; ``plan_names`` (``JobBinding.names``) names operators stored by id only."""
    out = Referenced()
    dstl = _changelog_file_handles(cp)
    for site, h in all_stream_handles(cp):
        if not is_file_backed(h):
            continue
        resolved = resolver.resolve(h)
        assert resolved is not None
        local = resolved.local_text
        if local is None:
            if resolved.path_rule is not None:
                rule = resolved.path_rule
            else:
                rule = "path-escape" if resolved.problem and "escape" in resolved.problem else "file-not-local"
            shown = shown_path(resolved.original)  # a NUL or control character is shown escaped
            finding = Finding(
                rule,
                f"{shown}: {resolved.problem}",
                operator=site.operator.label(plan_names),
                subtask=site.subtask.index if site.subtask else None,
                file=shown,
            )
            out.unresolved.append((resolved.original, finding))
            continue
        end = h.start_pos + h.state_size
        prev = out.needed.get(local)
        if prev is None or end > prev.end:
            where = f"{site.operator.label(plan_names)} {site.kind}"
            out.needed[local] = Need(end, h.whole_file, where, id(h) in dstl)
    return out


def _changelog_file_handles(cp: CheckpointMetadata) -> set[int]:
    """``id`` of every stream handle that names a DSTL file (a changelog increment's delegates)."""
    out: set[int] = set()

    def visit(h: KeyedHandle | None) -> None:
        if isinstance(h, ChangelogHandle):
            for part in h.non_materialized:
                visit(part)
        elif isinstance(h, ChangelogFileIncrementHandle):
            out.update(id(d) for _, d in h.handles)

    for op in cp.operators:
        for sub in op.subtasks:
            visit(sub.managed_keyed_state)
            visit(sub.raw_keyed_state)
    return out


def missing_file(path: str, need: Need) -> Finding:
    return Finding("file-exists", f"missing file (referenced by {need.where})", file=path)


def unreadable_file(path: str, why: str) -> Finding:
    return Finding("file-exists", why, file=path)


def size_finding(path: str, size: int, need: Need, first_byte: int | None = None) -> Finding | None:
    """``file-size`` when the file is shorter than its handles need, ``file-size-extra`` when a whole-file
    handle is shorter than its file. ``first_byte``: a DSTL file's flag byte (None: the file is empty)."""
    if need.changelog_file:
        if first_byte is not None and first_byte != DSTL_UNCOMPRESSED:
            return None  # compressed: the handles count uncompressed bytes
        if size < need.end + 1:
            message = f"file has {size} bytes, handles need {need.end} after its flag byte ({need.where})"
            return Finding("file-size", message, file=path, offset=size)
        if size > need.end + 1:
            message = f"file has {size} bytes, handle says {need.end} after the 1-byte flag"
            return Finding("file-size-extra", message, file=path)
        return None
    if size < need.end:
        message = f"file has {size} bytes, handles need {need.end} ({need.where})"
        return Finding("file-size", message, file=path, offset=size)
    if need.whole_file and size > need.end:
        return Finding("file-size-extra", f"file has {size} bytes, handle says {need.end}", file=path)
    return None


def unsafe_path_refusal(errors: list[Finding]) -> str | None:
    """Why no command may write from a source whose errors include an unsafe path (``path-escape``,
    ``bad-path``), or None. Unlike other damage, ``force`` never overrides it: a crafted path would
    make the output (or a later restore) read or write outside the checkpoint."""
    unsafe = [f for f in errors if f.rule in PATH_RULES]
    if not unsafe:
        return None
    first = unsafe[0]
    where = f" (operator {first.operator})" if first.operator else ""
    count = f"{len(unsafe)} unsafe paths, first" if len(unsafe) > 1 else "an unsafe path"
    return Message(
        f"the source names {count}: {first.rule}: {first.message}{where}; nothing is written from such a "
        "checkpoint, not even with ",
        Named("force", True),
        " (spillway validate lists every one)",
    )
