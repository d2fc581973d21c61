"""List every file a checkpoint depends on.

``spillway files``: every file checkpoints depend on, where it lives, what dropping one would free."""

from __future__ import annotations

from click import argument
from rich.markup import escape
from rich.table import Table

from spillway import api
from spillway.cli.common import ExitStatus, emit_json, guarded, human_bytes, out
from spillway.cli.help import command as spillway_command
from spillway.cli.options import PlanNaming, flag, plan_naming
from spillway.cli.wide import print_wide

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
    def run() -> int:
        report = api.files(list(paths), **naming.plan_keywords())
        if json_out:
            emit_json(report.to_json())
        else:
            show(report)
        return ExitStatus.FINDINGS if report.missing() or report.damaged or report.unsafe() else ExitStatus.OK

    return guarded(run, json_out)


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
            f"format V{cf.loaded.checkpoint.format_version}) {escape(cf.metadata_path)}: "
            f"{len(mine)} files, {human_bytes(sum(f.size or 0 for f in mine))}" + (f" — {where}" if where else ""),
            soft_wrap=True,
        )
    table = Table(show_edge=False, pad_edge=False)
    if several:
        table.add_column("area", no_wrap=True)
    else:
        table.add_column("where", no_wrap=True)
    table.add_column("file", no_wrap=True)
    table.add_column("size", justify="right", no_wrap=True)
    table.add_column("exists", no_wrap=True)
    table.add_column("handles", justify="right", no_wrap=True)
    if several:
        for cf in report.checkpoints:
            table.add_column(cf.chk_name, justify="center", no_wrap=True)
    table.add_column("operators", no_wrap=True)
    table.add_column("state", overflow="fold")
    only = report.checkpoints[0].chk_name
    for f in sorted(
        report.files.values(), key=lambda f: (api.GROUPS.index(f.group(only)) if not several else 0, f.area)
    ):
        flag = " (outside the job directory)" if f.outside_job_dir else ""
        row = [escape(f.area if several else f.group(only)), escape(f.display() + flag)]
        row += [
            "-" if f.size is None else str(f.size),
            "yes" if f.exists else "[bold red]missing[/]",
            str(f.handles),
        ]
        if several:
            row += ["x" if i in f.checkpoints else "" for i in range(len(report.checkpoints))]
        row += [
            escape(", ".join(sorted(labels.get(o, o) for o in f.operators))),
            escape(", ".join(k.replace("_state", "").replace("_", " ") for k in sorted(f.kinds))),
        ]
        table.add_row(*row)
    if report.files:
        print_wide(table)
    else:
        out.print("no files: every handle is inline in _metadata")
    if several:
        shared = report.shared()
        out.print(
            f"shared by more than one checkpoint: {len(shared)} files, {human_bytes(sum(f.size or 0 for f in shared))}"
        )
        for i, cf in enumerate(report.checkpoints):
            gone = report.exclusive(i)
            out.print(
                f"dropping {escape(cf.chk_name)} leaves {len(gone)} files "
                f"({human_bytes(sum(f.size or 0 for f in gone))}) unreferenced"
            )
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
        for r in cf.loaded.resolver.rebases():
            out.print(
                f"[dim]{escape(cf.chk_name)}: rebased {r['paths']} paths: "
                f"{escape(str(r['from']))} -> {escape(str(r['to']))}[/]",
                soft_wrap=True,
            )
