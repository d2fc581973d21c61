"""List every file a checkpoint depends on."""

from __future__ import annotations

import os
import posixpath
from typing import TYPE_CHECKING

from click import argument
from rich.markup import escape

from spillway import api
from spillway.cli.common import ExitStatus, emit_json, human_bytes
from spillway.cli.help import command as spillway_command
from spillway.cli.options import PlanNaming, flag, plan_naming
from spillway.cli.render import out, print_paragraph, print_rebased, print_wide, table

if TYPE_CHECKING:
    from rich.table import Table

HELP = """List every file a checkpoint depends on, grouped by where it lives: its own chk-N directory, the
job's shared/ (incremental RocksDB SST files) and taskowned/ directories, another checkpoint's
directory, or elsewhere (another job, bucket or location); with its size on disk and whether it exists.

Given several checkpoints of a job (several PATHs, or a job directory holding several chk-N, which
stands for all of them), also which files they share and which files become unreferenced when one of
them is dropped — what deleting a retained incremental checkpoint really frees. Before Flink 2.0 a
checkpoint stores operator ids only: with --plan (and --uid/--uid-map) the operators the plan binds
exactly are named by the plan (--json: "checkpoints[].operators[].plan_name"). A chk-N whose _metadata
does not decode is reported as damaged and left out; the others are still answered.
A file outside the job directory (another job's, or one a handle path reaches by ".." or a symlink) is
"external", flagged "outside the job directory" (--json: "outside_job_dir"), and never counted as freed by
dropping a checkpoint; a path with ".." or a NUL byte is reported as unsafe (a NUL path is never looked up).
Exit code 0, 1 when a referenced file is missing, a path is unsafe or a checkpoint is damaged, 2 on usage errors, 3 when
the storage cannot be reached or read.

Examples:

  spillway files /checkpoints/7f3c.../chk-42

  spillway files /checkpoints/7f3c...            # every retained chk-N of the job

  spillway files chk-41 chk-42 --json | jq '.checkpoints[] | {directory, unreferenced_if_dropped}'
"""


@spillway_command("files", HELP)
@argument(
    "paths", nargs=-1, required=True,
    help="job checkpoint dirs (every chk-N in it), chk-N dirs or _metadata files; local or URIs",
)  # fmt: skip
@flag("--json", "json_out", help="Emit JSON (schema spillway.files/1).")
@plan_naming()
def command(paths: tuple[str, ...], json_out: bool, naming: PlanNaming) -> int:
    report = api.files(list(paths), **naming.plan_keywords())
    if json_out:
        emit_json(report.to_json())
    else:
        show(report)
    return ExitStatus.FINDINGS if report.missing() or report.damaged or report.unsafe() else ExitStatus.OK


def _labels(report: api.FilesReport) -> dict[str, str]:
    labels: dict[str, str] = {}
    for cf in report.checkpoints:
        for op in cf.loaded.checkpoint.operators:
            if op.operator_id not in labels or labels[op.operator_id] == op.operator_id:
                labels[op.operator_id] = op.label(cf.plan_names)
    return labels


def show(report: api.FilesReport) -> None:
    labels = _labels(report)
    several = len(report.checkpoints) > 1
    for i, cf in enumerate(report.checkpoints):
        if cf.loaded.location.note and not several:
            out.print(f"[dim]{escape(cf.loaded.location.note)}[/]")
        mine = report.of(i)
        counts = {g: 0 for g in api.GROUPS}
        for f in mine:
            counts[f.group(cf.chk_name)] += 1
        where = ", ".join(f"{g} {n}" for g, n in counts.items() if n)
        out.print(
            f"[bold]{escape(cf.chk_name)}[/] (checkpoint {cf.loaded.checkpoint.checkpoint_id}, "
            f"format V{cf.loaded.checkpoint.format_version}): "
            f"{len(mine)} files, {human_bytes(sum(f.size or 0 for f in mine))}" + (f" — {where}" if where else ""),
            soft_wrap=True,
        )
        out.print(f"    {escape(cf.metadata_path)}", soft_wrap=True)
    if report.files:
        print_wide(_table(report, labels), narrow=_table(report, labels, narrow=True))
    else:
        out.print("no files: every handle is inline in _metadata")
    if several:
        _what_dropping_frees(report)
    _warnings(report)


