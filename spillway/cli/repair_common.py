"""What every writing command (rescale, ``spillway repair …``) shares: opening its source through the API,
showing a repair's report, and the restore instructions after a write (the work is in ``spillway.api``)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from rich.markup import escape
from rich.table import Table

import spillway.api as api
from spillway.cli.binding import show_binding_doc
from spillway.cli.common import EXIT_OK, UsageError, emit_json, err, out
from spillway.cli.wide import print_wide

if TYPE_CHECKING:
    from spillway.api import Checkpoint, RepairResult


def open_source(
    src: str, plan: str | None, uid: list[str] | None, uid_map: str | None, rebase: list[str] | None
) -> Checkpoint:
    """SRC opened with --plan, --uid/--uid-map and --rebase (checked here first, in the CLI's words)."""
    if plan is None and (uid or uid_map):
        raise UsageError("--uid and --uid-map need --plan")
    uids: dict[str, str] = {}
    for item in uid or []:
        name, sep, value = item.rpartition("=")
        if not sep or not name or not value:
            raise UsageError(f"--uid {item!r}: expected NAME=UID")
        uids[name] = value
    for rule in rebase or []:
        old, sep, new = rule.partition("=")
        if not sep or not old or not new:
            raise UsageError(f"--rebase expects OLD_PREFIX=NEW_PREFIX, got {rule!r}")
    return api.open(src, plan=plan, uids=uids, uid_map=uid_map, rebase=rebase)


def show_report(report: RepairResult, json_out: bool) -> int:
    if json_out:
        emit_json(report.to_json())
        return EXIT_OK
    show_binding_doc(report.binding)
    title = ("would write " if report.dry_run else "wrote ") + escape(report.out)
    table = Table(title=title, title_justify="left")
    for col in ("change", "count", "detail"):
        table.add_column(col, no_wrap=col != "detail", overflow="fold" if col == "detail" else "ellipsis")
    for c in report.changes:
        table.add_row(escape(c.what), "unknown" if c.count is None else str(c.count), escape(c.detail))
    print_wide(table)
    for w in report.warnings:
        err.print(f"[yellow]warning:[/] {escape(w)}")
    if not report.dry_run:
        out.print("[green]self-check passed: the output decodes identically and validates clean[/]")
    show_restore(report.restore_lines())
    return EXIT_OK


def show_restore(lines: list[str]) -> None:
    """After every writing command: how to restore what it wrote (none after a dry run)."""
    for line in lines:
        out.print(escape(line), soft_wrap=True)
