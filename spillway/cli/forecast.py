"""The restore forecast's options and table, shared by ``rescale --dry-run``, ``analyze -p`` and ``preflight``."""

from __future__ import annotations

import dataclasses
from typing import Any

from rich.markup import escape

from spillway import api
from spillway.api import BUFFERS_PER_CHANNEL, DEFAULT_BUFFER_SIZE, FLOATING_BUFFERS_PER_GATE, UsageError
from spillway.cli.common import human_bytes
from spillway.cli.options import Decorator, bundle, key_specs, option, repeatable
from spillway.cli.render import print_paragraph, print_table

# One buffer-size concept: Flink's network buffer (taskmanager.memory.segment-size), which also bounds the chunks
# rescale writes (its --buffer-size). --segment-size, the forecast's first name for it, stays as a hidden alias.
buffers_per_channel_option = option(
    "--buffers-per-channel",
    type=int,
    metavar="N",
    default=BUFFERS_PER_CHANNEL,
    help="Forecast: taskmanager.network.memory.buffers-per-channel.",
)
floating_buffers_option = option(
    "--floating-buffers-per-gate",
    type=int,
    metavar="N",
    default=FLOATING_BUFFERS_PER_GATE,
    help="Forecast: taskmanager.network.memory.floating-buffers-per-gate.",
)


def buffer_size(given: int | None, alias: int | None) -> int:
    """--buffer-size, or its deprecated alias --segment-size (not both with different values)."""
    if given is not None and alias is not None and given != alias:
        raise UsageError(f"--buffer-size {given} and --segment-size {alias}: one buffer size, give --buffer-size")
    return next((n for n in (given, alias) if n is not None), DEFAULT_BUFFER_SIZE)


@dataclasses.dataclass(frozen=True)
class Forecast:
    """The restore forecast's key extractors and Flink's network buffers (``analyze -p``, ``preflight``)."""

    key: list[str] | None = None
    key_fn: list[str] | None = None
    buffer_size: int | None = None
    buffers_per_channel: int = BUFFERS_PER_CHANNEL
    floating_buffers_per_gate: int = FLOATING_BUFFERS_PER_GATE
    segment_size: int | None = None

    def keys(self) -> tuple[dict[str, str], dict[str, str]]:
        """--key and --key-fn as the API's ``keys`` and ``key_fns``."""
        return key_specs(self.key, self.key_fn)

    def buffers(self) -> api.BufferSettings:
        """The network settings, checked by the API (its errors name the options: ``guarded``)."""
        size = buffer_size(self.buffer_size, self.segment_size)
        return api.buffer_settings(size, self.buffers_per_channel, self.floating_buffers_per_gate)


def forecasting(keyword: str = "forecasting") -> Decorator:
    """--key, --key-fn and Flink's network buffers, as one ``Forecast``."""
    return bundle(
        keyword,
        Forecast,
        repeatable(
            "--key", metavar="VERTEX=EXTRACTOR", help="Forecast: a keyBy vertex's key extractor (as for rescale)."
        ),
        repeatable(
            "--key-fn", metavar="VERTEX=MODULE:FN", help="Forecast: a keyBy vertex's key function (as for rescale)."
        ),
        option(
            "--buffer-size",
            type=int,
            metavar="BYTES",
            help=f"Flink's network buffer size, taskmanager.memory.segment-size (default {DEFAULT_BUFFER_SIZE}).",
        ),
        buffers_per_channel_option,
        floating_buffers_option,
        option("--segment-size", type=int, hidden=True, help="Deprecated: use --buffer-size."),
    )


def show_forecast(f: dict[str, Any]) -> None:
    s = f["spillway"]
    print_table(
        ("vertex", "subtask>", "channels>", "records>", "bytes>", "file"),
        [
            (
                escape(x["vertex"]),
                str(x["subtask"]),
                str(x["channels"]),
                str(x["records"]),
                human_bytes(x["bytes"]),
                escape(x["file"]),
            )
            for x in s["files"]
        ],
        "forecast: spillway would write (per new channel-state file)",
    )
    print_paragraph(
        f"{s['records']} records, {human_bytes(s['bytes'])} of framed elements into {len(s['channels'])} new channels"
    )
    fl = f["flink"]
    cfg = fl["settings"]
    # "through filter": bytes of ambiguous old subtasks, which Flink deserializes and filters record by record;
    # "kept": what it keeps of all it read (bytes and records).
    rows = []
    for e in fl["edges"]:
        for x in e["subtasks"]:
            need = f"{x['recovered_buffers']}/{x['gate_buffers']}"
            rows.append(
                (
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
            )
    print_table(
        (
            "edge",
            "sub>",
            "old",
            "virtual ch>",
            "read>",
            "through filter>",
            "kept>",
            "records kept>",
            "buffers need/gate>",
        ),
        rows,
        f"forecast: Flink's own restore-time rescaling (segment {human_bytes(cfg['segment_size'])}, "
        f"{cfg['buffers_per_channel']} per channel, {cfg['floating_buffers_per_gate']} floating per gate)",
    )
    print_paragraph(
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
