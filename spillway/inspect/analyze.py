"""``analyze``: what is in flight, channel by channel, in the order Flink replays it.

Replay order of one logical channel u→d: the downstream's input-side chunks (in offset-list order),
then the upstream's output-side chunks. Buffer sequence numbers count those chunks 0..n-1; record
sequence numbers count whole records in the same order. A record that starts in the input part and
ends in the output part is the "partial record carried across the junction".
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any

from spillway import progress
from spillway.flink.features import FormatFeatures
from spillway.formats.channel_file import Blob, BlobError, read_chunk_header
from spillway.formats.record_reader import Record, RecordReader
from spillway.formats.stream_elements import (
    ALL_TAGS,
    ELEMENTS,
    RECORD_TAGS,
    TAG_WATERMARK,
    element_fault,
    element_name,
    tags_for_format_version,
)
from spillway.inspect.channels import ChannelKey, ChannelMap, ChannelPart, LogicalChannel, channel_key, logical_channels
from spillway.inspect.output_order import choose_orders
from spillway.inspect.topology import JobBinding, Topology, bind_job
from spillway.model.checkpoint import (
    ChannelHandle,
    CheckpointMetadata,
    OperatorState,
    channel_handles,
)
from spillway.storage.blobs import DelegateBlobs, delegate_display, prefetch_delegates
from spillway.storage.load import LoadedCheckpoint

FULLY_FINISHED = "FULLY_FINISHED"
PARTIALLY_FINISHED = "PARTIALLY_FINISHED"
RUNNING = "RUNNING"
NOT_RECORDED = "NOT_RECORDED"


def finished_state(op: OperatorState, features: FormatFeatures) -> str:
    if not features.finished_markers:
        return NOT_RECORDED  # V2 has no FLIP-147 markers (and 1.11-1.13 wrote V3 without them)
    if op.fully_finished:
        return FULLY_FINISHED
    if any(s.finished for s in op.subtasks):
        return PARTIALLY_FINISHED
    return RUNNING


@dataclass
class Buffer:
    seq: int
    side: str
    file: str
    offset: int  # physical offset of the chunk's length field
    length: int  # payload bytes


@dataclass
class Position:
    side: str
    file: str
    offset: int  # physical offset of the record's length field


@dataclass
class ChannelAnalysis:
    label: str
    upstream: dict[str, Any]
    downstream: dict[str, Any]
    gate: int | None
    ship_strategy: str | None
    buffers: list[Buffer] = field(default_factory=list)
    records: int | None = 0  # stream records only (tags 0 and 1); None: not parsed
    record_bytes: int = 0  # payload + length prefixes of whole elements (records and the other elements)
    elements: dict[str, int] = field(default_factory=dict)  # every element by kind
    watermarks: int = 0
    other_elements: int = 0  # neither a record nor a watermark: watermark status, latency markers, …
    last_watermark: int | None = None
    input_bytes: int = 0
    output_bytes: int = 0
    junction_record: dict[str, int] | None = None
    first_record: Position | None = None
    last_record: Position | None = None
    problem: str | None = None
    record_list: list[dict[str, Any]] = field(default_factory=list)
    # (operator id, side, subtask, a, b) of each handle this channel is made of
    part_keys: list[ChannelKey] = field(default_factory=list)

    @property
    def bytes(self) -> int:
        return self.input_bytes + self.output_bytes


@dataclass
class OperatorAnalysis:
    operator: OperatorState
    finished_state: str
    finished_subtasks: list[int]
    in_flight_bytes: int = 0
    in_flight_records: int = 0
    channel_handles: int = 0
    per_subtask_bytes: dict[int, int] = field(default_factory=dict)


# Called with every record of every channel, in replay order (see ``analyze``).
RecordSink = Callable[["ChannelAnalysis", Record, "Position"], None]


@dataclass
class Analysis:
    checkpoint: CheckpointMetadata
    operators: list[OperatorAnalysis]
    channels: list[ChannelAnalysis]
    skipped: list[str]
    #: Operator id -> the name the plan bound gives it (``JobBinding.names``): how ``operators`` are shown.
    plan_names: Mapping[str, str] = field(default_factory=dict)

    @property
    def records(self) -> int:
        """Records in flight, over the channels whose records could be counted (``uncounted``: the others)."""
        return sum(c.records for c in self.channels if c.records is not None)

    @property
    def bytes(self) -> int:
        """Bytes of channel state in flight, over every channel."""
        return sum(c.bytes for c in self.channels)

    @property
    def uncounted(self) -> list[ChannelAnalysis]:
        """Channels whose ``records`` is None (unknown, not zero): output-side state analysed without a
        plan (it may start mid-record, so it is not split into records), or state that could not be read
        (``problem`` says why)."""
        return [c for c in self.channels if c.records is None]


def _chunks(blobs: DelegateBlobs, h: ChannelHandle) -> Iterator[tuple[Blob, int, int]]:
    blob = blobs.get(h.delegate)
    if blob is None:
        where = delegate_display(blobs.resolver, h.delegate)
        raise BlobError(f"channel state of {h.label()} is not readable: {where} (spillway validate says why)", 0)
    for off in h.offsets:
        chunk = read_chunk_header(blob, off)
        yield blob, off, chunk.length


def analyze(
    loaded: LoadedCheckpoint,
    topology: Topology | None = None,
    keep_records: int = 0,
    on_record: RecordSink | None = None,
    job: JobBinding | None = None,
) -> Analysis:
    """``keep_records``: how many records per channel to keep (with payload) for display/decoding.
    ``on_record``: receives every record as it is read (for streaming outputs: nothing is kept for it).
    ``job``: the binding of ``topology`` to the checkpoint when the caller holds it."""
    cp = loaded.checkpoint
    blobs = DelegateBlobs(loaded.resolver)
    prefetch_delegates(  # a remote checkpoint's channel-state files, in parallel
        loaded.resolver,
        (
            h.delegate
            for o in cp.operators
            for s in o.subtasks
            for h in channel_handles(s.input_channel_state) + channel_handles(s.result_subpartition_state)
        ),
    )
    try:
        ops = {o.operator_id: _operator(o, cp.features) for o in cp.operators}
        tags = tags_for_format_version(cp.format_version)
        channels: list[ChannelAnalysis] = []
        skipped: list[str] = []
        placed: set[ChannelKey] = set()
        bar = progress.stage(
            "reading channel state",
            sum(
                h.state_size
                for o in cp.operators
                for s in o.subtasks
                for h in channel_handles(s.input_channel_state) + channel_handles(s.result_subpartition_state)
            ),
        )
        names: Mapping[str, str] = {}
        if topology is not None:
            job = job or bind_job(topology, cp)
            bound, names = job.vertices, job.names
            orders, notes = choose_orders(topology, bound, cp, lambda trial: _frames_clean(trial, blobs, cp, tags))
            cmap = logical_channels(topology, bound, cp, orders, plan_names=names)
            skipped += cmap.skipped + notes
            for lc in cmap.channels:
                channels.append(_channel(lc, blobs, ops, keep_records, on_record, tags=tags))
                bar.advance(sum(p.handle.state_size for p in lc.parts))
            placed = cmap.used
        for op in cp.operators:
            for sub in op.subtasks:
                for h in channel_handles(sub.input_channel_state) + channel_handles(sub.result_subpartition_state):
                    if channel_key(op, h) in placed:
                        continue
                    first, second = h.info  # (gate, input channel) or (partition, subpartition)
                    other = UNKNOWN_END_NO_PLAN if topology is None else UNKNOWN_END_UNBOUND
                    lc = LogicalChannel(None, other, other, -1, -1, first if h.side == "input" else -1)
                    if h.side == "input":
                        lc.downstream, lc.downstream_subtask, lc.upstream_subtask = op.label(names), sub.index, second
                    else:
                        lc.upstream, lc.upstream_subtask, lc.downstream_subtask = op.label(names), sub.index, second
                    lc.parts.append(ChannelPart(op, h))
                    channels.append(_channel(lc, blobs, ops, keep_records, on_record, alone=True, tags=tags))
                    bar.advance(h.state_size)
        if topology is None and channels:
            skipped.append(
                "no --plan: each channel handle is analysed alone; output-side state is not parsed "
                "into records (it may start mid-record)"
            )
        return Analysis(cp, list(ops.values()), channels, skipped, names)
    finally:
        blobs.close()


def _frames_clean(cmap: ChannelMap, blobs: DelegateBlobs, cp: CheckpointMetadata, tags: frozenset[int]) -> bool:
    """Every channel of ``cmap`` parses into whole records (a trial: nothing is counted)."""
    trial = {o.operator_id: _operator(o, cp.features) for o in cp.operators}
    return all(_channel(lc, blobs, trial, 0, None, tags=tags).problem is None for lc in cmap.channels)


# The end of a channel analysed alone that no plan names (its operator is shown in its place, never "?").
UNKNOWN_END_NO_PLAN = "(other end unknown: no --plan)"
UNKNOWN_END_UNBOUND = "(other end not bound to the plan)"


def _operator(op: OperatorState, features: FormatFeatures) -> OperatorAnalysis:
    return OperatorAnalysis(op, finished_state(op, features), sorted(s.index for s in op.subtasks if s.finished))


def _endpoint(label: str, subtask: int, op: OperatorState | None) -> dict[str, Any]:
    return {"operator": label, "operator_id": op.operator_id if op else None, "subtask": subtask}


def _channel(
    lc: LogicalChannel,
    blobs: DelegateBlobs,
    ops: dict[str, OperatorAnalysis],
    keep: int,
    on_record: RecordSink | None,
    alone: bool = False,
    tags: frozenset[int] = ALL_TAGS,
) -> ChannelAnalysis:
    up_op = lc.upstream_op or next((p.operator for p in lc.parts if p.handle.side == "output"), None)
    down_op = lc.downstream_op or next((p.operator for p in lc.parts if p.handle.side == "input"), None)
    ca = ChannelAnalysis(
        lc.label() if not alone else f"{lc.parts[0].label()} (alone)",
        _endpoint(lc.upstream, lc.upstream_subtask, up_op),
        _endpoint(lc.downstream, lc.downstream_subtask, down_op),
        lc.gate if lc.gate >= 0 else None,
        lc.edge.ship_strategy if lc.edge else None,
    )
    parse = not (alone and lc.parts[0].handle.side == "output")
    reader = RecordReader()
    input_end_seq: int | None = None
    try:
        for part in lc.parts:
            side = part.handle.side
            ca.part_keys.append(channel_key(part.operator, part.handle))
            op_a = ops[part.operator.operator_id]
            op_a.channel_handles += 1
            records_before = ca.records or 0
            for blob, off, length in _chunks(blobs, part.handle):
                ca.buffers.append(Buffer(len(ca.buffers), side, blob.name, blob.physical(off), length))
                if side == "input":
                    ca.input_bytes += length
                else:
                    ca.output_bytes += length
                op_a.in_flight_bytes += length
                sub = part.handle.subtask_index
                op_a.per_subtask_bytes[sub] = op_a.per_subtask_bytes.get(sub, 0) + length
                if not parse:
                    continue
                data = blob.read_at(off + 4, length)
                for rec in reader.feed(data, (side, blob, off + 4)):
                    _count(ca, rec, keep, on_record, tags)
            if parse:
                op_a.in_flight_records += (ca.records or 0) - records_before
            if side == "input" and reader.leftover:
                input_end_seq = sum(ca.elements.values())  # element sequence numbers (Record.seq) count them all
                ca.junction_record = {"input_bytes": reader.leftover}
        if not parse:
            ca.records = None
        elif reader.bad_length is not None:
            token, pos, length = reader.bad_length
            ca.problem = f"corrupt record length {length} at {token[1].name}:{token[1].physical(token[2] + pos)}"
        elif reader.leftover and not alone:
            ca.problem = f"channel ends inside a record ({reader.leftover} bytes of it present)"
        if ca.junction_record is not None and input_end_seq is not None and sum(ca.elements.values()) > input_end_seq:
            ca.junction_record["record_seq"] = input_end_seq
    except BlobError as exc:
        ca.problem = str(exc)
        ca.records = None
    return ca


# Long.MIN_VALUE: the timestamp a record without event time carries (FLIP-27 sources without a timestamp
# assigner send tag-0 records with it: docs/format/record-framing.md); shown as "none" / null.
NO_TIMESTAMP = -(1 << 63)


def record_timestamp(rec: Record) -> int | None:
    """The element's event time, None when it has none (a record of tag 1, or of tag 0 with Long.MIN_VALUE)."""
    ts = rec.timestamp
    return None if ts == NO_TIMESTAMP and rec.tag in RECORD_TAGS else ts


