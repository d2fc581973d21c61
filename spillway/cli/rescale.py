"""``spillway rescale``: redistribute channel state (and keyed/operator state) to a new parallelism."""

from __future__ import annotations

from typing import Annotated, Any

import typer
from rich.markup import escape
from rich.table import Table

from spillway.cli.binding import show_binding_doc
from spillway.cli.common import EXIT_OK, UsageError, emit_json, err, guarded, out
from spillway.cli.forecast import (
    DEFAULTS,
    BuffersPerChannelOpt,
    FloatingBuffersOpt,
    SegmentSizeOpt,
    buffer_settings,
    show_forecast,
)
from spillway.cli.options import RebaseOpt, UidMapOpt, UidOpt, plan_with_uids
from spillway.cli.repair_common import show_restore
from spillway.cli.wide import print_wide
from spillway.rescale.plan import DEFAULT_BUFFER_SIZE

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
network buffers recovered against what a gate gets (--segment-size, --buffers-per-channel,
--floating-buffers-per-gate; Flink's defaults).

A source that validate finds damaged is refused. --force rescales it anyway by leaving out every old
logical channel on a moved edge that touches damaged channel state (both halves, all its in-flight
records), and lists each one with why and how many bytes its handles state; the restored job never
sees those records. Damage anywhere else (keyed/operator state, channels that are not moved, the
plan) is still refused.

EXTRACTOR: long | string | int | boolean | tuple:0:long | tuple(long,string):1 | row(long,int,string):2
(see docs/analyze.md). --key-fn module:function gets the record's serialized value (bytes) and returns
the key's Java hashCode (int) or a str key; for CUSTOM edges it gets (bytes, parallelism) and returns
the target subtask.

Examples:

  spillway rescale chk-42 --plan plan.json --parallelism count=4 --key count=tuple:0:long --out chk-42-p4

  spillway rescale chk-42 --plan plan.json --parallelism parse=1 --parallelism count=1 \\
      --key count=tuple:0:long --out chk-42-p1 --master spark://host:7077 --json
"""


def _pairs(values: list[str] | None, what: str) -> dict[str, str]:
    result: dict[str, str] = {}
    for v in values or []:
        name, sep, value = v.rpartition("=")
        if not sep or not name or not value:
            raise UsageError(f"{what} {v!r}: expected VERTEX=VALUE")
        if name in result and result[name] != value:
            raise UsageError(f"{what} given twice for {name!r} ({result[name]!r} and {value!r}): which one?")
        result[name] = value
    return result


def _counts(values: list[str] | None, option: str) -> dict[str, int]:
    """VERTEX=N pairs of a parallelism option; N must be a positive integer (a usage error otherwise)."""
    counts: dict[str, int] = {}
    for name, n in _pairs(values, option).items():
        if not n.isdigit() or int(n) < 1:
            raise UsageError(f"{option} {name}={n}: N must be a positive integer")
        counts[name] = int(n)
    return counts


def _key_specs(key: list[str] | None, key_fn: list[str] | None) -> tuple[dict[str, str], dict[str, str]]:
    """--key and --key-fn, checked before any work: a bad extractor or both for one vertex is a usage error."""
    from spillway.formats.values import ValueSpecError, parse_key_extractor

    keys, fns = _pairs(key, "--key"), _pairs(key_fn, "--key-fn")
    both = sorted(set(keys) & set(fns))
    if both:
        raise UsageError(f"--key and --key-fn both given for {', '.join(both)}: give one")
    for name, spec in keys.items():
        try:
            parse_key_extractor(spec)
        except ValueSpecError as exc:
            raise UsageError(f"--key {name}={spec}: {exc}") from None
    for name, spec in fns.items():
        if ":" not in spec:
            raise UsageError(f"--key-fn {name}={spec}: expected module:function")
    if fns:
        _import_from_cwd()
    return keys, fns


def lost_records_text(doc: dict[str, Any]) -> str:
    """What ``--force`` leaves out, in records (counted where validate framed a channel whole) and bytes."""
    counted, uncounted, total = doc["lost_records"], doc["lost_uncounted_bytes"], doc["lost_bytes"]
    if not uncounted:
        return f"{counted} records, {total} bytes"
    if uncounted == total:
        return f"records unknown, {total} bytes"
    return f"{counted} records + unknown records in {uncounted} bytes, {total} bytes in all"


def _import_from_cwd() -> None:
    """--key-fn modules are found in the current directory, as ``python -m`` finds them: a console script's
    path starts with its own bin/ instead. Also for Spark's Python workers (they inherit PYTHONPATH)."""
    import os
    import sys

    cwd = os.getcwd()
    if cwd not in sys.path:
        sys.path.insert(0, cwd)
    paths = os.environ.get("PYTHONPATH", "").split(os.pathsep)
    if cwd not in paths:
        os.environ["PYTHONPATH"] = os.pathsep.join([cwd, *filter(None, paths)])


def show_lost(doc: dict[str, Any], dry_run: bool) -> None:
    lost = doc["lost_channels"]
    t = Table(
        title=f"[bold red]{'would leave' if dry_run else 'left'} out {len(lost)} damaged logical channels "
        f"(--force): {lost_records_text(doc)} of in-flight data the restored job will never see[/]",
        title_justify="left",
    )
    for col in ("channel", "edge", "records", "bytes (as stated)", "why"):
        t.add_column(col, no_wrap=col != "why")
    for x in lost:
        t.add_row(
            escape(x["channel"]),
            escape(x["edge"]),
            "unknown" if x["records"] is None else str(x["records"]),
            str(x["stated_bytes"]),
            escape("; ".join(x["reasons"])),
        )
    print_wide(t)


def command(
    src: Annotated[str, typer.Argument(help="job checkpoint dir, chk-N dir or _metadata file")],
    plan: Annotated[str, typer.Option("--plan", help="Flink plan JSON of the job (job graph or stream graph).")],
    parallelism: Annotated[
        list[str], typer.Option("--parallelism", "-p", help="VERTEX=N (vertex id, operator uid or name); repeatable.")
    ],
    out_dir: Annotated[
        str | None, typer.Option("--out", help="New checkpoint directory (must not exist); not needed with --dry-run.")
    ] = None,
    key: Annotated[list[str] | None, typer.Option("--key", help="VERTEX=EXTRACTOR for its keyBy input.")] = None,
    key_fn: Annotated[
        list[str] | None, typer.Option("--key-fn", help="VERTEX=module:function for its keyBy/custom input.")
    ] = None,
    master: Annotated[
        str, typer.Option("--master", help="Spark master: local[*], local[N], spark://host:port, yarn; or inprocess.")
    ] = "local[*]",
    buffer_size: Annotated[
        int, typer.Option("--buffer-size", help="Max chunk (network buffer) size of the new channel files.")
    ] = DEFAULT_BUFFER_SIZE,
    dry_run: Annotated[
        bool, typer.Option("--dry-run", help="Plan and forecast (read the channels, route, count); write nothing.")
    ] = False,
    json_out: Annotated[bool, typer.Option("--json", help="Report as JSON (schema spillway.rescale/1).")] = False,
    rebase: RebaseOpt = None,
    uid: UidOpt = None,
    uid_map: UidMapOpt = None,
    force: Annotated[
        bool,
        typer.Option(
            "--force",
            help="Rescale a damaged source by leaving out its damaged logical channels on moved edges "
            "(each listed, with the bytes lost).",
        ),
    ] = False,
    segment_size: SegmentSizeOpt = DEFAULTS[0],
    buffers_per_channel: BuffersPerChannelOpt = DEFAULTS[1],
    floating_buffers_per_gate: FloatingBuffersOpt = DEFAULTS[2],
) -> None:
    def run() -> int:
        from spillway.rescale.rescale import rescale_checkpoint

        def announce(checkpoint_dir: str) -> None:
            err.print(f"rescaling {escape(checkpoint_dir)} with master {escape(master)} …")

        if out_dir is None and not dry_run:
            raise UsageError("--out DIR is required (the new checkpoint's directory), unless --dry-run")
        counts = _counts(parallelism, "--parallelism")
        keys, fns = _key_specs(key, key_fn)
        buffers = buffer_settings(segment_size, buffers_per_channel, floating_buffers_per_gate)
        topology = plan_with_uids(plan, uid, uid_map)
        assert topology is not None
        report = rescale_checkpoint(
            src,
            topology,
            counts,
            out_dir,
            keys=keys,
            key_fns=fns,
            buffer_size=buffer_size,
            master=None if master == "inprocess" else master,
            rebase=rebase,
            dry_run=dry_run,
            on_start=None if json_out else announce,
            buffers=buffers,
            force=force,
        )
        doc = report.to_doc()
        doc["dry_run"] = dry_run
        if json_out:
            emit_json(doc)
            return EXIT_OK
        show_binding_doc(doc.get("binding"))
        t = Table(
            title=("would write " if dry_run else "wrote ") + escape(out_dir or "(no --out)"), title_justify="left"
        )
        for col in ("vertex", "old p", "new p"):
            t.add_column(col, no_wrap=True)
        for v in doc["vertices"]:
            t.add_row(escape(v["vertex"]), str(v["old_parallelism"]), str(v["new_parallelism"]))
        print_wide(t)
        e = Table(title="edges", title_justify="left")
        for col in ("edge", "rule", "key"):
            e.add_column(col, no_wrap=True)
        for x in doc["edges"]:
            e.add_row(escape(x["edge"]), escape(x["rule"]), escape(x["key"] or x["key_fn"] or "-"))
        print_wide(e)
        if not dry_run:
            out.print(
                f"{doc['records_moved']} records from {doc['source_channels']} old channels into "
                f"{doc['channel_files']} channel files · watermarks kept {doc['markers_kept']} · dropped "
                + (", ".join(f"{n} {k}" for k, n in doc["dropped"].items()) or "nothing")
            )
        if doc["lost_channels"]:
            show_lost(doc, dry_run)
        if doc["forecast"] is not None:
            show_forecast(doc["forecast"])
        for n in doc["notes"]:
            out.print(f"[dim]note:[/] {escape(n)}")
        if doc["plan_file"]:
            out.print(f"plan of the rescaled job (for validate --plan): {escape(doc['plan_file'])}", soft_wrap=True)
        show_restore(doc["restore"])
        return EXIT_OK

    raise typer.Exit(guarded(run, json_out))
