"""The PySpark backend: route old channels in parallel, write the new channel files in pieces on the
executors, and self-check every piece there. The driver only handles the plan, the run refs (~100 bytes
per run of up to 256 KiB) and small per-piece / per-source reports (never the records themselves).

Before the jobs: while the JVM starts (``prestart``; a bare SparkContext, then one warm-up task per core),
the driver routes old channels itself, smallest first, exactly as a route task would (``_route_while_starting``);
the moment Spark is up, a thread hands whatever the driver has not taken to job 1, while the driver finishes the
channel it is on (``Claims``).
Job 1 (one task per slice of the remaining old channels; none if the driver routed them all): each task routes
its old channels into staging files beside the output and returns one ref per run (``staging.RunRef``: target,
order keys, file, offset, length, records, crc) and a report per old channel.
Between the jobs the driver sorts the refs (the replay order) and lays out every new file from them
(``layout.plan_files``): each file is cut into pieces of whole runs, about ``PIECES_PER_CORE`` per core
in all, and created at its final size.
Job 2 (one task per piece): each task copies its runs from staging into the piece's byte range and
re-reads it. Output bytes depend only on the sorted refs, so ``local[*]``, a cluster and the
in-process backend write byte-identical files.
"""

from __future__ import annotations

import contextlib
import contextvars
import json
import os
import pickle
import re
import shutil
import sys
import tempfile
import threading
import time
from collections.abc import Iterator
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import replace
from typing import Any

from spillway import progress
from spillway.errors import Message, message_of
from spillway.rescale import spark_cds
from spillway.rescale.execute import MoveResult, SourceReport, finish_report
from spillway.rescale.layout import Piece, PieceResult, create_files, plan_files, sum_pieces, write_piece
from spillway.rescale.plan import RescalePlan, RescaleRefused, SourceChannel
from spillway.rescale.route_error import RouteError
from spillway.rescale.staging import STAGING_DIR, RunRef, remove_staging, stage_source
from spillway.storage.safe_writer import WriteError


def session(master: str) -> Any:
    """The SparkContext for ``master``: the one ``prestart`` is already bringing up, else a new one."""
    global _pending
    pending = _pending
    if pending is not None and pending[0] == master:
        try:
            return pending[1].result()
        finally:  # only now: while it waits, the driver sees the start still pending (_starting) and routes
            if _pending is pending:
                _pending = None
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


def _starting(master: str) -> bool:
    """True while ``prestart``'s JVM for ``master`` is still coming up (the driver has time to spare)."""
    pending = _pending
    return pending is not None and pending[0] == master and not pending[1].done()


def _start(master: str) -> Any:
    from pyspark import SparkConf, SparkContext

    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    os.environ.setdefault("PYSPARK_DRIVER_PYTHON", sys.executable)
    options = {
        "spark.pyspark.python": sys.executable,
        "spark.ui.enabled": "false",
        "spark.ui.showConsoleProgress": "false",
        "spark.log.level": "ERROR",
        "spark.driver.bindAddress": "127.0.0.1",
        "spark.driver.host": "127.0.0.1",
        # pyspark's daemon, importing pyspark byte-compiled instead of from Spark's pyspark.zip: ~0.55 s of
        # CPU less in every python worker's first task (spark_daemon)
        "spark.python.daemon.module": "spillway.rescale.spark_daemon",
    }
    building = None
    if master.startswith("local"):
        # The driver JVM only schedules small tasks here: C1 alone starts it ~1 s sooner, and classes
        # mapped from a CDS archive save ~5 s more (measured; see spark_cds).
        cds, building = spark_cds.java_options()
        options["spark.driver.extraJavaOptions"] = f"-XX:TieredStopAtLevel=1 {cds}".strip()
    conf = SparkConf().setMaster(master).setAppName("spillway-rescale").setAll(list(options.items()))
    _launch_quietly(conf)
    # A bare SparkContext: the jobs use the RDD API only, and a SparkSession's own set-up took another
    # 1.5-2 s of the start (measured side by side, benchmarks/README.md).
    sc = SparkContext.getOrCreate(conf)
    if building is not None:
        spark_cds.record_jvm(sc, building)
    sc.setLogLevel("ERROR")
    _warm_up(sc)
    return sc


