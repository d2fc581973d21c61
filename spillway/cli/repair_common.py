"""What every writing command (rescale, ``spillway repair …``) shares: the repairs' common options and run
(options checked, source opened through the API, one call, the report shown), and the restore instructions after
a write (the work is in ``spillway.api``)."""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from typing import TYPE_CHECKING, TypeVar

import click
from rich.markup import escape

from spillway.cli.binding import show_binding_doc
from spillway.cli.common import ExitStatus, emit_json, in_options, show_warnings
from spillway.cli.help import command
from spillway.cli.options import (
    Decorator,
    Naming,
    bundle,
    flag,
    json_flag,
    naming,
    operators_option,
    option,
    plan_option,
    src_argument,
)
from spillway.cli.render import out, print_table

if TYPE_CHECKING:
    from spillway.api import Checkpoint, RepairResult

Options = TypeVar("Options")


@dataclasses.dataclass(frozen=True)
class Repair:
    """SRC, --out, --plan, --dry-run, --force and --json: what every ``spillway repair`` command takes."""

    src: str
    out_dir: str
    plan: str | None = None
    dry_run: bool = False
    force: bool = False
    json_out: bool = False

    def run(
        self,
        naming: Naming,
        options: Callable[[], Options],
        write: Callable[[Checkpoint, Options], RepairResult],
        before: Callable[[RepairResult], None] | None = None,
    ) -> int:
        """Check the repair's ``options`` (before any storage is touched), open SRC, ``write``, show the report
        (``before`` it, in text: what the repair wants said first): the exit code."""
        checked = options()
        report = write(naming.open(self.src, self.plan), checked)
        if before is not None and not self.json_out:
            before(report)
        return show_report(report, self.json_out)


FORCE_HELP = "Write even if the source has validate errors (each is listed in the report)."


def repair_options(force_help: str = FORCE_HELP) -> Decorator:
    """SRC, --out, --plan, --dry-run, --force (``force_help``: what it means here) and --json, as one ``Repair``."""
    return bundle(
        "repair",
        Repair,
        src_argument,
        option(
            "--out",
            "out_dir",
            metavar="DIR",
            required=True,
            help="New checkpoint directory or URI (s3://…); must not exist.",
        ),
        plan_option,
        flag("--dry-run", help="Show what would change; write nothing."),
        flag("--force", help=force_help),
        json_flag,
    )


def operators_repair(
    name: str,
    help: str,
    options: Callable[[str, list[str] | None, bool, bool], Options],
    write: Callable[[Checkpoint, Options], RepairResult],
    before: Callable[[RepairResult], None] | None = None,
    force_help: str = FORCE_HELP,
) -> click.Command:
    """The command of a repair of chosen operators (--operator): ``options(out, operators, dry_run, force)`` checked,
    then ``write`` on the opened source."""

    @command(name, help)
    @repair_options(force_help)
    @operators_option
    @naming()
    def run(repair: Repair, operator: list[str] | None, naming: Naming) -> int:
        return repair.run(
            naming, lambda: options(repair.out_dir, operator, repair.dry_run, repair.force), write, before
        )

    return run


def show_report(report: RepairResult, json_out: bool) -> int:
    if json_out:
        emit_json(report.to_json())
        return ExitStatus.OK
    show_binding_doc(report.binding)
    detailed = any(c.detail for c in report.changes)  # an empty column says nothing: leave it out
    print_table(
        ("change", "count", "detail~") if detailed else ("change", "count"),
        [
            (escape(c.what), "unknown" if c.count is None else str(c.count))
            + ((escape(in_options(c.detail)),) if detailed else ())
            for c in report.changes
        ],
        ("would write " if report.dry_run else "wrote ") + escape(report.out),
    )
    show_warnings(report.warnings)
    if not report.dry_run:
        out.print("[green]self-check passed: the output decodes identically and validates clean[/]")
    show_restore(report.restore_lines())
    return ExitStatus.OK


def show_restore(lines: list[str]) -> None:
    """After every writing command: how to restore what it wrote (none after a dry run)."""
    for line in lines:
        out.print(escape(line), soft_wrap=True)
