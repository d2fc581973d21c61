"""Write a copy at a new parallelism, in-flight data moved."""

from __future__ import annotations

from typing import TYPE_CHECKING

from click import argument
from rich.markup import escape

import spillway.api as api
from spillway.cli.binding import show_binding_doc
from spillway.cli.common import ExitStatus, UsageError, emit_json, in_options
from spillway.cli.forecast import buffers_per_channel_option, floating_buffers_option, show_forecast
from spillway.cli.help import command as spillway_command
from spillway.cli.options import Naming, counts, flag, key_specs, naming, option, repeatable
from spillway.cli.render import err, out, print_paragraph, print_table
from spillway.cli.repair_common import show_restore

if TYPE_CHECKING:
    from spillway.api import RescaleResult

HELP = """Rescale a checkpoint offline: write a NEW checkpoint in which the chosen vertices have a new
parallelism, with every in-flight record already on the channel Flink would route it to. Flink then
restores it at the new parallelism as-is (nothing to filter during recovery). The source is never
modified; the output is self-checked (every record exactly once, source order kept, hash-edge records
on the subtask owning their key group, validate clean) before it is renamed into place.

Keyed state moves by key-group range, operator state as Flink redistributes it; coordinator and master
state stay. Edges: HASH needs a key extractor for the downstream vertex (--key or --key-fn);
REBALANCE/SHUFFLE are balanced by bytes; GLOBAL goes to subtask 0; FORWARD needs equal parallelism.
In-flight watermarks are kept only where one old channel alone feeds the new one (else dropped and
counted); latency markers are dropped. The data movement runs on Spark (--master, default local[*]);
--master inprocess runs it in this process (small checkpoints, no JVM).

--dry-run forecasts the restore: the records and bytes each new channel and channel-state file would
get (the old channels are read and routed, nothing is written), and what Flink's own restore-time
rescaling would do instead: per new subtask the virtual channels, bytes read and filtered, and the
network buffers recovered against what a gate gets (--buffer-size, --buffers-per-channel,
--floating-buffers-per-gate; Flink's defaults).

A source that validate finds damaged is refused. --force rescales it anyway by leaving out every old
logical channel on a moved edge that touches damaged channel state (both halves, all its in-flight
records), and lists each one with why and how many bytes its handles state; the restored job never
sees those records. Damage anywhere else (keyed/operator state, channels that are not moved, the
plan) is still refused.

EXTRACTOR (docs/analyze.md, "Key extractors"): a value spec, then ":" and the key field (index, name or
path), then "|" and functions that derive the key from that field, no Python needed:

  long | string | tuple:0:long | tuple(long,string):1
  row(long,int,string):2 | row(id:long,name:string):name
  caseclass(string,long):_1
  pojo(userId:long,meta:pojo(region:string,zone:int)):meta.region
  'string|before(":")' | 'pojo(user:string,seq:long):user|before(":")|lower'
  avro(Schema.avsc):user.id (Avro records; the schema may be a registry URL)
  kryo5(user:String,v:long):user (a class Flink 2.x writes with Kryo; kryo2 for Flink 1.x)

Key functions: before/after/beforelast/afterlast('S'), part('S',N), substring(B[,E]), lower, upper, trim,
str, mod(N), with Java's String and % semantics. POJO fields may be listed in any order.

--key-fn module:function covers every other key: the function gets the record's serialized value (bytes) and
returns the key as a str, or the key's Java hashCode as an int; for CUSTOM edges it gets (bytes, parallelism)
and returns the target subtask. A complete example, prefix_key.py in the current directory, for the bundled
job whose "slow" operator is keyed by the part of a String before ':' (the same key as
--key 'slow=string|before(":")'):

  # prefix_key.py
  from spillway.formats.values import read_string

  def key(value: bytes) -> str:
      text, _ = read_string(value, 0)  # (the String, next offset)
      return text.split(":", 1)[0]

  spillway rescale chk-42 --plan plan.json -p slow=3 --key-fn slow=prefix_key:key --out chk-42-p3

The readers of spillway.formats.values take (bytes, offset) and return (value, next offset): read_string,
read_long, read_boolean; decode_value(SPEC, bytes) decodes a whole value by a value spec.

Examples:

  spillway rescale chk-42 --plan plan.json --parallelism count=4 --key count=tuple:0:long --out chk-42-p4

  spillway rescale chk-42 --plan plan.json --parallelism parse=1 --parallelism count=1 \\
      --key count=tuple:0:long --out chk-42-p1 --master spark://host:7077 --json
"""


def lost_records_text(result: RescaleResult) -> str:
    """What ``--force`` leaves out, in records (counted where validate framed a channel whole) and bytes."""
    counted, uncounted, total = result.lost_records, result.lost_uncounted_bytes, result.lost_bytes
    if not uncounted:
        return f"{counted} records, {total} bytes"
    if uncounted == total:
        return f"records unknown, {total} bytes"
    return f"{counted} records + unknown records in {uncounted} bytes, {total} bytes in all"


