"""Export in-flight records to Parquet for a job to replay."""

from __future__ import annotations

from rich.markup import escape

from spillway import api
from spillway.cli.common import ExitStatus, UsageError, emit_json
from spillway.cli.help import command as spillway_command
from spillway.cli.options import (
    Naming,
    NewJob,
    flag,
    jsonl_flag,
    naming,
    new_job,
    operators_option,
    option,
    path_argument,
    plan_option,
    salvage_options,
    value_type_option,
)
from spillway.cli.render import out, print_table

HELP = """Export the in-flight records (channel state) of the chosen operators — or of all — into Parquet,
one file per edge, so a job can replay what a rewrite or a restore would drop (docs/salvage.md). Each row is
one record with where it was (operator, subtask, side, gate/channel, sequence number in replay order, file,
offset, element tag), the checkpoint id and value_raw: the value's bytes exactly as the job's serializer wrote
them. --value-type also decodes the value (tuples, rows, POJOs, case classes, Avro records and Kryo objects as
Arrow structs, arrays and lists as lists, maps as maps); a record that does not fit fails the whole export,
which then writes nothing. Watermarks and other stream events are counted, not exported. The checkpoint is
only read; --out must be a new or empty directory.

--value-type SPEC applies to every edge, --value-type EDGE=SPEC to one edge (repeatable; EDGE is
UPSTREAM->DOWNSTREAM or UPSTREAM, operators as analyze names them); SPEC as for analyze --value-type
(tuple(long,string), row(...), rowdata(...), a scalar).

--operator X exports the channels into and out of X: exactly what
spillway repair strip-channel-state --operator X drops (which takes --salvage DIR to export them first).
--new-plan NEW_PLAN exports exactly what a restore into that job drops, as spillway preflight finds it
(--allow-non-restored-state for a removed operator, -p, --max-parallelism and --flink-version as there): the
halves of channels held by operators the new job lacks, output state of an operator no longer ending its chain.

Examples:

  spillway salvage chk-42 --plan plan.json --out salvaged/

  spillway salvage chk-42 --plan plan.json --out salvaged/ --operator count \\
      --value-type 'parse->count=tuple(long,long)' --value-type count=long

  spillway salvage chk-42 --plan plan.json --out salvaged/ --jsonl --json | jq .records

  spillway salvage chk-42 --plan plan.json --out salvaged/ --new-plan new-plan.json --allow-non-restored-state
"""


@spillway_command("salvage", HELP)
@path_argument
@option("--out", "out_dir", metavar="DIR", required=True, help="New or empty directory for the export.")
@plan_option
@operators_option
@value_type_option
@jsonl_flag
@flag("--dry-run", help="Decode and count the records; write nothing.")
@flag("--json", "json_out", help="Emit JSON (schema spillway.salvage/1).")
@option(
    "--new-plan",
    metavar="NEW_PLAN",
    help="Export exactly what a restore into this job drops (spillway preflight's loss); with the options "
    "describing the new job as for preflight.",
)
@new_job()
@naming()
def command(
    path: str,
    out_dir: str,
    plan: str | None,
    operator: list[str] | None,
    value_type: list[str] | None,
    jsonl: bool,
    dry_run: bool,
    json_out: bool,
    new_plan: str | None,
    new_job: NewJob,
    naming: Naming,
) -> int:
    options = salvage_options(out_dir, operator, value_type, jsonl, dry_run)
    settings = new_job.for_plan(new_plan)
    if new_plan is not None and operator:
        raise UsageError("--operator and --new-plan: the restore's loss chooses the records, give one of them")
    cp = naming.open(path, plan)
    restore = None
    if new_plan is not None:  # --uid/--uid-map name the uids of either plan, as for report
        restore = api.check_restore(cp, new_plan, settings, **naming.keywords(new_plan))
    report = cp.salvage(options, dropped_by=restore)
    if json_out:
        doc = report.to_json()
        if restore is not None:
            doc["restore"] = {"plan": new_plan, "answer": restore.result.answer.value}
        emit_json(doc)
    else:
        if restore is not None:
            out.print(f"a restore into {escape(new_plan or '')}: {escape(restore.result.answer.value)}")
        show(report, dry_run)
    return ExitStatus.OK


def show(report: api.SalvageReport, dry_run: bool) -> None:
    rows = [
        (
            escape(f"{e.upstream} -> {e.downstream}" + ("" if e.gate is None else f" (gate {e.gate})")),
            str(len(e.channels)),
            str(e.records),
            escape(e.value_type or "raw bytes"),
            "-" if dry_run else escape(e.file),
        )
        for e in report.edges
    ]
    title = ("would export" if dry_run else "exported") + f" from checkpoint {report.checkpoint_id}"
    print_table(("edge", "channels", "records", "value", "file~"), rows, title)
    for p in report.written:
        out.print(f"[dim]wrote {escape(str(p))}[/]", soft_wrap=True)
    others = sum(c.other_elements for c in report.channels)
    noun = "record" if report.records == 1 else "records"
    out.print(
        f"{report.records} {noun} ({report.bytes} value bytes) in {len(report.channels)} channels"
        + (f"; {others} watermarks and other stream events not exported" if others else "")
    )


__all__ = ["command"]