def _import_worker_modules(_: Iterator[int]) -> Iterator[int]:
    """A warm-up task: the python worker imports what the route and write tasks need (numpy, the router,
    the writer) by importing this module, which is how this function reaches the worker."""
    return iter(())


def _warm_up(sc: Any) -> None:
    """Run one empty task per core before the first real job: it starts the python workers and imports
    their modules, and loads the JVM's scheduling classes (the first job of a fresh context took 2.6-4.3 s
    against 0.1 s for the next, measured). On the start thread this overlaps the driver's own work; a
    failure here is left for the real job to report."""
    n = max(1, int(sc.defaultParallelism))
    with contextlib.suppress(Exception):  # the route or write job meets the same failure and reports it
        sc.parallelize(range(n), n).mapPartitions(_import_worker_modules).collect()


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


PIECES_PER_CORE = 3  # write tasks per core: pieces of about equal size keep every core busy to the end
MIN_PIECE = 16 * 1024 * 1024  # smaller pieces cost more in task overhead than they gain in balance


def _route_task(plan_bytes: bytes, directory: str) -> Any:
    """Job 1: route each old channel of the task's slices into its staging file; yield one
    (report doc, run ref tuples) per old channel."""

    def route(slices: Iterator[list[int]]) -> Iterator[tuple[dict[str, Any], list[tuple[Any, ...]]]]:
        plan: RescalePlan = pickle.loads(plan_bytes)
        with _sent_as_text():
            yield from _routed(plan, slices, directory)

    return route


def _routed(
    plan: RescalePlan, slices: Iterator[list[int]], directory: str
) -> Iterator[tuple[dict[str, Any], list[tuple[Any, ...]]]]:
    for sids in slices:
        for sid in sids:
            src = plan.sources[sid]
            refs, stats = stage_source(src, plan.edges[src.edge], directory)
            report = finish_report(src, stats, copies=sum(r.records for r in refs))
            yield (
                report.to_doc(),
                [
                    (r.tkey, r.down, r.gate, r.up, r.sid, r.seq, r.file, r.offset, r.length, r.records, r.crc)
                    for r in refs
                ],
            )


def _write_task(directory: str, buffer_size: int, plan_bytes: bytes) -> Any:
    """Job 2: write and re-read each piece of the task; yield what the re-read found."""

    def write(pieces: Iterator[Piece]) -> Iterator[tuple[str, dict[int, list[int]], list[str]]]:
        plan: RescalePlan = pickle.loads(plan_bytes)
        with _sent_as_text():
            for piece in pieces:
                res = write_piece(directory, piece, buffer_size, plan)
                yield res.name, res.channels, res.problems

    return write


