"""Turn finished markers into empty running state."""

from __future__ import annotations

from typing import TYPE_CHECKING

from rich.markup import escape

import spillway.api as api
from spillway.cli.render import err
from spillway.cli.repair_common import operators_repair

if TYPE_CHECKING:
    from spillway.api import RepairResult

HELP = """Clear FLIP-147 finished markers (fully finished operators, finished subtasks) so that Flink's
restore-time finished-state checks accept a checkpoint for a changed topology. With --plan and no
--operator, exactly the operators of the vertices Flink would refuse are cleared. Cleared operators
restart with no state: a cleared source reads its input again from the start.

Examples:

  spillway repair clear-finished chk-42 --out chk-42-cleared --plan new-plan.json

  spillway repair clear-finished chk-42 --out chk-42-cleared --operator bsrc --operator bmap --force
"""


def show_cleared(report: RepairResult) -> None:
    for c in report.changes:
        err.print(f"[yellow]{escape(c.what)}[/]")


command = operators_repair(
    "clear-finished",
    HELP,
    api.ClearFinishedOptions,
    api.Checkpoint.clear_finished,
    show_cleared,
    force_help="Clear even where Flink would accept the markers, and even if the source has validate errors.",
)
