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

import os
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from spillway.errors import UsageError
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
from spillway.rescale.options import RescaleOptions
from spillway.rescale.rescale import RescaleReport
from spillway.storage.load import LoadedCheckpoint, load_checkpoint

PathLike = str | os.PathLike[str]
# Path rewrites that win over automatic rebasing: {old_prefix: new_prefix}, or "OLD=NEW" strings.
Rebase = Mapping[str, str] | Sequence[str] | None


def _rules(rebase: Rebase) -> list[str] | None:
    """``rebase`` as the locator's ``OLD=NEW`` rules; a wrong shape is a ``UsageError`` in Python's words."""
    if rebase is None:
        return None
    pairs: list[tuple[object, object]]
    if isinstance(rebase, Mapping):
        pairs = list(rebase.items())
    elif isinstance(rebase, Sequence) and not isinstance(rebase, str):
        pairs = [(r.partition("=")[0], r.partition("=")[2]) if isinstance(r, str) else (r, None) for r in rebase]
    else:
        raise UsageError(f"rebase: expected a mapping {{old_prefix: new_prefix}}, got {type(rebase).__name__}")
    rules = []
    for old, new in pairs:
        if not isinstance(old, str) or not isinstance(new, str) or not old or not new:
            raise UsageError(
                f"rebase: {old!r}: expected non-empty prefixes, {{old_prefix: new_prefix}} or 'OLD_PREFIX=NEW_PREFIX'"
            )
        rules.append(f"{old}={new}")
    return rules


def open_checkpoint(path: PathLike, rebase: Rebase = None) -> LoadedCheckpoint:
    """Locate (job dir → newest chk-N, chk-N dir, or ``_metadata``; local or a pyarrow.fs URI) and decode.

    ``rebase``: ``{old_prefix: new_prefix}`` path rewrites that win over automatic rebasing."""
    return load_checkpoint(path, _rules(rebase))


def _loaded(checkpoint: LoadedCheckpoint | PathLike, rebase: Rebase) -> LoadedCheckpoint:
    return checkpoint if isinstance(checkpoint, LoadedCheckpoint) else load_checkpoint(checkpoint, _rules(rebase))


def _plan(plan: Topology | PathLike | None) -> Topology | None:
    if plan is None or isinstance(plan, Topology):
        return plan
    return load_plan(Path(plan))


def validate(
    checkpoint: LoadedCheckpoint | PathLike,
    plan: Topology | PathLike | None = None,
    *,
    rebase: Rebase = None,
    progress: Progress | None = None,
) -> Report:
    """Every check of ``spillway validate``; sound when ``report.errors`` is empty and ``report.complete``."""
    return _validate(_loaded(checkpoint, rebase), _plan(plan), progress)


def analyze(
    checkpoint: LoadedCheckpoint | PathLike,
    plan: Topology | PathLike | None = None,
    *,
    rebase: Rebase = None,
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
    checkpoints: LoadedCheckpoint | PathLike | list[LoadedCheckpoint | PathLike], *, rebase: Rebase = None
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
            opened.extend(open_checkpoints([str(item)], _rules(rebase)))
    return collect_files(opened)


def diff(a: LoadedCheckpoint | PathLike, b: LoadedCheckpoint | PathLike, *, rebase: Rebase = None) -> CheckpointDiff:
    """What differs between two checkpoints (``spillway diff``); ``.identical``, ``.to_json()`` is
    ``spillway.diff/1``."""
    la, lb = _loaded(a, rebase), _loaded(b, rebase)
    return diff_checkpoints(la, lb, str(la.location.checkpoint_dir), str(lb.location.checkpoint_dir))


def rescale(
    src: PathLike,
    plan: Topology | PathLike,
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
