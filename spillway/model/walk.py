"""Walk every stream handle reachable from a checkpoint, with where it sits (for files, relocation, checks)."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass

from spillway.model.checkpoint import (
    ChangelogByteIncrementHandle,
    ChangelogFileIncrementHandle,
    ChangelogHandle,
    ChannelHandle,
    Checkpoint,
    FileHandle,
    IncrementalHandle,
    KeyGroupsHandle,
    MergedChannelHandle,
    OperatorState,
    OperatorStreamHandle,
    RelativeFileHandle,
    SegmentFileHandle,
    SubtaskState,
)

_WRAPPERS = (KeyGroupsHandle, OperatorStreamHandle, MergedChannelHandle, ChannelHandle)

STATE_KINDS = (
    "managed_operator_state",
    "raw_operator_state",
    "managed_keyed_state",
    "raw_keyed_state",
    "input_channel_state",
    "result_subpartition_state",
)


@dataclass(frozen=True, slots=True)
class HandleSite:
    operator: OperatorState
    subtask: SubtaskState | None  # None: coordinator state
    kind: str  # one of STATE_KINDS, or "coordinator_state"
    role: str  # "delegate", "meta", "shared:<local path>", "private:<local path>", …


def stream_handles_of(handle: object, role: str = "delegate") -> list[tuple[str, object]]:
    """Every stream handle inside any handle (itself included when it is one), with its role."""
    out: list[tuple[str, object]] = []
    _collect(handle, role, out)
    return out


def _collect(handle: object, role: str, out: list[tuple[str, object]]) -> None:
    # Hot on large checkpoints (hundreds of thousands of handles): plain recursion, no generators.
    if handle is None:
        return
    cls = type(handle)
    if cls is IncrementalHandle:
        _collect(handle.meta_state_handle, "meta", out)  # type: ignore[attr-defined]
        for item in handle.shared_state:  # type: ignore[attr-defined]
            _collect(item.handle, "shared:" + item.local_path, out)
        for item in handle.private_state:  # type: ignore[attr-defined]
            _collect(item.handle, "private:" + item.local_path, out)
    elif cls is ChangelogHandle:
        for h in (*handle.materialized, *handle.non_materialized):  # type: ignore[attr-defined]
            _collect(h, role, out)
    elif cls is ChangelogFileIncrementHandle:
        for _, h in handle.handles:  # type: ignore[attr-defined]
            _collect(h, role, out)
    elif cls in _WRAPPERS:
        _collect(handle.delegate, role, out)  # type: ignore[attr-defined]
    elif cls is not ChangelogByteIncrementHandle:
        out.append((role, handle))


def subtask_handles(sub: SubtaskState) -> Iterator[tuple[str, object]]:
    """(kind, top-level handle) for every state handle a subtask holds."""
    for kind in STATE_KINDS[:4]:
        h = getattr(sub, kind)
        if h is not None:
            yield kind, h
    for h in sub.input_channel_state:
        yield "input_channel_state", h
    for h in sub.result_subpartition_state:
        yield "result_subpartition_state", h


def all_stream_handles(checkpoint: Checkpoint) -> Iterator[tuple[HandleSite, object]]:
    for op in checkpoint.operators:
        if op.coordinator_state is not None:
            yield HandleSite(op, None, "coordinator_state", "delegate"), op.coordinator_state
        for sub in op.subtasks:
            for kind, top in subtask_handles(sub):
                for role, h in stream_handles_of(top):
                    yield HandleSite(op, sub, kind, role), h


def file_path_of(handle: object) -> str | None:
    """The file a stream handle points into (``None`` for inline and empty handles)."""
    if isinstance(handle, FileHandle | SegmentFileHandle):
        return handle.path
    if isinstance(handle, RelativeFileHandle):
        return handle.relative_path
    return None


def transform_stream_handles(checkpoint: Checkpoint, fn: Callable[[object], object]) -> None:
    """Replace, in place, every stream handle ``h`` reachable from the checkpoint by ``fn(h)``.

    ``fn`` sees leaf stream handles only (file, relative, inline, segment…); wrappers are descended.
    """

    def stream(h: object) -> object:
        if h is None:
            return None
        if isinstance(h, KeyGroupsHandle):  # legacy key-groups handle in a stream position
            h.delegate = stream(h.delegate)  # type: ignore[assignment]
            return h
        return fn(h)

    def keyed(h: object) -> object:
        if isinstance(h, KeyGroupsHandle):
            h.delegate = stream(h.delegate)  # type: ignore[assignment]
        elif isinstance(h, IncrementalHandle):
            h.meta_state_handle = stream(h.meta_state_handle)  # type: ignore[assignment]
            for item in (*h.shared_state, *h.private_state):
                item.handle = stream(item.handle)  # type: ignore[assignment]
        elif isinstance(h, ChangelogHandle):
            h.materialized = [keyed(x) for x in h.materialized]  # type: ignore[misc]
            h.non_materialized = [keyed(x) for x in h.non_materialized]  # type: ignore[misc]
        elif isinstance(h, ChangelogFileIncrementHandle):
            h.handles = [(o, stream(x)) for o, x in h.handles]  # type: ignore[misc]
        return h

    for op in checkpoint.operators:
        if op.coordinator_state is not None:
            op.coordinator_state = stream(op.coordinator_state)  # type: ignore[assignment]
        for sub in op.subtasks:
            for kind in ("managed_operator_state", "raw_operator_state"):
                h = getattr(sub, kind)
                if h is not None:
                    h.delegate = stream(h.delegate)
            for kind in ("managed_keyed_state", "raw_keyed_state"):
                h = getattr(sub, kind)
                if h is not None:
                    setattr(sub, kind, keyed(h))
            for h in (*sub.input_channel_state, *sub.result_subpartition_state):
                h.delegate = stream(h.delegate)  # type: ignore[union-attr]


def leaf_stream_handles(checkpoint: Checkpoint, coordinator: bool = False) -> Iterator[object]:
    """Every leaf stream handle of every subtask (and, if asked, of coordinator state), without site
    bookkeeping — the fast path for whole-checkpoint scans such as file resolution."""
    for op in checkpoint.operators:
        if coordinator and op.coordinator_state is not None:
            yield op.coordinator_state
        for sub in op.subtasks:
            for _, top in subtask_handles(sub):
                for _, handle in stream_handles_of(top):
                    yield handle
