"""Decode _metadata: every operator, subtask and handle."""

from __future__ import annotations

from spillway.api import DumpView, dump_checkpoint
from spillway.cli.common import ExitStatus, UsageError, emit_json
from spillway.cli.help import command as spillway_command
from spillway.cli.options import PlanNaming, flag, option, path_argument, plan_naming

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


@spillway_command("dump", HELP)
@path_argument
@flag("--json", "json_out", help="Emit the full decode as JSON (schema spillway.dump/1).")
@option("--operator", metavar="OPERATOR", help="Only this operator (id, uid or name).")
@option("--subtask", type=int, metavar="N", help="Only this subtask index.")
@flag("--tree", help="Show every handle as a tree.")
@plan_naming()
def command(
    path: str, json_out: bool, operator: str | None, subtask: int | None, tree: bool, naming: PlanNaming
) -> int:
    # parse -> one API call -> render (the API reads the plan before any checkpoint)
    view = DumpView(operator, subtask)
    result = dump_checkpoint(path, view, **naming.plan_keywords())
    code = ExitStatus.FINDINGS if result.damaged else ExitStatus.OK
    if subtask is not None:
        top = result.top_parallelism
        if subtask < 0 or subtask >= top:
            raise UsageError(
                f"--subtask {subtask}: "
                + (f"the parallelism is {top} (subtasks 0..{top - 1})" if top else "no operator has subtasks")
            )
    if json_out:
        emit_json(result.json_head(), ("operators", result.operator_docs()))
        return code
    from spillway.cli.binding import show_binding
    from spillway.cli.dump_show import show  # text for people: rich is loaded only now

    result.survey()
    show_binding(result.binding)
    show(result, tree or operator is not None or subtask is not None)
    return code
