"""The read-side calls that take paths rather than one opened checkpoint: several checkpoints (``files``,
``diff``), a checkpoint named by a running job (``check_restore``), a page about one (``report``). Each reads
its plans first (a bad plan fails before any storage is touched), then opens, then calls ``Checkpoint``."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import replace
from typing import TYPE_CHECKING

from spillway.api.options import PreflightOptions
from spillway.api.results import PreflightResult, ReportResult
from spillway.api.session import Checkpoint, new_job_plan, plan_source
from spillway.api.session import open as open_checkpoint
from spillway.errors import ArgumentError
from spillway.inspect.job_plans import PathLike, read_plan
from spillway.storage.job_jar import JobJar
from spillway.storage.locate import RebaseRules, rebase_rules

if TYPE_CHECKING:
    from spillway.inspect.diff import CheckpointDiff
    from spillway.inspect.files import FilesReport
    from spillway.inspect.topology import Topology

Opened = Checkpoint | PathLike


def files(
    checkpoints: Opened | Sequence[Opened],
    *,
    plan: Topology | JobJar | PathLike | None = None,
    uids: Mapping[str, str] | None = None,
    uid_map: PathLike | None = None,
    rebase: RebaseRules = None,
) -> FilesReport:
    """Every file the checkpoints depend on (``spillway files``); a job directory stands for all its ``chk-N``,
    and one whose ``_metadata`` does not decode is left out (``.damaged``, and a warning). ``.exclusive(i)``:
    what dropping checkpoint ``i`` leaves unreferenced; ``.to_json()`` is ``spillway.files/1``. With ``plan``
    the operators it binds exactly in each checkpoint are named by it (each checkpoint binds a plan of its own)."""
    from spillway.inspect.files import checkpoint_files, collect_files
    from spillway.notices import warn

    first = read_plan(plan, uids=uids, uid_map=uid_map)  # usage errors before any checkpoint is read
    items = checkpoints if isinstance(checkpoints, Sequence) and not isinstance(checkpoints, str) else [checkpoints]
    if any(isinstance(i, Checkpoint) for i in items):
        opened = [i if isinstance(i, Checkpoint) else open_checkpoint(i, rebase=rebase) for i in items]
        report = collect_files([(c.source, c.loaded) for c in opened])
    else:
        report = checkpoint_files([str(i) for i in items], rebase_rules(rebase))
    if first is not None:  # each checkpoint binds a plan of its own (the binding rebuilds the plan's chains)
        for i, cf in enumerate(report.checkpoints):
            cf.plan_names = Checkpoint(cf.loaded, first if i == 0 else first.unbound_copy()).plan_names
    for d in report.damaged:
        warn(f"{d.checkpoint}: damaged, left out: {d.error}")
    return report


def diff(
    a: Opened,
    b: Opened,
    *,
    plan: Topology | JobJar | PathLike | None = None,
    uids: Mapping[str, str] | None = None,
    uid_map: PathLike | None = None,
    rebase: RebaseRules = None,
) -> CheckpointDiff:
    """What differs between two checkpoints (``spillway diff``): ``.identical``, ``.to_json()`` is
    ``spillway.diff/1``. With ``plan`` both sides are named by it (say, before and after a rescale)."""
    first = read_plan(plan, uids=uids, uid_map=uid_map)  # usage errors before any checkpoint is read
    side_a = a if isinstance(a, Checkpoint) else open_checkpoint(a, plan=first, rebase=rebase)
    # the same plan names both sides, each bound on its own copy
    second = first.unbound_copy() if first is not None else None
    side_b = b if isinstance(b, Checkpoint) else open_checkpoint(b, plan=second, rebase=rebase)
    return side_a.diff(side_b)


def check_restore(
    checkpoint: Checkpoint | PathLike,
    new_plan: Topology | JobJar | PathLike,
    options: PreflightOptions | None = None,
    *,
    uids: Mapping[str, str] | None = None,
    uid_map: PathLike | None = None,
    rebase: RebaseRules = None,
) -> PreflightResult:
    """``spillway preflight``: would Flink restore ``checkpoint`` into the job of ``new_plan``? ``checkpoint`` may
    be a running job's ``http://HOST:PORT/jobs/JOB_ID`` (its latest completed checkpoint), ``new_plan`` too (its
    plan); ``uids``/``uid_map`` name uids of the new plan. ``.restorable``: True / False / None (unknown)."""
    options = options or PreflightOptions()
    # the new job's plan (a jar's sets the max parallelism its code sets), checked before any storage is touched
    topology = new_job_plan(read_plan(new_plan, uids=uids, uid_map=uid_map) or new_plan, options)
    from spillway.storage.rest import job_checkpoint

    opened = (
        checkpoint if isinstance(checkpoint, Checkpoint) else open_checkpoint(job_checkpoint(checkpoint), rebase=rebase)
    )
    return opened.preflight(topology, replace(options, parallelism={}), source=plan_source(new_plan))


def report(
    checkpoint: Checkpoint | PathLike,
    *,
    plan: Topology | JobJar | PathLike | None = None,
    uids: Mapping[str, str] | None = None,
    uid_map: PathLike | None = None,
    rebase: RebaseRules = None,
    new_plan: Topology | JobJar | PathLike | None = None,
    options: PreflightOptions | None = None,
) -> ReportResult:
    """``spillway report``: one self-contained HTML page about ``checkpoint`` (``.html``, ``.to_json()`` is
    ``spillway.report/1``); with ``new_plan`` also preflight's answer for that job. ``uids``/``uid_map`` name
    uids in both plans (without ``plan``, in ``new_plan`` alone)."""
    new_job = None
    source = None
    if new_plan is not None:
        options = options or PreflightOptions()
        new_job = new_job_plan(read_plan(new_plan, uids=uids, uid_map=uid_map) or new_plan, options)
        options = replace(options, parallelism={})
        source = plan_source(new_plan)
    elif options is not None and options != PreflightOptions():
        raise ArgumentError("options", None, "only with new_plan (they describe the new job)")
    if isinstance(checkpoint, Checkpoint):
        opened = checkpoint
    else:
        own = read_plan(plan, uids=uids, uid_map=uid_map) if plan is not None or new_plan is None else None
        opened = open_checkpoint(checkpoint, plan=own, rebase=rebase)
    return opened.report(new_job, options, source=source)
