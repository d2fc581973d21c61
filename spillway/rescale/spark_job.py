"""The PySpark backend: route old channels in parallel, shuffle run refs to their new channel files,
write those files on the executors, and self-check them there. The driver only handles the plan and
small per-file / per-source reports (never the records themselves).

Stage 1 (``mapInArrow`` over source ids): each task routes its old channels into staging files beside
the output and emits one ref row per run (``staging.RunRef``: target, order keys, file, offset, length,
records, crc) and a report row per old channel.
Stage 2 (``repartition`` by target + ``sortWithinPartitions``): each task reads its sorted runs back
from staging and streams them into channel-state files, then re-reads and checks them. Only refs cross
Spark's shuffle. Output bytes depend only on the sort order, so ``local[*]`` and a cluster write
byte-identical files.
"""

from __future__ import annotations

import contextlib
import json
import os
import pickle
import re
import sys
import tempfile
import threading
import time
from collections.abc import Iterator
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import replace
from typing import Any

from spillway import progress
from spillway.flink.keygroups import murmur3_int
from spillway.rescale import spark_cds
from spillway.rescale.channel_writer import WrittenFile, background_fsync, target_key, write_sorted_runs
from spillway.rescale.execute import MoveResult, SourceReport, finish_report
from spillway.rescale.plan import RescalePlan, RescaleRefused
from spillway.rescale.route_error import RouteError
from spillway.rescale.staging import RunRef, remove_staging, stage_source, staged_rows
from spillway.storage.safe_writer import WriteError

STATS_KEY = "~stats"  # sorts after every target key


def session(master: str) -> Any:
    """The SparkSession for ``master``: the one ``prestart`` is already bringing up, else a new one."""
    global _pending
    pending, _pending = _pending, None
    if pending is not None and pending[0] == master:
        return pending[1].result()
    return _start(master)


_pending: tuple[str, Future[Any]] | None = None


def prestart(master: str) -> None:
    """Start the JVM for ``master`` on a thread of its own while the caller validates the source and plans
    (``session`` then waits for it). Spark start is 3.6-6 s of a local rescale on this project's 2-core
    machine, the source's validation another ~1-2 s per GiB; neither needs the other. A failed start is
    raised by ``session``; one nobody asks for dies with the process (the JVM exits with its stdin pipe)."""
    global _pending
    if _pending is None:
        pool = ThreadPoolExecutor(max_workers=1, thread_name_prefix="spillway-spark-start")
        _pending = (master, pool.submit(_start, master))
        pool.shutdown(wait=False)


def _start(master: str) -> Any:
    from pyspark import SparkConf
    from pyspark.sql import SparkSession

    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    os.environ.setdefault("PYSPARK_DRIVER_PYTHON", sys.executable)
    options = {
        "spark.pyspark.python": sys.executable,
        "spark.ui.enabled": "false",
        "spark.ui.showConsoleProgress": "false",
        "spark.log.level": "ERROR",
        "spark.sql.shuffle.partitions": "8",
        "spark.sql.execution.arrow.maxRecordsPerBatch": "1024",
        "spark.driver.bindAddress": "127.0.0.1",
        "spark.driver.host": "127.0.0.1",
    }
    building = None
    if master.startswith("local"):
        # The driver JVM only schedules small tasks here: C1 alone starts it ~1 s sooner, and classes
        # mapped from a CDS archive save ~5 s more (measured; see spark_cds).
        cds, building = spark_cds.java_options()
        options["spark.driver.extraJavaOptions"] = f"-XX:TieredStopAtLevel=1 {cds}".strip()
    conf = SparkConf().setMaster(master).setAppName("spillway-rescale").setAll(list(options.items()))
    _launch_quietly(conf)
    builder = SparkSession.builder.master(master).appName("spillway-rescale")
    for key, value in options.items():
        builder = builder.config(key, value)
    spark = builder.getOrCreate()
    if building is not None:
        spark_cds.record_jvm(spark, building)
    spark.sparkContext.setLogLevel("ERROR")
    return spark


spark_log: str | None = None  # where the JVM's (and its python workers') stderr goes, once redirected
_own_log = False  # spark_log is a temporary file of ours (not SPILLWAY_SPARK_LOG): removed after a successful run


def forget_log() -> None:
    """After a successful run nobody needs Spark's chatter: remove our temporary log file (the JVM keeps
    writing to the unlinked file; a chosen ``SPILLWAY_SPARK_LOG`` file is kept)."""
    global spark_log, _own_log
    if spark_log and _own_log:
        with contextlib.suppress(OSError):
            os.unlink(spark_log)
        spark_log, _own_log = None, False


