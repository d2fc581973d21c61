"""How every ``spillway repair`` command shows its report (the work is in ``spillway.repair``)."""

from __future__ import annotations

from typing import Any

from rich.markup import escape
from rich.table import Table

from spillway.cli.binding import show_binding_doc
from spillway.cli.common import EXIT_OK, emit_json, err, out
from spillway.cli.wide import print_wide
from spillway.inspect.restore_instructions import restore_lines
from spillway.repair.session import RepairReport


def show_report(report: RepairReport, json_out: bool) -> int:
    if json_out:
        emit_json(report.to_json())
        return EXIT_OK
    show_binding_doc(report.extra.get("binding"))
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
    show_restore(report.extra.get("restore"))
    return EXIT_OK


def show_restore(restore: dict[str, Any] | None) -> None:
    """After every writing command: how to restore what it wrote (restore_instructions)."""
    if restore is None:
        return
    for line in restore_lines(restore):
        out.print(escape(line), soft_wrap=True)
