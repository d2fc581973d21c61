"""What every repair shares: the plan of the output and the report of changes."""

from __future__ import annotations

from dataclasses import dataclass, field

from spillway.errors import SpillwayError
from spillway.storage.safe_writer import PlannedOutput


class RepairError(SpillwayError):
    """The repair cannot be done as asked (exit code 1, nothing written)."""


@dataclass
class Change:
    what: str
    count: int | None  # None: not known (``detail`` says why)
    detail: str = ""


@dataclass
class RepairPlan:
    output: PlannedOutput
    changes: list[Change] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)
    self_check_rebase: list[str] = field(default_factory=list)
    #: Labels (name, uid, id) of operators removed on purpose: the plan may still show them.
    dropped: set[str] = field(default_factory=set)
