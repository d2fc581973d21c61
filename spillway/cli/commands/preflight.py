"""Will Flink restore a checkpoint into a job?"""

from __future__ import annotations

from typing import Any

from click import argument
from rich.markup import escape

from spillway import api
from spillway.cli.common import ExitStatus, emit_json, human_bytes, in_options
from spillway.cli.forecast import Forecast, forecasting, show_forecast
from spillway.cli.help import command as spillway_command
from spillway.cli.options import Naming, NewJob, flag, naming, new_job, option
from spillway.cli.render import out, print_paragraph, print_table

# Unknown is neither a yes a deploy script may act on nor Flink's refusal: it has its own code (4).

HELP = """Will Flink restore CHECKPOINT into the job of --plan, and keep every record and every state? Answers
offline with Flink's own restore-time checks (docs/format/restore-checks.md): state of operators the new job lacks,
max parallelism, channel state on exchanges the new job chains or makes pointwise while rescaling, keyed state fed
without keyBy, FLIP-147 finished-state rules, known restore bugs. Each reason says what Flink does on that release
(refuses / fails after start / restores and drops) and carries Flink's own message where Flink has one. What the
restore drops without a word (state left behind by --allow-non-restored-state, records in flight) is listed as the
loss, and the answer is then "restores with loss", never a plain yes. Operators are mapped by the new job's ids
(the job-graph plan's vertex ids, --uid, the job's jar); a mapping by name alone assumes the uids are unchanged, and
the answer is "unknown" with what would make it certain (usually --uid NAME=UID).

--plan is the new job's plan: either flavour (REST /jobs/<id>/plan, JsonPlanGenerator, or
env.getExecutionPlan()); -p VERTEX=N changes a vertex's parallelism in it. A plan does not show max parallelism:
give --max-parallelism N (job-wide) or VERTEX=N if the new job sets one, --max-parallelism none if it sets none
(without either the answer is unknown: Flink refuses a value other than the checkpoint's). If only parallelism
changed, the restore
forecast (bytes and records each new subtask replays, Flink's virtual channels and buffers) is added; keyBy edges
with records in flight need --key/--key-fn as for rescale.

--plan http://HOST:PORT/jobs/JOB_ID fetches a running job's plan from its JobManager's REST API; CHECKPOINT given
the same way is that job's latest completed checkpoint.

Exit code 0 restorable without loss, 1 not restorable (Flink refuses or the job fails) or restores with loss
(JSON "verdict" tells which), 4 unknown, 2 usage errors, 3 JobManager unreachable.

Examples:

  spillway preflight chk-42 --plan new-job-plan.json --uid 'Source: seq=src' --max-parallelism none

  spillway preflight chk-42 --plan plan.json -p count=4 --max-parallelism 128 --flink-version 2.3.0 --json
"""

VERDICT_STYLE = {
    "refused": "bold red",
    "fails": "bold red",
    "loss": "bold red",
    "unknown": "yellow",
    "warning": "yellow",
    "ok": "green",
    "note": "dim",
}
# "restores but loses data" is findings (1), as "no" is: never the 0 a deploy script may act on
EXIT_CODES = {
    api.PreflightVerdict.YES: ExitStatus.OK,
    api.PreflightVerdict.NO: ExitStatus.FINDINGS,
    api.PreflightVerdict.RESTORES_WITH_LOSS: ExitStatus.FINDINGS,
    api.PreflightVerdict.UNKNOWN: ExitStatus.UNKNOWN,
}
ANSWER = {
    "yes": "[bold green]yes[/]",
    "no": "[bold red]no[/]",
    "restores-with-loss": "[bold red]restores with loss[/] (Flink restores and drops data without a word: see below)",
    "unknown": "[yellow]unknown[/]",
}


@spillway_command("preflight", HELP)
@argument(
    "checkpoint",
    help="job checkpoint dir, chk-N dir or _metadata file, or http://HOST:PORT/jobs/JOB_ID for that job's "
    "latest completed checkpoint",
)
@option(
    "--plan",
    metavar="FILE",
    help="The new job's plan JSON (either flavour), or a running job's: http://HOST:PORT/jobs/JOB_ID.",
)
@new_job()
@forecasting()
@flag("--json", "json_out", help="Emit JSON (schema spillway.preflight/2).")
@naming()
def command(
    checkpoint: str, plan: str | None, new_job: NewJob, forecasting: Forecast, json_out: bool, naming: Naming
) -> int:
    settings = new_job.options(forecasting.keys(), forecasting.buffers())
    new_plan = naming.plan_or_job(plan)
    if new_plan is None:
        raise api.UsageError("give the new job: --plan PLAN.json or --job JOB.jar")
    found = api.check_restore(checkpoint, new_plan, settings, **naming.keywords(plan))
    if json_out:
        emit_json(found.to_json())
    else:
        show(found.result, found.forecast, found.forecast_note)
    return EXIT_CODES[found.result.answer]


_REASON = 9  # a reason's later lines start under its check's name, past the verdict


def show(result: api.PreflightAnswer, forecast: dict[str, Any] | None, forecast_note: str | None) -> None:
    out.print(f"restorable: {ANSWER[result.answer.value]}")
    # one reason per paragraph, not a table: the messages and Flink's words are long and must not be cut
    for r in result.reasons:
        style = VERDICT_STYLE.get(r.verdict, "")
        verdict = f"[{style}]{r.verdict.value:8}[/]" if style else f"{r.verdict.value:8}"
        issue = f" [{r.flink_issue}]" if r.flink_issue else ""
        does = f" (Flink {r.flink_does.value})" if r.flink_does is not None and r.verdict != "ok" else ""
        reason = in_options(r.message) + issue + does  # an argument the library names, as the option that sets it
        print_paragraph(f"{verdict} {escape(r.check)}: {escape(reason)}", indent=_REASON)
        if r.flink_message:
            print_paragraph(" " * _REASON + "Flink: " + escape(r.flink_message.replace("\n", " ")), indent=_REASON)
    if result.loss:
        show_loss(result.loss)
    rows = [
        (
            escape(row["vertex"]),
            str(row["parallelism"]),
            "-" if row["checkpoint_parallelism"] is None else str(row["checkpoint_parallelism"]),
            human_bytes(row["input_channel_bytes"]),
            human_bytes(row["output_channel_bytes"]),
        )
        for row in result.vertices
    ]
    columns = ("vertex~", "parallelism>", "checkpoint>", "input channel state>", "output channel state>")
    print_table(columns, rows, "the new job's vertices and the checkpoint state they get")
    if forecast is not None:
        show_forecast(forecast)
    if forecast_note:
        print_paragraph(escape(in_options(forecast_note)))


def show_loss(loss: api.PreflightLoss) -> None:
    rows = [(escape(s.label), "state: " + ", ".join(s.kinds), human_bytes(s.bytes), "-") for s in loss.state]
    rows += [
        (
            escape(f.label),
            f"{f.side} channel state in flight: {escape(f.why)}",
            human_bytes(f.bytes),
            "?" if f.records is None else str(f.records),
        )
        for f in loss.in_flight
    ]
    print_table(
        ("operator~", "what~", "bytes>", "records>"), rows, "loss: what Flink drops on this restore without a word"
    )
