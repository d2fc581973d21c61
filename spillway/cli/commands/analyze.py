"""Show the data in flight, channel by channel.

In-flight data per channel in replay order, finished flags, Flink's verdict."""

from __future__ import annotations

import click
from rich.markup import escape
from rich.table import Table

from spillway import api
from spillway.cli.binding import show_binding
from spillway.cli.common import ExitStatus, UsageError, emit_json, human_bytes
from spillway.cli.forecast import Forecast, forecasting, show_forecast
from spillway.cli.help import command as spillway_command
from spillway.cli.options import Naming, counts, flag, naming, option, path_argument, repeatable
from spillway.cli.render import out, print_wide

HEATMAP_AUTO_MAX = 16  # heat maps are shown without --heatmap when both ends of an edge have at most this many subtasks

HELP = f"""Show what is in flight, channel by channel, in the order Flink replays it on recovery: buffer
and record sequence numbers, bytes, watermarks, the record carried across the input/output junction,
in-flight volume and skew per operator, edge and subtask, and each operator's FLIP-147 finished state.
With --plan, also the verdict Flink's restore-time finished-state checks would give, and per edge a heat
map (upstream subtask x downstream subtask, shaded by in-flight bytes) and the watermarks in flight
(shown when both ends have at most {HEATMAP_AUTO_MAX} subtasks; --heatmap always, --no-heatmap never).

--value-type SPEC says how --decode shows values (what does not fit shows as hex) and, with --parquet DIR
--records, decodes the records into records.parquet too (column decoded; auto and hex leave them raw);
--value-type EDGE=SPEC does so for one edge (UP->DOWN or UP; repeatable; column decoded[EDGE]):

  auto: string, long, int or boolean, whichever fits exactly; hex: raw bytes

  string, long, int, short, byte, boolean, double, float, bytes

  tuple(T,...): a Tuple (TupleSerializer), e.g. tuple(long,string)

  row(T,...): a Row (RowSerializer), e.g. row(long,int,string)

  rowdata(T,...): SQL RowData, e.g. rowdata(int,bigint,string)

  pojo(name:T,...): a POJO (PojoSerializer; fields in any order), e.g.
  pojo(user:string,seq:long,meta:pojo(region:string))

  row(name:T,...), caseclass(T,...): named Row fields, a Scala case class

  array(T), objarray(T), list(T), map(K,V), nullable(T): int[]/String[], Long[]/POJO[], List, Map

  avro(SCHEMA): an Avro record (AvroSerializer), SCHEMA a .avsc file or registry URL, e.g. avro(user.avsc)

  kryo5(NAME:TYPE,...): fields of a class Flink 2.x writes with Kryo (kryo2: 1.x), e.g. kryo5(user:String,ts:long)

  ?: a field of unknown type; decoding stops there (docs/analyze.md)

Examples:

  spillway analyze chk-42 --plan plan.json

  spillway analyze chk-42 --plan plan.json --decode 5 --value-type 'tuple(long,string)'

  spillway analyze chk-42 --plan plan.json --json | jq '.channels[] | {{label, records, bytes}}'

  spillway analyze chk-42 --plan plan.json --parquet out/ --records

  spillway analyze chk-42 --plan plan.json --parquet out/ --records --value-type 'parse->count=tuple(long,long)'

  spillway analyze chk-42 --plan plan.json -p count=4 --key count=tuple:0:long

-p/--parallelism VERTEX=N (repeatable, needs --plan) adds a restore forecast for that parallelism: what
spillway rescale would move per new channel and file, and what Flink's own restore-time rescaling would
do (virtual channels, bytes read and filtered, recovered network buffers against a gate's; see
spillway rescale --help). Re-routed keyBy edges need --key or --key-fn for the downstream vertex.
"""


