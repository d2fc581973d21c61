"""Parquet views of an analysis (pyarrow): ``channels.parquet`` (one row per logical channel) and, optionally,
``records.parquet`` (one row per record), streamed while analyze reads the channels: memory stays bounded by
one batch however many records are in flight.

Both go through the guarded door (``spillway.storage.new_files``): an existing file is never replaced (refused
before the analysis, exit 2), each file is written under a staged name and linked into place, and a failure
leaves neither file nor any directory the run made."""

from __future__ import annotations

from pathlib import Path
from typing import Any, BinaryIO

import pyarrow as pa
import pyarrow.parquet as pq

from spillway.formats.record_reader import Record
from spillway.formats.stream_elements import element_name
from spillway.inspect.analyze import Analysis, ChannelAnalysis, Position, analyze, record_timestamp, value_bytes
from spillway.inspect.topology import JobBinding, Topology
from spillway.storage.load import LoadedCheckpoint
from spillway.storage.new_files import new_files, refuse_existing

RECORD_SCHEMA = pa.schema(
    [
        ("channel", pa.string()),
        ("seq", pa.int64()),
        ("tag", pa.string()),
        ("timestamp", pa.int64()),
        ("length", pa.int64()),
        ("side", pa.string()),
        ("file", pa.string()),
        ("offset", pa.int64()),
        ("value", pa.binary()),
    ]
)
BATCH_ROWS = 65_536
BATCH_BYTES = 32 << 20  # value bytes buffered before a row group is written


class RecordRows:
    """A record sink for ``analyze(on_record=...)`` writing ``records.parquet`` into ``sink`` (a new file) in
    row groups of at most ``batch_rows`` rows / ``batch_bytes`` value bytes."""

    def __init__(self, sink: BinaryIO, batch_rows: int = BATCH_ROWS, batch_bytes: int = BATCH_BYTES) -> None:
        self.batch_rows = batch_rows
        self.batch_bytes = batch_bytes
        self.rows = 0
        self._cols: dict[str, list[Any]] = {name: [] for name in RECORD_SCHEMA.names}
        self._buffered_bytes = 0
        self._writer = pq.ParquetWriter(sink, RECORD_SCHEMA)

    def __call__(self, channel: ChannelAnalysis, rec: Record, pos: Position) -> None:
        c = self._cols
        tag = rec.tag
        c["channel"].append(channel.label)
        c["seq"].append(rec.seq)
        c["tag"].append(element_name(tag))
        c["timestamp"].append(record_timestamp(rec))
        c["length"].append(rec.length)
        c["side"].append(pos.side)
        c["file"].append(pos.file)
        c["offset"].append(pos.offset)
        value = value_bytes(rec)
        c["value"].append(value)
        self._buffered_bytes += len(value) if value else 0
        if len(c["seq"]) >= self.batch_rows or self._buffered_bytes >= self.batch_bytes:
            self._flush()

    def _flush(self) -> None:
        if not self._cols["seq"]:
            return
        batch = pa.record_batch([pa.array(self._cols[f.name], f.type) for f in RECORD_SCHEMA], schema=RECORD_SCHEMA)
        self._writer.write_batch(batch)
        self.rows += batch.num_rows
        for col in self._cols.values():
            col.clear()
        self._buffered_bytes = 0

    def finish(self) -> None:
        self._flush()
        self._writer.close()

    def abort(self) -> None:
        self._writer.close()


def analyze_to_parquet(
    loaded: LoadedCheckpoint,
    topology: Topology | None,
    directory: Path,
    with_records: bool,
    keep_records: int = 0,
    batch_rows: int = BATCH_ROWS,
    job: JobBinding | None = None,
) -> tuple[Analysis, list[Path]]:
    """Run ``analyze`` and write its Parquet views; records stream to disk while the channels are read.
    ``job``: the binding of ``topology`` to the checkpoint when the caller holds it."""
    names = ["channels.parquet", *(["records.parquet"] if with_records else [])]
    refuse_existing([directory / n for n in names], " (choose another directory)")
    with new_files(directory) as files:
        if with_records:
            with files.writing("records.parquet") as fh:
                sink = RecordRows(fh, batch_rows)
                try:
                    result = analyze(loaded, topology, keep_records=keep_records, on_record=sink, job=job)
                except BaseException:
                    sink.abort()
                    raise
                sink.finish()
        else:
            result = analyze(loaded, topology, keep_records=keep_records, job=job)
        with files.writing("channels.parquet") as fh:
            write_channels(result, fh)
        written = files.publish()
    return result, sorted(written, key=lambda p: names.index(p.name))


def write_channels(a: Analysis, sink: BinaryIO) -> None:
    """``channels.parquet``: one row per logical channel, into ``sink`` (a new file)."""
    channels = pa.table(
        {
            "channel": [c.label for c in a.channels],
            "upstream_operator": [c.upstream["operator"] for c in a.channels],
            "upstream_subtask": [c.upstream["subtask"] for c in a.channels],
            "downstream_operator": [c.downstream["operator"] for c in a.channels],
            "downstream_subtask": [c.downstream["subtask"] for c in a.channels],
            "gate": pa.array([c.gate for c in a.channels], pa.int32()),
            "ship_strategy": pa.array([c.ship_strategy for c in a.channels], pa.string()),
            "buffers": pa.array([len(c.buffers) for c in a.channels], pa.int64()),
            "records": pa.array([c.records for c in a.channels], pa.int64()),
            "bytes": pa.array([c.bytes for c in a.channels], pa.int64()),
            "input_bytes": pa.array([c.input_bytes for c in a.channels], pa.int64()),
            "output_bytes": pa.array([c.output_bytes for c in a.channels], pa.int64()),
            "watermarks": pa.array([c.watermarks for c in a.channels], pa.int64()),
            "other_elements": pa.array([c.other_elements for c in a.channels], pa.int64()),
            "last_watermark": pa.array([c.last_watermark for c in a.channels], pa.int64()),
            "junction_bytes": pa.array(
                [c.junction_record["input_bytes"] if c.junction_record else None for c in a.channels], pa.int64()
            ),
            "problem": pa.array([c.problem for c in a.channels], pa.string()),
        }
    )
    pq.write_table(channels, sink)
