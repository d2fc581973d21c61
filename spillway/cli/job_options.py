"""``--job JOB.jar`` (with ``--job-class``, ``--job-arg``, ``--job-flink-version``) wherever ``--plan`` is taken:
the job's own graph, as Flink builds it from the jar, instead of a plan file (``option_values.plan_or_job``)."""

from __future__ import annotations

from typing import Annotated

import typer

JobOpt = Annotated[
    str | None,
    typer.Option(
        "--job",
        metavar="JOB.jar",
        help="The job's jar instead of a plan: its main runs in Flink's plan-only environment (nothing is "
        "executed) and every operator is bound by Flink's own id (see spillway ids).",
    ),
]
JobClassOpt = Annotated[
    str | None, typer.Option("--job-class", metavar="MAIN", help="The job's main class (else the jar manifest's).")
]
JobArgOpt = Annotated[
    list[str] | None,
    typer.Option("--job-arg", metavar="ARG", help="One argument of the job's main (repeatable, in order)."),
]
JobFlinkOpt = Annotated[
    str | None,
    typer.Option(
        "--job-flink-version",
        metavar="X.Y.Z",
        help="The Flink release the job is built for (else read from the jar, else FLINK_HOME's).",
    ),
]


__all__ = ["JobArgOpt", "JobClassOpt", "JobFlinkOpt", "JobOpt"]
