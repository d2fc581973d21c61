"""``spillway analyze``: in-flight data per channel in replay order, finished flags, Flink's verdict."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Any

import typer
from rich.markup import escape
from rich.table import Table

from spillway.cli.common import UsageError, emit_json, guarded, human_bytes, out
from spillway.cli.dump import RebaseOpt
from spillway.formats.values import READERS, decode_value
from spillway.inspect.analyze import Analysis, ChannelAnalysis, analyze
from spillway.inspect.finished import Verdict, check
from spillway.inspect.load import load_checkpoint
from spillway.inspect.topology import load_plan

HELP = """Show what is in flight, channel by channel, in the order Flink replays it on recovery: buffer
and record sequence numbers, bytes, watermarks, the record carried across the input/output junction,
in-flight volume and skew per operator and subtask, and each operator's FLIP-147 finished state.
With --plan, also the verdict Flink's restore-time finished-state checks would give.

Examples:

  spillway analyze chk-42 --plan plan.json

  spillway analyze chk-42 --plan plan.json --decode 5 --value-type string

  spillway analyze chk-42 --plan plan.json --json | jq '.channels[] | {label, records, bytes}'

  spillway analyze chk-42 --plan plan.json --parquet out/ --records
"""


def command(
    path: Annotated[str, typer.Argument(help="job checkpoint dir, chk-N dir or _metadata file")],
    plan: Annotated[str | None, typer.Option("--plan", help="Flink plan JSON (job-graph or stream-graph).")] = None,
    json_out: Annotated[bool, typer.Option("--json", help="Emit JSON (schema spillway.analyze/1).")] = False,
    decode: Annotated[int, typer.Option("--decode", metavar="N", help="Show the first N records per channel.")] = 0,
    value_type: Annotated[
        str, typer.Option("--value-type", help="Record value serializer: auto, string, long, int, boolean, hex.")
    ] = "auto",
    parquet: Annotated[
        str | None, typer.Option("--parquet", metavar="DIR", help="Write channels.parquet (and records.parquet).")
    ] = None,
    records: Annotated[bool, typer.Option("--records", help="With --parquet: one row per record too.")] = False,
    rebase: RebaseOpt = None,
) -> None:
    if value_type not in ("auto", "hex", *READERS):
        raise typer.BadParameter(f"unknown value type {value_type!r}", param_hint="--value-type")

    def run() -> None:
        if records and not parquet:
            raise UsageError("--records needs --parquet DIR")
        topology = load_plan(plan) if plan else None
        loaded = load_checkpoint(path, rebase)
        keep = 10**12 if records else decode
        result = analyze(loaded, topology, keep_records=keep)
        verdict = check(topology, loaded.checkpoint) if topology else None
        if parquet:
            from spillway.inspect.parquet_out import write_parquet

            written = write_parquet(result, Path(parquet), records)
            if not json_out:
                for p in written:
                    out.print(f"[dim]wrote {p}[/]")
        if json_out:
            emit_json(to_json(result, verdict, decode, value_type))
        else:
            show(result, verdict, decode, value_type)

    guarded(run)


def render_value(raw: bytes | None, value_type: str) -> str:
    if raw is None:
        return "-"
    if value_type == "hex":
        return raw.hex()
    kinds = list(READERS) if value_type == "auto" else [value_type]
    for kind in kinds:
        try:
            return repr(decode_value(kind, raw))
        except ValueError:
            continue
    return raw.hex()


def _record_json(r: dict[str, Any], value_type: str) -> dict[str, Any]:
    return {**r, "value": render_value(r["value"], value_type)}


def channel_json(c: ChannelAnalysis, decode: int, value_type: str) -> dict[str, Any]:
    return {
        "label": c.label,
        "upstream": c.upstream,
        "downstream": c.downstream,
        "gate": c.gate,
        "ship_strategy": c.ship_strategy,
        "buffers": len(c.buffers),
        "records": c.records,
        "bytes": c.bytes,
        "input_bytes": c.input_bytes,
        "output_bytes": c.output_bytes,
        "elements": c.elements,
        "watermarks": c.watermarks,
        "last_watermark": c.last_watermark,
        "junction_record": c.junction_record,
        "first_record": vars(c.first_record) if c.first_record else None,
        "last_record": vars(c.last_record) if c.last_record else None,
        "problem": c.problem,
        "buffer_sequence": [vars(b) for b in c.buffers],
        "first_records": [_record_json(r, value_type) for r in c.record_list[:decode]],
    }


def to_json(a: Analysis, verdict: Verdict | None, decode: int, value_type: str) -> dict[str, Any]:
    return {
        "schema": "spillway.analyze/1",
        "format_version": a.checkpoint.format_version,
        "checkpoint_id": a.checkpoint.checkpoint_id,
        "operators": [
            {
                "operator_id": o.operator.operator_id,
                "name": o.operator.name,
                "uid": o.operator.uid,
                "parallelism": o.operator.parallelism,
                "finished_state": o.finished_state,
                "finished_subtasks": o.finished_subtasks,
                "in_flight_bytes": o.in_flight_bytes,
                "in_flight_records": o.in_flight_records,
                "in_flight_bytes_per_subtask": {str(k): v for k, v in sorted(o.per_subtask_bytes.items())},
            }
            for o in a.operators
        ],
        "channels": [channel_json(c, decode, value_type) for c in a.channels],
        "restore_verdict": None
        if verdict is None
        else {
            "restorable": verdict.restorable,
            "certain": verdict.certain,
            "vertices": verdict.classification,
            "violations": [vars(v) for v in verdict.violations],
            "notes": verdict.notes,
        },
        "skipped": a.skipped,
    }


BAR = "█"


def _bar(value: int, top: int, width: int = 30) -> str:
    n = 0 if top == 0 else round(width * value / top)
    return BAR * n + ("▏" if value and not n else "")


def show(a: Analysis, verdict: Verdict | None, decode: int, value_type: str) -> None:
    ops = Table(title="operators", title_justify="left")
    for col in ("operator", "operator id", "finished", "in-flight bytes", "records", "per subtask"):
        ops.add_column(col, justify="right" if col in ("in-flight bytes", "records") else "left")
    top = max((v for o in a.operators for v in o.per_subtask_bytes.values()), default=0)
    for o in a.operators:
        fin = o.finished_state + (f" {o.finished_subtasks}" if o.finished_subtasks else "")
        skew = "\n".join(f"#{k} {_bar(v, top)} {human_bytes(v)}" for k, v in sorted(o.per_subtask_bytes.items()))
        ops.add_row(
            escape(o.operator.label()),
            o.operator.operator_id,
            fin,
            human_bytes(o.in_flight_bytes) if o.in_flight_bytes else "-",
            str(o.in_flight_records) if o.in_flight_records else "-",
            skew or "-",
        )
    out.print(ops)
    if a.channels:
        ch = Table(
            title="logical channels (replay order: input state, then upstream output state)", title_justify="left"
        )
        for col in ("channel", "edge", "buffers", "records", "bytes", "in / out", "watermarks", "junction", "volume"):
            ch.add_column(col)
        ctop = max(c.bytes for c in a.channels)
        for c in a.channels:
            ch.add_row(
                escape(c.label),
                c.ship_strategy or "-",
                str(len(c.buffers)),
                "?" if c.records is None else str(c.records),
                human_bytes(c.bytes),
                f"{human_bytes(c.input_bytes)} / {human_bytes(c.output_bytes)}",
                str(c.watermarks) if c.watermarks else "-",
                f"{c.junction_record['input_bytes']} B" if c.junction_record else "-",
                _bar(c.bytes, ctop, 20),
            )
        out.print(ch)
    if decode:
        for c in a.channels:
            if not c.record_list:
                continue
            out.print(f"[bold]{escape(c.label)}[/]")
            for r in c.record_list[:decode]:
                ts = "" if r["timestamp"] is None else f" ts={r['timestamp']}"
                out.print(f"  #{r['seq']} {r['tag']}{ts} {escape(render_value(r['value'], value_type))}")
    for c in a.channels:
        if c.problem:
            out.print(f"[red]{escape(c.label)}: {escape(c.problem)}[/]")
    for s in a.skipped:
        out.print(f"[dim]{escape(s)}[/]")
    total = sum(c.bytes for c in a.channels)
    recs = sum(c.records or 0 for c in a.channels)
    out.print(f"{len(a.channels)} channels · {human_bytes(total)} in flight · {recs} records")
    if verdict is not None:
        if verdict.restorable and not verdict.certain:
            out.print("[bold yellow]restore check: no refusal found, but the verdict is uncertain (see below)[/]")
        elif verdict.restorable:
            out.print("[bold green]restore check: Flink's finished-state checks would accept this checkpoint[/]")
        else:
            out.print("[bold red]restore check: Flink would refuse this checkpoint[/]")
            for v in verdict.violations:
                out.print(f"  [red]{v.rule}[/]: {escape(v.message)}")
        for n in verdict.notes:
            out.print(f"  [dim]{escape(n)}[/]")
