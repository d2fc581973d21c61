"""The PySpark backend: route old channels in parallel, shuffle runs to their new channel files, write
those files on the executors, and self-check them there. The driver only handles the plan and small
per-file / per-source reports (never the records themselves).

Stage 1 (``mapInArrow`` over source ids): each task routes its old channels into runs (Arrow rows).
Stage 2 (``repartition`` by target + ``sortWithinPartitions``): each task streams its sorted runs into
channel-state files. Output bytes depend only on the sort order, so ``local[*]`` and a cluster write
byte-identical files.
"""

from __future__ import annotations

import json
import os
import pickle
import sys
from collections.abc import Iterator
from typing import Any

from spillway.rescale.channel_writer import WrittenFile, write_sorted_runs
from spillway.rescale.execute import MoveResult, SourceReport, finish_report, row_of
from spillway.rescale.plan import RescalePlan
from spillway.rescale.route import RouteStats, route_source

STATS_KEY = "~stats"  # sorts after every target key
ROW_BATCH = 4 * 1024 * 1024  # bytes of run data per Arrow batch


def session(master: str) -> Any:
    from pyspark.sql import SparkSession

    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    os.environ.setdefault("PYSPARK_DRIVER_PYTHON", sys.executable)
    builder = (
        SparkSession.builder.master(master)
        .appName("spillway-rescale")
        .config("spark.pyspark.python", sys.executable)
        .config("spark.ui.enabled", "false")
        .config("spark.ui.showConsoleProgress", "false")
        .config("spark.log.level", "ERROR")
        .config("spark.sql.shuffle.partitions", "8")
        .config("spark.sql.execution.arrow.maxRecordsPerBatch", "1024")
        .config("spark.driver.bindAddress", "127.0.0.1")
        .config("spark.driver.host", "127.0.0.1")
    )
    spark = builder.getOrCreate()
    spark.sparkContext.setLogLevel("ERROR")
    return spark


def _run_schema() -> Any:
    import pyarrow as pa

    return pa.schema(
        [
            ("tkey", pa.string()),
            ("down", pa.int32()),
            ("gate", pa.int32()),
            ("up", pa.int32()),
            ("sid", pa.int64()),
            ("seq", pa.int64()),
            ("data", pa.binary()),
            ("records", pa.int64()),
            ("crc", pa.int64()),
        ]
    )


RUN_DDL = "tkey string, down int, gate int, up int, sid long, seq long, data binary, records long, crc long"


def _route_partition(plan_bytes: bytes) -> Any:
    def route(batches: Iterator[Any]) -> Iterator[Any]:
        import pyarrow as pa

        plan: RescalePlan = pickle.loads(plan_bytes)
        schema = _run_schema()
        rows: list[tuple] = []
        size = 0

        def batch() -> Any:
            cols = list(zip(*rows, strict=True))
            return pa.RecordBatch.from_arrays(
                [pa.array(c, type=f.type) for c, f in zip(cols, schema, strict=True)], schema=schema
            )

        for b in batches:
            for sid in b.column("sid").to_pylist():
                src = plan.sources[sid]
                ep = plan.edges[src.edge]
                stats = RouteStats()
                copies = 0
                for run in route_source(src, ep, stats):
                    copies += run.records
                    rows.append(row_of(ep, run))
                    size += len(run.data)
                    if size >= ROW_BATCH:
                        yield batch()
                        rows, size = [], 0
                report = finish_report(src, stats, copies=copies)
                rows.append((STATS_KEY, 0, 0, 0, sid, 0, json.dumps(report.to_doc()).encode(), 0, 0))
        if rows:
            yield batch()

    return route


def _write_partition(directory: str, buffer_size: int, plan_bytes: bytes) -> Any:
    def write(batches: Iterator[Any]) -> Iterator[Any]:
        import pyarrow as pa

        from spillway.rescale.verify import check_file

        plan: RescalePlan = pickle.loads(plan_bytes)
        stats_docs: list[str] = []

        def rows() -> Iterator[tuple]:
            for b in batches:
                cols = b.to_pydict()
                for i, tkey in enumerate(cols["tkey"]):
                    if tkey == STATS_KEY:
                        stats_docs.append(cols["data"][i].decode())
                        continue
                    yield (
                        tkey.split(":")[0],
                        cols["down"][i],
                        cols["gate"][i],
                        cols["up"][i],
                        cols["data"][i],
                        cols["records"][i],
                        cols["crc"][i],
                    )

        from pathlib import Path

        files = write_sorted_runs(directory, rows(), buffer_size)
        out = []
        for f in files:
            problems, per_gate = check_file(Path(directory), f, plan)
            out.append(json.dumps({"file": f.to_doc(), "problems": problems, "per_gate": per_gate}))
        out += [json.dumps({"source": json.loads(d)}) for d in stats_docs]
        if out:
            yield pa.RecordBatch.from_arrays([pa.array(out, type=pa.string())], names=["doc"])

    return write


def run_spark(plan: RescalePlan, directory: str, master: str) -> tuple[MoveResult, list[str], dict[int, int]]:
    """Returns the move result, the executors' self-check problems and records written per edge."""
    spark = session(master)
    plan_bytes = pickle.dumps(plan)
    order = sorted(plan.sources, key=lambda s: -s.payload_bytes)  # big channels first: better packing
    slices = max(1, min(len(order), spark.sparkContext.defaultParallelism * 4))
    sids = spark.createDataFrame([(s.sid,) for s in order], "sid long").repartition(slices)
    routed = sids.mapInArrow(_route_partition(plan_bytes), RUN_DDL)
    targets = len({(ep.down_head, d) for ep in plan.edges for d in range(ep.new_down_p)}) + 1
    written = (
        routed.repartition(max(1, min(targets, 64)), "tkey")
        .sortWithinPartitions("tkey", "gate", "up", "sid", "seq")
        .mapInArrow(_write_partition(directory, plan.buffer_size, plan_bytes), "doc string")
    )
    files: list[WrittenFile] = []
    reports: list[SourceReport] = []
    problems: list[str] = []
    per_edge: dict[int, int] = {}
    by_gate = {(ep.down_head, ep.gate): ep.index for ep in plan.edges}
    for row in written.toLocalIterator():
        doc = json.loads(row["doc"])
        if "source" in doc:
            reports.append(SourceReport(**doc["source"]))
            continue
        f = WrittenFile.from_doc(doc["file"])
        files.append(f)
        problems += doc["problems"]
        for gate, n in doc["per_gate"].items():
            idx = by_gate.get((f.operator_id, int(gate)))
            if idx is not None:
                per_edge[idx] = per_edge.get(idx, 0) + n
    files.sort(key=lambda f: (f.operator_id, f.down))
    reports.sort(key=lambda r: r.sid)
    return MoveResult(files, reports), problems, per_edge
