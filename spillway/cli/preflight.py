"""``spillway preflight``: will Flink restore this checkpoint into this job, and what will recovery need."""

from __future__ import annotations

from typing import Annotated, Any

import typer
from rich.markup import escape
from rich.table import Table

from spillway import api
from spillway.cli.common import EXIT_FINDINGS, EXIT_OK, emit_json, guarded, human_bytes, out
from spillway.cli.forecast import Forecast, show_forecast
from spillway.cli.options import Naming, NewJob, bundled
from spillway.cli.wide import print_wide

# 0 and 1 as everywhere; 2 usage; 3 is kept for "storage unreachable" (issue 21). Unknown is neither a yes a
# deploy script may act on nor Flink's refusal: its own code.
EXIT_UNKNOWN = 4

HELP = """Will Flink restore CHECKPOINT into the job of --plan? Answers offline with Flink's own restore-time checks
(docs/format/restore-checks.md): state of operators the new job lacks, max parallelism, channel state on exchanges
the new job chains or makes pointwise while rescaling, FLIP-147 finished-state rules, known restore bugs. Each
reason carries Flink's own message where Flink has one. Where the plan cannot tell which checkpoint operator a plan
operator is, the answer is "unknown" with what would make it certain (usually --uid NAME=UID).

--plan is the new job's plan: either flavour (REST /jobs/<id>/plan, JsonPlanGenerator, or
env.getExecutionPlan()); -p VERTEX=N changes a vertex's parallelism in it. A plan does not show max parallelism:
give --max-parallelism N (job-wide) or VERTEX=N if the new job sets one. If only parallelism changed, the restore
forecast (bytes and records each new subtask replays, Flink's virtual channels and buffers) is added; keyBy edges
with records in flight need --key/--key-fn as for rescale.

--plan http://HOST:PORT/jobs/JOB_ID fetches a running job's plan from its JobManager's REST API; CHECKPOINT given
the same way is that job's latest completed checkpoint.

Exit code 0 restorable, 1 not restorable (Flink refuses), 4 unknown, 2 usage errors, 3 JobManager unreachable.

Examples:

  spillway preflight chk-42 --plan new-job-plan.json --uid 'Source: seq=src'

  spillway preflight chk-42 --plan plan.json -p count=4 --max-parallelism 128 --flink-version 2.3.0 --json
"""

VERDICT_STYLE = {"refused": "bold red", "unknown": "yellow", "warning": "yellow", "ok": "green", "note": "dim"}


@bundled
def command(
    checkpoint: Annotated[
        str,
        typer.Argument(
            help="job checkpoint dir, chk-N dir or _metadata file, or http://HOST:PORT/jobs/JOB_ID for that job's "
            "latest completed checkpoint"
        ),
    ],
    plan: Annotated[
        str | None,
        typer.Option(
            "--plan", help="The new job's plan JSON (either flavour), or a running job's: http://HOST:PORT/jobs/JOB_ID."
        ),
    ] = None,
    new_job: NewJob = NewJob(),
    forecasting: Forecast = Forecast(),
    json_out: Annotated[bool, typer.Option("--json", help="Emit JSON (schema spillway.preflight/1).")] = False,
    naming: Naming = Naming(),
) -> None:
    def run() -> int:
        settings = new_job.options(forecasting.keys(), forecasting.buffers())
        new_plan = naming.plan_or_job(plan)
        if new_plan is None:
            raise api.UsageError("give the new job: --plan PLAN.json or --job JOB.jar")
        found = api.check_restore(checkpoint, new_plan, settings, **naming.keywords(plan))
        if json_out:
            emit_json(found.to_json())
        else:
            show(found.result, found.forecast, found.forecast_note)
        if found.restorable is None:
            return EXIT_UNKNOWN
        return EXIT_OK if found.restorable else EXIT_FINDINGS

    raise typer.Exit(guarded(run, json_out))


def show(result: api.PreflightAnswer, forecast: dict[str, Any] | None, forecast_note: str | None) -> None:
    answer = {True: "[bold green]yes[/]", False: "[bold red]no[/]", None: "[yellow]unknown[/]"}[result.restorable]
    out.print(f"restorable: {answer}")
    # one reason per paragraph, not a table: the messages and Flink's words are long and must not be cut
    for r in result.reasons:
        style = VERDICT_STYLE.get(r.verdict, "")
        verdict = f"[{style}]{r.verdict:8}[/]" if style else f"{r.verdict:8}"
        issue = f" [{r.flink_issue}]" if r.flink_issue else ""
        out.print(f"{verdict} {escape(r.check)}: {escape(r.message + issue)}", soft_wrap=True)
        if r.flink_message:
            out.print("         Flink: " + escape(r.flink_message.replace("\n", " ")), soft_wrap=True)
    v = Table(title="the new job's vertices and the checkpoint state they get", title_justify="left")
    for col in ("vertex", "parallelism", "checkpoint", "input channel state", "output channel state"):
        v.add_column(col, no_wrap=col != "vertex", justify="left" if col == "vertex" else "right")
    for row in result.vertices:
        v.add_row(
            escape(row["vertex"]),
            str(row["parallelism"]),
            "-" if row["checkpoint_parallelism"] is None else str(row["checkpoint_parallelism"]),
            human_bytes(row["input_channel_bytes"]),
            human_bytes(row["output_channel_bytes"]),
        )
    print_wide(v)
    if forecast is not None:
        show_forecast(forecast)
    if forecast_note:
        out.print(escape(forecast_note), soft_wrap=True)
