"""Parquet views of an analysis (pyarrow): one row per channel, optionally one row per record."""

from __future__ import annotations

from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq

from spillway.inspect.analyze import Analysis


def write_parquet(a: Analysis, directory: Path, with_records: bool) -> list[Path]:
    directory.mkdir(parents=True, exist_ok=True)
    channels = pa.table(
        {
            "channel": [c.label for c in a.channels],
            "upstream_operator": [c.upstream["operator"] for c in a.channels],
            "upstream_subtask": [c.upstream["subtask"] for c in a.channels],
            "downstream_operator": [c.downstream["operator"] for c in a.channels],
            "downstream_subtask": [c.downstream["subtask"] for c in a.channels],
            "gate": pa.array([c.gate for c in a.channels], pa.int32()),
            "ship_strategy": [c.ship_strategy for c in a.channels],
            "buffers": [len(c.buffers) for c in a.channels],
            "records": pa.array([c.records for c in a.channels], pa.int64()),
            "bytes": [c.bytes for c in a.channels],
            "input_bytes": [c.input_bytes for c in a.channels],
            "output_bytes": [c.output_bytes for c in a.channels],
            "watermarks": [c.watermarks for c in a.channels],
            "last_watermark": pa.array([c.last_watermark for c in a.channels], pa.int64()),
            "junction_bytes": pa.array(
                [c.junction_record["input_bytes"] if c.junction_record else None for c in a.channels], pa.int64()
            ),
            "problem": [c.problem for c in a.channels],
        }
    )
    written = [directory / "channels.parquet"]
    _write(channels, written[0])
    if with_records:
        rows: dict[str, list] = {
            k: [] for k in ("channel", "seq", "tag", "timestamp", "length", "side", "file", "offset", "value")
        }
        for c in a.channels:
            for r in c.record_list:
                rows["channel"].append(c.label)
                rows["seq"].append(r["seq"])
                rows["tag"].append(r["tag"])
                rows["timestamp"].append(r["timestamp"])
                rows["length"].append(r["length"])
                rows["side"].append(r["position"]["side"])
                rows["file"].append(r["position"]["file"])
                rows["offset"].append(r["position"]["offset"])
                rows["value"].append(r["value"])
        table = pa.table(
            {
                **rows,
                "timestamp": pa.array(rows["timestamp"], pa.int64()),
                "value": pa.array(rows["value"], pa.binary()),
            }
        )
        written.append(directory / "records.parquet")
        _write(table, written[1])
    return written


def _write(table: pa.Table, path: Path) -> None:
    # Written under a temporary name and renamed: a crash never leaves a file that looks complete.
    tmp = path.with_name(path.name + ".partial")
    pq.write_table(table, tmp)
    tmp.replace(path)
