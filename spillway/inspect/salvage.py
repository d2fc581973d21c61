"""``salvage``: the in-flight records of chosen channels, exported so a job can replay them.

One row per stream record (watermarks and other stream events are counted, not exported), in the order Flink
replays the channel, with where it sits (operator, subtask, side, gate/channel, sequence number, file, offset,
element tag) and the checkpoint id. ``value_raw`` always holds the value's bytes exactly as the job's
TypeSerializer wrote them (a job can deserialize them with its own serializer, whatever the type); with a
value spec, ``value`` also holds the decoded value (an Arrow struct for tuples and rows, a scalar column for
scalars). A spec whose type has no Arrow mapping here gets ``value_json`` (the value as JSON text) instead.

Written while ``analyze`` reads the channels, a bounded batch at a time, through the guarded door
(``spillway.storage.new_files``): ``records.parquet``, optionally ``records.jsonl`` (for readers without
Parquet) and ``salvage.json`` (what was exported, per channel); all or none. A record that does not fit the
spec, or a chosen channel that cannot be split into records, fails the whole salvage: nothing is kept.
"""

from __future__ import annotations

import base64
import json
import re
from collections.abc import Callable, Collection
from contextlib import ExitStack
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, BinaryIO

import pyarrow as pa
import pyarrow.parquet as pq

from spillway.errors import Message, Named, SpillwayError, UsageError
from spillway.formats.record_reader import Record
from spillway.formats.stream_elements import RECORD_TAGS, element_name
from spillway.formats.values import (
    Type,
    ValueSpecError,
    decode,
    json_data,
    parse_value_spec,
)
from spillway.inspect.analyze import Analysis, ChannelAnalysis, Position, analyze, record_timestamp, value_bytes
from spillway.inspect.salvage_options import ValueTypes
from spillway.inspect.topology import JobBinding, Topology
from spillway.inspect.value_arrow import arrow_type, arrow_value
from spillway.safe_io import real_path
from spillway.storage.guard import TargetExists
from spillway.storage.load import LoadedCheckpoint
from spillway.storage.new_files import new_files, refuse_existing

SCHEMA_NAME = "spillway.salvage/1"
RECORDS = "records.parquet"
JSONL = "records.jsonl"
MANIFEST = "salvage.json"
BATCH_ROWS = 16_384
BATCH_BYTES = 32 << 20  # value bytes buffered before a row group is written


class SalvageError(SpillwayError):
    """The chosen in-flight records cannot all be exported as asked (exit 1); nothing was written."""


# Where a record was: the columns every row has, before the value's.
PROVENANCE = [
    ("checkpoint_id", pa.int64()),
    ("channel", pa.string()),
    ("upstream_operator", pa.string()),
    ("upstream_operator_id", pa.string()),
    ("upstream_subtask", pa.int32()),
    ("downstream_operator", pa.string()),
    ("downstream_operator_id", pa.string()),
    ("downstream_subtask", pa.int32()),
    ("ship_strategy", pa.string()),
    # the half of the channel that held the record: "input" (the downstream's) or "output" (the upstream's)
    ("side", pa.string()),
    ("operator", pa.string()),  # the operator of that half, and its subtask
    ("operator_id", pa.string()),
    ("subtask", pa.int32()),
    # that half's handle: input side (gate index, input channel index), output side (partition, subpartition)
    ("gate", pa.int32()),
    ("channel_index", pa.int32()),
    ("seq", pa.int64()),  # element sequence number in the logical channel's replay order
    ("kind", pa.string()),
    ("tag", pa.int8()),  # StreamElementSerializer's tag: 0 record with timestamp, 1 record without
    ("timestamp", pa.int64()),
    ("file", pa.string()),
    ("offset", pa.int64()),  # of the record's length field in ``file``
    ("length", pa.int32()),  # of the element (tag, timestamp, value), the length field excluded
    ("value_raw", pa.binary()),
]


@dataclass
class ChannelExport:
    """What was exported of one logical channel."""

    channel: str
    upstream: str
    downstream: str
    ship_strategy: str | None
    records: int = 0
    bytes: int = 0  # value bytes exported
    other_elements: int = 0  # watermarks and other stream events in the same channel, not exported

    def to_json(self) -> dict[str, Any]:
        return {
            "channel": self.channel,
            "upstream": self.upstream,
            "downstream": self.downstream,
            "ship_strategy": self.ship_strategy,
            "records": self.records,
            "value_bytes": self.bytes,
            "other_elements": self.other_elements,
        }


