"""The first API: free functions over paths or opened checkpoints (docs/api.md); kept, and each now
also reachable as a method of ``spillway.api.Checkpoint``.

    import spillway
    cp = spillway.open_checkpoint("/checkpoints/7f3c…")          # newest chk-N
    report = spillway.validate(cp, plan="plan.json")
    print(report.errors, spillway.validate_json(report, str(cp.location.metadata_path), []))
    analysis = spillway.analyze(cp, plan="plan.json")
    spillway.rescale("chk-42", "plan.json", {"count": 4}, "chk-42-p4", keys={"count": "tuple:0:long"})
    spillway.repair.strip_channel_state("chk-42", "chk-42-stripped", plan="plan.json", operators=["slow"])

Every failure is a ``spillway.SpillwayError`` whose ``exit_code`` is what the CLI would exit with. A
``rebase`` is a mapping ``{old_prefix: new_prefix}`` (or the CLI's ``"OLD=NEW"`` strings).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from spillway.api import reading
from spillway.api.jobs import JobJar, job_plan
from spillway.api.options import AnalyzeOptions
from spillway.api.plans import PathLike, Rebase, rebase_rules
from spillway.api.session import Checkpoint
from spillway.inspect.analyze import Analysis
from spillway.inspect.diff import CheckpointDiff
from spillway.inspect.files import FilesReport
from spillway.inspect.finished import Verdict
from spillway.inspect.preflight import Result as PreflightResult
from spillway.inspect.preflight import Settings as PreflightSettings
from spillway.inspect.preflight import check as _preflight
from spillway.inspect.reports import analyze_json, validate_json
from spillway.inspect.topology import Topology, load_plan
from spillway.inspect.validate import Progress, Report
from spillway.rescale.options import RescaleOptions
from spillway.rescale.rescale import RescaleReport
from spillway.storage.load import LoadedCheckpoint, load_checkpoint


def _rules(rebase: Rebase) -> list[str] | None:
    return rebase_rules(rebase)


def open_checkpoint(path: PathLike, rebase: Rebase = None) -> LoadedCheckpoint:
    """Locate (job dir → newest chk-N, chk-N dir, or ``_metadata``; local or a pyarrow.fs URI) and decode.

    ``rebase``: ``{old_prefix: new_prefix}`` path rewrites that win over automatic rebasing."""
    return load_checkpoint(path, _rules(rebase))


def _loaded(checkpoint: LoadedCheckpoint | PathLike, rebase: Rebase) -> LoadedCheckpoint:
    return checkpoint if isinstance(checkpoint, LoadedCheckpoint) else load_checkpoint(checkpoint, _rules(rebase))


def _plan(plan: Topology | JobJar | PathLike | None) -> Topology | None:
    if plan is None or isinstance(plan, Topology):
        return plan
    if isinstance(plan, JobJar):
        return job_plan(plan)
    return load_plan(Path(plan))


def _opened(
    checkpoint: LoadedCheckpoint | PathLike, plan: Topology | JobJar | PathLike | None, rebase: Rebase
) -> Checkpoint:
    return Checkpoint(_loaded(checkpoint, rebase), _plan(plan))


def validate(
    checkpoint: LoadedCheckpoint | PathLike,
    plan: Topology | JobJar | PathLike | None = None,
    *,
    rebase: Rebase = None,
    progress: Progress | None = None,
) -> Report:
    """Every check of ``spillway validate``; sound when ``report.errors`` is empty and ``report.complete``."""
    return _opened(checkpoint, plan, rebase).validate(progress).report


def analyze(
    checkpoint: LoadedCheckpoint | PathLike,
    plan: Topology | JobJar | PathLike | None = None,
    *,
    rebase: Rebase = None,
    keep_records: int = 0,
) -> Analysis:
    """In-flight data channel by channel in replay order, finished states (``spillway analyze``)."""
    return _opened(checkpoint, plan, rebase).analyze(AnalyzeOptions(keep_records=keep_records)).analysis


def restore_verdict(checkpoint: LoadedCheckpoint | PathLike, plan: Topology | JobJar | PathLike) -> Verdict:
    """Would Flink's restore-time finished-state checks accept this checkpoint for ``plan``?"""
    verdict = _opened(checkpoint, plan, None).verdict()
    assert verdict is not None  # a plan was given
    return verdict


def preflight(
    checkpoint: LoadedCheckpoint | PathLike,
    plan: Topology | JobJar | PathLike,
    settings: PreflightSettings | None = None,
    *,
    rebase: list[str] | None = None,
) -> PreflightResult:
    """Would Flink restore ``checkpoint`` into the job of ``plan`` (``spillway preflight``)? ``.answer`` is yes /
    no / restores-with-loss / unknown (``.loss`` lists what the restore drops), ``.restorable`` True / False / None
    (unknown), ``.reasons`` says why; ``settings`` carries what a plan does not show (allow-non-restored-state, the
    max parallelism the job sets or ``no_max_parallelism``, the restoring release)."""
    topology = _plan(plan)
    assert topology is not None
    loaded = _loaded(checkpoint, rebase)
    return _preflight(topology, loaded.checkpoint, settings, loaded)


def files(
    checkpoints: LoadedCheckpoint | PathLike | list[LoadedCheckpoint | PathLike], *, rebase: Rebase = None
) -> FilesReport:
    """Every file the checkpoints depend on (``spillway files``); a job directory stands for all its
    ``chk-N``. ``.exclusive(i)``: what dropping checkpoint ``i`` leaves unreferenced; ``.to_json()``
    is ``spillway.files/1``. ``spillway.api.reading.files`` also names operators by a plan."""
    return reading.files(checkpoints, rebase=rebase)


def diff(a: LoadedCheckpoint | PathLike, b: LoadedCheckpoint | PathLike, *, rebase: Rebase = None) -> CheckpointDiff:
    """What differs between two checkpoints (``spillway diff``); ``.identical``, ``.to_json()`` is
    ``spillway.diff/1``."""
    return reading.diff(a, b, rebase=rebase)


def rescale(
    src: PathLike,
    plan: Topology | JobJar | PathLike,
    parallelism: dict[str, int],
    out: PathLike | None = None,
    *,
    rebase: Rebase = None,
    **options: Any,
) -> RescaleReport:
    """``spillway rescale`` over a path: ``spillway.open(src, plan=plan, rebase=rebase).rescale(RescaleOptions(
    parallelism, out, **options)).report`` (``options``: the fields of ``RescaleOptions``: ``keys``,
    ``key_fns``, ``buffer_size``, ``master`` — None for in-process —, ``dry_run``, ``force``, …). ``out`` may be
    left out for a ``dry_run``. Also callable as ``spillway.rescale(...)`` (see ``spillway/__init__.py``)."""
    from spillway.api.session import open as open_at

    return open_at(src, plan=plan, rebase=rebase).rescale(RescaleOptions(parallelism, out, **options)).report


__all__ = [
    "Analysis",
    "CheckpointDiff",
    "FilesReport",
    "LoadedCheckpoint",
    "Rebase",
    "Report",
    "RescaleReport",
    "Topology",
    "Verdict",
    "analyze",
    "analyze_json",
    "diff",
    "files",
    "load_plan",
    "open_checkpoint",
    "rescale",
    "restore_verdict",
    "validate",
    "validate_json",
]
