"""The ``spillway.dump/1`` JSON document (docs/dump-schema.md) built from the model."""

from __future__ import annotations

import hashlib
from collections.abc import Callable, Iterator, Mapping
from typing import Any

from spillway import progress
from spillway.flink.features import FormatFeatures
from spillway.formats.metadata_codec import paused_gc
from spillway.model.checkpoint import (
    HANDLE_TYPES,
    ByteStreamHandle,
    ChangelogByteIncrementHandle,
    ChangelogFileIncrementHandle,
    ChangelogHandle,
    CheckpointMetadata,
    EmptySegmentFileHandle,
    FileBacked,
    FileHandle,
    Handle,
    IncrementalHandle,
    InputChannelHandle,
    KeyGroupsHandle,
    LocalPathHandle,
    MergedInputChannelHandle,
    MergedResultSubpartitionHandle,
    OperatorState,
    OperatorStreamHandle,
    RelativeFileHandle,
    ResultSubpartitionHandle,
    SegmentFileHandle,
    SubtaskState,
)
from spillway.model.paths import PathProblem, local_path_problem, path_problem
from spillway.storage.locate import FileResolver

SCHEMA = "spillway.dump/1"


class JsonView:
    """Renders the model as ``spillway.dump/1``: one renderer per handle class (``handle`` dispatches on
    the class, every renderer renders its children through ``handle`` again)."""

    def __init__(self, resolver: FileResolver | None = None, plan_names: Mapping[str, str] | None = None):
        self.resolver = resolver
        self.plan_names = plan_names or {}  # operator id -> a bound plan's name (``JobBinding.names``)
        # Whether channel handles store their subtask index (Flink 1.11's do not: null, as Flink reports).
        self._channel_subtask_index = True
        self._renderers: dict[type, Callable[[Any], dict[str, Any]]] = {
            ByteStreamHandle: self._byte_stream,
            FileHandle: self._file,
            RelativeFileHandle: self._relative_file,
            SegmentFileHandle: self._segment_file,
            EmptySegmentFileHandle: self._empty_segment_file,
            KeyGroupsHandle: self._key_groups,
            IncrementalHandle: self._incremental,
            ChangelogHandle: self._changelog,
            ChangelogByteIncrementHandle: self._changelog_bytes,
            ChangelogFileIncrementHandle: self._changelog_files,
            OperatorStreamHandle: self._operator_stream,
            InputChannelHandle: self._input_channel,
            ResultSubpartitionHandle: self._result_subpartition,
            MergedInputChannelHandle: self._merged_input_channel,
            MergedResultSubpartitionHandle: self._merged_result_subpartition,
        }
        missing = set(HANDLE_TYPES) - set(self._renderers)
        if missing:
            raise AssertionError(f"no JSON view for {sorted(t.__name__ for t in missing)}")

    def handle(self, h: Handle | None) -> dict[str, Any] | None:
        """Any handle (null: None)."""
        if h is None:
            return None
        return self._renderers[type(h)](h)

    # --- stream handles
    def _byte_stream(self, h: ByteStreamHandle) -> dict[str, Any]:
        return {
            "type": h.flink_class,
            "handle_name": h.name,
            "state_size": h.state_size,
            "data_sha256": hashlib.sha256(h.data).hexdigest(),
        }

    def _file(self, h: FileHandle) -> dict[str, Any]:
        return self._local({"type": h.flink_class, "path": h.path, "state_size": h.state_size}, h)

    def _relative_file(self, h: RelativeFileHandle) -> dict[str, Any]:
        out: dict[str, Any] = {"type": h.flink_class, "relative_path": h.relative_path, "state_size": h.state_size}
        if self.resolver is not None:
            out["path"] = self.resolver.shown_text(h)
        return _marked(out, path_problem(h.relative_path, relative=True))

    def _segment_file(self, h: SegmentFileHandle) -> dict[str, Any]:
        doc = {
            "type": h.flink_class,
            "path": h.path,
            "start_pos": h.start_pos,
            "state_size": h.state_size,
            "scope": h.scope_name,
            "logical_file_id": h.logical_file_id,
        }
        return self._local(doc, h)

    def _empty_segment_file(self, h: EmptySegmentFileHandle) -> dict[str, Any]:
        return {"type": h.flink_class, "state_size": 0}

    def _local(self, doc: dict[str, Any], h: FileBacked) -> dict[str, Any]:
        """spillway-only ``local_path``: where the file is on this machine (after rebasing), its URI when it
        is read from a store, or null."""
        if self.resolver is not None:
            doc["local_path"] = self.resolver.shown_text(h)
        return _marked(doc, path_problem(h.file_name))

    # --- keyed handles
    def _key_groups(self, h: KeyGroupsHandle) -> dict[str, Any]:
        return {
            "type": h.flink_class,
            "key_group_range": h.key_groups.as_pair(),
            "offsets": h.offsets,
            "state_handle_id": h.state_handle_id,
            "state_size": h.state_size,
            "delegate": self.handle(h.delegate),
        }

    def _incremental(self, h: IncrementalHandle) -> dict[str, Any]:
        return {
            "type": h.flink_class,
            "checkpoint_id": h.checkpoint_id,
            "backend_identifier": h.backend_identifier,
            "key_group_range": h.key_groups.as_pair(),
            "checkpointed_size": h.checkpointed_size,
            "state_size": h.state_size,
            "meta_state_handle": self.handle(h.meta_state_handle),
            "shared_state": [self._local_entry(i) for i in h.shared_state],
            "private_state": [self._local_entry(i) for i in h.private_state],
            "state_handle_id": h.state_handle_id,
        }

    def _local_entry(self, entry: LocalPathHandle) -> dict[str, Any]:
        doc = {"local_path": entry.local_path, "handle": self.handle(entry.handle)}
        return _marked(doc, local_path_problem(entry.local_path))

    def _changelog(self, h: ChangelogHandle) -> dict[str, Any]:
        return {
            "type": h.flink_class,
            "key_group_range": h.key_groups.as_pair(),
            "checkpointed_size": h.checkpointed_size,
            "materialized": [self.handle(x) for x in h.materialized],
            "non_materialized": [self.handle(x) for x in h.non_materialized],
            "materialization_id": h.materialization_id,
            "checkpoint_id": h.checkpoint_id if h.checkpoint_id is not None else h.materialization_id,
            "state_handle_id": h.state_handle_id,
        }

    def _changelog_bytes(self, h: ChangelogByteIncrementHandle) -> dict[str, Any]:
        return {
            "type": h.flink_class,
            "key_group_range": h.key_groups.as_pair(),
            "from": h.from_sequence,
            "to": h.to_sequence,
            "changes": [
                {"key_group": kg, "size": len(d), "data_sha256": hashlib.sha256(d).hexdigest()} for kg, d in h.changes
            ],
            "state_handle_id": h.state_handle_id,
        }

    def _changelog_files(self, h: ChangelogFileIncrementHandle) -> dict[str, Any]:
        return {
            "type": h.flink_class,
            "key_group_range": h.key_groups.as_pair(),
            "handles_and_offsets": [{"offset": o, "handle": self.handle(x)} for o, x in h.handles],
            "state_size": h.state_size,
            "checkpointed_size": h.checkpointed_size,
            "state_handle_id": h.state_handle_id,
            "storage_identifier": h.storage_identifier or "filesystem",
        }

    # --- operator handles
    def _operator_stream(self, h: OperatorStreamHandle) -> dict[str, Any]:
        out: dict[str, Any] = {
            "type": h.flink_class,
            "states": {s.name: {"distribution_mode": s.mode_name, "offsets": s.offsets} for s in h.states},
            "state_size": h.state_size,
            "delegate": self.handle(h.delegate),
        }
        if h.file_merging is not None:
            out["task_owned_dir"] = h.file_merging.task_owned_dir
            out["shared_dir"] = h.file_merging.shared_dir
            dirs = (h.file_merging.task_owned_dir, h.file_merging.shared_dir)
            return _marked(out, next((p for d in dirs if d and (p := path_problem(d)) is not None), None))
        return out

    # --- channel handles (the channels of a merged handle: single handles without the shared delegate)
    def _input_channel(self, h: InputChannelHandle) -> dict[str, Any]:
        return {
            "type": h.flink_class,
            "subtask_index": h.subtask_index if self._channel_subtask_index else None,
            "gate_index": h.gate_index,
            "input_channel_index": h.input_channel_index,
            "offsets": h.offsets,
            "state_size": h.state_size,
            "delegate": self.handle(h.delegate),
        }

    def _result_subpartition(self, h: ResultSubpartitionHandle) -> dict[str, Any]:
        return {
            "type": h.flink_class,
            "subtask_index": h.subtask_index if self._channel_subtask_index else None,
            "partition_index": h.partition_index,
            "subpartition_index": h.subpartition_index,
            "offsets": h.offsets,
            "state_size": h.state_size,
            "delegate": self.handle(h.delegate),
        }

    def _merged_input_channel(self, h: MergedInputChannelHandle) -> dict[str, Any]:
        kind, subtask = InputChannelHandle.flink_class, h.subtask_index
        channels = [
            {
                "type": kind,
                "subtask_index": subtask,
                "gate_index": c.gate_index,
                "input_channel_index": c.input_channel_index,
                "offsets": c.offsets,
                "state_size": c.state_size,
            }
            for c in h.channels
        ]
        return self._merged(h, channels)

    def _merged_result_subpartition(self, h: MergedResultSubpartitionHandle) -> dict[str, Any]:
        kind, subtask = ResultSubpartitionHandle.flink_class, h.subtask_index
        channels = [
            {
                "type": kind,
                "subtask_index": subtask,
                "partition_index": c.partition_index,
                "subpartition_index": c.subpartition_index,
                "offsets": c.offsets,
                "state_size": c.state_size,
            }
            for c in h.channels
        ]
        return self._merged(h, channels)

    def _merged(
        self, h: MergedInputChannelHandle | MergedResultSubpartitionHandle, channels: list[dict[str, Any]]
    ) -> dict[str, Any]:
        return {
            "type": h.flink_class,
            "subtask_index": h.subtask_index,
            "state_size": h.state_size,
            "delegate": self.handle(h.delegate),
            "channels": channels,
        }

    # --- structure
    def subtask(self, s: SubtaskState, features: FormatFeatures) -> dict[str, Any]:
        out: dict[str, Any] = {
            "index": s.index,
            "finished": s.finished,
            "managed_operator_state": _listed(self.handle(s.managed_operator_state)),
            "raw_operator_state": _listed(self.handle(s.raw_operator_state)),
            "managed_keyed_state": _listed(self.handle(s.managed_keyed_state)),
            "raw_keyed_state": _listed(self.handle(s.raw_keyed_state)),
            "input_channel_state": [self.handle(h) for h in s.input_channel_state],
            "result_subpartition_state": [self.handle(h) for h in s.result_subpartition_state],
        }
        if features.ref_checkpoint_ids:
            out["ref_checkpoint_id"] = s.ref_checkpoint_id
        return out

    def operator(self, o: OperatorState, features: FormatFeatures, subtask: int | None = None) -> dict[str, Any]:
        self._channel_subtask_index = features.channel_subtask_index
        subs = sorted(o.subtasks, key=lambda s: s.index)
        if subtask is not None:
            subs = [s for s in subs if s.index == subtask]
        return {
            "operator_id": o.operator_id,
            "name": o.name,
            "plan_name": self.plan_names.get(o.operator_id),
            "uid": o.uid,
            "parallelism": o.parallelism,
            "max_parallelism": o.max_parallelism,
            "fully_finished": o.fully_finished,
            "coordinator_state": self.handle(o.coordinator_state),
            "subtasks": [self.subtask(s, features) for s in subs],
        }

    def checkpoint(
        self,
        cp: CheckpointMetadata,
        operators: list[OperatorState] | None = None,
        subtask: int | None = None,
    ) -> dict[str, Any]:
        doc = self.checkpoint_head(cp)
        doc["operators"] = list(self.operator_docs(cp, operators, subtask))
        return doc

    def checkpoint_head(self, cp: CheckpointMetadata) -> dict[str, Any]:
        """The document without its operators: ``operators`` is an empty list, in its place."""
        props = None
        if cp.properties is not None:
            p = cp.properties
            props = {
                "discard_cancelled": p.discard_cancelled,
                "discard_failed": p.discard_failed,
                "discard_finished": p.discard_finished,
                "discard_subsumed": p.discard_subsumed,
                "discard_suspended": p.discard_suspended,
                "forced": p.forced,
                "unclaimed": p.unclaimed,
                "checkpoint_type": dict(p.checkpoint_type),
            }
        doc: dict[str, Any] = {
            "schema": SCHEMA,
            "format_version": cp.format_version,
            "checkpoint_id": cp.checkpoint_id,
            "master_states": [
                {"name": m.name, "version": m.version, "bytes": len(m.payload)} for m in cp.master_states
            ],
            "properties": props,
            "operators": [],
        }
        if cp.properties_note:
            doc["properties_note"] = cp.properties_note
        return doc

    def operator_docs(
        self, cp: CheckpointMetadata, operators: list[OperatorState] | None = None, subtask: int | None = None
    ) -> Iterator[dict[str, Any]]:
        """The ``operators`` of the document, one at a time (a caller writing each as it comes holds
        one operator's dicts instead of the whole document's)."""
        chosen = operators or cp.operators
        bar = progress.stage("building the JSON view", len(chosen), "operators")
        # Hundreds of thousands of small acyclic dicts: the cyclic GC only costs time here (4.6 s -> 3.2 s
        # CPU for the view of a 100 MB _metadata), as it does while decoding.
        with paused_gc():
            for o in chosen:
                yield self.operator(o, cp.features, subtask)
                bar.advance()


def _listed(doc: dict[str, Any] | None) -> list[dict[str, Any]]:
    """A single handle slot as a list of 0 or 1 handles (a null handle and an absent one look alike)."""
    return [] if doc is None else [doc]


def _marked(doc: dict[str, Any], problem: PathProblem | None) -> dict[str, Any]:
    """spillway-only ``path_problem`` (``{rule, reason}``), only on a handle whose path is unsafe: such a
    path is shown exactly as stored, and never resolved."""
    if problem is not None:
        doc["path_problem"] = {"rule": problem.rule, "reason": problem.reason}
    return doc