@dataclass
class EdgeExport:
    """The records of one edge (upstream -> downstream, one input gate): one Parquet file, one value spec."""

    upstream: str
    downstream: str
    gate: int | None
    ship_strategy: str | None
    value_type: str | None
    value_column: str | None  # "value", "value_json" or None (no spec: value_raw only)
    file: str
    channels: list[ChannelExport] = field(default_factory=list)
    upstream_id: str | None = None
    downstream_id: str | None = None

    @property
    def records(self) -> int:
        return sum(c.records for c in self.channels)

    def to_json(self) -> dict[str, Any]:
        return {
            "upstream": self.upstream,
            "downstream": self.downstream,
            "gate": self.gate,
            "ship_strategy": self.ship_strategy,
            "value_type": self.value_type,
            "value_column": self.value_column,
            "file": self.file,
            "records": self.records,
            "channels": [c.to_json() for c in self.channels],
        }


@dataclass
class SalvageReport:
    """What ``salvage`` exported: per edge and channel, in total, and the files (none in a dry run)."""

    checkpoint_id: int
    edges: list[EdgeExport] = field(default_factory=list)
    written: list[Path] = field(default_factory=list)
    jsonl: str | None = None
    analysis: Analysis | None = None  # the reading the export came from (every channel, chosen or not)

    @property
    def channels(self) -> list[ChannelExport]:
        return [c for e in self.edges for c in e.channels]

    @property
    def records(self) -> int:
        return sum(c.records for c in self.channels)

    @property
    def bytes(self) -> int:
        return sum(c.bytes for c in self.channels)

    def to_json(self) -> dict[str, Any]:
        return {
            "schema": SCHEMA_NAME,
            "checkpoint_id": self.checkpoint_id,
            "records": self.records,
            "value_bytes": self.bytes,
            "edges": [e.to_json() for e in self.edges],
            "jsonl": self.jsonl,
            "files": [str(p) for p in self.written],
        }


ChannelFilter = Callable[[ChannelAnalysis], bool]
Half = tuple[str, str]  # one half of logical channels: (operator id, "input" or "output")


def holding(halves: Collection[Half]) -> ChannelFilter:
    """The channels with a part in one of ``halves`` (what a restore drops: preflight's ``loss.in_flight``)."""
    return lambda ch: any((k[0], k[1]) in halves for k in ch.part_keys)


def touching(operator_ids: set[str] | None) -> ChannelFilter:
    """The channels into or out of one of ``operator_ids`` (every channel when None): those that
    ``repair strip-channel-state`` with the same operators drops."""
    if operator_ids is None:
        return lambda ch: True
    return lambda ch: ch.upstream.get("operator_id") in operator_ids or ch.downstream.get("operator_id") in operator_ids


_UNSAFE = re.compile(r"[^A-Za-z0-9._-]+")


def _file_name(up: str, down: str, gate: int | None, taken: set[str]) -> str:
    stem = f"records-{_UNSAFE.sub('_', up)}-{_UNSAFE.sub('_', down)}"[:120] + ("" if gate is None else f"-gate{gate}")
    name, n = f"{stem}.parquet", 1
    while name in taken:
        n += 1
        name = f"{stem}-{n}.parquet"
    taken.add(name)
    return name


class _EdgeWriter:
    def __init__(self, export: EdgeExport, spec: Type | None, sink: BinaryIO | None) -> None:
        self.export = export
        self.spec = spec
        self.value_arrow = None if spec is None else arrow_type(spec)
        value_fields = [] if export.value_column is None else [(export.value_column, self.value_arrow or pa.string())]
        self.schema = pa.schema(PROVENANCE + value_fields)
        self.writer = None if sink is None else pq.ParquetWriter(sink, self.schema)
        self.rows: list[dict[str, Any]] = []
        self.values: list[object] = []
        self.buffered = 0

    def flush(self) -> None:
        if not self.rows or self.writer is None:
            return
        columns = [pa.array([r[name] for r in self.rows], typ) for name, typ in PROVENANCE]
        if self.spec is not None:
            if self.value_arrow is None:
                columns.append(pa.array([json.dumps(json_data(v)) for v in self.values], pa.string()))
            else:
                columns.append(pa.array([arrow_value(self.spec, v) for v in self.values], self.value_arrow))
        self.writer.write_batch(pa.record_batch(columns, schema=self.schema))
        self.rows, self.values, self.buffered = [], [], 0


