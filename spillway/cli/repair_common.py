"""What every writing command (rescale, ``spillway repair …``) shares: the repairs' common options and run
(options checked, source opened through the API, one call, the report shown), and the restore instructions after
a write (the work is in ``spillway.api``)."""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from typing import TYPE_CHECKING, NoReturn, TypeVar

import typer
from rich.markup import escape
from rich.table import Table

from spillway.cli.binding import show_binding_doc
from spillway.cli.common import ExitStatus, cli_words, emit_json, guarded, out, show_warnings
from spillway.cli.options import DryRunOpt, ForceOpt, JsonOpt, Naming, OperatorsOpt, OutOpt, PlanOpt, SrcArg, bundled
from spillway.cli.wide import print_wide

if TYPE_CHECKING:
    from spillway.api import Checkpoint, RepairResult

Options = TypeVar("Options")


@dataclasses.dataclass(frozen=True)
class Repair:
    """SRC, --out, --plan, --dry-run, --force and --json: what every ``spillway repair`` command takes."""

    src: SrcArg
    out_dir: OutOpt
    plan: PlanOpt = None
    dry_run: DryRunOpt = False
    force: ForceOpt = False
    json_out: JsonOpt = False

    def run(
        self,
        naming: Naming,
        options: Callable[[], Options],
        write: Callable[[Checkpoint, Options], RepairResult],
        before: Callable[[RepairResult], None] | None = None,
    ) -> NoReturn:
        """Check the repair's ``options`` (before any storage is touched), open SRC, ``write``, show the report
        (``before`` it, in text: what the repair wants said first) and exit with its code."""

        def run() -> int:
            checked = options()
            report = write(naming.open(self.src, self.plan), checked)
            if before is not None and not self.json_out:
                before(report)
            return show_report(report, self.json_out)

        raise typer.Exit(guarded(run, self.json_out, output=self.out_dir))


def operators_repair(
    options: Callable[[str, list[str] | None, bool, bool], Options],
    write: Callable[[Checkpoint, Options], RepairResult],
    before: Callable[[RepairResult], None] | None = None,
    repair_options: type[Repair] = Repair,
) -> Callable[..., None]:
    """The command of a repair of chosen operators (--operator): ``options(out, operators, dry_run, force)`` checked,
    then ``write`` on the opened source; ``repair_options``: the common options, where one says more here."""

    def command(repair: Repair, operator: OperatorsOpt = None, naming: Naming = Naming()) -> None:
        repair.run(naming, lambda: options(repair.out_dir, operator, repair.dry_run, repair.force), write, before)

    command.__annotations__ = {**command.__annotations__, "repair": repair_options}  # what typer is shown
    return bundled(command)


def show_report(report: RepairResult, json_out: bool) -> int:
    if json_out:
        emit_json(report.to_json())
        return ExitStatus.OK
    show_binding_doc(report.binding)
    title = ("would write " if report.dry_run else "wrote ") + escape(report.out)
    table = Table(title=title, title_justify="left")
    detailed = any(c.detail for c in report.changes)  # an empty column says nothing: leave it out
    for col in ("change", "count", "detail") if detailed else ("change", "count"):
        table.add_column(col, no_wrap=col != "detail", overflow="fold" if col == "detail" else "ellipsis")
    for c in report.changes:
        row = [escape(c.what), "unknown" if c.count is None else str(c.count)]
        table.add_row(*row, *([escape(cli_words(c.detail))] if detailed else []))
    print_wide(table)
    show_warnings(report.warnings)
    if not report.dry_run:
        out.print("[green]self-check passed: the output decodes identically and validates clean[/]")
    show_restore(report.restore_lines())
    return ExitStatus.OK


def show_restore(lines: list[str]) -> None:
    """After every writing command: how to restore what it wrote (none after a dry run)."""
    for line in lines:
        out.print(escape(line), soft_wrap=True)
