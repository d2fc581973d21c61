"""``spillway repair clear-finished``: turn FLIP-147 finished markers into empty running state."""

from __future__ import annotations

from typing import Annotated

import typer
from rich.markup import escape

from spillway.cli.common import UsageError, err, guarded
from spillway.cli.dump import RebaseOpt
from spillway.cli.repair_common import (
    DryRunOpt,
    JsonOpt,
    OperatorsOpt,
    OutOpt,
    PlanOpt,
    RepairIO,
    SrcArg,
    finish,
    open_repair,
    operator_ids,
    source_rebases,
    storage_guarded,
)
from spillway.inspect.finished import check, classify
from spillway.inspect.topology import load_plan
from spillway.repair.common import Change, RepairError, RepairPlan
from spillway.repair.transforms import clear_finished
from spillway.storage.relative import relative_copies
from spillway.storage.safe_writer import PlannedOutput

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
    force: Annotated[bool, typer.Option("--force", help="Clear even where Flink would accept the markers.")] = False,
    dry_run: DryRunOpt = False,
    json_out: JsonOpt = False,
    rebase: RebaseOpt = None,
) -> None:
    def run() -> int:
        with open_repair(src, out_dir, rebase) as io:
            return repair(io)

    def repair(io: RepairIO) -> int:
        loaded = io.loaded
        cp = loaded.checkpoint
        ids = operator_ids(cp, operator)
        verdict = check(load_plan(plan), cp) if plan else None
        if ids is None:
            if verdict is None:
                raise UsageError("name the operators to clear (--operator) or give the new job's --plan")
            if verdict.restorable:
                raise RepairError(
                    "Flink's finished-state checks would accept this checkpoint for that plan: nothing to clear"
                )
            flagged = {v.vertex for v in verdict.violations}
            ids = {
                o.operator_id
                for o in cp.operators
                if classify(o) != "ALL_RUNNING" and any(o.name and o.name in v for v in flagged)
            }
            if not ids:
                raise RepairError(
                    "cannot tell which operators belong to the refused vertices (metadata before "
                    "V5 stores no names): name them with --operator"
                )
        not_finished = [o.label() for o in cp.operators if o.operator_id in ids and classify(o) == "ALL_RUNNING"]
        if not_finished:
            raise RepairError(f"not finished, nothing to clear: {', '.join(not_finished)}")
        if verdict is not None and verdict.restorable and not force:
            raise RepairError(
                "Flink would accept these finished markers for that plan; clearing them makes the "
                "operators run again from scratch (use --force if that is what you want)"
            )
        new, changed = clear_finished(cp, ids)
        rp = RepairPlan(PlannedOutput(new, relative_copies(loaded, new)))
        for c in changed:
            rp.changes.append(Change(c, 1))
        rp.warnings.append("cleared operators restart with no state; cleared sources read their input again")
        if not json_out:
            for c in changed:
                err.print(f"[yellow]{escape(c)}[/]")
        rp.self_check_rebase = source_rebases(loaded, io.rebase)
        return finish(rp, io, dry_run, json_out, plan)

    raise typer.Exit(guarded(storage_guarded(run)))