class SalvageSink:
    """A record sink for ``analyze(on_record=...)``: the records of the channels ``chosen`` accepts, decoded as
    ``value_types`` says, one Parquet file per edge opened by ``open_file(name)`` (and every record in
    ``jsonl``), a batch at a time. Without ``open_file`` (a dry run) the records are decoded and counted only."""

    def __init__(
        self,
        checkpoint_id: int,
        chosen: ChannelFilter,
        value_types: ValueTypes,
        open_file: Callable[[str], BinaryIO] | None = None,
        jsonl: BinaryIO | None = None,
        batch_rows: int = BATCH_ROWS,
        halves: Collection[Half] | None = None,
    ) -> None:
        self.checkpoint_id = checkpoint_id
        self.chosen = chosen
        self.halves = halves
        self.value_types = value_types
        self.report = SalvageReport(checkpoint_id)
        self._open_file = open_file
        self._jsonl = jsonl
        self._batch_rows = batch_rows
        self._channels: dict[int, tuple[ChannelExport, _EdgeWriter]] = {}
        self._edges: dict[tuple[str, str, int | None], _EdgeWriter] = {}
        self._names: set[str] = set()
        self._lines: list[str] = []

    def _edge(self, ch: ChannelAnalysis) -> _EdgeWriter:
        up, down = ch.upstream, ch.downstream
        key = (up["operator"], down["operator"], ch.gate)
        edge = self._edges.get(key)
        if edge is None:
            text = self.value_types.for_edge(up, down)
            spec = None if text is None else parse_value_spec(text)
            column = None if spec is None else "value" if arrow_type(spec) is not None else "value_json"
            name = _file_name(up["operator"], down["operator"], ch.gate, self._names)
            export = EdgeExport(up["operator"], down["operator"], ch.gate, ch.ship_strategy, text, column, name)
            export.upstream_id, export.downstream_id = up["operator_id"], down["operator_id"]
            edge = self._edges[key] = _EdgeWriter(
                export, spec, None if self._open_file is None else self._open_file(name)
            )
            self.report.edges.append(export)
        return edge

    def __call__(self, ch: ChannelAnalysis, rec: Record, pos: Position) -> None:
        known = self._channels.get(id(ch))
        if known is None:
            if not self.chosen(ch):
                return
            edge = self._edge(ch)
            export = ChannelExport(ch.label, ch.upstream["operator"], ch.downstream["operator"], ch.ship_strategy)
            edge.export.channels.append(export)
            known = self._channels[id(ch)] = (export, edge)
        export, edge = known
        holder = ch.downstream if pos.side == "input" else ch.upstream
        if self.halves is not None and not self._in_halves(ch, holder["operator_id"], pos.side):
            return
        if rec.tag not in RECORD_TAGS:
            export.other_elements += 1
            return
        raw = value_bytes(rec) or b""
        value: object = None
        if edge.spec is not None:
            try:
                value = decode(edge.spec, raw)
            except ValueSpecError as exc:
                raise SalvageError(
                    f"{pos.file}:{pos.offset}: record #{rec.seq} of {ch.label} is {exc} (the value spec of "
                    f"{edge.export.upstream}->{edge.export.downstream}; without one its raw bytes are exported)"
                ) from None
        export.records += 1
        export.bytes += len(raw)
        if self._open_file is None and self._jsonl is None:
            return
        info = next(((k[3], k[4]) for k in reversed(ch.part_keys) if k[1] == pos.side), (None, None))
        row: dict[str, Any] = {
            "checkpoint_id": self.checkpoint_id,
            "channel": ch.label,
            "upstream_operator": ch.upstream["operator"],
            "upstream_operator_id": ch.upstream["operator_id"],
            "upstream_subtask": ch.upstream["subtask"],
            "downstream_operator": ch.downstream["operator"],
            "downstream_operator_id": ch.downstream["operator_id"],
            "downstream_subtask": ch.downstream["subtask"],
            "ship_strategy": ch.ship_strategy,
            "side": pos.side,
            "operator": holder["operator"],
            "operator_id": holder["operator_id"],
            "subtask": holder["subtask"],
            "gate": info[0],
            "channel_index": info[1],
            "seq": rec.seq,
            "kind": element_name(rec.tag),
            "tag": rec.tag,
            "timestamp": record_timestamp(rec),
            "file": pos.file,
            "offset": pos.offset,
            "length": rec.length,
            "value_raw": raw,
        }
        if self._jsonl is not None:
            doc = {k: v for k, v in row.items() if k != "value_raw"}
            doc["value_raw_base64"] = base64.b64encode(raw).decode("ascii")
            if edge.spec is not None:
                doc["value"] = json_data(value)
            self._lines.append(json.dumps(doc, separators=(",", ":")))
            if len(self._lines) >= self._batch_rows:
                self._write_lines()
        if edge.writer is not None:
            edge.rows.append(row)
            edge.values.append(value)
            edge.buffered += len(raw)
            if len(edge.rows) >= self._batch_rows or edge.buffered >= BATCH_BYTES:
                edge.flush()

    def _in_halves(self, ch: ChannelAnalysis, operator_id: str | None, side: str) -> bool:
        """The record has bytes in one of ``halves``: the half it starts in, and for the record carried across the
        junction (it starts in the input half, and once that half is read, the junction is known) the output half
        too, since dropping either half loses it whole."""
        assert self.halves is not None
        if (operator_id, side) in self.halves:
            return True
        across = side == "input" and ch.junction_record is not None
        return across and (ch.upstream["operator_id"], "output") in self.halves

    def _write_lines(self) -> None:
        if self._jsonl is not None and self._lines:
            self._jsonl.write(("\n".join(self._lines) + "\n").encode())
        self._lines = []

    def finish(self) -> None:
        self._write_lines()
        for edge in self._edges.values():
            edge.flush()
            if edge.writer is not None:
                edge.writer.close()

    def abort(self) -> None:
        for edge in self._edges.values():
            if edge.writer is not None:
                edge.writer.close()