@spillway_command("analyze", HELP)
@path_argument
@option("--plan", metavar="FILE", help="Flink plan JSON (job-graph or stream-graph).")
@flag("--json", "json_out", help="Emit JSON (schema spillway.analyze/1).")
@option("--decode", type=int, metavar="N", default=0, help="Show the first N records per channel.")
@repeatable(
    "--value-type",
    metavar="SPEC|EDGE=SPEC",
    help="How --decode shows values (auto, hex or a value spec) and --records decodes them; of EDGE; repeatable.",
)
@option("--parquet", metavar="DIR", help="Write channels.parquet (and records.parquet).")
@flag("--records", help="With --parquet: one row per record too (streamed to disk).")
@option(
    "--heatmap/--no-heatmap",
    default=None,
    help=f"Per-edge heat maps (default: when parallelism <= {HEATMAP_AUTO_MAX}).",
)
@naming()
@repeatable("-p", "--parallelism", metavar="VERTEX=N", help="Add a restore forecast at this parallelism; repeatable.")
@repeatable("--new-parallelism", hidden=True, help="Deprecated: use -p/--parallelism.")
@forecasting()
def command(
    path: str,
    plan: str | None,
    json_out: bool,
    decode: int,
    value_type: list[str] | None,
    parquet: str | None,
    records: bool,
    heatmap: bool | None,
    naming: Naming,
    parallelism: list[str] | None,
    new_parallelism: list[str] | None,
    forecasting: Forecast,
) -> int:
    shown, by_edge = value_types(value_type)

    def run() -> int:
        new_p = [*(parallelism or []), *(new_parallelism or [])]
        if records and not parquet:
            raise UsageError("--records needs --parquet DIR")
        keyed = forecasting.key or forecasting.key_fn
        if (new_p or keyed) and not plan:
            raise UsageError("-p/--parallelism, --key and --key-fn need --plan")
        if keyed and not new_p:
            raise UsageError("--key/--key-fn need -p/--parallelism")
        forecast = None
        if new_p:
            keys, fns = forecasting.keys()
            buffers = forecasting.buffers()
            forecast = api.ForecastOptions(counts(new_p, "-p/--parallelism"), keys, fns, buffers)
        options = api.AnalyzeOptions(decode, shown, parquet, records, forecast, by_edge)
        cp = naming.open(path, plan)
        result = cp.analyze(options)
        if json_out:
            emit_json(result.to_json())
        else:
            for p in result.written:
                out.print(f"[dim]wrote {escape(str(p))}[/]", soft_wrap=True)
            show_binding(result.binding)
            show(result.analysis, result.verdict, decode, options, heatmap)
            if result.forecast is not None:
                show_forecast(result.forecast)
        # Channel state that could not be read or framed is damage: say so in the exit code too.
        return ExitStatus.FINDINGS if result.damaged else ExitStatus.OK

    return run()


def value_types(given: list[str] | None) -> tuple[str, dict[str, str]]:
    """``--value-type`` values as the API's ``(value_type, value_types)``, checked: a mistake is a usage error."""
    try:
        default, by_edge = api.value_type_args(given or [])
        api.AnalyzeOptions(value_type=default or "auto", value_types=by_edge)
    except api.ArgumentError as exc:
        where = "" if exc.key is None else f"{exc.key}={exc.value}: "
        raise click.BadParameter(where + exc.detail, param_hint="--value-type") from None
    return default or "auto", by_edge


BAR = "█"


def _bar(value: int, top: int, width: int = 30) -> str:
    n = 0 if top == 0 else round(width * value / top)
    return BAR * n + ("▏" if value and not n else "")


def _shade(frac: float) -> str:
    """Background from dark grey (little in flight) to bright red (the most on this edge)."""
    r = round(60 + 195 * frac)
    g = round(60 - 20 * frac)
    b = round(70 - 40 * frac)
    fg = "black" if frac > 0.6 else "white"
    return f"{fg} on rgb({r},{g},{b})"


def heat_map(e: api.EdgeSummary) -> Table:
    """Upstream subtasks down, downstream subtasks across; each cell the in-flight bytes of that channel."""
    grid = e.grid()
    top = max((c.bytes for c in e.channels), default=0)
    t = Table(
        title=(
            f"in-flight bytes  {escape(e.upstream)} → {escape(e.downstream)}  "
            f"({escape(e.ship_strategy or '?')}{'' if e.gate is None else f', gate {e.gate}'})"
        ),
        caption=f"{e.records} records in {len(e.channels)} channels",
        caption_justify="left",
        title_justify="left",
    )
    t.add_column("up \\ down", justify="right", style="bold", no_wrap=True)
    for d in range(e.downstream_parallelism):
        t.add_column(f"#{d}", justify="right", no_wrap=True)
    t.add_column("Σ", justify="right", style="bold", no_wrap=True)
    for u in range(e.upstream_parallelism):
        cells = []
        for d in range(e.downstream_parallelism):
            c = grid.get((u, d))
            if c is None:
                cells.append("[dim]·[/]")  # no channel between these two subtasks
            elif c.bytes == 0:
                cells.append("[dim]0[/]")
            else:
                cells.append(f"[{_shade(c.bytes / top)}]{human_bytes(c.bytes)}[/]")
        row_total = sum(c.bytes for (uu, _), c in grid.items() if uu == u)
        t.add_row(f"#{u}", *cells, human_bytes(row_total))
    col_totals = [sum(c.bytes for (_, dd), c in grid.items() if dd == d) for d in range(e.downstream_parallelism)]
    t.add_row("Σ", *(human_bytes(v) for v in col_totals), human_bytes(e.bytes), style="bold")
    return t


