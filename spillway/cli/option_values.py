"""Option values checked and put the way the API takes them, without typer: the plain fast path
(cli/fast.py) uses these as the typer commands do."""

from __future__ import annotations

from typing import TYPE_CHECKING

from spillway.api import UsageError

if TYPE_CHECKING:
    from spillway.api import JobJar


def uid_pairs(plan: str | None, uid: list[str] | None, uid_map: str | None) -> dict[str, str]:
    """--uid NAME=UID pairs (checked: --uid and --uid-map need --plan)."""
    if plan is None and (uid or uid_map):
        raise UsageError("--uid and --uid-map need --plan")
    uids: dict[str, str] = {}
    for item in uid or []:
        name, sep, value = item.rpartition("=")
        if not sep or not name or not value:
            raise UsageError(f"--uid {item!r}: expected NAME=UID")
        uids[name] = value
    return uids


def rebase_rules(values: list[str] | None) -> list[str] | None:
    """--rebase OLD=NEW rules, their syntax checked here (the API names its own argument otherwise)."""
    for text in values or []:
        old, sep, new = text.partition("=")
        if not sep or not old or not new:
            raise UsageError(f"--rebase expects OLD_PREFIX=NEW_PREFIX, got {text!r}")
    return values


def plan_or_job(
    plan: str | None,
    job: str | None,
    job_class: str | None = None,
    job_arg: list[str] | None = None,
    flink_version: str | None = None,
    *,
    option: str = "--plan",
    uid: list[str] | None = None,
    uid_map: str | None = None,
) -> str | JobJar | None:
    """What the API takes as ``plan``: the plan file, or the job's jar (--job) with how to run its main."""
    if job is None:
        given = [name for name, v in (("--job-class", job_class), ("--job-arg", job_arg)) if v]
        if flink_version:
            given.append("--job-flink-version")
        if given:
            raise UsageError(f"{' and '.join(given)} need --job JOB.jar")
        return plan
    if plan is not None:
        raise UsageError(f"{option} and --job both given: the job's jar is its plan; give one")
    if uid or uid_map:
        raise UsageError("--uid and --uid-map are not taken with --job: the job's jar shows every uid itself")
    from spillway.api import JobJar

    return JobJar(job, job_class, tuple(job_arg or ()), flink_version)


__all__ = ["plan_or_job", "rebase_rules", "uid_pairs"]
