"""Check a checkpoint and every file it references."""

from __future__ import annotations

from spillway.cli.common import ExitStatus, emit_json
from spillway.cli.help import command as spillway_command
from spillway.cli.options import (
    Naming,
    bundle,
    flag,
    job_options,
    option,
    path_argument,
    rebase_option,
    uid_map_option,
    uid_option,
)

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


@spillway_command("validate", HELP)
@path_argument
@option("--plan", metavar="FILE", help="Flink plan JSON (job-graph or stream-graph).")
@flag("--json", "json_out", help="Emit the report as JSON (schema spillway.validate/1).")
@bundle(
    "naming",
    Naming,
    rebase_option,
    uid_option,
    uid_map_option,
    flag("--strict", help="Exit 1 also when no error was found but something was left unchecked."),
    *job_options,
)
@option(
    "--buffer-size",
    type=int,
    metavar="BYTES",
    help="Flink's network buffer size (taskmanager.memory.segment-size) in bytes, default 32768: what "
    "Flink would do with a damaged record depends on it.",
)
def command(path: str, plan: str | None, json_out: bool, naming: Naming, strict: bool, buffer_size: int | None) -> int:
    cp = naming.open(path, plan)
    result = cp.validate(buffer_size=buffer_size)  # progress bars on stderr when it is a terminal (see guarded)
    if json_out:
        emit_json(result.to_json())
    else:
        from spillway.cli.binding import show_binding
        from spillway.cli.validate_show import show  # text for people: rich is loaded only now

        show_binding(cp.binding)
        show(result.report, cp.shown, cp.note, result.rebased)
    return ExitStatus.FINDINGS if result.report.errors or (strict and not result.report.complete) else ExitStatus.OK
