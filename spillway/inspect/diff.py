"""Compare two checkpoints: operators (matched by operator id), their parallelism, finished flags and
state sizes by kind, in-flight bytes, the files they reference, the format version.

Typical pairs: chk-41 and chk-42 of one job; a source and its rescaled or repaired output; the same
job before and after an upgrade.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from spillway.inspect.files import FilesReport, collect_files
from spillway.model.checkpoint import OperatorState, stream_size
from spillway.model.walk import subtask_handles
from spillway.storage.load import LoadedCheckpoint

SCHEMA = "spillway.diff/1"

# Compared per operator, in this order; every one of them counts as a difference.
FIELDS = (
    "name",
    "uid",
    "parallelism",
    "max_parallelism",
    "subtasks",
    "fully_finished",
    "finished_subtasks",
    "keyed_state_bytes",
    "operator_state_bytes",
    "input_channel_bytes",
    "output_channel_bytes",
    "in_flight_bytes",
    "coordinator_state_bytes",
)
CHANNEL_FIELDS = frozenset({"input_channel_bytes", "output_channel_bytes", "in_flight_bytes"})


def operator_figures(op: OperatorState, plan_names: Mapping[str, str] | None = None) -> dict[str, Any]:
    """What ``diff`` compares of one operator (sizes are the bytes the handles name); ``plan_names``: the names
    a bound plan gives (``JobBinding.names``)."""
    keyed = operator = inputs = outputs = 0
    for sub in op.subtasks:
        for kind, top in subtask_handles(sub):
            if kind.endswith("keyed_state"):
                keyed += top.state_size
            elif kind.endswith("operator_state"):
                operator += top.state_size
            elif kind == "input_channel_state":
                inputs += top.state_size
            else:
                outputs += top.state_size
    return {
        "operator_id": op.operator_id,
        "name": op.name,
        "plan_name": (plan_names or {}).get(
            op.operator_id
        ),  # the bound --plan's name when the checkpoint stores none; never compared
        "uid": op.uid,
        "parallelism": op.parallelism,
        "max_parallelism": op.max_parallelism,
        "subtasks": len(op.subtasks),
        "fully_finished": op.fully_finished,
        "finished_subtasks": sorted(s.index for s in op.subtasks if s.finished),
        "keyed_state_bytes": keyed,
        "operator_state_bytes": operator,
        "input_channel_bytes": inputs,
        "output_channel_bytes": outputs,
        "in_flight_bytes": inputs + outputs,
        "coordinator_state_bytes": stream_size(op.coordinator_state),
    }


@dataclass
class OperatorChange:
    operator_id: str
    label: str
    a: dict[str, Any]
    b: dict[str, Any]
    changes: dict[str, tuple[Any, Any]]

    @property
    def renamed(self) -> bool:
        """Both checkpoints store a name (or uid) and they differ."""
        return any(self.a[k] is not None and self.b[k] is not None and self.a[k] != self.b[k] for k in ("name", "uid"))


@dataclass
class CheckpointDiff:
    a: LoadedCheckpoint
    b: LoadedCheckpoint
    a_path: str
    b_path: str
    checkpoint: dict[str, tuple[Any, Any]]  # checkpoint-level fields that differ
    added: list[dict[str, Any]]  # operators only in b
    removed: list[dict[str, Any]]  # operators only in a
    changed: list[OperatorChange]
    unchanged: int
    files: FilesReport
    files_added: list[str] = field(default_factory=list)  # keys (FilesReport.files) only b references
    files_removed: list[str] = field(default_factory=list)
    files_shared: list[str] = field(default_factory=list)

    @property
    def identical(self) -> bool:
        return not (
            self.checkpoint or self.added or self.removed or self.changed or self.files_added or self.files_removed
        )

    def to_json(self) -> dict[str, Any]:
        return diff_json(self)


def _label(
    a: OperatorState | None, b: OperatorState | None, names_a: Mapping[str, str], names_b: Mapping[str, str]
) -> str:
    for op, names in ((b, names_b), (a, names_a)):
        if op is not None and (op.uid or op.name or names.get(op.operator_id)):
            return op.label(names)
    op = b or a
    assert op is not None
    return op.operator_id


def diff_checkpoints(
    a: LoadedCheckpoint,
    b: LoadedCheckpoint,
    a_path: str = "A",
    b_path: str = "B",
    plan_names: tuple[Mapping[str, str], Mapping[str, str]] = ({}, {}),
) -> CheckpointDiff:
    """What differs from ``a`` to ``b``; ``plan_names``: the names a plan bound to each gives (``JobBinding.names``)."""
    names_a, names_b = plan_names
    ca, cb = a.checkpoint, b.checkpoint
    top: dict[str, tuple[Any, Any]] = {}
    for name in ("format_version", "checkpoint_id"):
        va, vb = getattr(ca, name), getattr(cb, name)
        if va != vb:
            top[name] = (va, vb)
    ops_a = {o.operator_id: o for o in ca.operators}
    ops_b = {o.operator_id: o for o in cb.operators}
    added = [operator_figures(ops_b[i], names_b) for i in ops_b if i not in ops_a]
    removed = [operator_figures(ops_a[i], names_a) for i in ops_a if i not in ops_b]
    changed: list[OperatorChange] = []
    unchanged = 0
    for op_id, op_a in ops_a.items():
        op_b = ops_b.get(op_id)
        if op_b is None:
            continue
        fa, fb = operator_figures(op_a, names_a), operator_figures(op_b, names_b)
        changes = {k: (fa[k], fb[k]) for k in FIELDS if fa[k] != fb[k]}
        if changes:
            changed.append(OperatorChange(op_id, _label(op_a, op_b, names_a, names_b), fa, fb, changes))
        else:
            unchanged += 1
    files = collect_files([(a_path, a), (b_path, b)], [names_a, names_b])
    result = CheckpointDiff(a, b, a_path, b_path, top, added, removed, changed, unchanged, files)
    for key, f in sorted(files.files.items(), key=lambda kv: kv[1].display()):
        if f.checkpoints == {1}:
            result.files_added.append(key)
        elif f.checkpoints == {0}:
            result.files_removed.append(key)
        else:
            result.files_shared.append(key)
    return result


def _file_docs(d: CheckpointDiff, keys: list[str]) -> list[dict[str, Any]]:
    out = []
    for k in keys:
        f = d.files.files[k]
        out.append(
            {
                "path": k,
                "shown": f.display(),
                "area": f.area,
                "size": f.size,
                "exists": f.exists,
                "operators": sorted(f.operators),
                "state_kinds": sorted(f.kinds),
            }
        )
    return out


def _side(loaded: LoadedCheckpoint, path: str) -> dict[str, Any]:
    cp = loaded.checkpoint
    return {
        "path": path,
        "metadata": loaded.location.shown,
        "checkpoint_id": cp.checkpoint_id,
        "format_version": cp.format_version,
        "operators": len(cp.operators),
    }


def diff_json(d: CheckpointDiff) -> dict[str, Any]:
    """The ``spillway.diff/1`` document (docs/cli.md#spillway-diff)."""

    def size(keys: list[str]) -> int:
        return sum(d.files.files[k].size or 0 for k in keys)

    return {
        "schema": SCHEMA,
        "identical": d.identical,
        "a": _side(d.a, d.a_path),
        "b": _side(d.b, d.b_path),
        "checkpoint": {k: {"a": va, "b": vb} for k, (va, vb) in d.checkpoint.items()},
        "operators": {
            "added": d.added,
            "removed": d.removed,
            "changed": [
                {
                    "operator_id": c.operator_id,
                    "label": c.label,
                    "plan_name": c.b["plan_name"] or c.a["plan_name"],
                    "renamed": c.renamed,
                    "changes": {k: {"a": va, "b": vb} for k, (va, vb) in c.changes.items()},
                }
                for c in d.changed
            ],
            "unchanged": d.unchanged,
        },
        "files": {
            "added": _file_docs(d, d.files_added),
            "removed": _file_docs(d, d.files_removed),
            "shared": len(d.files_shared),
            "added_bytes": size(d.files_added),
            "removed_bytes": size(d.files_removed),
            "shared_bytes": size(d.files_shared),
        },
    }
