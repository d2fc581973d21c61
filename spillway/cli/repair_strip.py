"""``spillway repair strip-channel-state``: drop in-flight data of chosen operators, with a loss report."""

from __future__ import annotations

import typer
from rich.markup import escape

import spillway.api as api
from spillway.cli.common import err, guarded
from spillway.cli.options import (
    DryRunOpt,
    ForceOpt,
    JsonOpt,
    OperatorsOpt,
    OutOpt,
    PlanOpt,
    RebaseOpt,
    SrcArg,
    UidMapOpt,
    UidOpt,
)
from spillway.cli.repair_common import open_source, show_report

HELP = """Drop the channel state (in-flight records) of the chosen operators — or of all — and keep
everything else, above all the sources' split-assignment (coordinator) state. Whole logical channels
are dropped: the downstream's input half and the upstream's output half together (needs --plan unless
every channel goes). The loss report names every channel, edge, record count and byte count dropped:
exactly-once no longer holds for those records.

Examples:

  spillway repair strip-channel-state chk-42 --out chk-42-stripped --plan plan.json --operator slow

  spillway repair strip-channel-state chk-42 --out chk-42-stripped --json | jq .records_dropped
"""


def command(
    src: SrcArg,
    out_dir: OutOpt,
    operator: OperatorsOpt = None,
    plan: PlanOpt = None,
    dry_run: DryRunOpt = False,
    force: ForceOpt = False,
    json_out: JsonOpt = False,
    rebase: RebaseOpt = None,
    uid: UidOpt = None,
    uid_map: UidMapOpt = None,
) -> None:
    def run() -> int:
        options = api.StripOptions(out_dir, operator, dry_run, force)
        report = open_source(src, plan, uid, uid_map, rebase).strip_channel_state(options)
        loss = report.loss
        if loss is not None and loss.channels and not json_out:
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
        return show_report(report, json_out)

    raise typer.Exit(guarded(run, json_out))