def watermark_map(e: api.EdgeSummary) -> Table:
    """Watermarks in flight per channel: how many, and the last one's timestamp."""
    grid = e.grid()
    t = Table(title=f"watermarks in flight  {escape(e.upstream)} → {escape(e.downstream)}", title_justify="left")
    t.add_column("up \\ down", justify="right", style="bold", no_wrap=True)
    for d in range(e.downstream_parallelism):
        t.add_column(f"#{d}", justify="right", no_wrap=True)
    for u in range(e.upstream_parallelism):
        cells = []
        for d in range(e.downstream_parallelism):
            c = grid.get((u, d))
            if c is None:
                cells.append("[dim]·[/]")
            elif not c.watermarks:
                cells.append("[dim]0[/]")
            else:
                cells.append(f"{c.watermarks} (last {c.last_watermark})")
        t.add_row(f"#{u}", *cells)
    return t


def show(
    a: api.Analysis,
    verdict: api.Verdict | None,
    decode: int,
    options: api.AnalyzeOptions,
    heatmap: bool | None = None,
) -> None:
    ops = Table(title="operators", title_justify="left")
    for col in ("operator", "operator id", "finished", "in-flight bytes", "records", "per subtask"):
        ops.add_column(col, justify="right" if col in ("in-flight bytes", "records") else "left", no_wrap=True)
    top = max((v for o in a.operators for v in o.per_subtask_bytes.values()), default=0)
    for o in a.operators:
        fin = o.finished_state + (f" {o.finished_subtasks}" if o.finished_subtasks else "")
        skew = "\n".join(f"#{k} {_bar(v, top)} {human_bytes(v)}" for k, v in sorted(o.per_subtask_bytes.items()))
        ops.add_row(
            escape(o.operator.label(a.plan_names)),
            o.operator.operator_id,
            escape(fin),
            human_bytes(o.in_flight_bytes) if o.in_flight_bytes else "-",
            str(o.in_flight_records) if o.in_flight_records else "-",
            skew or "-",
        )
    print_wide(ops)
    if a.channels:
        ch = Table(title="logical channels, replay order: input, then upstream output", title_justify="left")
        cols = ("channel", "edge", "buffers", "records", "bytes", "in / out", "watermarks", "other events")
        for col in (*cols, "junction", "volume"):
            ch.add_column(col, no_wrap=True)
        ctop = max(c.bytes for c in a.channels)
        for c in a.channels:
            ch.add_row(
                escape(c.label),
                escape(c.ship_strategy or "-"),
                str(len(c.buffers)),
                ("unreadable" if c.problem else "not parsed") if c.records is None else str(c.records),
                human_bytes(c.bytes),
                f"{human_bytes(c.input_bytes)} / {human_bytes(c.output_bytes)}",
                f"{c.watermarks} (last {c.last_watermark})" if c.watermarks else "-",
                str(c.other_elements) if c.other_elements else "-",
                f"{c.junction_record['input_bytes']} B" if c.junction_record else "-",
                _bar(c.bytes, ctop, 20),
            )
        print_wide(ch)
    if heatmap is not False:
        for e in api.edges(a):
            small = max(e.upstream_parallelism, e.downstream_parallelism) <= HEATMAP_AUTO_MAX
            if not (heatmap or small):
                continue
            print_wide(heat_map(e))
            if e.watermarks:
                print_wide(watermark_map(e))
            else:
                out.print(f"[dim]no watermarks in flight on {escape(e.upstream)} → {escape(e.downstream)}[/]")
    if decode:
        decoded_as = options.decoded_as()
        for c in a.channels:
            if not c.record_list:
                continue
            value_type = decoded_as.for_edge(c.upstream, c.downstream) or options.value_type
            out.print(f"[bold]{escape(c.label)}[/]")
            for r in c.record_list[:decode]:
                ts = " ts=none" if r["timestamp"] is None else f" ts={r['timestamp']}"
                text, problem = api.render_value(r["value"], value_type)
                why = f" [dim]({escape(problem)})[/]" if problem else ""
                out.print(f"  #{r['seq']} {r['tag']}{ts} {escape(text)}{why}")
    for c in a.channels:
        if c.problem:
            out.print(f"[red]{escape(c.label)}: {escape(c.problem)}[/]")
    for s in a.skipped:
        out.print(f"[dim]{escape(s)}[/]")
    total = sum(c.bytes for c in a.channels)
    recs = sum(c.records or 0 for c in a.channels)
    marks = sum(c.watermarks for c in a.channels)
    others = sum(c.other_elements for c in a.channels)
    out.print(
        f"{len(a.channels)} channels · {human_bytes(total)} in flight · {recs} records · {marks} watermarks · "
        f"{others} other stream events"
    )
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