def value_bytes(rec: Record) -> bytes | None:
    """The user value's serialized bytes (after tag and timestamp), None for non-records."""
    kind = ELEMENTS.get(rec.tag)
    if kind is None or kind.value_offset is None:
        return None
    return rec.payload[kind.value_offset :]


def _count(ca: ChannelAnalysis, rec: Record, keep: int, on_record: RecordSink | None, tags: frozenset[int]) -> None:
    tag = rec.tag
    if tag in RECORD_TAGS:
        ca.records = (ca.records or 0) + 1
    elif tag != TAG_WATERMARK:
        ca.other_elements += 1
    ca.record_bytes += 4 + rec.length
    name = element_name(tag)
    ca.elements[name] = ca.elements.get(name, 0) + 1
    side, blob, base = rec.start
    pos = Position(side, blob.name, blob.physical(base + rec.start_pos))
    if ca.first_record is None:
        ca.first_record = pos
    ca.last_record = pos
    fault = element_fault(tag, rec.length, tags)
    if fault is not None and ca.problem is None:  # a lost boundary found later replaces it (more basic)
        ca.problem = f"{fault.message} at {pos.file}:{pos.offset}"
    if tag == TAG_WATERMARK:
        ca.watermarks += 1
        ca.last_watermark = rec.timestamp
    if on_record is not None:
        on_record(ca, rec, pos)
    if len(ca.record_list) < keep:
        ca.record_list.append(
            {
                "seq": rec.seq,
                "tag": name,
                "timestamp": record_timestamp(rec),
                "length": rec.length,
                "position": {"side": pos.side, "file": pos.file, "offset": pos.offset},
                "value": value_bytes(rec),
            }
        )


