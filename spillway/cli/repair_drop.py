"""``spillway repair drop-operator``: remove an operator's state entirely."""

from __future__ import annotations

import typer

import spillway.api as api
from spillway.cli.common import UsageError, guarded
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

HELP = """Remove the chosen operators' state from a checkpoint — also from checkpoints with channel
state, which the State Processor API cannot open. Channels into or out of a dropped operator lose
both halves (needs --plan when the operator holds channel state). The remaining operators then
restore without --allowNonRestoredState.

Examples:

  spillway repair drop-operator chk-42 --out chk-42-without-audit --operator audit --plan plan.json
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
        if not operator:
            raise UsageError("name the operator(s) to drop with --operator")
        options = api.DropOperatorOptions(out_dir, operator, dry_run, force)
        report = open_source(src, plan, uid, uid_map, rebase).drop_operator(options)
        return show_report(report, json_out)

    raise typer.Exit(guarded(run, json_out))
