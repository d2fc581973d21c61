"""The writing calls: rescale and the repairs, on a checkpoint opened with ``spillway.open``.

    import spillway
    from spillway.api import RescaleOptions, StripOptions

    cp = spillway.open("chk-42", plan="plan.json")
    result = cp.rescale(RescaleOptions({"count": 4}, out="chk-42-p4", keys={"count": "tuple:0:long"}))
    print(result.moved.records, result.restore_lines())   # result.to_json() is spillway.rescale/1
    report = cp.strip_channel_state(StripOptions("chk-42-stripped", operators=["slow"]))
    print(report.loss.records_dropped)                     # report.to_json() is spillway.repair/1

Each call reads the opened checkpoint, never modifies it, writes a new checkpoint under a temporary name,
self-checks it and renames it into place (a ``dry_run`` writes nothing); it returns a typed result with
one ``to_json()`` and, after a write, the exact restore instructions (``restore``, ``restore_lines()``).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from spillway.errors import UsageError
from spillway.repair.common import Change
from spillway.repair.options import ClearFinishedOptions, DropOperatorOptions, RelocateOptions, StripOptions
from spillway.repair.session import EdgeLoss, Loss, RepairReport
from spillway.repair.transforms import ChannelLoss
from spillway.rescale.options import RescaleOptions
from spillway.rescale.plan import LostChannel
from spillway.rescale.rescale import EdgeRoute, Moved, RescaleReport, VertexChange

if TYPE_CHECKING:
    from spillway.api.session import Checkpoint

# A repair's result: what changed, its warnings, the loss report (strip-channel-state, drop-operator),
# the binding (with a plan) and the restore instructions; ``to_json()`` is ``spillway.repair/1``.
RepairResult = RepairReport


@dataclass
class RescaleResult:
    """What a rescale wrote (or, with ``dry_run``, would write). ``to_json()`` is ``spillway.rescale/1``."""

    report: RescaleReport
    dry_run: bool

    @property
    def out(self) -> str | None:
        return None if self.report.out is None else str(self.report.out)

    @property
    def vertices(self) -> list[VertexChange]:
        return self.report.vertices

    @property
    def edges(self) -> list[EdgeRoute]:
        return self.report.edges

    @property
    def source_channels(self) -> int:
        """Old logical channels read."""
        return len(self.report.plan.sources)

    @property
    def moved(self) -> Moved | None:
        """Records, channel files, watermarks kept and what was dropped; None in a dry run (see ``forecast``)."""
        return self.report.moved

    @property
    def lost_channels(self) -> list[LostChannel]:
        """The damaged logical channels left out (``force``): the restored job never sees their records."""
        return list(self.report.plan.lost)

    @property
    def lost_bytes(self) -> int:
        return self.report.lost_bytes

    @property
    def lost_records(self) -> int:
        """Records of the lost channels where counted (``lost_uncounted_bytes``: the bytes of the others)."""
        return self.report.lost_records

    @property
    def lost_uncounted_bytes(self) -> int:
        return self.report.lost_uncounted_bytes

    @property
    def notes(self) -> list[str]:
        return self.report.plan.notes + self.report.notes

    @property
    def plan_file(self) -> str | None:
        """The rescaled job's plan, written beside the new ``_metadata`` (for ``validate``)."""
        return self.report.plan_file

    @property
    def binding(self) -> list[dict[str, Any]] | None:
        """How the plan's operators were bound (the rows every JSON report carries)."""
        return self.report.binding

    @property
    def forecast(self) -> dict[str, Any] | None:
        """Dry run: what would move, and what Flink's own restore-time rescaling would do instead."""
        return self.report.forecast

    @property
    def restore(self) -> dict[str, Any] | None:
        """How to restore the new checkpoint (path, release line, parallelism per operator); None in a dry run."""
        return self.report.restore

    def restore_lines(self) -> list[str]:
        from spillway.inspect.restore_instructions import restore_lines

        return [] if self.report.restore is None else restore_lines(self.report.restore)

    def to_json(self) -> dict[str, Any]:
        return {**self.report.to_doc(), "dry_run": self.dry_run}


def _plan_needed(cp: Checkpoint, what: str) -> None:
    if cp.plan is None:
        raise UsageError(f"{what} needs the job's plan: spillway.open(path, plan=...)")


def rescale(cp: Checkpoint, options: RescaleOptions) -> RescaleResult:
    """A new checkpoint in which the vertices of ``options.parallelism`` run at their new parallelism,
    every in-flight record already on the channel Flink routes it to (``spillway rescale``)."""
    _plan_needed(cp, "rescale")
    assert cp.plan is not None
    from spillway.rescale.rescale import rescale_checkpoint

    report = rescale_checkpoint(cp.loaded, cp.plan, options, cp.job_binding)  # the one binding, deduced once
    return RescaleResult(report, options.dry_run)


def relocate(cp: Checkpoint, options: RelocateOptions) -> RepairResult:
    """Every path at or below ``options.old`` rewritten below ``options.new`` (``spillway repair relocate``)."""
    from spillway.repair.operations import relocate_opened

    return relocate_opened(cp.loaded, cp.plan, options, cp.job_binding)


def strip_channel_state(cp: Checkpoint, options: StripOptions) -> RepairResult:
    """The channel state of ``options.operators`` (all without) dropped, whole logical channels at a time;
    ``.loss`` says what (``spillway repair strip-channel-state``)."""
    from spillway.repair.operations import strip_opened

    return strip_opened(cp.loaded, cp.plan, options, cp.job_binding)


def clear_finished(cp: Checkpoint, options: ClearFinishedOptions) -> RepairResult:
    """FLIP-147 finished markers cleared (``spillway repair clear-finished``)."""
    from spillway.repair.operations import clear_opened

    return clear_opened(cp.loaded, cp.plan, options, cp.job_binding)


def drop_operator(cp: Checkpoint, options: DropOperatorOptions) -> RepairResult:
    """The state of ``options.operators`` removed, with the other half of their channels
    (``spillway repair drop-operator``)."""
    from spillway.repair.operations import drop_opened

    return drop_opened(cp.loaded, cp.plan, options, cp.job_binding)


__all__ = [
    "Change",
    "ChannelLoss",
    "EdgeLoss",
    "EdgeRoute",
    "Loss",
    "LostChannel",
    "Moved",
    "RepairResult",
    "RescaleResult",
    "VertexChange",
    "clear_finished",
    "drop_operator",
    "relocate",
    "rescale",
    "strip_channel_state",
]
