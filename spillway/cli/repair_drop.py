"""``spillway repair drop-operator``: remove an operator's state entirely."""

from __future__ import annotations

import typer

from spillway.cli.common import UsageError, guarded
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
from spillway.inspect.analyze import analyze
from spillway.inspect.topology import load_plan
from spillway.repair.common import Change, RepairError, RepairPlan
from spillway.repair.transforms import drop_operators, strip_channel_state
from spillway.storage.relative import relative_copies
from spillway.storage.safe_writer import PlannedOutput

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
    json_out: JsonOpt = False,
    rebase: RebaseOpt = None,
) -> None:
    def run() -> int:
        with open_repair(src, out_dir, rebase) as io:
            return repair(io)

    def repair(io: RepairIO) -> int:
        loaded = io.loaded
        ids = operator_ids(loaded.checkpoint, operator)
        if not ids:
            raise UsageError("name the operator(s) to drop with --operator")
        has_channels = any(
            s.input_channel_state or s.result_subpartition_state
            for o in loaded.checkpoint.operators
            if o.operator_id in ids
            for s in o.subtasks
        )
        cp = loaded.checkpoint
        rp = RepairPlan(PlannedOutput(cp))
        report: dict = {"records_dropped": 0, "bytes_dropped": 0}
        if has_channels:
            if plan is None:
                raise RepairError(
                    "the operator holds channel state: --plan is needed to drop the other half of "
                    "each of its channels too"
                )
            stripped = strip_channel_state(cp, analyze(loaded, load_plan(plan)), ids)
            cp = stripped.checkpoint
            rp.changes.append(
                Change(
                    "channels dropped with it",
                    len(stripped.losses),
                    f"{stripped.records_dropped} records, {stripped.bytes_dropped} bytes",
                )
            )
            report = {"records_dropped": stripped.records_dropped, "bytes_dropped": stripped.bytes_dropped}
        new = drop_operators(cp, ids)
        rp.output = PlannedOutput(new, relative_copies(loaded, new))
        for o in loaded.checkpoint.operators:
            if o.operator_id in ids:
                rp.changes.append(Change(f"operator dropped: {o.label()}", 1, o.operator_id))
        rp.self_check_rebase = source_rebases(loaded, io.rebase)
        return finish(rp, io, dry_run, json_out, plan, report=report)

    raise typer.Exit(guarded(storage_guarded(run)))
