"""Walk every stream handle reachable from a checkpoint, with where it sits (for files, relocation, checks)."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass

from spillway.inspect.model import (
    ChangelogFileIncrementHandle,
    ChangelogHandle,
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


def stream_handles_of(handle: object, role: str = "delegate") -> Iterator[tuple[str, object]]:
    """Every stream handle inside any handle (itself included when it is one)."""
    if handle is None:
        return
    if isinstance(handle, KeyGroupsHandle):
        yield from stream_handles_of(handle.delegate, role)
    elif isinstance(handle, IncrementalHandle):
        yield from stream_handles_of(handle.meta_state_handle, "meta")
        for item in handle.shared_state:
            yield from stream_handles_of(item.handle, f"shared:{item.local_path}")
        for item in handle.private_state:
            yield from stream_handles_of(item.handle, f"private:{item.local_path}")
    elif isinstance(handle, ChangelogHandle):
        for h in (*handle.materialized, *handle.non_materialized):
            yield from stream_handles_of(h, role)
    elif isinstance(handle, ChangelogFileIncrementHandle):
        for _, h in handle.handles:
            yield from stream_handles_of(h, role)
    elif isinstance(handle, OperatorStreamHandle | MergedChannelHandle):
        yield from stream_handles_of(handle.delegate, role)
    elif hasattr(handle, "delegate"):  # ChannelHandle
        yield from stream_handles_of(handle.delegate, role)  # type: ignore[attr-defined]
    elif hasattr(handle, "state_size"):
        yield role, handle


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
