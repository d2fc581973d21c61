"""``spillway validate``'s body: open -> validate -> render, without typer (the plain fast path, cli/fast.py,
calls ``run`` as the typer command in cli/validate.py does)."""

from __future__ import annotations

from spillway import api
from spillway.cli.common import ExitStatus, emit_json, guarded
from spillway.cli.option_values import plan_or_job, rebase_rules, uid_pairs


def run(
    path: str,
    *,
    plan: str | None = None,
    json_out: bool = False,
    rebase: list[str] | None = None,
    uid: list[str] | None = None,
    uid_map: str | None = None,
    strict: bool = False,
    job: str | None = None,
    job_class: str | None = None,
    job_arg: list[str] | None = None,
    job_flink_version: str | None = None,
    buffer_size: int | None = None,
) -> int:
    """The command with its options' values as given (None/False: not given): its exit code."""

    def body() -> int:
        given = plan_or_job(plan, job, job_class, job_arg, job_flink_version, uid=uid, uid_map=uid_map)
        uids = uid_pairs(plan or job, uid, uid_map)
        cp = api.open(path, plan=given, uids=uids, uid_map=uid_map, rebase=rebase_rules(rebase))
        result = cp.validate(buffer_size=buffer_size)  # progress bars on stderr when it is a terminal (see guarded)
        if json_out:
            emit_json(result.to_json())
        else:
            from spillway.cli.binding import show_binding
            from spillway.cli.validate_show import show  # text for people: rich is loaded only now

            show_binding(cp.binding)
            show(result.report, cp.shown, cp.note, result.rebased)
        return ExitStatus.FINDINGS if result.report.errors or (strict and not result.report.complete) else ExitStatus.OK

    return guarded(body, json_out)


__all__ = ["run"]