def _launch_quietly(conf: Any) -> None:
    """Launch the driver JVM with its stderr in a log file instead of the terminal: log4j and the python
    workers it forks inherit that descriptor, so their start-up chatter and an executor's stack traces
    stay out of the CLI's output (failures are reported in one line naming the log). Only the JVM's
    descriptor is redirected (pyspark's ``popen_kwargs``), not this process's: the start may run on a
    thread while the caller still prints. ``SPILLWAY_SPARK_LOG=-`` keeps them on the terminal,
    ``SPILLWAY_SPARK_LOG=PATH`` picks the file."""
    global spark_log, _own_log
    from pyspark import SparkContext
    from pyspark.java_gateway import launch_gateway

    choice = os.environ.get("SPILLWAY_SPARK_LOG", "")
    if choice == "-" or SparkContext._gateway is not None:
        return
    if choice:
        fd = os.open(choice, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
        path = choice
    else:
        fd, path = tempfile.mkstemp(prefix="spillway-spark-", suffix=".log")
    try:
        gateway = launch_gateway(conf, popen_kwargs={"stderr": fd})
    finally:
        os.close(fd)
    SparkContext._ensure_initialized(gateway=gateway)  # getOrCreate's context then uses this JVM
    spark_log, _own_log = path, not choice


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
            ("file", pa.string()),
            ("offset", pa.int64()),
            ("length", pa.int64()),
            ("records", pa.int64()),
            ("crc", pa.int64()),
            ("part", pa.int32()),
            ("doc", pa.string()),
        ]
    )


RUN_DDL = (
    "tkey string, down int, gate int, up int, sid long, seq long, file string, offset long, length long, "
    "records long, crc long, part int, doc string"
)
MAX_WRITE_TASKS = 64


def _spark_hash_int(value: int) -> int:
    """Spark's ``Murmur3Hash`` of an int column (``Murmur3_x86_32.hashInt``, seed 42), as a signed int."""
    return murmur3_int(value, seed=42)


def write_partitions(plan: RescalePlan) -> tuple[int, dict[str, int]]:
    """(number of write tasks, target key -> ``part`` value). Hash partitioning on ``part`` puts each
    target in a partition of its own (up to MAX_WRITE_TASKS; beyond that round-robin), biggest expected
    targets first, so no two big targets meet in one task by a hash collision. Only speed depends on
    this: every target lands whole in one partition whatever the values."""
    size: dict[str, float] = {}
    for ep in plan.edges:
        payload = sum(s.payload_bytes for s in plan.sources if s.edge == ep.index)
        for d in range(ep.new_down_p):
            key = target_key(ep.down_head, d)
            size[key] = size.get(key, 0.0) + payload / ep.new_down_p
    order = sorted(size, key=lambda k: (-size[k], k))
    tasks = min(len(order), MAX_WRITE_TASKS) + 1  # + one for the per-source reports
    wanted = {key: i % (tasks - 1) for i, key in enumerate(order)}
    wanted[STATS_KEY] = tasks - 1
    value_for: dict[int, int] = {}
    x = 0
    while len(value_for) < tasks:  # the smallest int that Spark's partitioner sends to each partition
        value_for.setdefault(_spark_hash_int(x) % tasks, x)
        x += 1
    return tasks, {key: value_for[p] for key, p in wanted.items()}


def _route_partition(plan_bytes: bytes, part_of: dict[str, int], directory: str, order: list[int]) -> Any:
    """Stage 1: route each old channel into its staging file; emit one ref row per run and one report row
    per old channel (``doc``)."""

    def route(batches: Iterator[Any]) -> Iterator[Any]:
        import pyarrow as pa

        plan: RescalePlan = pickle.loads(plan_bytes)
        schema = _run_schema()

        def batch(rows: list[tuple]) -> Any:
            cols = list(zip(*rows, strict=True))
            return pa.RecordBatch.from_arrays(
                [pa.array(c, type=f.type) for c, f in zip(cols, schema, strict=True)], schema=schema
            )

        for b in batches:
            for i in b.column("id").to_pylist():
                sid = order[i]
                src = plan.sources[sid]
                refs, stats = stage_source(src, plan.edges[src.edge], directory)
                report = finish_report(src, stats, copies=sum(r.records for r in refs))
                rows: list[tuple[Any, ...]] = [
                    (r.tkey, r.down, r.gate, r.up, r.sid, r.seq, r.file, r.offset, r.length, r.records, r.crc,
                     part_of[r.tkey], None)
                    for r in refs
                ]  # fmt: skip
                rows.append(
                    (STATS_KEY, 0, 0, 0, sid, 0, "", 0, 0, 0, 0, part_of[STATS_KEY], json.dumps(report.to_doc()))
                )
                yield batch(rows)

    return route


def _write_partition(directory: str, buffer_size: int, plan_bytes: bytes) -> Any:
    def write(batches: Iterator[Any]) -> Iterator[Any]:
        import pyarrow as pa

        from spillway.rescale.verify import check_file

        plan: RescalePlan = pickle.loads(plan_bytes)
        stats_docs: list[str] = []

        def refs() -> Iterator[RunRef]:
            for b in batches:
                cols = b.to_pydict()
                for i, tkey in enumerate(cols["tkey"]):
                    if tkey == STATS_KEY:
                        stats_docs.append(cols["doc"][i])
                        continue
                    yield RunRef(
                        tkey,
                        cols["down"][i],
                        cols["gate"][i],
                        cols["up"][i],
                        cols["sid"][i],
                        cols["seq"][i],
                        cols["file"][i],
                        cols["offset"][i],
                        cols["length"][i],
                        cols["records"][i],
                        cols["crc"][i],
                    )

        from pathlib import Path

        out = []
        with background_fsync() as synced:  # the flush overlaps the check's re-read
            files = write_sorted_runs(directory, staged_rows(directory, refs()), buffer_size, synced)
            for f in files:
                problems, per_gate = check_file(Path(directory), f, plan)
                out.append(json.dumps({"file": f.to_doc(), "problems": problems, "per_gate": per_gate}))
        out += [json.dumps({"source": json.loads(d)}) for d in stats_docs]
        if out:
            yield pa.RecordBatch.from_arrays([pa.array(out, type=pa.string())], names=["doc"])

    return write


