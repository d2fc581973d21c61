"""The restore forecast's tables, shared by ``rescale --dry-run``, ``analyze -p`` and ``preflight``."""

from __future__ import annotations

from typing import Any

from rich.markup import escape

from spillway.cli.common import human_bytes
from spillway.cli.render import print_paragraph, print_table


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
