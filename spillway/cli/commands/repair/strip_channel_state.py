"""Drop the in-flight data of chosen operators.

With a loss report."""

from __future__ import annotations

from typing import TYPE_CHECKING

from rich.markup import escape

import spillway.api as api
from spillway.cli.common import err
from spillway.cli.repair_common import operators_repair

if TYPE_CHECKING:
    from spillway.api import RepairResult

HELP = """Drop the channel state (in-flight records) of the chosen operators — or of all — and keep
everything else, above all the sources' split-assignment (coordinator) state. Whole logical channels
are dropped: the downstream's input half and the upstream's output half together (needs --plan unless
every channel goes). The loss report names every channel, edge, record count and byte count dropped:
exactly-once no longer holds for those records.

Examples:

  spillway repair strip-channel-state chk-42 --out chk-42-stripped --plan plan.json --operator slow

  spillway repair strip-channel-state chk-42 --out chk-42-stripped --json | jq .records_dropped
"""


def show_loss(report: RepairResult) -> None:
    loss = report.loss
    if loss is None or not loss.channels:
        return
    dropped = loss.records_dropped
    err.print(
        f"[bold red]WARNING: {len(loss.channels)} channels with "
        f"{'an unknown number of' if dropped is None else dropped} in-flight records "
        f"({loss.bytes_dropped} bytes) are dropped. Exactly-once no longer holds for them: they were "
        "sent before the checkpoint and will not be replayed.[/]"
    )
    for name, e in (loss.edges or {}).items():
        records = "an unknown number of" if e.records is None else e.records
        err.print(f"  [red]{escape(name)}: {records} records, {e.bytes} bytes[/]")


command = operators_repair("strip-channel-state", HELP, api.StripOptions, api.Checkpoint.strip_channel_state, show_loss)
