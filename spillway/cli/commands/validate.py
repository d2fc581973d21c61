"""``spillway validate``: prove a checkpoint sound, or locate every fault."""

from __future__ import annotations

from typing import Annotated

import typer

from spillway.cli import validate_body
from spillway.cli.job_options import JobArgOpt, JobClassOpt, JobFlinkOpt, JobOpt
from spillway.cli.options import RebaseOpt, UidMapOpt, UidOpt

HELP = """Check _metadata, every referenced file, every channel-state file and the record framing of
every logical channel. Each fault is reported with rule, file, byte offset, operator, subtask and
channel. Exit code 0 when no error is found, 1 when any error is found (or, with --strict, when
anything was left unchecked), 2 on usage errors. "sound" means no error and nothing unchecked;
otherwise the summary names what was not checked (--json: "complete": false and "unchecked").

Without --plan, output-side channel state cannot be joined to its input side and is only checked
chunk by chunk (listed as unchecked); pass the job's plan (REST /jobs/:id/plan or
env.getExecutionPlan()) for the rest.

Examples:

  spillway validate /checkpoints/7f3c.../chk-42

  spillway validate chk-42 --plan plan.json --json | jq '.findings[] | select(.severity=="error")'
"""


def command(
    path: Annotated[str, typer.Argument(help="job checkpoint dir, chk-N dir or _metadata file")],
    plan: Annotated[str | None, typer.Option("--plan", help="Flink plan JSON (job-graph or stream-graph).")] = None,
    json_out: Annotated[
        bool, typer.Option("--json", help="Emit the report as JSON (schema spillway.validate/1).")
    ] = False,
    rebase: RebaseOpt = None,
    uid: UidOpt = None,
    uid_map: UidMapOpt = None,
    strict: Annotated[
        bool,
        typer.Option("--strict", help="Exit 1 also when no error was found but something was left unchecked."),
    ] = False,
    job: JobOpt = None,
    job_class: JobClassOpt = None,
    job_arg: JobArgOpt = None,
    job_flink_version: JobFlinkOpt = None,
    buffer_size: Annotated[
        int | None,
        typer.Option(
            "--buffer-size",
            help="Flink's network buffer size (taskmanager.memory.segment-size) in bytes, default 32768: what "
            "Flink would do with a damaged record depends on it.",
        ),
    ] = None,
) -> None:
    raise typer.Exit(
        validate_body.run(
            path,
            plan=plan,
            json_out=json_out,
            rebase=rebase,
            uid=uid,
            uid_map=uid_map,
            strict=strict,
            job=job,
            job_class=job_class,
            job_arg=job_arg,
            job_flink_version=job_flink_version,
            buffer_size=buffer_size,
        )
    )


__all__ = ["HELP", "command"]