def _table(report: api.FilesReport, labels: dict[str, str], narrow: bool = False) -> Table:
    """Every file a row. ``narrow``: for a terminal the full table does not fit: no handle count, the
    operators and their state in one column that wraps (and the file's name starts with its area)."""
    several = len(report.checkpoints) > 1
    names = ["file", "size>"] if narrow else ["area" if several else "where", "file", "size>", "exists", "handles>"]
    names += ["needed by~"] * several + (["operators: state~"] if narrow else ["operators", "state~"])
    only = report.checkpoints[0].chk_name
    rows = []
    for f in sorted(
        report.files.values(), key=lambda f: (api.GROUPS.index(f.group(only)) if not several else 0, f.area)
    ):
        size = "-" if f.size is None else human_bytes(f.size)
        exists = "yes" if f.exists else "[bold red]missing[/]"
        file = escape(f.display() + (" (outside the job directory)" if f.outside_job_dir else ""))
        row = [file, size if f.exists else exists]
        if not narrow:
            row = [escape(f.area if several else f.group(only)), file, size, exists, str(f.handles)]
        if several:  # checkpoint names, wrapped between them: one a line when narrow, the rest for the prose
            row.append(" ".join(escape(report.checkpoints[i].chk_name) for i in sorted(f.checkpoints)))
        operators = ", ".join(sorted(labels.get(o, o) for o in f.operators))
        state = ", ".join(k.replace("_state", "").replace("_", " ") for k in sorted(f.kinds))
        row += [escape(f"{operators}: {state}")] if narrow else [escape(operators), escape(state)]
        rows.append(row)
    made = table(names, rows, show_edge=False, pad_edge=False)
    if several and narrow:
        made.columns[2].max_width = max(len("needed"), *(len(cf.chk_name) for cf in report.checkpoints))
    return made


def _what_dropping_frees(report: api.FilesReport) -> None:
    """For each checkpoint: the files no other checkpoint given needs (path in the job directory and
    size), which dropping it leaves unreferenced; the files it shares stay for the others."""
    shared = report.shared()
    out.print(
        f"shared by more than one checkpoint: {len(shared)} files, {human_bytes(sum(f.size or 0 for f in shared))}"
    )
    job_dir = posixpath.dirname(posixpath.dirname(report.checkpoints[0].metadata_path.replace(os.sep, "/")))
    print_paragraph(f"paths below are in the job directory {escape(job_dir)}")
    for i, cf in enumerate(report.checkpoints):
        gone = report.exclusive(i)
        out.print(
            f"dropping [bold]{escape(cf.chk_name)}[/] leaves {len(gone)} files "
            f"({human_bytes(sum(f.size or 0 for f in gone))}) unreferenced" + (":" if gone else "")
        )
        width = max((len(human_bytes(f.size or 0)) for f in gone), default=0)
        for f in gone:
            out.print(f"    {human_bytes(f.size or 0):>{width}}  {escape(f.display())}", soft_wrap=True)
        kept = [f for f in report.of(i) if len(f.checkpoints) > 1 and f.freed_with_checkpoint]
        if kept:
            others = sorted({j for f in kept for j in f.checkpoints} - {i})
            out.print(
                f"    kept: {len(kept)} files ({human_bytes(sum(f.size or 0 for f in kept))}) also needed by "
                + ", ".join(escape(report.checkpoints[j].chk_name) for j in others)
            )


def _warnings(report: api.FilesReport) -> None:
    outside = [f for f in report.files.values() if not f.freed_with_checkpoint]
    if outside:
        out.print(
            f"{len(outside)} files outside the job directory or named by an unsafe path: "
            "never listed as freed by dropping a checkpoint, never to be deleted with one"
        )
    for f in report.unsafe():
        problem = f.path_problem
        assert problem is not None
        out.print(f"[bold red]{problem.rule}[/]: {escape(f.shown_name)}: {escape(problem.reason)}", soft_wrap=True)
    missing = report.missing()
    if missing:
        out.print(f"[bold red]{len(missing)} referenced files are missing[/]")
    for cf in report.checkpoints:
        print_rebased(cf.loaded.resolver.rebases(), f"{escape(cf.chk_name)}: ")
