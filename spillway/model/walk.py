"""The one traversal of a checkpoint's state handles: reading (every leaf stream handle, with where it
sits) and rewriting (every leaf replaced by ``fn(leaf)``).

Both follow ``children()`` / ``with_children()`` of the model's handles (spillway.model.checkpoint), so
a new handle kind is walked, relocated, resolved and opened once it declares its children. The leaf
stream handles are the ones holding bytes: inline, a file, a segment of a file, an empty segment.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Protocol, TypeAlias, TypeVar

from spillway.model.checkpoint import (
    FILE_BACKED_TYPES,
    STREAM_LEAF_TYPES,
    AnyChannelHandle,
    ByteStreamHandle,
    CheckpointMetadata,
    Children,
    FileMergingDirs,
    Handle,
    HandleKindError,
    InputChannelHandle,
    KeyedHandle,
    MergedInputChannelHandle,
    MergedResultSubpartitionHandle,
    OperatorState,
    OperatorStreamHandle,
    RelativeFileHandle,
    ResultSubpartitionHandle,
    StreamHandle,
    StreamLeaf,
    SubtaskState,
    is_stream_leaf,
)

STATE_KINDS = (
    "managed_operator_state",
    "raw_operator_state",
    "managed_keyed_state",
    "raw_keyed_state",
    "input_channel_state",
    "result_subpartition_state",
)

LeafFn: TypeAlias = Callable[[StreamLeaf], StreamHandle]
TopHandle: TypeAlias = OperatorStreamHandle | KeyedHandle | AnyChannelHandle  # what a subtask holds

if TYPE_CHECKING:
    from typing_extensions import Self


class _HoldsHandles(Protocol):
    def children(self) -> Children: ...
    def with_children(self, children: Sequence[Handle | None]) -> Self: ...


H = TypeVar("H", bound=_HoldsHandles)


@dataclass(frozen=True, slots=True)
class HandleSite:
    operator: OperatorState
    subtask: SubtaskState | None  # None: coordinator state
    kind: str  # one of STATE_KINDS, or "coordinator_state"
    role: str  # the leaf's role in its parent: "delegate", "meta", "shared:<local path>", "private:<local path>", …


# --------------------------------------------------------------------------------------------------
# reading


def subtask_handles(sub: SubtaskState) -> list[tuple[str, TopHandle]]:
    """(kind, top-level handle) for every state handle a subtask holds."""
    out: list[tuple[str, TopHandle]] = []
    if sub.managed_operator_state is not None:
        out.append(("managed_operator_state", sub.managed_operator_state))
    if sub.raw_operator_state is not None:
        out.append(("raw_operator_state", sub.raw_operator_state))
    if sub.managed_keyed_state is not None:
        out.append(("managed_keyed_state", sub.managed_keyed_state))
    if sub.raw_keyed_state is not None:
        out.append(("raw_keyed_state", sub.raw_keyed_state))
    out.extend(("input_channel_state", h) for h in sub.input_channel_state)
    out.extend(("result_subpartition_state", h) for h in sub.result_subpartition_state)
    return out


def stream_handles_of(handle: Handle | None, role: str = "delegate") -> list[tuple[str, StreamLeaf]]:
    """Every leaf stream handle inside any handle (itself included when it is one), with its role."""
    out: list[tuple[str, StreamLeaf]] = []
    if handle is not None:
        _collect(handle, role, out)
    return out


def _leaves(handle: Handle, out: list[StreamLeaf]) -> None:
    if isinstance(handle, STREAM_LEAF_TYPES):
        out.append(handle)
        return
    for _, child in handle.children():
        if child is not None:
            _leaves(child, out)


def _collect(handle: Handle, role: str, out: list[tuple[str, StreamLeaf]]) -> None:
    # Hot on large checkpoints (hundreds of thousands of handles): plain recursion, no generators, and
    # leaves (most handles) recognised before asking for children.
    if isinstance(handle, STREAM_LEAF_TYPES):
        out.append((role, handle))
        return
    for child_role, child in handle.children():
        if child is not None:
            _collect(child, child_role, out)


def all_stream_handles(checkpoint: CheckpointMetadata) -> Iterator[tuple[HandleSite, StreamLeaf]]:
    """Every leaf stream handle with where it sits (coordinator state included)."""
    for op in checkpoint.operators:
        if op.coordinator_state is not None:
            yield HandleSite(op, None, "coordinator_state", "delegate"), op.coordinator_state
        for sub in op.subtasks:
            for kind, top in subtask_handles(sub):
                for role, h in stream_handles_of(top):
                    yield HandleSite(op, sub, kind, role), h


def leaf_stream_handles(checkpoint: CheckpointMetadata, coordinator: bool = False) -> list[StreamLeaf]:
    """Every leaf stream handle of every subtask (and, if asked, of coordinator state), without site
    bookkeeping — the fast path for whole-checkpoint scans such as file resolution."""
    out: list[StreamLeaf] = []
    for op in checkpoint.operators:
        if coordinator and op.coordinator_state is not None:
            out.append(op.coordinator_state)
        for sub in op.subtasks:
            subtask_leaves(sub, out)
    return out


# Exact classes (a set lookup instead of an isinstance chain, for the handles counted in hundreds of
# thousands): every channel-handle kind holds one delegate and nothing else.
_CHANNEL_CLASSES = frozenset(
    {InputChannelHandle, ResultSubpartitionHandle, MergedInputChannelHandle, MergedResultSubpartitionHandle}
)
_LEAF_CLASSES = frozenset(STREAM_LEAF_TYPES)


def subtask_leaves(sub: SubtaskState, out: list[StreamLeaf]) -> None:
    """Append every leaf stream handle a subtask holds to ``out`` (the order of ``subtask_handles``).

    Channel handles (hundreds of thousands in an unaligned checkpoint) are read straight through to
    their delegate: no ``children()`` tuple, no recursion per handle."""
    for top in (sub.managed_operator_state, sub.raw_operator_state, sub.managed_keyed_state, sub.raw_keyed_state):
        if top is not None:
            _leaves(top, out)
    append = out.append
    for handles in (sub.input_channel_state, sub.result_subpartition_state):
        for h in handles:
            if type(h) in _CHANNEL_CLASSES:
                d = h.delegate
                if type(d) in _LEAF_CLASSES:
                    append(d)  # type: ignore[arg-type]  # a leaf: its exact class was checked just above
                elif d is not None:
                    _leaves(d, out)
            else:
                _leaves(h, out)


def file_names(checkpoint: CheckpointMetadata, coordinator: bool = False) -> tuple[set[str], set[str]]:
    """(absolute, relative): the names of every file the handles point into, each once."""
    absolute: set[str] = set()
    relative: set[str] = set()
    add_relative = relative.add
    leaves: list[StreamLeaf] = []
    for op in checkpoint.operators:
        if coordinator and op.coordinator_state is not None:
            leaves.append(op.coordinator_state)
        for sub in op.subtasks:
            for top in (
                sub.managed_operator_state,
                sub.raw_operator_state,
                sub.managed_keyed_state,
                sub.raw_keyed_state,
            ):
                if top is not None:
                    _leaves(top, leaves)
            for handles in (sub.input_channel_state, sub.result_subpartition_state):
                for h in handles:
                    # most channel handles: a relative file (their subtask's channel-state file)
                    d = h.delegate if type(h) in _CHANNEL_CLASSES else h
                    if type(d) is RelativeFileHandle:
                        add_relative(d.relative_path)
                    elif d is not None:
                        _leaves(d, leaves)
    for leaf in leaves:
        if isinstance(leaf, FILE_BACKED_TYPES):
            (relative if leaf.relative else absolute).add(leaf.file_name)
    return absolute, relative


def file_path_of(handle: Handle | None) -> str | None:
    """The file a stream handle points into, as the handle names it (None for inline and empty handles)."""
    return handle.file_name if isinstance(handle, FILE_BACKED_TYPES) else None


# --------------------------------------------------------------------------------------------------
# rewriting


def _map(handle: Handle | None, fn: LeafFn) -> Handle | None:
    if handle is None:
        return None
    children = handle.children()
    if not children:
        return fn(handle) if is_stream_leaf(handle) else handle
    new = [_map(child, fn) for _, child in children]
    if all(n is c for n, (_, c) in zip(new, children, strict=True)):
        return handle
    return handle.with_children(new)


def map_stream_leaves(handle: H, fn: LeafFn) -> H:
    """``handle`` with every leaf stream handle inside it replaced by ``fn(leaf)`` (itself when nothing changed)."""
    children = handle.children()
    new = [_map(child, fn) for _, child in children]
    if all(n is c for n, (_, c) in zip(new, children, strict=True)):
        return handle
    return handle.with_children(new)


def transform_stream_handles(checkpoint: CheckpointMetadata, fn: LeafFn) -> None:
    """Replace, in place, every leaf stream handle ``h`` reachable from the checkpoint by ``fn(h)``.

    ``fn`` sees leaf stream handles only (file, relative, inline, segment…); the handles holding them
    are rebuilt around the results (unchanged ones are kept as they are).
    """
    for op in checkpoint.operators:
        if op.coordinator_state is not None:
            coordinator = fn(op.coordinator_state)
            if coordinator is not None and not isinstance(coordinator, ByteStreamHandle):
                raise HandleKindError(f"coordinator state must stay inline, not a {coordinator.flink_class}")
            op.coordinator_state = coordinator
        for sub in op.subtasks:
            if sub.managed_operator_state is not None:
                sub.managed_operator_state = map_stream_leaves(sub.managed_operator_state, fn)
            if sub.raw_operator_state is not None:
                sub.raw_operator_state = map_stream_leaves(sub.raw_operator_state, fn)
            if sub.managed_keyed_state is not None:
                sub.managed_keyed_state = map_stream_leaves(sub.managed_keyed_state, fn)
            if sub.raw_keyed_state is not None:
                sub.raw_keyed_state = map_stream_leaves(sub.raw_keyed_state, fn)
            sub.input_channel_state = [map_stream_leaves(h, fn) for h in sub.input_channel_state]
            sub.result_subpartition_state = [map_stream_leaves(h, fn) for h in sub.result_subpartition_state]


MERGING_DIR_FIELDS = ("task_owned_dir", "shared_dir")


def merging_dirs(checkpoint: CheckpointMetadata) -> Iterator[FileMergingDirs]:
    """The directory records of file-merging operator state (its task-owned and shared directories: paths too,
    though no handle opens them), each as the model holds it (a writer may set its fields)."""
    for op in checkpoint.operators:
        for sub in op.subtasks:
            for h in (sub.managed_operator_state, sub.raw_operator_state):
                merging = getattr(h, "file_merging", None) if h is not None else None
                if merging is not None:
                    yield merging