def piece_size(plan_total: int, cores: int) -> int:
    return max(MIN_PIECE, -(-plan_total // max(1, cores * PIECES_PER_CORE)))


def _absolute(plan: RescalePlan) -> RescalePlan:
    """The plan with absolute local paths: executors of a cluster run in their own working directory."""
    sources = [
        replace(s, parts=tuple(replace(p, path=os.path.abspath(p.path)) if p.path else p for p in s.parts))
        for s in plan.sources
    ]
    return replace(plan, sources=sources)


# Spark hands the driver an executor's error as text only: a refusal's message (spillway.errors.Message) rides
# along on a line of its own, so the driver raises it with the arguments it names kept apart.
_SENT = "spillway-message: "


@contextlib.contextmanager
def _sent_as_text() -> Iterator[None]:
    try:
        yield
    except (RouteError, RescaleRefused) as exc:
        said = message_of(exc)
        if not isinstance(said, Message):
            raise
        raise type(exc)(f"{said}\n{_SENT}{json.dumps(said.to_doc())}") from None


def _received(lines: list[str], text: str) -> str:
    """The message an executor sent (:func:`_sent_as_text`), else ``text`` as Spark gave it."""
    for line in lines:
        if line.startswith(_SENT):
            return Message.from_doc(json.loads(line[len(_SENT) :]))
    return text


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
        return RouteError(_received(lines, message))
    if kind == "RescaleRefused":
        return RescaleRefused(_received(lines, message))
    where = f" (Spark's log: {spark_log})" if spark_log else ""
    return WriteError(f"the Spark job failed: {last}{where}")


@contextlib.contextmanager
def _task_progress(sc: Any, what: str) -> Iterator[None]:
    """Tick a progress stage each time a Spark task finishes (the driver polls Spark's status tracker:
    one task routes a slice of the old channels or writes a share of the new channel files)."""
    bar = progress.stage(f"rescale: Spark tasks ({what})", None, "tasks")
    if bar is progress.SILENT:
        yield
        return
    tracker = sc.statusTracker()
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


class Claims:
    """The old channels nobody routes yet, biggest first. While Spark starts the driver takes them one at a time
    from the small end (``smallest``); once Spark is up, its route job takes all that are left at once
    (``rest``). Each channel goes to exactly one of the two."""

    def __init__(self, sources: list[SourceChannel]) -> None:
        self._left = sorted(sources, key=lambda s: -s.payload_bytes)
        self._lock = threading.Lock()
        self.handed_out = False  # rest() was called: a route job may be running on them

    def smallest(self) -> SourceChannel | None:
        with self._lock:
            return self._left.pop() if self._left else None

    def rest(self) -> list[SourceChannel]:
        with self._lock:
            rest, self._left = self._left, []
            self.handed_out = self.handed_out or bool(rest)
        return rest

    def withdraw(self) -> bool:
        """The driver failed: no channel is handed out any more. True if some were already (to a route job
        that may be writing into staging now)."""
        with self._lock:
            self._left = []
            return self.handed_out


def _route_while_starting(
    plan: RescalePlan, directory: str, master: str, claims: Claims
) -> tuple[list[SourceReport], list[RunRef]]:
    """Route old channels on the driver while the JVM for ``master`` is still starting (and warming up its
    python workers), smallest first, until Spark is up or none are left. Every channel, the biggest included:
    the route job starts on a thread of its own the moment Spark is up (``run_spark``), so a channel the driver
    is still on delays no Spark task; it only takes that channel's work off the job (measured, benchmarks/
    README.md: keeping one channel per core for Spark had left a core idle for up to 2.6 s at the start). These
    are the steps and files a route task would make (staging file named by the channel's id), so the output
    bytes do not change: they depend only on the sorted run refs."""
    reports: list[SourceReport] = []
    refs: list[RunRef] = []
    bar = None
    while _starting(master) and (src := claims.smallest()) is not None:
        if bar is None:
            bar = progress.stage("rescale: routing on the driver while Spark starts", None, "old channels")
        staged, stats = stage_source(src, plan.edges[src.edge], directory)
        reports.append(finish_report(src, stats, copies=sum(r.records for r in staged)))
        refs.extend(staged)
        bar.advance()
    if bar is not None:
        bar.done()
    return reports, refs


def _route_on_spark(
    master: str, plan_bytes: bytes, directory: str, claims: Claims
) -> tuple[Any, float, list[tuple[dict[str, Any], list[tuple[Any, ...]]]]]:
    """The Spark side of the route phase: wait for the SparkContext, take every old channel the driver has not
    (``Claims.rest``) and route them in job 1 (no job when there are none). Returns the context, the
    ``perf_counter`` time it was ready, and what the route tasks yielded."""
    sc = session(master)
    ready = time.perf_counter()
    sources = claims.rest()
    if not sources:
        return sc, ready, []
    order = [s.sid for s in sources]  # biggest first
    n = max(1, min(len(order), sc.defaultParallelism * 4))
    slices = [order[i::n] for i in range(n)]  # dealt round-robin, biggest first: slices of similar size
    with _task_progress(sc, "route"):
        routed = sc.parallelize(slices, n).mapPartitions(_route_task(plan_bytes, directory)).collect()
    return sc, ready, routed


def _stop_route_job(pending: Future[Any]) -> None:
    """Cancel a route job that may still be running (its tasks write into staging) and wait for it to end."""
    if pending.done():
        return
    from pyspark import SparkContext

    sc = SparkContext._active_spark_context
    if sc is not None:
        with contextlib.suppress(Exception):
            sc.cancelAllJobs()
    with contextlib.suppress(BaseException):
        pending.result()


def discard_staging(directory: str) -> threading.Thread | None:
    """Move the staging directory out of the output's temporary directory (a rename: the final check must not
    see it) and delete it on a thread of its own, meanwhile the driver checks and renames the output. Deleting
    it took 0.2-3.8 s after the write job (measured, benchmarks/README.md), all of it serial otherwise. The
    thread is not a daemon: the process waits for it before it exits. If the rename fails, it is deleted here."""
    staged = os.path.join(directory, STAGING_DIR)
    trash = f"{directory.rstrip(os.sep)}.staging"
    try:
        os.rename(staged, trash)
    except OSError:
        remove_staging(directory)
        return None
    remover = threading.Thread(target=shutil.rmtree, args=(trash, True), name="spillway-staging-removal")
    remover.start()
    return remover


def run_spark(
    plan: RescalePlan, directory: str, master: str, timings: dict[str, float] | None = None
) -> tuple[MoveResult, list[str], dict[int, int]]:
    """Returns the move result, the executors' self-check problems and records written per edge.
    ``timings`` gets ``spark_start`` (waiting for the session and JVM, after the driver routed what it could
    meanwhile) and ``driver_route`` (that routing) in seconds."""
    plan = _absolute(plan)
    directory = os.path.abspath(directory)
    plan_bytes = pickle.dumps(plan)
    prestart(master)  # nothing new if rescale_checkpoint started it already
    files: list[Any] = []
    found: list[Any] = []
    claims = Claims(plan.sources)
    pending: Future[Any] | None = None
    try:
        # The route job is submitted from a thread the moment Spark is up, whatever the driver is doing then.
        # Run in a copy of this context: progress listeners live in a ContextVar.
        spark_side = ThreadPoolExecutor(max_workers=1, thread_name_prefix="spillway-route-job")
        context = contextvars.copy_context()
        pending = spark_side.submit(context.run, _route_on_spark, master, plan_bytes, directory, claims)
        spark_side.shutdown(wait=False)
        t0 = time.perf_counter()
        reports, driver_refs = _route_while_starting(plan, directory, master, claims)
        t1 = time.perf_counter()
        sc, ready, routed = pending.result()
        if timings is not None:
            timings["driver_route"] = t1 - t0
            timings["spark_start"] = max(0.0, ready - t1)
        cores = sc.defaultParallelism
        reports = sorted([*reports, *(SourceReport(**doc) for doc, _ in routed)], key=lambda r: r.sid)
        refs = sorted([*driver_refs, *(RunRef(*t) for _, rows in routed for t in rows)], key=RunRef.order)
        files, pieces = plan_files(refs, plan.buffer_size, piece_size(sum(r.length for r in refs), cores))
        create_files(directory, files)
        pieces.sort(key=lambda p: p.start - p.end)  # biggest first: the last round is the shortest
        if pieces:
            write = _write_task(directory, plan.buffer_size, plan_bytes)
            with _task_progress(sc, "write"):
                found = sc.parallelize(pieces, len(pieces)).mapPartitions(write).collect()
    except BaseException as exc:
        if pending is not None and claims.withdraw():
            _stop_route_job(pending)  # before staging is removed under its tasks
        remove_staging(directory)
        if isinstance(exc, Exception) and type(exc).__module__.startswith(("pyspark", "py4j")):
            raise executor_failure(exc) from None
        raise
    discard_staging(directory)
    problems, per_gate = sum_pieces(directory, files, [PieceResult(*row) for row in found])
    by_gate = {(ep.down_head, ep.gate): ep.index for ep in plan.edges}
    per_edge: dict[int, int] = {}
    for key, count in per_gate.items():
        idx = by_gate.get(key)
        if idx is not None:
            per_edge[idx] = per_edge.get(idx, 0) + count
    files.sort(key=lambda f: (f.operator_id, f.down))
    if not problems:
        forget_log()
    return MoveResult(files, reports), problems, per_edge