def check_complete(analysis: Analysis, chosen: ChannelFilter, topology: Topology | None) -> None:
    """Refuse when a chosen channel could not be split into records: its records would be lost unexported."""
    for ch in analysis.channels:
        if not chosen(ch):
            continue
        if ch.problem is not None:
            raise SalvageError(f"{ch.label}: {ch.problem}; its records cannot be exported")
        if ch.records is None:
            why = (
                Message("output-side state is split into records only with the job's ", Named("plan"))
                if topology is None
                else "its output-side state is not bound to the plan"
            )
            raise SalvageError(Message(f"{ch.label}: ", why, "; its records cannot be exported"))


def refuse_used_directory(directory: Path) -> None:
    """The export goes into a new or empty directory: its files are named after the edges found while reading,
    and nothing there is ever replaced."""
    if directory.is_dir():
        if any(directory.iterdir()):
            raise TargetExists(f"{directory}: not empty; spillway never overwrites (choose a new or empty directory)")
    else:
        refuse_existing([directory], " (choose a new or empty directory)")


def refuse_inside_checkpoint(directory: Path, loaded: LoadedCheckpoint) -> None:
    """The checkpoint is read-only: no export goes into (or below) its directory."""
    if loaded.location.uri is not None:
        return
    source = real_path(loaded.location.checkpoint_dir)
    target = real_path(directory)
    if target == source or source in target.parents:
        raise UsageError(f"{directory}: inside the checkpoint {source}; spillway never writes into its input")


def salvage(
    loaded: LoadedCheckpoint,
    topology: Topology | None,
    directory: Path | None,
    operator_ids: set[str] | None = None,
    value_types: ValueTypes | None = None,
    jsonl: bool = False,
    job: JobBinding | None = None,
    batch_rows: int = BATCH_ROWS,
    halves: Collection[Half] | None = None,
) -> SalvageReport:
    """Export the in-flight records of the channels into or out of ``operator_ids`` (all when None) into
    ``directory`` (None: a dry run, decoded and counted only). ``halves``: instead, the records with bytes in
    those halves of channels, ``(operator id, side)`` (what a restore drops). Raises ``SalvageError`` (nothing
    written) when a chosen channel cannot be read into records or a record does not fit its value spec."""
    chosen = touching(operator_ids) if halves is None else holding(halves)
    types = value_types or ValueTypes()
    cp_id = loaded.checkpoint.checkpoint_id

    def finished(sink: SalvageSink, analysis: Analysis) -> None:
        check_complete(analysis, chosen, topology)
        _check_keys(types, sink.report)
        sink.report.analysis = analysis

    if directory is None:
        sink = SalvageSink(cp_id, chosen, types, batch_rows=batch_rows, halves=halves)
        finished(sink, analyze(loaded, topology, on_record=sink, job=job))
        return sink.report
    refuse_used_directory(directory)
    with new_files(directory) as files, ExitStack() as open_files:
        lines = open_files.enter_context(files.writing(JSONL)) if jsonl else None
        sink = SalvageSink(
            cp_id, chosen, types, lambda name: open_files.enter_context(files.writing(name)), lines, batch_rows, halves
        )
        try:
            finished(sink, analyze(loaded, topology, on_record=sink, job=job))
        except BaseException:
            sink.abort()
            raise
        sink.finish()
        open_files.close()
        report = sink.report
        report.jsonl = JSONL if jsonl else None
        with files.writing(MANIFEST) as fh:
            doc = report.to_json()
            del doc["files"]
            doc["columns"] = [f"{name}: {typ}" for name, typ in PROVENANCE]
            fh.write((json.dumps(doc, indent=2) + "\n").encode())
        report.written = files.publish()
    return report


def _check_keys(types: ValueTypes, report: SalvageReport) -> None:
    ends = [(_names(e.upstream, e.upstream_id), _names(e.downstream, e.downstream_id)) for e in report.edges]
    unused = types.unused(ends)
    if unused:
        shown = ", ".join(f"{e.upstream}->{e.downstream}" for e in report.edges) or "none"
        raise SalvageError(f"value spec for {', '.join(unused)}: no exported edge is called so (edges: {shown})")


def _names(name: str, operator_id: str | None) -> set[str]:
    return {name} if operator_id is None else {name, operator_id}
