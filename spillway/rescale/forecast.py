"""A restore forecast: what an offline rescale WOULD move, and what Flink's own restore-time rescaling
would have to do instead (docs/rescale.md, "forecast"; docs/format/rescaling.md).

*spillway*: every old channel of the plan is read and routed with the router the real rescale uses
(``router.route_source``), the runs are counted per new channel and per new channel-state file, and
nothing is written.

*Flink*: per edge and new downstream subtask, Flink's ``SubtaskStateMapper`` (downstream mapper of the
edge's partitioner, ARBITRARY upstream) gives the old subtasks whose channel state it receives; the
virtual channels are ``DemultiplexingRecordDeserializer.create``'s count (old subtasks x old channels
mapped to each new input channel); the bytes it reads are those logical channels (its own input state
plus the upstream's re-sent output state), the ones of ambiguous old subtasks go through the record filter
(records kept: the same key-group/partitioner math the router uses). Buffer demand: the input-side
chunks read into network buffers of ``segment_size`` (one chunk fills ceil(length / segment) buffers),
against what a gate gets (input channels x buffers-per-channel + floating-buffers-per-gate).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from spillway.flink.keygroups import key_group_range, operator_index
from spillway.flink.partitioners import Partitioner
from spillway.formats.channel_file import HEADER_SIZE, read_chunk_header
from spillway.rescale.channel_reader import open_part
from spillway.rescale.channel_writer import target_file_name
from spillway.rescale.plan import EdgePlan, RescalePlan, SourceChannel
from spillway.rescale.rescale_options import BUFFERS_PER_CHANNEL, DEFAULT_BUFFER_SIZE, FLOATING_BUFFERS_PER_GATE

# The router (and with it numpy, ~0.1-0.25 s of import) is imported by forecast() only: the CLI imports
# this module for BufferSettings and its defaults in every command, validate and dump included.

UPPER_BOUND_MAX_PARALLELISM = 32768  # KeyGroupRangeAssignment: RANGE cancels the max parallelism out
LENGTH_FIELD = 4  # a chunk's length field


@dataclass(frozen=True)
class BufferSettings:
    segment_size: int = DEFAULT_BUFFER_SIZE  # the network buffer size
    buffers_per_channel: int = BUFFERS_PER_CHANNEL
    floating_buffers_per_gate: int = FLOATING_BUFFERS_PER_GATE

    def to_doc(self) -> dict[str, int]:
        return {
            "segment_size": self.segment_size,
            "buffers_per_channel": self.buffers_per_channel,
            "floating_buffers_per_gate": self.floating_buffers_per_gate,
        }


# ------------------------------------------------------------------------------------------ Flink's mappers


def downstream_mapper(strategy: str) -> str:
    """The partitioner's downstream ``SubtaskStateMapper`` (docs/format/rescaling.md)."""
    return Partitioner.of(strategy).downstream_mapper or "UNSUPPORTED"


def old_subtasks(mapper: str, new_index: int, old_p: int, new_p: int) -> list[int]:
    """``SubtaskStateMapper.getOldSubtasks`` (ARBITRARY is ROUND_ROBIN)."""
    if mapper in ("ROUND_ROBIN", "ARBITRARY"):
        return list(range(new_index, old_p, new_p))
    if mapper == "FIRST":
        return list(range(old_p)) if new_index == 0 else []
    if mapper == "FULL":
        return list(range(old_p))
    if mapper == "RANGE":
        first, last = key_group_range(UPPER_BOUND_MAX_PARALLELISM, new_p, new_index)
        start = operator_index(UPPER_BOUND_MAX_PARALLELISM, old_p, first)
        end = operator_index(UPPER_BOUND_MAX_PARALLELISM, old_p, last)
        return list(range(start, end + 1))
    return []  # UNSUPPORTED: pointwise/broadcast edges carry no channel state


def mapping(mapper: str, old_p: int, new_p: int) -> list[list[int]]:
    """``getNewToOldSubtasksMapping``: new index -> old indexes."""
    return [old_subtasks(mapper, n, old_p, new_p) for n in range(new_p)]


def is_identity(m: list[list[int]], old_p: int) -> bool:
    """``RescaleMappings.isIdentity``: new i reads old i for every old i; new subtasks past them read nothing."""
    return len(m) >= old_p and all(olds == ([i] if i < old_p else []) for i, olds in enumerate(m))


def ambiguous(mapper: str, m: list[list[int]]) -> set[int]:
    """``RescaleMappings.getAmbiguousTargets`` for ambiguous-capable mappers (RANGE, FULL)."""
    if mapper not in ("RANGE", "FULL"):
        return set()
    seen: dict[int, int] = {}
    for olds in m:
        for o in olds:
            seen[o] = seen.get(o, 0) + 1
    return {o for o, n in seen.items() if n > 1}


# ------------------------------------------------------------------------------------------ the forecast


@dataclass
class _Source:
    records: int = 0
    bytes: int = 0
    to: dict[int, int] = field(default_factory=dict)  # new downstream subtask -> records routed there
    to_bytes: dict[int, int] = field(default_factory=dict)  # new downstream subtask -> framed bytes routed there


