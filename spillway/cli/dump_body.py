"""``spillway dump``'s body: parse -> one API call -> render, without typer (the plain fast path, cli/fast.py,
calls ``run`` as the typer command in cli/dump.py does)."""

from __future__ import annotations

from spillway.api import DumpView, dump_checkpoint
from spillway.cli.common import ExitStatus, UsageError, emit_json, guarded
from spillway.cli.option_values import plan_or_job, rebase_rules, uid_pairs


def run(
    path: str,
    *,
    json_out: bool = False,
    operator: str | None = None,
    subtask: int | None = None,
    tree: bool = False,
    plan: str | None = None,
    rebase: list[str] | None = None,
    uid: list[str] | None = None,
    uid_map: str | None = None,
    job: str | None = None,
    job_class: str | None = None,
    job_arg: list[str] | None = None,
    job_flink_version: str | None = None,
) -> int:
    """The command with its options' values as given (None/False: not given): its exit code."""

    def body() -> int:
        # parse -> one API call -> render (the API reads the plan before any checkpoint)
        given = plan_or_job(plan, job, job_class, job_arg, job_flink_version, uid=uid, uid_map=uid_map)
        uids = uid_pairs(plan or job, uid, uid_map)
        rules = rebase_rules(rebase)
        view = DumpView(operator, subtask)
        result = dump_checkpoint(path, view, plan=given, uids=uids, uid_map=uid_map, rebase=rules)
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

    return guarded(body, json_out)


__all__ = ["run"]
