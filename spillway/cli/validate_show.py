"""``spillway validate`` for people: the findings table and the verdict (rich), loaded only when a run prints text."""

from __future__ import annotations

from typing import Any

from rich.markup import escape

from spillway import api
from spillway.cli.render import out, print_items, print_paragraph, print_rebased, print_table

SEVERITY_STYLE = {"error": "bold red", "warning": "yellow", "info": "dim"}


def show(report: api.Report, metadata: str, note: str | None, rebased: list[dict[str, Any]]) -> None:
    if note:
        out.print(f"[dim]{escape(note)}[/]", soft_wrap=True)
    if report.findings:
        # Identifiers whole on one line; only the message wraps.
        columns = ("severity", "rule", "operator", "subtask", "channel", "file", "offset", "message~")
        rows = [
            (
                f"[{SEVERITY_STYLE[f.severity]}]{f.severity}[/]",
                escape(f.rule),
                escape(f.operator or "-"),
                "-" if f.subtask is None else str(f.subtask),
                escape(f.channel or "-"),
                escape(f.file.rsplit("/", 1)[-1] if f.file else "-"),
                "-" if f.offset is None else str(f.offset),
                escape(f.message),
            )
            for f in report.findings
        ]
        print_table(columns, rows, escape(metadata))
    c = report.counts()
    if report.errors:
        verdict = f"[bold red]{c['error']} errors[/]"
    elif report.unchecked:
        verdict = f"[bold yellow]no errors found, not all checked ({len(report.unchecked)} unchecked)[/]"
    else:
        verdict = "[bold green]sound[/]"
    print_items(
        [
            verdict,
            f"{c['warning']} warnings",
            f"{c['info']} notes",
            f"{report.files_checked} files",
            f"{report.blobs_checked} channel-state blobs, {report.chunks} chunks",
            f"{report.channels_framed} logical channels framed ({report.handles_framed_alone} handles alone)",
            f"{report.records} records and {report.elements - report.records} other stream elements, "
            f"{report.bytes_read} payload bytes",
        ]
    )
    for what, why, n in report.unchecked_summary():
        noun = what.replace("-", " ") + ("s" if n != 1 else "")
        print_paragraph(f"[yellow]unchecked: {n} {noun}: {escape(why)}[/]")
    if report.unchecked and not report.errors:
        # "no errors found" is not "safe to restore": point at the command that answers that.
        print_paragraph(
            "[dim]to check them, give the job's plan (--plan FILE or --job JOB.jar); whether Flink will restore "
            "this checkpoint into a job: spillway preflight CHECKPOINT --plan NEW_PLAN[/]"
        )
    print_rebased(rebased)


__all__ = ["SEVERITY_STYLE", "show"]
