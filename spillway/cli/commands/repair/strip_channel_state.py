"""Drop the in-flight data of chosen operators."""

from __future__ import annotations

from typing import TYPE_CHECKING

from rich.markup import escape

import spillway.api as api
from spillway.cli.common import UsageError
from spillway.cli.help import command as spillway_command
from spillway.cli.options import (
    Naming,
    jsonl_flag,
    naming,
    operators_option,
    option,
    salvage_options,
    value_type_option,
)
from spillway.cli.render import err
from spillway.cli.repair_common import Repair, repair_options

if TYPE_CHECKING:
    from spillway.api import RepairResult

HELP = """Drop the channel state (in-flight records) of the chosen operators — or of all — and keep
everything else, above all the sources' split-assignment (coordinator) state. Whole logical channels
are dropped: the downstream's input half and the upstream's output half together (needs --plan unless
every channel goes). The loss report names every channel, edge, record count and byte count dropped:
exactly-once no longer holds for those records.

--salvage DIR first exports exactly the records dropped into DIR (Parquet, one file per edge; see
spillway salvage -h, --value-type and --jsonl as there), so a job can replay them; if that export fails,
nothing is stripped.

Examples:

  spillway repair strip-channel-state chk-42 --out chk-42-stripped --plan plan.json --operator slow

  spillway repair strip-channel-state chk-42 --out chk-42-stripped --json | jq .records_dropped

  spillway repair strip-channel-state chk-42 --out chk-42-stripped --plan plan.json --salvage salvaged/
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
    if report.salvage is not None and not report.dry_run:
        err.print(f"[yellow]All {report.salvage['records']} of them were exported first (replay: docs/salvage.md).[/]")


@spillway_command("strip-channel-state", HELP)
@repair_options()
@operators_option
@option("--salvage", metavar="DIR", help="First export the dropped records into DIR (new or empty).")
@value_type_option
@jsonl_flag
@naming()
def command(
    repair: Repair,
    operator: list[str] | None,
    salvage: str | None,
    value_type: list[str] | None,
    jsonl: bool,
    naming: Naming,
) -> int:
    def options() -> api.StripOptions:
        if (value_type or jsonl) and salvage is None:
            raise UsageError("--value-type and --jsonl need --salvage DIR")
        salvaged = None if salvage is None else salvage_options(salvage, None, value_type, jsonl)
        return api.StripOptions(repair.out_dir, operator, repair.dry_run, repair.force, salvaged)

    return repair.run(naming, options, api.Checkpoint.strip_channel_state, show_loss)
