"""spillway's Python API: what the CLI does, as calls that return objects (docs/api.md).

    import spillway
    cp = spillway.open_checkpoint("/checkpoints/7f3c…")          # newest chk-N
    report = spillway.validate(cp, plan="plan.json")
    print(report.errors, spillway.validate_json(report, str(cp.location.metadata_path), []))
    analysis = spillway.analyze(cp, plan="plan.json")
    spillway.rescale("chk-42", "plan.json", {"count": 4}, "chk-42-p4", keys={"count": "tuple:0:long"})
    spillway.repair.strip_channel_state("chk-42", "chk-42-stripped", plan="plan.json", operators=["slow"])

Every failure is a ``spillway.SpillwayError`` whose ``exit_code`` is what the CLI would exit with.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from spillway.inspect.analyze import Analysis
from spillway.inspect.analyze import analyze as _analyze
from spillway.inspect.diff import CheckpointDiff, diff_checkpoints
from spillway.inspect.files import FilesReport, collect_files, open_checkpoints
from spillway.inspect.finished import Verdict, check
from spillway.inspect.preflight import Result as PreflightResult
from spillway.inspect.preflight import Settings as PreflightSettings
from spillway.inspect.preflight import check as _preflight
from spillway.inspect.reports import analyze_json, validate_json
from spillway.inspect.topology import Topology, load_plan
from spillway.inspect.validate import Progress, Report
from spillway.inspect.validate import validate as _validate
from spillway.rescale.rescale import RescaleReport, rescale_checkpoint
from spillway.storage.load import LoadedCheckpoint, load_checkpoint

PathLike = str | os.PathLike[str]


def open_checkpoint(path: PathLike, rebase: list[str] | None = None) -> LoadedCheckpoint:
    """Locate (job dir → newest chk-N, chk-N dir, or ``_metadata``; local or a pyarrow.fs URI) and decode.

    ``rebase``: ``["OLD=NEW", …]`` path rewrites that win over automatic rebasing."""
    return load_checkpoint(path, rebase)


def _loaded(checkpoint: LoadedCheckpoint | PathLike, rebase: list[str] | None) -> LoadedCheckpoint:
    return checkpoint if isinstance(checkpoint, LoadedCheckpoint) else load_checkpoint(checkpoint, rebase)


def _plan(plan: Topology | PathLike | None) -> Topology | None:
    if plan is None or isinstance(plan, Topology):
        return plan
    return load_plan(Path(plan))


def validate(
    checkpoint: LoadedCheckpoint | PathLike,
    plan: Topology | PathLike | None = None,
    *,
    rebase: list[str] | None = None,
    progress: Progress | None = None,
) -> Report:
    """Every check of ``spillway validate``; sound when ``report.errors`` is empty and ``report.complete``."""
    return _validate(_loaded(checkpoint, rebase), _plan(plan), progress)


def analyze(
    checkpoint: LoadedCheckpoint | PathLike,
    plan: Topology | PathLike | None = None,
    *,
    rebase: list[str] | None = None,
    keep_records: int = 0,
) -> Analysis:
    """In-flight data channel by channel in replay order, finished states (``spillway analyze``)."""
    return _analyze(_loaded(checkpoint, rebase), _plan(plan), keep_records=keep_records)


def restore_verdict(checkpoint: LoadedCheckpoint | PathLike, plan: Topology | PathLike) -> Verdict:
    """Would Flink's restore-time finished-state checks accept this checkpoint for ``plan``?"""
    topology = _plan(plan)
    assert topology is not None
    return check(topology, _loaded(checkpoint, None).checkpoint)


def preflight(
    checkpoint: LoadedCheckpoint | PathLike,
    plan: Topology | PathLike,
    settings: PreflightSettings | None = None,
    *,
    rebase: list[str] | None = None,
) -> PreflightResult:
    """Would Flink restore ``checkpoint`` into the job of ``plan`` (``spillway preflight``)? ``.restorable`` is
    True / False / None (unknown), ``.reasons`` says why; ``settings`` carries what a plan does not show
    (allow-non-restored-state, the max parallelism the job sets, the restoring release)."""
    topology = _plan(plan)
    assert topology is not None
    loaded = _loaded(checkpoint, rebase)
    return _preflight(topology, loaded.checkpoint, settings, loaded)


def files(
    checkpoints: LoadedCheckpoint | PathLike | list[LoadedCheckpoint | PathLike], *, rebase: list[str] | None = None
) -> FilesReport:
    """Every file the checkpoints depend on (``spillway files``); a job directory stands for all its
    ``chk-N``. ``.exclusive(i)``: what dropping checkpoint ``i`` leaves unreferenced; ``.to_json()``
    is ``spillway.files/1``."""
    items = checkpoints if isinstance(checkpoints, list) else [checkpoints]
    opened = []
    for item in items:
        if isinstance(item, LoadedCheckpoint):
            opened.append((str(item.location.checkpoint_dir), item))
        else:
            opened.extend(open_checkpoints([str(item)], rebase))
    return collect_files(opened)


def diff(
    a: LoadedCheckpoint | PathLike, b: LoadedCheckpoint | PathLike, *, rebase: list[str] | None = None
) -> CheckpointDiff:
    """What differs between two checkpoints (``spillway diff``); ``.identical``, ``.to_json()`` is
    ``spillway.diff/1``."""
    la, lb = _loaded(a, rebase), _loaded(b, rebase)
    return diff_checkpoints(la, lb, str(la.location.checkpoint_dir), str(lb.location.checkpoint_dir))


def rescale(
    src: str,
    plan: str,
    parallelism: dict[str, int],
    out: str,
    **options: Any,
) -> RescaleReport:
    """``spillway rescale``: see ``spillway.rescale.rescale.rescale_checkpoint`` for the options
    (``keys``, ``key_fns``, ``buffer_size``, ``master`` — None for in-process —, ``rebase``, ``dry_run``,
    ``force`` — leave out damaged logical channels of moved edges, listed in ``plan.lost``)."""
    return rescale_checkpoint(src, plan, parallelism, out, **options)


__all__ = [
    "Analysis",
    "CheckpointDiff",
    "FilesReport",
    "LoadedCheckpoint",
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