def show_lost(result: RescaleResult) -> None:
    lost = result.lost_channels
    rows = [
        (
            escape(x.channel),
            escape(x.edge),
            "unknown" if x.records is None else str(x.records),
            str(x.stated_bytes),
            escape("; ".join(x.reasons)),
        )
        for x in lost
    ]
    title = (
        f"[bold red]{'would leave' if result.dry_run else 'left'} out {len(lost)} damaged logical channels "
        f"(--force): {lost_records_text(result)} of in-flight data the restored job will never see[/]"
    )
    print_table(("channel", "edge", "records", "bytes (as stated)", "why~"), rows, title)


def show_result(result: RescaleResult) -> None:
    """A rescale's result, for people."""
    show_binding_doc(result.binding)
    rows = [(escape(v.vertex), str(v.old_parallelism), str(v.new_parallelism)) for v in result.vertices]
    title = ("would write " if result.dry_run else "wrote ") + escape(result.out or "(no --out)")
    print_table(("vertex", "old p", "new p"), rows, title)
    rows = [(escape(x.edge), escape(x.rule), escape(x.key or x.key_fn or "-")) for x in result.edges]
    print_table(("edge", "rule", "key"), rows, "edges")
    moved = result.moved
    if moved is not None:
        print_paragraph(
            f"{moved.records} records from {result.source_channels} old channels into "
            f"{moved.channel_files} channel files · watermarks kept {moved.markers_kept} · dropped "
            + (", ".join(f"{n} {k}" for k, n in moved.dropped.items()) or "nothing")
        )
    if result.lost_channels:
        show_lost(result)
    if result.forecast is not None:
        show_forecast(result.forecast)
    for n in result.notes:
        print_paragraph(f"[dim]note:[/] {escape(in_options(n))}")
    if result.plan_file:
        out.print(f"plan of the rescaled job (for validate --plan): {escape(result.plan_file)}", soft_wrap=True)
    show_restore(result.restore_lines())


@spillway_command("rescale", HELP)
@argument("src", help="job checkpoint dir, chk-N dir or _metadata file")
@option("--plan", metavar="FILE", required=True, help="Flink plan JSON of the job (job graph or stream graph).")
@repeatable(
    "--parallelism",
    "-p",
    metavar="VERTEX=N",
    required=True,
    help="VERTEX=N (vertex id, operator uid or name); repeatable.",
)
@option("--out", "out_dir", metavar="DIR", help="New checkpoint directory (must not exist); not needed with --dry-run.")
@repeatable(
    "--key",
    metavar="VERTEX=EXTRACTOR",
    help="VERTEX=EXTRACTOR for its keyBy input: a value spec, :FIELD, |FUNCTIONS "
    "(e.g. 'pojo(user:string,seq:long):user|before(\":\")'; see above).",
)
@repeatable("--key-fn", metavar="VERTEX=module:function", help="VERTEX=module:function for its keyBy/custom input.")
@option(
    "--master",
    metavar="MASTER",
    default="local[*]",
    help="Spark master: local[*], local[N], spark://host:port, yarn; or inprocess.",
)
@option(
    "--buffer-size",
    type=int,
    metavar="BYTES",
    default=api.DEFAULT_BUFFER_SIZE,
    help="Flink's network buffer size (taskmanager.memory.segment-size) in bytes: the largest chunk of the "
    "new channel files, and the buffers the forecast reads into.",
)
@flag("--dry-run", help="Plan and forecast (read the channels, route, count); write nothing.")
@flag("--json", "json_out", help=f"Report as JSON (schema {api.RESCALE_SCHEMA}).")
@naming()
@flag(
    "--force",
    help="Rescale a damaged source by leaving out its damaged logical channels on moved edges "
    "(each listed, with the bytes lost).",
)
@buffers_per_channel_option
@floating_buffers_option
def command(
    src: str,
    plan: str,
    parallelism: list[str],
    out_dir: str | None,
    key: list[str] | None,
    key_fn: list[str] | None,
    master: str,
    buffer_size: int,
    dry_run: bool,
    json_out: bool,
    naming: Naming,
    force: bool,
    buffers_per_channel: int,
    floating_buffers_per_gate: int,
) -> int:
    def announce(checkpoint_dir: str) -> None:
        err.print(f"rescaling {escape(checkpoint_dir)} with master {escape(master)} …")

    if out_dir is None and not dry_run:
        raise UsageError("--out DIR is required (the new checkpoint's directory), unless --dry-run")
    new_p = counts(parallelism, "--parallelism")
    keys, fns = key_specs(key, key_fn)
    options = api.RescaleOptions(
        new_p,
        out_dir,
        keys,
        fns,
        buffer_size=buffer_size,
        master=master,
        dry_run=dry_run,
        force=force,
        buffers_per_channel=buffers_per_channel,
        floating_buffers_per_gate=floating_buffers_per_gate,
        on_start=None if json_out else announce,
    )
    result = naming.open(src, plan).rescale(options)
    if json_out:
        emit_json(result.to_json())
    else:
        show_result(result)
    return ExitStatus.OK