@dataclass
class EdgeSummary:
    """The logical channels of one job edge (upstream operator → downstream operator, one input gate)."""

    upstream: str
    downstream: str
    gate: int | None
    ship_strategy: str | None
    upstream_parallelism: int
    downstream_parallelism: int
    channels: list[ChannelAnalysis] = field(default_factory=list)

    @property
    def bytes(self) -> int:
        return sum(c.bytes for c in self.channels)

    @property
    def records(self) -> int:
        return sum(c.records or 0 for c in self.channels)

    @property
    def buffers(self) -> int:
        return sum(len(c.buffers) for c in self.channels)

    @property
    def watermarks(self) -> int:
        return sum(c.watermarks for c in self.channels)

    @property
    def other_elements(self) -> int:
        return sum(c.other_elements for c in self.channels)

    def grid(self) -> dict[tuple[int, int], ChannelAnalysis]:
        """(upstream subtask, downstream subtask) → channel."""
        return {(c.upstream["subtask"], c.downstream["subtask"]): c for c in self.channels}


def edges(a: Analysis) -> list[EdgeSummary]:
    """Totals per edge, for channels whose two ends are known (with --plan); in first-seen order."""
    parallelism = {o.operator.operator_id: o.operator.parallelism for o in a.operators}
    found: dict[tuple[Any, ...], EdgeSummary] = {}
    for c in a.channels:
        up, down = c.upstream, c.downstream
        if up["operator_id"] is None or down["operator_id"] is None or up["subtask"] < 0 or down["subtask"] < 0:
            continue
        key = (up["operator"], down["operator"], c.gate, c.ship_strategy)
        e = found.get(key)
        if e is None:
            e = found[key] = EdgeSummary(
                up["operator"],
                down["operator"],
                c.gate,
                c.ship_strategy,
                parallelism.get(up["operator_id"], 0),
                parallelism.get(down["operator_id"], 0),
            )
        e.channels.append(c)
        e.upstream_parallelism = max(e.upstream_parallelism, up["subtask"] + 1)
        e.downstream_parallelism = max(e.downstream_parallelism, down["subtask"] + 1)
    return list(found.values())
