"""Keyed and operator state of one operator, redistributed to a new parallelism so that Flink restores the
result as-is (its recorded parallelism then equals the job's: docs/format/rescaling.md, "Unchanged parallelism").

    result = rescale_operator_state_and_keyed(op, 3, DelegateBlobs(loaded.resolver))
    result.subtasks   # new SubtaskStates 0..2 without channel state
    result.files      # new files their handles reference (write them into the output directory)
    result.notes      # what was cut, merged or kept whole

Channel state, coordinator state and finished operators are the caller's business.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from spillway.flink.features import FormatFeatures
from spillway.model.checkpoint import OperatorState, SubtaskState
from spillway.rescale.keyed_state import can_wrap_snapshots, rescale_keyed
from spillway.rescale.operator_state import rescale_operator_state
from spillway.rescale.state_files import NewStateFile, RescaleRefused, materialize
from spillway.storage.blobs import DelegateBlobs

__all__ = [
    "NewStateFile",
    "OperatorRescale",
    "RescaleRefused",
    "materialize",
    "rescale_operator_state_and_keyed",
]


@dataclass
class OperatorRescale:
    subtasks: list[SubtaskState]  # new_parallelism entries, index 0..n-1, no channel state, finished=False
    files: list[NewStateFile] = field(default_factory=list)  # new files the handles in ``subtasks`` reference
    notes: list[str] = field(default_factory=list)  # what was cut / merged / kept whole


def rescale_operator_state_and_keyed(
    op: OperatorState,
    new_parallelism: int,
    blobs: DelegateBlobs,
    label: str | None = None,
    features: FormatFeatures | None = None,
) -> OperatorRescale:
    """Redistribute ``op``'s managed/raw keyed state and managed/raw operator state to ``new_parallelism``;
    ``label``: how the operator is shown (default ``op.label()``); ``features``: the checkpoint's format
    (``CheckpointMetadata.features``), which decides whether a new subtask may get several incremental snapshots."""
    label = label or op.label()
    if not 0 < new_parallelism <= op.max_parallelism:
        raise RescaleRefused(
            f"{label}: parallelism {new_parallelism} is outside 1..{op.max_parallelism} (the operator's max "
            "parallelism, fixed by its state); choose a parallelism in that range"
        )
    old = [op.subtask(j) for j in range(op.parallelism)]
    stray = [s.index for s in op.subtasks if not 0 <= s.index < op.parallelism]
    if stray:
        raise RescaleRefused(f"{label}: subtask indices {stray} lie outside its parallelism {op.parallelism}")
    result = OperatorRescale([SubtaskState(index=i) for i in range(new_parallelism)])
    for kind in ("managed", "raw"):
        keyed = rescale_keyed(
            [getattr(s, f"{kind}_keyed_state") if s else None for s in old],
            op.max_parallelism,
            new_parallelism,
            blobs,
            operator=label,
            kind=kind,
            wrap_snapshots=can_wrap_snapshots(features),
        )
        operator = rescale_operator_state(
            [getattr(s, f"{kind}_operator_state") if s else None for s in old],
            new_parallelism,
            blobs,
            operator=label,
            kind=kind,
        )
        for sub, k, o in zip(result.subtasks, keyed.handles, operator.handles, strict=True):
            setattr(sub, f"{kind}_keyed_state", k)
            setattr(sub, f"{kind}_operator_state", o)
        result.files += keyed.files + operator.files
        result.notes += keyed.notes + operator.notes
    return result
