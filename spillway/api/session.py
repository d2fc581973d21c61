"""``spillway.open``: one checkpoint, opened once with its plan, uid map and path rules.

The object carries the one binding of the plan's operators to the checkpoint (deduced from the checkpoint's
evidence on first use, then shared by every call on it), so ``validate``, ``analyze``, ``rescale`` and the
repairs all see the same operators — as the CLI does, which calls these same methods.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass
from functools import cached_property
from pathlib import Path
from typing import TYPE_CHECKING, Any

from spillway.api.functions import Rebase, _rules

if TYPE_CHECKING:
    from spillway.flink.operator_ids import Binding
    from spillway.inspect.topology import JobBinding, Topology
    from spillway.inspect.validate import Progress, Report
    from spillway.model.checkpoint import Checkpoint as CheckpointModel
    from spillway.storage.load import LoadedCheckpoint

PathLike = str | os.PathLike[str]


def _plan(
    plan: Topology | PathLike | None, uids: Mapping[str, str] | None, uid_map: PathLike | None
) -> Topology | None:
    """The plan with the uids it cannot show: ``uid_map`` (a JSON file) first, ``uids`` win."""
    from spillway.errors import UsageError
    from spillway.inspect.topology import Topology, load_plan, load_uid_map

    if plan is None:
        if uids or uid_map:
            raise UsageError("uids and uid_map need a plan")
        return None
    merged = load_uid_map(Path(uid_map)) if uid_map is not None else {}
    for name, uid in (uids or {}).items():
        if not isinstance(name, str) or not isinstance(uid, str) or not name or not uid:
            raise UsageError(f"uids: {name!r}: expected {{operator name: uid}} with non-empty strings")
        merged[name] = uid
    if isinstance(plan, Topology):
        if merged:
            plan.uids = {**plan.uids, **merged}
        return plan
    return load_plan(Path(plan), merged)


def open(
    path: PathLike,
    *,
    plan: Topology | PathLike | None = None,
    uids: Mapping[str, str] | None = None,
    uid_map: PathLike | None = None,
    rebase: Rebase = None,
) -> Checkpoint:
    """Locate (job dir → newest chk-N, chk-N dir, ``_metadata``; local or a pyarrow.fs URI) and decode one
    checkpoint. ``plan``: the job's plan (either flavour: ``getExecutionPlan()``/``flink info`` or the REST
    job graph); ``uids``: ``{operator name: uid}`` the plan cannot show, ``uid_map``: the same as a JSON file
    (``uids`` win); ``rebase``: ``{old_prefix: new_prefix}`` path rewrites. The plan is read before the
    checkpoint, so a bad plan fails before any storage is touched."""
    from spillway.storage.load import load_checkpoint

    topology = _plan(plan, uids, uid_map)
    return Checkpoint(load_checkpoint(path, _rules(rebase)), topology)


@dataclass
class Checkpoint:
    """An opened checkpoint and (optionally) the plan of the job that wrote it."""

    loaded: LoadedCheckpoint
    plan: Topology | None = None

    @property
    def model(self) -> CheckpointModel:
        """The decoded ``_metadata`` (``spillway.model.checkpoint.Checkpoint``)."""
        return self.loaded.checkpoint

    @property
    def shown(self) -> str:
        """Where the checkpoint is, as a user would write it (a path or a URI)."""
        return self.loaded.location.shown

    @cached_property
    def job_binding(self) -> JobBinding | None:
        """The plan bound to the checkpoint (vertices, chains, operators); None without a plan."""
        from spillway.inspect.topology import bind_job

        return None if self.plan is None else bind_job(self.plan, self.model)

    @property
    def binding(self) -> Binding | None:
        """How each plan operator was bound (method, operator id, why); None without a plan."""
        jb = self.job_binding
        return None if jb is None else jb.operators

    def binding_json(self) -> list[dict[str, Any]] | None:
        """The ``binding`` rows every JSON report carries."""
        from spillway.inspect.reports import binding_json

        return binding_json(self.binding)

    def validate(self, progress: Progress | None = None) -> ValidateResult:
        """Every check of ``spillway validate``: sound when ``.report.errors`` is empty and it is complete."""
        from spillway.inspect.validate import validate

        self.job_binding  # noqa: B018 - bind before the checks, as the CLI shows the binding first
        return ValidateResult(self, validate(self.loaded, self.plan, progress))

    # --- writing: rescale and repairs (api/writing.py) ---
    if TYPE_CHECKING:
        from spillway.api.write_options import (
            ClearFinishedOptions,
            DropOperatorOptions,
            RelocateOptions,
            RescaleOptions,
            StripOptions,
        )
        from spillway.api.writing import RepairResult, RescaleResult

    def rescale(self, options: RescaleOptions) -> RescaleResult:
        """``spillway rescale``: a new checkpoint at the new parallelism (needs the plan); see api/writing.py."""
        from spillway.api import writing

        return writing.rescale(self, options)

    def relocate(self, options: RelocateOptions) -> RepairResult:
        """``spillway repair relocate``: every path below ``options.old`` moved below ``options.new``."""
        from spillway.api import writing

        return writing.relocate(self, options)

    def strip_channel_state(self, options: StripOptions) -> RepairResult:
        """``spillway repair strip-channel-state``: in-flight data dropped, with what was lost."""
        from spillway.api import writing

        return writing.strip_channel_state(self, options)

    def clear_finished(self, options: ClearFinishedOptions) -> RepairResult:
        """``spillway repair clear-finished``: FLIP-147 finished markers cleared."""
        from spillway.api import writing

        return writing.clear_finished(self, options)

    def drop_operator(self, options: DropOperatorOptions) -> RepairResult:
        """``spillway repair drop-operator``: operators removed with the other half of their channels."""
        from spillway.api import writing

        return writing.drop_operator(self, options)


@dataclass
class ValidateResult:
    checkpoint: Checkpoint
    report: Report

    @property
    def sound(self) -> bool:
        return not self.report.errors and self.report.complete

    def to_json(self) -> dict[str, Any]:
        """The ``spillway.validate/1`` document (docs/validate.md)."""
        from spillway.inspect.reports import validate_json

        loaded = self.checkpoint.loaded
        return validate_json(self.report, loaded.location.shown, loaded.resolver.rebases(), self.checkpoint.binding)
