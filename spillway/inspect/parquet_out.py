"""Parquet views of an analysis (pyarrow): ``channels.parquet`` (one row per logical channel) and, optionally,
``records.parquet`` (one row per record), streamed while analyze reads the channels: memory stays bounded by
one batch however many records are in flight.

Both go through the guarded door (``spillway.storage.new_files``): an existing file is never replaced (refused
before the analysis, exit 2), each file is written under a staged name and linked into place, and a failure
leaves neither file nor any directory the run made."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, BinaryIO

import pyarrow as pa
import pyarrow.parquet as pq

from spillway.formats.record_reader import Record
from spillway.formats.stream_elements import element_name
from spillway.formats.values import ValueSpecError, decode, json_data, parse_value_spec
from spillway.inspect.analyze import Analysis, ChannelAnalysis, Position, analyze, record_timestamp, value_bytes
from spillway.inspect.salvage_options import ValueTypes, check_edge_names
from spillway.inspect.topology import JobBinding, Topology
from spillway.inspect.value_arrow import arrow_type, arrow_value
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


class DecodedColumn:
    """The column of the records one value spec decodes: ``decoded`` for the spec of every edge, ``decoded[EDGE]``
    for the spec of EDGE (``decoded_json…``, the value as JSON text, for a spec without an Arrow type)."""

    def __init__(self, edge: str | None, spec: str) -> None:
        self.spec = parse_value_spec(spec)
        self.arrow = arrow_type(self.spec)
        stem = "decoded" if self.arrow is not None else "decoded_json"
        self.name = stem if edge is None else f"{stem}[{edge}]"
        self.values: list[object] = []

    def field(self) -> tuple[str, pa.DataType]:
        return self.name, self.arrow or pa.string()

    def array(self) -> pa.Array:
        if self.arrow is None:
            return pa.array([None if v is None else json.dumps(json_data(v)) for v in self.values], pa.string())
        return pa.array([arrow_value(self.spec, v) for v in self.values], self.arrow)


class RecordRows:
    """A record sink for ``analyze(on_record=...)`` writing ``records.parquet`` into ``sink`` (a new file) in
    row groups of at most ``batch_rows`` rows / ``batch_bytes`` value bytes. ``value_types``: the records of
    the edges they give a spec for are decoded too, one column per spec (``DecodedColumn``), and a record that
    does not fit its spec has the reason in ``decode_problem`` (the raw bytes stay in ``value``)."""

    def __init__(
        self,
        sink: BinaryIO,
        batch_rows: int = BATCH_ROWS,
        batch_bytes: int = BATCH_BYTES,
        value_types: ValueTypes | None = None,
    ) -> None:
        self.batch_rows = batch_rows
        self.batch_bytes = batch_bytes
        self.rows = 0
        self._cols: dict[str, list[Any]] = {name: [] for name in RECORD_SCHEMA.names}
        self._buffered_bytes = 0
        self._types = value_types or ValueTypes()
        # by the ValueTypes key that chose the spec: the edge key, None for the spec of every edge
        self._decoded: dict[str | None, DecodedColumn] = {
            key: DecodedColumn(key, spec) for key, spec in self._types.by_edge
        }
        if self._types.default is not None:
            self._decoded[None] = DecodedColumn(None, self._types.default)
        self._problems: list[str | None] = []
        self._column_of: dict[int, DecodedColumn | None] = {}  # by id of the channel
        self.schema = RECORD_SCHEMA
        if self._decoded:
            decoded = [c.field() for c in self._decoded.values()]
            self.schema = pa.schema([*RECORD_SCHEMA, *decoded, ("decode_problem", pa.string())])
        self._writer = pq.ParquetWriter(sink, self.schema)

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
        if self._decoded:
            self._decode(channel, value)
        if len(c["seq"]) >= self.batch_rows or self._buffered_bytes >= self.batch_bytes:
            self._flush()

    def _decode(self, channel: ChannelAnalysis, value: bytes | None) -> None:
        if id(channel) not in self._column_of:
            key = self._types.edge_key(channel.upstream, channel.downstream)
            self._column_of[id(channel)] = self._decoded.get(key)
        column = self._column_of[id(channel)]
        decoded: object = None
        problem = None
        if column is not None and value is not None:
            try:
                decoded = decode(column.spec, value)
            except ValueSpecError as exc:
                problem = str(exc)
        for c in self._decoded.values():
            c.values.append(decoded if c is column else None)
        self._problems.append(problem)

    def _flush(self) -> None:
        if not self._cols["seq"]:
            return
        columns = [pa.array(self._cols[f.name], f.type) for f in RECORD_SCHEMA]
        if self._decoded:
            columns += [c.array() for c in self._decoded.values()]
            columns.append(pa.array(self._problems, pa.string()))
        batch = pa.record_batch(columns, schema=self.schema)
        self._writer.write_batch(batch)
        self.rows += batch.num_rows
        for col in self._cols.values():
            col.clear()
        for d in self._decoded.values():
            d.values.clear()
        self._problems.clear()
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
    value_types: ValueTypes | None = None,
) -> tuple[Analysis, list[Path]]:
    """Run ``analyze`` and write its Parquet views; records stream to disk while the channels are read.
    ``job``: the binding of ``topology`` to the checkpoint when the caller holds it; ``value_types``: the value
    specs that decode the records in ``records.parquet`` (``RecordRows``)."""
    names = ["channels.parquet", *(["records.parquet"] if with_records else [])]
    refuse_existing([directory / n for n in names], " (choose another directory)")
    with new_files(directory) as files:
        if with_records:
            with files.writing("records.parquet") as fh:
                sink = RecordRows(fh, batch_rows, value_types=value_types)
                try:
                    result = analyze(loaded, topology, keep_records=keep_records, on_record=sink, job=job)
                    check_edge_names(value_types, result)
                except BaseException:
                    sink.abort()
                    raise
                sink.finish()
        else:
            result = analyze(loaded, topology, keep_records=keep_records, job=job)
            check_edge_names(value_types, result)
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