def _input_buffers(src: SourceChannel, segment: int) -> int:
    """Network buffers the source's input-side chunks fill when Flink reads them back."""
    total = 0
    for part in src.parts:
        if part.side != "input":
            continue
        blob = open_part(part)
        try:
            for off in part.offsets:
                total += -(-read_chunk_header(blob, off).length // segment)
        finally:
            blob.close()
    return total


def forecast(plan: RescalePlan, settings: BufferSettings | None = None) -> dict[str, Any]:
    """The ``forecast`` object of ``spillway.rescale/1`` (reads every planned old channel, writes nothing)."""
    from spillway.rescale.execute import finish_report
    from spillway.rescale.router import RouteStats, route_source

    settings = settings or BufferSettings()
    channels: dict[tuple[str, int, int, int], list[int]] = {}  # (op, down, gate, up) -> [records, bytes]
    labels = {vp.head.operator_id: vp.label for vp in plan.vertices.values() if vp.head is not None}
    per_source: dict[int, _Source] = {}
    for src in plan.sources:
        ep = plan.edges[src.edge]
        stats = RouteStats()
        seen = _Source()
        for run in route_source(src, ep, stats):
            acc = channels.setdefault((ep.down_head, run.down, ep.gate, run.up), [0, 0])
            acc[0] += run.records
            acc[1] += len(run.data)
            seen.to[run.down] = seen.to.get(run.down, 0) + run.records
            seen.to_bytes[run.down] = seen.to_bytes.get(run.down, 0) + len(run.data)
        finish_report(src, stats, 0)  # refuses a channel that ends inside a record, as the rescale does
        seen.records, seen.bytes = stats.records, src.payload_bytes
        per_source[src.sid] = seen
    new_channels: list[dict[str, Any]] = [
        {
            "vertex": labels.get(op, op),
            "operator_id": op,
            "subtask": down,
            "gate": gate,
            "channel": up,
            "records": rb[0],
            "bytes": rb[1],
        }
        for (op, down, gate, up), rb in sorted(channels.items())
    ]
    files: dict[tuple[str, int], dict[str, Any]] = {}
    for c in new_channels:
        f = files.setdefault(
            (c["operator_id"], c["subtask"]),
            {
                "file": target_file_name(c["operator_id"], c["subtask"]),
                "vertex": c["vertex"],
                "subtask": c["subtask"],
                "channels": 0,
                "records": 0,
                "bytes": HEADER_SIZE,
            },
        )
        f["channels"] += 1
        f["records"] += c["records"]
        f["bytes"] += c["bytes"] + LENGTH_FIELD * -(-c["bytes"] // plan.buffer_size)  # chunks' length fields
    moved = sum(c["records"] for c in new_channels)
    flink = [e for e in (_flink_edge(ep, plan, per_source, settings) for ep in plan.edges) if e is not None]
    return {
        "spillway": {
            "records": moved,
            "bytes": sum(c["bytes"] for c in new_channels),
            "channels": new_channels,
            "files": list(files.values()),
        },
        "flink": {
            "settings": settings.to_doc(),
            "edges": flink,
            "virtual_channels": sum(s["virtual_channels"] for e in flink for s in e["subtasks"]),
            "bytes_read": sum(s["bytes_read"] for e in flink for s in e["subtasks"]),
            "bytes_filtered": sum(s["bytes_filtered"] for e in flink for s in e["subtasks"]),
            "bytes_kept": sum(s["bytes_kept"] for e in flink for s in e["subtasks"]),
            "over_budget": sum(1 for e in flink for s in e["subtasks"] if s["over_budget"]),
        },
    }


def _flink_edge(
    ep: EdgePlan, plan: RescalePlan, per_source: dict[int, _Source], settings: BufferSettings
) -> dict[str, Any] | None:
    sources = [s for s in plan.sources if s.edge == ep.index]
    if not any(s.parts for s in sources):
        return None  # no in-flight data on this edge: Flink gives its gate NO_STATE
    down_mapper = downstream_mapper(ep.strategy)
    down_map = mapping(down_mapper, ep.old_down_p, ep.new_down_p)
    up_map = mapping("ARBITRARY", ep.old_up_p, ep.new_up_p)  # the gate's channel mapping: upstream's output
    identity = is_identity(down_map, ep.old_down_p) and is_identity(up_map, ep.old_up_p)
    amb = ambiguous(down_mapper, down_map)
    gate_buffers = ep.new_up_p * settings.buffers_per_channel + settings.floating_buffers_per_gate
    by_down: dict[int, list[SourceChannel]] = {}
    for s in sources:
        by_down.setdefault(s.down, []).append(s)
    subtasks = []
    for n, olds in enumerate(down_map):
        mine = [s for d in olds for s in by_down.get(d, [])]
        virtual = 0 if identity or not olds else len(olds) * sum(len(u) for u in up_map)
        filtered = [s for s in mine if s.down in amb]
        kept = sum(per_source[s.sid].records for s in mine if s.down not in amb)
        kept += sum(per_source[s.sid].to.get(n, 0) for s in filtered)
        # Bytes of what the filter lets through: an unambiguous old subtask's channels whole, an ambiguous
        # one's the elements the partitioner puts on this subtask (what the router routes here).
        kept_bytes = sum(s.payload_bytes for s in mine if s.down not in amb)
        kept_bytes += sum(per_source[s.sid].to_bytes.get(n, 0) for s in filtered)
        recovered = sum(_input_buffers(s, settings.segment_size) for s in mine)
        subtasks.append(
            {
                "subtask": n,
                "old_subtasks": olds,
                "ambiguous_old_subtasks": sorted(set(olds) & amb),
                "input_channels": ep.new_up_p,
                "virtual_channels": virtual,
                "bytes_read": sum(s.payload_bytes for s in mine),
                "bytes_filtered": sum(s.payload_bytes for s in filtered),
                "bytes_kept": kept_bytes,
                "records_read": sum(per_source[s.sid].records for s in mine),
                "records_kept": kept,
                "recovered_buffers": recovered,
                "gate_buffers": gate_buffers,
                "over_budget": recovered > gate_buffers,
            }
        )
    return {
        "edge": ep.label,
        "downstream_mapper": down_mapper,
        "upstream_mapper": "ARBITRARY",
        "rescaling": not identity,
        "subtasks": subtasks,
    }
