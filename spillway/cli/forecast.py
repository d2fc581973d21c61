"""The restore forecast's options and table, shared by ``rescale --dry-run`` and ``analyze --new-parallelism``."""

from __future__ import annotations

from typing import Annotated, Any

import typer
from rich.markup import escape
from rich.table import Table

from spillway.cli.common import human_bytes, out
from spillway.cli.wide import print_wide
from spillway.rescale.forecast import BufferSettings
from spillway.rescale.options import BUFFERS_PER_CHANNEL, DEFAULT_BUFFER_SIZE, FLOATING_BUFFERS_PER_GATE

SegmentSizeOpt = Annotated[
    int,
    typer.Option(
        "--segment-size", help="Forecast: Flink's taskmanager.memory.segment-size in bytes (network buffer size)."
    ),
]
BuffersPerChannelOpt = Annotated[
    int,
    typer.Option("--buffers-per-channel", help="Forecast: taskmanager.network.memory.buffers-per-channel."),
]
FloatingBuffersOpt = Annotated[
    int,
    typer.Option("--floating-buffers-per-gate", help="Forecast: taskmanager.network.memory.floating-buffers-per-gate."),
]
DEFAULTS = (DEFAULT_BUFFER_SIZE, BUFFERS_PER_CHANNEL, FLOATING_BUFFERS_PER_GATE)


def buffer_settings(segment_size: int, buffers_per_channel: int, floating: int) -> BufferSettings:
    from spillway.cli.common import UsageError

    if segment_size < 64:
        raise UsageError(f"--segment-size {segment_size}: at least 64 bytes")
    if buffers_per_channel < 0 or floating < 0:
        raise UsageError("--buffers-per-channel and --floating-buffers-per-gate must not be negative")
    return BufferSettings(segment_size, buffers_per_channel, floating)


def show_forecast(f: dict[str, Any]) -> None:
    s = f["spillway"]
    t = Table(title="forecast: spillway would write (per new channel-state file)", title_justify="left")
    for col in ("vertex", "subtask", "channels", "records", "bytes", "file"):
        t.add_column(
            col, justify="right" if col in ("subtask", "channels", "records", "bytes") else "left", no_wrap=True
        )
    for x in s["files"]:
        t.add_row(
            escape(x["vertex"]),
            str(x["subtask"]),
            str(x["channels"]),
            str(x["records"]),
            human_bytes(x["bytes"]),
            escape(x["file"]),
        )
    print_wide(t)
    out.print(
        f"{s['records']} records, {human_bytes(s['bytes'])} of framed elements into {len(s['channels'])} new channels"
    )
    fl = f["flink"]
    cfg = fl["settings"]
    t = Table(
        title=(
            "forecast: Flink's own restore-time rescaling (segment "
            f"{human_bytes(cfg['segment_size'])}, {cfg['buffers_per_channel']} per channel, "
            f"{cfg['floating_buffers_per_gate']} floating per gate)"
        ),
        title_justify="left",
    )
    # "through filter": bytes of ambiguous old subtasks, which Flink deserializes and filters record by record;
    # "kept": what it keeps of all it read (bytes and records).
    cols = ("edge", "sub", "old", "virtual ch", "read", "through filter", "kept", "records kept", "buffers need/gate")
    for col in cols:
        t.add_column(col, justify="left" if col in ("edge", "old") else "right", no_wrap=True)
    for e in fl["edges"]:
        for x in e["subtasks"]:
            need = f"{x['recovered_buffers']}/{x['gate_buffers']}"
            t.add_row(
                escape(f"{e['edge']} [{e['downstream_mapper']}]"),
                str(x["subtask"]),
                ",".join(map(str, x["old_subtasks"])) + ("*" if x["ambiguous_old_subtasks"] else ""),
                str(x["virtual_channels"]),
                human_bytes(x["bytes_read"]),
                human_bytes(x["bytes_filtered"]),
                human_bytes(x["bytes_kept"]),
                f"{x['records_kept']}/{x['records_read']}",
                f"[red]{need} OVER[/]" if x["over_budget"] else need,
            )
    print_wide(t)
    out.print(
        f"Flink: {fl['virtual_channels']} virtual channels, reads {human_bytes(fl['bytes_read'])}, of which "
        f"{human_bytes(fl['bytes_filtered'])} through its record filter (* ambiguous old subtasks), keeps "
        f"{human_bytes(fl['bytes_kept'])}; "
        + (
            f"[red]{fl['over_budget']} gate(s) recover more buffers than the gate gets[/] (risk of stalled "
            "recovery / out of network memory: FLINK-22946, FLINK-39519)"
            if fl["over_budget"]
            else "every gate's recovered buffers fit what the gate gets"
        )
    )
