"""Run a rescale plan's data movement. Two backends share the same per-source and per-target steps
(``staging.stage_source``, then ``write_sorted_runs`` over the sorted run refs): ``run_local``
(in-process, one core) and ``spillway.rescale.spark_job.run_spark``.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any

from spillway import progress
from spillway.rescale.channel_writer import WrittenFile, write_sorted_runs
from spillway.rescale.plan import RescalePlan, SourceChannel
from spillway.rescale.route_error import RouteError
from spillway.rescale.router import RouteStats
from spillway.rescale.staging import RunRef, remove_staging, stage_source, staged_rows


@dataclass
class SourceReport:
    sid: int
    records: int
    record_bytes: int
    crc: int
    copies: int  # records delivered, counting broadcast copies
    kept_markers: int
    dropped: dict[str, int]

    def to_doc(self) -> dict[str, Any]:
        return self.__dict__.copy()


@dataclass
class MoveResult:
    files: list[WrittenFile]
    sources: list[SourceReport]
    intended: dict[tuple[str, int, int, int], tuple[int, int]] = field(default_factory=dict)


def finish_report(src: SourceChannel, stats: RouteStats, copies: int) -> SourceReport:
    """``copies``: records delivered to the new channels (a broadcast record once per target)."""
    if stats.leftover:
        raise RouteError(
            f"{src.label}: the channel ends inside a record ({stats.leftover} bytes of an unfinished record); "
            "it cannot be re-cut offline (run spillway validate)"
        )
    return SourceReport(
        src.sid, stats.records, stats.record_bytes, stats.crc, copies, stats.kept_markers, dict(stats.dropped)
    )


def run_local(plan: RescalePlan, directory: str, synced: Callable[[str], None] | None = None) -> MoveResult:
    """Route every old channel into staging files, sort the run refs, write the new files (``synced``:
    see ``write_sorted_runs``). Memory holds the refs (one per run of at most RUN_LIMIT bytes), never
    the records."""
    refs = []
    reports = []
    try:
        routing = progress.stage("rescale: routing old channels", sum(s.payload_bytes for s in plan.sources))
        for src in plan.sources:
            staged, stats = stage_source(src, plan.edges[src.edge], directory)
            reports.append(finish_report(src, stats, copies=sum(r.records for r in staged)))
            refs.extend(staged)
            routing.advance(src.payload_bytes)
        refs.sort(key=lambda r: r.order())
        writing = progress.stage("rescale: writing new channels", len(refs), "runs")

        def ticking(refs: list[RunRef]) -> Iterator[RunRef]:
            for r in refs:
                yield r
                writing.advance()

        files = write_sorted_runs(directory, staged_rows(directory, ticking(refs)), plan.buffer_size, synced)
    finally:
        remove_staging(directory)
    return MoveResult(files, reports)
