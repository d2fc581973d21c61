"""``spillway repair strip-channel-state``: drop in-flight data of chosen operators, with a loss report."""

from __future__ import annotations

import typer
from rich.markup import escape

from spillway.cli.common import err, guarded
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
from spillway.repair.transforms import strip_channel_state
from spillway.storage.relative import relative_copies
from spillway.storage.safe_writer import PlannedOutput

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
    json_out: JsonOpt = False,
    rebase: RebaseOpt = None,
) -> None:
    def run() -> int:
        with open_repair(src, out_dir, rebase) as io:
            return repair(io)

    def repair(io: RepairIO) -> int:
        loaded = io.loaded
        ids = operator_ids(loaded.checkpoint, operator)
        if ids is not None and plan is None:
            raise RepairError(
                "stripping some operators needs --plan: each channel's other half sits on the operator at the "
                "other end of the edge, and dropping one half only would break record framing on restore"
            )
        topology = load_plan(plan) if plan else None
        analysis = analyze(loaded, topology)
        result = strip_channel_state(loaded.checkpoint, analysis, ids)
        copies = relative_copies(loaded, result.checkpoint)
        rp = RepairPlan(PlannedOutput(result.checkpoint, copies))
        rp.changes.append(Change("channel handles removed", result.handles_removed))
        rp.changes.append(Change("logical channels dropped", len(result.losses)))
        dropped = result.records_dropped
        rp.changes.append(
            Change(
                "records dropped",
                -1 if dropped is None else dropped,
                "" if dropped is not None else "unknown: output-side state without --plan",
            )
        )
        rp.changes.append(Change("bytes dropped", result.bytes_dropped))
        edges: dict[str, dict[str, int | None]] = {}
        for loss in result.losses:
            e = edges.setdefault(f"{loss.upstream} -> {loss.downstream} ({loss.edge})", {"records": 0, "bytes": 0})
            e["records"] = None if e["records"] is None or loss.records is None else e["records"] + loss.records
            e["bytes"] = (e["bytes"] or 0) + loss.bytes
        if result.losses and not json_out:
            err.print(
                f"[bold red]WARNING: {len(result.losses)} channels with "
                f"{'an unknown number of' if dropped is None else dropped} in-flight records "
                f"({result.bytes_dropped} bytes) are dropped. Exactly-once no longer holds for them: they were "
                "sent before the checkpoint and will not be replayed.[/]"
            )
            for name, e in edges.items():
                err.print(f"  [red]{escape(name)}: {e['records']} records, {e['bytes']} bytes[/]")
        report = {
            "records_dropped": dropped,
            "bytes_dropped": result.bytes_dropped,
            "edges": edges,
            "channels": [vars(loss) for loss in result.losses],
        }
        rp.self_check_rebase = source_rebases(loaded, io.rebase)
        return finish(rp, io, dry_run, json_out, plan, report=report)

    raise typer.Exit(guarded(storage_guarded(run)))
