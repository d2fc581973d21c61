"""``spillway dump``: everything in ``_metadata``, for people (table/tree) or machines (--json)."""

from __future__ import annotations

from typing import Annotated

import typer

from spillway.cli import dump_body
from spillway.cli.options import PlanNaming, bundled

HELP = """Decode a checkpoint's _metadata (format V2-V7) and show every operator, subtask and handle.

PATH is a job's checkpoint directory (the newest chk-N is picked; newer ones whose _metadata does not
decode are reported and passed over), a chk-N directory or a _metadata file, local or a URI (s3://…).
Absolute paths Flink wrote that no longer exist are rebased onto PATH automatically.
Before Flink 2.0 a checkpoint stores operator ids only: with --plan (and --uid/--uid-map) the operators
the plan binds exactly are shown with the plan's names (--json: "plan_name"; "name" stays what Flink stored).
Exit code 0, 1 when a chk-N of the job directory is damaged, 2 on usage errors, 3 when the storage
cannot be reached or read.

Examples:

  spillway dump /checkpoints/7f3c.../chk-42

  spillway dump /checkpoints/7f3c... --operator slow --subtask 1

  spillway dump chk-42/_metadata --json | jq '.operators[].operator_id'

  spillway dump chk-42 --plan plan.json --uid-map uids.json --json | jq '.operators[] | {operator_id, plan_name}'
"""


@bundled
def command(
    path: Annotated[str, typer.Argument(help="job checkpoint dir, chk-N dir or _metadata file")],
    json_out: Annotated[
        bool, typer.Option("--json", help="Emit the full decode as JSON (schema spillway.dump/1).")
    ] = False,
    operator: Annotated[str | None, typer.Option("--operator", help="Only this operator (id, uid or name).")] = None,
    subtask: Annotated[int | None, typer.Option("--subtask", help="Only this subtask index.")] = None,
    tree: Annotated[bool, typer.Option("--tree", help="Show every handle as a tree.")] = False,
    naming: PlanNaming = PlanNaming(),
) -> None:
    raise typer.Exit(
        dump_body.run(
            path,
            json_out=json_out,
            operator=operator,
            subtask=subtask,
            tree=tree,
            plan=naming.plan,
            rebase=naming.rebase,
            uid=naming.uid,
            uid_map=naming.uid_map,
            job=naming.job,
            job_class=naming.job_class,
            job_arg=naming.job_arg,
            job_flink_version=naming.job_flink_version,
        )
    )


__all__ = ["HELP", "command"]
