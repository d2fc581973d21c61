"""Run a rescale plan's data movement. Two backends share the same per-source and per-target steps:
``run_local`` (in-process; for small checkpoints and tests) and ``spillway.rescale.spark_job.run_spark``.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from spillway.rescale.channel_writer import WrittenFile, target_key, write_sorted_runs
from spillway.rescale.plan import EdgePlan, RescalePlan, SourceChannel
from spillway.rescale.route import RouteError, RouteStats, Run, route_source


@dataclass
class SourceReport:
    sid: int
    records: int
    record_bytes: int
    crc: int
    copies: int  # records delivered, counting broadcast copies
    kept_markers: int
    dropped: dict[str, int]

    def to_doc(self) -> dict:
        return self.__dict__.copy()


@dataclass
class MoveResult:
    files: list[WrittenFile]
    sources: list[SourceReport]
    intended: dict[tuple[str, int, int, int], tuple[int, int]] = field(default_factory=dict)


def route_one(src: SourceChannel, ep: EdgePlan) -> tuple[list[Run], SourceReport]:
    """Route a source completely (used where runs are collected; the Spark path streams instead)."""
    stats = RouteStats()
    runs = list(route_source(src, ep, stats))
    return runs, finish_report(src, stats, runs)


def finish_report(
    src: SourceChannel, stats: RouteStats, runs: list[Run] | None = None, copies: int = -1
) -> SourceReport:
    if stats.leftover:
        raise RouteError(
            f"{src.label}: the channel ends inside a record ({stats.leftover} bytes of an unfinished record); "
            "it cannot be re-cut offline (run spillway validate)"
        )
    if copies < 0:
        copies = sum(r.records for r in runs or [])
    return SourceReport(
        src.sid, stats.records, stats.record_bytes, stats.crc, copies, stats.kept_markers, dict(stats.dropped)
    )


def row_of(ep: EdgePlan, run: Run) -> tuple[str, int, int, int, int, int, bytes, int, int]:
    """(target key, down, gate, up, sid, seq, data, records, crc): the sort order is the row order."""
    return (
        target_key(ep.down_head, run.down),
        run.down,
        ep.gate,
        run.up,
        run.sid,
        run.seq,
        run.data,
        run.records,
        run.crc,
    )


def run_local(plan: RescalePlan, directory: str) -> MoveResult:
    rows = []
    reports = []
    for src in plan.sources:
        ep = plan.edges[src.edge]
        runs, report = route_one(src, ep)
        reports.append(report)
        rows.extend(row_of(ep, r) for r in runs)
    rows.sort(key=lambda r: r[:6])
    files = write_sorted_runs(
        directory, ((r[0].split(":")[0], r[1], r[2], r[3], r[6], r[7], r[8]) for r in rows), plan.buffer_size
    )
    return MoveResult(files, reports)
