"""The self-check every writer runs on its output before the rename: decode and ``validate``.

It lives here, above ``spillway.storage``, because the safe writer must not know about validation;
writers pass ``validated_output(...)`` as the writer's ``check``.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from spillway.inspect.findings import Finding
from spillway.inspect.topology import Topology
from spillway.inspect.validate import validate
from spillway.storage.load import load_checkpoint
from spillway.storage.safe_writer import PlannedOutput, WriteError


def validated_output(
    topology: Topology | None = None,
    rebase: list[str] | None = None,
    extra_check: Callable[[Path], list[str]] | None = None,
) -> Callable[[Path, PlannedOutput], list[Finding]]:
    """A writer check: ``validate`` finds no error in the written output (read through the plan's
    final prefix), then ``extra_check`` finds no problem. Returns the non-error findings."""

    def check(tmp: Path, plan: PlannedOutput) -> list[Finding]:
        rules = [f"{plan.final_prefix}={tmp}"] if plan.final_prefix else []
        report = validate(load_checkpoint(tmp, internal=[*rules, *(rebase or [])]), topology)
        if report.errors:
            first = report.errors[0]
            raise WriteError(
                f"self-check: validate found {len(report.errors)} errors in the output, first: "
                f"{first.rule}: {first.message} ({first.file or ''})"
            )
        problems = extra_check(tmp) if extra_check else []
        if problems:
            raise WriteError("self-check: " + "; ".join(problems[:5]))
        return report.findings

    return check
