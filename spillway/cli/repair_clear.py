"""``spillway repair clear-finished``: turn FLIP-147 finished markers into empty running state."""

from __future__ import annotations

from typing import Annotated

import typer
from rich.markup import escape

import spillway.api as api
from spillway.cli.common import err, guarded
from spillway.cli.options import DryRunOpt, JsonOpt, OperatorsOpt, OutOpt, PlanOpt, RebaseOpt, SrcArg, UidMapOpt, UidOpt
from spillway.cli.repair_common import open_source, show_report

HELP = """Clear FLIP-147 finished markers (fully finished operators, finished subtasks) so that Flink's
restore-time finished-state checks accept a checkpoint for a changed topology. With --plan and no
--operator, exactly the operators of the vertices Flink would refuse are cleared. Cleared operators
restart with no state: a cleared source reads its input again from the start.

Examples:

  spillway repair clear-finished chk-42 --out chk-42-cleared --plan new-plan.json

  spillway repair clear-finished chk-42 --out chk-42-cleared --operator bsrc --operator bmap --force
"""


def command(
    src: SrcArg,
    out_dir: OutOpt,
    operator: OperatorsOpt = None,
    plan: PlanOpt = None,
    force: Annotated[
        bool,
        typer.Option(
            "--force",
            help="Clear even where Flink would accept the markers, and even if the source has validate errors.",
        ),
    ] = False,
    dry_run: DryRunOpt = False,
    json_out: JsonOpt = False,
    rebase: RebaseOpt = None,
    uid: UidOpt = None,
    uid_map: UidMapOpt = None,
) -> None:
    def run() -> int:
        options = api.ClearFinishedOptions(out_dir, operator, dry_run, force)
        report = open_source(src, plan, uid, uid_map, rebase).clear_finished(options)
        if not json_out:
            for c in report.changes:
                err.print(f"[yellow]{escape(c.what)}[/]")
        return show_report(report, json_out)

    raise typer.Exit(guarded(run, json_out))