def _absolute(plan: RescalePlan) -> RescalePlan:
    """The plan with absolute local paths: executors of a cluster run in their own working directory."""
    sources = [
        replace(s, parts=tuple(replace(p, path=os.path.abspath(p.path)) if p.path else p for p in s.parts))
        for s in plan.sources
    ]
    return replace(plan, sources=sources)


def executor_failure(exc: Exception) -> Exception:
    """The one-line error for a failed Spark job: the Python exception an executor raised (a refusal such
    as ``RouteError`` keeps its type), else Spark's own first line."""
    text = str(exc)
    lines = [line.strip() for line in text.splitlines() if line.strip()]
    raised = [line for line in lines if re.match(r"^[\w.]+(Error|Exception|Refused): ", line)]
    last = raised[-1] if raised else (lines[0] if lines else type(exc).__name__)
    name, _, message = last.partition(": ")
    kind = name.rsplit(".", 1)[-1]
    if kind == "RouteError":
        return RouteError(message)
    if kind == "RescaleRefused":
        return RescaleRefused(message)
    where = f" (Spark's log: {spark_log})" if spark_log else ""
    return WriteError(f"the Spark job failed: {last}{where}")


@contextlib.contextmanager
def _task_progress(spark: Any) -> Iterator[None]:
    """Tick a progress stage each time a Spark task finishes (the driver polls Spark's status tracker:
    one task routes a slice of the old channels or writes a share of the new channel files)."""
    bar = progress.stage("rescale: Spark tasks (route, then write)", None, "tasks")
    if bar is progress.SILENT:
        yield
        return
    tracker = spark.sparkContext.statusTracker()
    seen: dict[int, tuple[int, int]] = {}  # stage id -> (completed, total)
    stop = threading.Event()

    def poll() -> None:
        while not stop.wait(0.3):
            try:
                for sid in tracker.getActiveStageIds():
                    info = tracker.getStageInfo(sid)
                    if info is not None:
                        seen[sid] = (info.numCompletedTasks, info.numTasks)
            except Exception:  # the tracker is best effort: never fail the job for a progress bar
                continue
            bar.update(sum(d for d, _ in seen.values()), sum(t for _, t in seen.values()) or None)

    poller = threading.Thread(target=poll, name="spillway-spark-progress", daemon=True)
    poller.start()
    try:
        yield
    finally:
        stop.set()
        poller.join()
        bar.done()


def run_spark(
    plan: RescalePlan, directory: str, master: str, timings: dict[str, float] | None = None
) -> tuple[MoveResult, list[str], dict[int, int]]:
    """Returns the move result, the executors' self-check problems and records written per edge.
    ``timings`` gets ``spark_start`` (session and JVM start) in seconds."""
    t0 = time.perf_counter()
    spark = session(master)
    if timings is not None:
        timings["spark_start"] = time.perf_counter() - t0
    plan = _absolute(plan)
    directory = os.path.abspath(directory)
    plan_bytes = pickle.dumps(plan)
    order = [s.sid for s in sorted(plan.sources, key=lambda s: -s.payload_bytes)]  # big first: better packing
    slices = max(1, min(len(order), spark.sparkContext.defaultParallelism * 4))
    # spark.range, not createDataFrame: no local data to ship to the JVM (that took ~1 s)
    ids = spark.range(0, len(order), numPartitions=slices)
    tasks, part_of = write_partitions(plan)
    routed = ids.mapInArrow(_route_partition(plan_bytes, part_of, directory, order), RUN_DDL)
    written = (
        routed.repartition(tasks, "part")
        .sortWithinPartitions("tkey", "gate", "up", "sid", "seq")
        .mapInArrow(_write_partition(directory, plan.buffer_size, plan_bytes), "doc string")
    )
    files: list[WrittenFile] = []
    reports: list[SourceReport] = []
    problems: list[str] = []
    per_edge: dict[int, int] = {}
    by_gate = {(ep.down_head, ep.gate): ep.index for ep in plan.edges}
    # collect(), not toLocalIterator(): the latter runs one job per partition, one after the other, which
    # serializes the write stage. The rows are small reports (one per file and per old channel).
    try:
        with _task_progress(spark):
            collected = written.collect()
    except Exception as exc:
        if type(exc).__module__.startswith(("pyspark", "py4j")):
            raise executor_failure(exc) from None
        raise
    finally:
        remove_staging(directory)
    for row in collected:
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
    if not problems:
        forget_log()
    return MoveResult(files, reports), problems, per_edge
