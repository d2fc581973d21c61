"""The ``spillway.dump/1`` JSON document (docs/dump-schema.md) built from the model."""

from __future__ import annotations

import hashlib
from typing import Any

from spillway.model.checkpoint import (
    ByteStreamHandle,
    ChangelogByteIncrementHandle,
    ChangelogFileIncrementHandle,
    ChangelogHandle,
    ChannelHandle,
    Checkpoint,
    EmptySegmentFileHandle,
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
from spillway.storage.locate import FileResolver

SCHEMA = "spillway.dump/1"


class JsonView:
    def __init__(self, resolver: FileResolver | None = None):
        self.resolver = resolver

    # --- stream handles
    def stream(self, h: Any) -> dict[str, Any] | None:
        if h is None:
            return None
        if isinstance(h, ByteStreamHandle):
            return {
                "type": h.flink_class,
                "handle_name": h.name,
                "state_size": h.state_size,
                "data_sha256": hashlib.sha256(h.data).hexdigest(),
            }
        if isinstance(h, FileHandle):
            return self._local({"type": h.flink_class, "path": h.path, "state_size": h.state_size}, h)
        if isinstance(h, RelativeFileHandle):
            out: dict[str, Any] = {
                "type": h.flink_class,
                "relative_path": h.relative_path,
                "state_size": h.state_size,
            }
            if self.resolver is not None:
                resolved = self.resolver.resolve(h)
                out["path"] = resolved.local_text if resolved and resolved.local_text else None
            return out
        if isinstance(h, SegmentFileHandle):
            return self._local(
                {
                    "type": h.flink_class,
                    "path": h.path,
                    "start_pos": h.start_pos,
                    "state_size": h.state_size,
                    "scope": h.scope_name,
                    "logical_file_id": h.logical_file_id,
                },
                h,
            )
        if isinstance(h, EmptySegmentFileHandle):
            return {"type": h.flink_class, "state_size": 0}
        if isinstance(h, KeyGroupsHandle):
            return self.keyed(h)
        raise TypeError(f"not a stream handle: {h!r}")

    def _local(self, doc: dict[str, Any], h: Any) -> dict[str, Any]:
        """spillway-only ``local_path``: where the file is on this machine (after rebasing), or null."""
        if self.resolver is not None:
            resolved = self.resolver.resolve(h)
            doc["local_path"] = resolved.local_text if resolved and resolved.local_text else None
        return doc

    # --- keyed handles
    def keyed(self, h: Any) -> dict[str, Any]:
        if isinstance(h, KeyGroupsHandle):
            return {
                "type": h.flink_class,
                "key_group_range": h.key_groups.as_pair(),
                "offsets": h.offsets,
                "state_handle_id": h.state_handle_id,
                "state_size": h.state_size,
                "delegate": self.stream(h.delegate),
            }
        if isinstance(h, IncrementalHandle):
            return {
                "type": h.flink_class,
                "checkpoint_id": h.checkpoint_id,
                "backend_identifier": h.backend_identifier,
                "key_group_range": h.key_groups.as_pair(),
                "checkpointed_size": h.checkpointed_size,
                "state_size": h.state_size,
                "meta_state_handle": self.stream(h.meta_state_handle),
                "shared_state": [{"local_path": i.local_path, "handle": self.stream(i.handle)} for i in h.shared_state],
                "private_state": [
                    {"local_path": i.local_path, "handle": self.stream(i.handle)} for i in h.private_state
                ],
                "state_handle_id": h.state_handle_id,
            }
        if isinstance(h, ChangelogHandle):
            return {
                "type": h.flink_class,
                "key_group_range": h.key_groups.as_pair(),
                "checkpointed_size": h.checkpointed_size,
                "materialized": [self.keyed(x) for x in h.materialized],
                "non_materialized": [self.keyed(x) for x in h.non_materialized],
                "materialization_id": h.materialization_id,
                "checkpoint_id": h.checkpoint_id if h.checkpoint_id is not None else h.materialization_id,
                "state_handle_id": h.state_handle_id,
            }
        if isinstance(h, ChangelogByteIncrementHandle):
            return {
                "type": h.flink_class,
                "key_group_range": h.key_groups.as_pair(),
                "from": h.from_sequence,
                "to": h.to_sequence,
                "changes": [
                    {"key_group": kg, "size": len(d), "data_sha256": hashlib.sha256(d).hexdigest()}
                    for kg, d in h.changes
                ],
                "state_handle_id": h.state_handle_id,
            }
        if isinstance(h, ChangelogFileIncrementHandle):
            return {
                "type": h.flink_class,
                "key_group_range": h.key_groups.as_pair(),
                "handles_and_offsets": [{"offset": o, "handle": self.stream(x)} for o, x in h.handles],
                "state_size": h.state_size,
                "checkpointed_size": h.checkpointed_size,
                "state_handle_id": h.state_handle_id,
                "storage_identifier": h.storage_identifier or "filesystem",
            }
        raise TypeError(f"not a keyed handle: {h!r}")

    def operator_handle(self, h: OperatorStreamHandle) -> dict[str, Any]:
        out: dict[str, Any] = {
            "type": h.flink_class,
            "states": {s.name: {"distribution_mode": s.mode_name, "offsets": s.offsets} for s in h.states},
            "state_size": h.state_size,
            "delegate": self.stream(h.delegate),
        }
        if h.file_merging is not None:
            out["task_owned_dir"] = h.file_merging.task_owned_dir
            out["shared_dir"] = h.file_merging.shared_dir
        return out

    def channel(self, h: Any, with_delegate: bool = True) -> dict[str, Any]:
        if isinstance(h, MergedChannelHandle):
            return {
                "type": h.flink_class,
                "subtask_index": h.subtask_index,
                "state_size": h.state_size,
                "delegate": self.stream(h.delegate),
                "channels": [self.channel(c, with_delegate=False) for c in h.unmerged()],
            }
        assert isinstance(h, ChannelHandle)
        a, b = (
            ("gate_index", "input_channel_index")
            if h.side == "input"
            else (
                "partition_index",
                "subpartition_index",
            )
        )
        out = {
            "type": h.flink_class,
            "subtask_index": h.subtask_index,
            a: h.a,
            b: h.b,
            "offsets": h.offsets,
            "state_size": h.state_size,
        }
        if with_delegate:
            out["delegate"] = self.stream(h.delegate)
        return out

    # --- structure
    def subtask(self, s: SubtaskState, version: int) -> dict[str, Any]:
        out: dict[str, Any] = {
            "index": s.index,
            "finished": s.finished,
            "managed_operator_state": [self.operator_handle(s.managed_operator_state)]
            if s.managed_operator_state
            else [],
            "raw_operator_state": [self.operator_handle(s.raw_operator_state)] if s.raw_operator_state else [],
            "managed_keyed_state": [self.keyed(s.managed_keyed_state)] if s.managed_keyed_state else [],
            "raw_keyed_state": [self.keyed(s.raw_keyed_state)] if s.raw_keyed_state else [],
            "input_channel_state": [self.channel(h) for h in s.input_channel_state],
            "result_subpartition_state": [self.channel(h) for h in s.result_subpartition_state],
        }
        if version >= 7:
            out["ref_checkpoint_id"] = s.ref_checkpoint_id
        return out

    def operator(self, o: OperatorState, version: int, subtask: int | None = None) -> dict[str, Any]:
        subs = sorted(o.subtasks, key=lambda s: s.index)
        if subtask is not None:
            subs = [s for s in subs if s.index == subtask]
        return {
            "operator_id": o.operator_id,
            "name": o.name,
            "uid": o.uid,
            "parallelism": o.parallelism,
            "max_parallelism": o.max_parallelism,
            "fully_finished": o.fully_finished,
            "coordinator_state": self.stream(o.coordinator_state),
            "subtasks": [self.subtask(s, version) for s in subs],
        }

    def checkpoint(
        self,
        cp: Checkpoint,
        operators: list[OperatorState] | None = None,
        subtask: int | None = None,
    ) -> dict[str, Any]:
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
            "operators": [self.operator(o, cp.format_version, subtask) for o in (operators or cp.operators)],
        }
        if cp.properties_note:
            doc["properties_note"] = cp.properties_note
        return doc
