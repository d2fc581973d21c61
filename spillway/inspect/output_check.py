"""The self-check every writer runs on its output before the rename: decode, ``validate``, and every file the
output names exists where a restoring Flink would look (``spillway.inspect.references``).

It lives here, above ``spillway.storage``, because the safe writer must not know about validation;
writers pass ``validated_output(...)`` as the writer's ``check``.

An output is held to more than an input. A subtask's keyed state whose key groups reach outside the range Flink
assigns that subtask is only a warning in a checkpoint Flink wrote (``key-group-range``), but in one spillway wrote
it is a certain fault of ours: Flink hands a subtask the keyed state stored under its index (same parallelism) or
the handles whose range intersects its own (rescaled), and a full-snapshot backend then restores key groups the
subtask does not own. It refuses the rename like an error. A range inside the subtask's own is what Flink's own
rescaling hands a subtask (the intersection of an old handle with the new range), and a RocksDB incremental
handle that contains the whole range is clipped to it on restore (``key-group-clipped``): both pass.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from spillway.flink.keygroups import key_group_range
from spillway.inspect.findings import Finding
from spillway.inspect.references import missing_references
from spillway.inspect.topology import Topology
from spillway.inspect.validate import validate
from spillway.model.checkpoint import CheckpointMetadata, IncrementalHandle
from spillway.storage.load import load_checkpoint
from spillway.storage.safe_writer import PlannedOutput, WriteError


def validated_output(
    topology: Topology | None = None,
    rebase: list[str] | None = None,
    extra_check: Callable[[Path], list[str]] | None = None,
) -> Callable[[Path, PlannedOutput], list[Finding]]:
    """A writer check: ``validate`` finds no error in the written output (read through the plan's
    final prefix), every file it names exists (after the final prefix and ``rebase`` only), no subtask's keyed
    state reaches outside its key groups, then ``extra_check`` finds no problem. Returns the non-error findings."""

    def check(tmp: Path, plan: PlannedOutput) -> list[Finding]:
        rules = [f"{plan.final_prefix}={tmp}"] if plan.final_prefix else []
        loaded = load_checkpoint(tmp, internal=[*rules, *(rebase or [])])
        report = validate(loaded, topology)
        if report.errors:
            first = report.errors[0]
            raise WriteError(
                f"self-check: validate found {len(report.errors)} errors in the output, first: "
                f"{first.rule}: {first.message} ({first.file or ''})"
            )
        missing = missing_references(tmp, plan.final_prefix, rebase)
        if missing:
            raise WriteError(
                f"self-check: the output names {len(missing)} files that do not exist where Flink would look, "
                f"first: {missing[0]}"
            )
        outside = foreign_key_groups(loaded.checkpoint)
        if outside:
            raise WriteError(f"self-check: {len(outside)} keyed state handles of the output, first: {outside[0]}")
        problems = extra_check(tmp) if extra_check else []
        if problems:
            raise WriteError("self-check: " + "; ".join(problems[:5]))
        return report.findings

    return check


def foreign_key_groups(checkpoint: CheckpointMetadata) -> list[str]:
    """Every keyed state handle holding key groups outside the range Flink assigns its subtask (Flink's rule:
    subtask i of p owns [ceil(i * max / p), ceil((i + 1) * max / p) - 1]), unless Flink clips it on restore."""
    found: list[str] = []
    for op in checkpoint.operators:
        if not 0 < op.parallelism <= op.max_parallelism:
            continue  # validate reports an impossible parallelism itself
        for sub in op.subtasks:
            if not 0 <= sub.index < op.parallelism:
                continue  # validate's subtask-index error
            lo, hi = key_group_range(op.max_parallelism, op.parallelism, sub.index)
            for kind, h in (("managed", sub.managed_keyed_state), ("raw", sub.raw_keyed_state)):
                if h is None or h.key_groups.count <= 0:
                    continue
                first, last = h.key_groups.start, h.key_groups.last
                if lo <= first and last <= hi:
                    continue
                if isinstance(h, IncrementalHandle) and first <= lo and hi <= last:
                    continue  # Flink's RocksDB restore drops the key groups outside [lo, hi]
                found.append(
                    f"key-group-range: {op.label()} subtask {sub.index} {kind} keyed state holds key groups "
                    f"[{first}, {last}], but Flink assigns it [{lo}, {hi}]: it would restore key groups the "
                    "subtask does not own"
                )
    return found
