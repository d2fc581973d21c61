"""Options and output shared by the ``spillway repair`` commands."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Annotated

import typer
from rich.markup import escape
from rich.table import Table

from spillway.cli.common import EXIT_OK, emit_json, err, out
from spillway.inspect.load import LoadedCheckpoint
from spillway.inspect.topology import load_plan
from spillway.repair.common import RepairPlan
from spillway.rescale.writer import write_checkpoint

OutOpt = Annotated[str, typer.Option("--out", help="New checkpoint directory (must not exist).")]
DryRunOpt = Annotated[bool, typer.Option("--dry-run", help="Show what would change; write nothing.")]
JsonOpt = Annotated[bool, typer.Option("--json", help="Emit the change report as JSON.")]
PlanOpt = Annotated[str | None, typer.Option("--plan", help="Flink plan JSON (for channel pairing and checks).")]


def source_rebases(loaded: LoadedCheckpoint, user_rules: list[str] | None) -> list[str]:
    """Where the source's files really are (explicit --rebase and automatic rebasing), as rules for
    the output's self-check: the output names the same files, it must resolve them the same way."""
    loaded.resolve_files()
    return [*(user_rules or []), *(f"{r['from']}={r['to']}" for r in loaded.resolver.rebases())]


def finish(
    rp: RepairPlan,
    target: Path,
    dry_run: bool,
    json_out: bool,
    plan: str | None,
    before: Callable[[], None] | None = None,
    report: dict | None = None,
) -> int:
    if not dry_run:
        if before is not None:
            before()
        rp.output.final_prefix = rp.output.final_prefix or f"file:{target}"
        topology = load_plan(plan) if plan else None
        write_checkpoint(rp.output, target, topology, rebase=rp.self_check_rebase)
    doc = {
        "schema": "spillway.repair/1",
        "out": str(target),
        "dry_run": dry_run,
        "changes": [{"what": c.what, "count": c.count, "detail": c.detail} for c in rp.changes],
        "warnings": rp.warnings,
        **(report or {}),
    }
    if json_out:
        emit_json(doc)
        return EXIT_OK
    table = Table(title=("would write " if dry_run else "wrote ") + escape(str(target)), title_justify="left")
    for col in ("change", "count", "detail"):
        table.add_column(col)
    for c in rp.changes:
        table.add_row(escape(c.what), str(c.count), escape(c.detail))
    out.print(table)
    for w in rp.warnings:
        err.print(f"[yellow]warning:[/] {escape(w)}")
    if not dry_run:
        out.print("[green]self-check passed: the output decodes identically and validates clean[/]")
    return EXIT_OK


OperatorsOpt = Annotated[list[str] | None, typer.Option("--operator", help="Operator id, uid or name (repeatable).")]


def operator_ids(checkpoint, wanted: list[str] | None) -> set[str] | None:
    """Resolve --operator values to operator ids; None when none were given."""
    if not wanted:
        return None
    from spillway.cli.dump import select_operators

    ids: set[str] = set()
    for w in wanted:
        ids |= {o.operator_id for o in select_operators(checkpoint, w)}
    return ids
