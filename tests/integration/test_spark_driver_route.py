"""While the JVM starts, the Spark backend's driver routes old channels itself, smallest first, until Spark takes
the rest (real 2.3.0 fixture "counted"; no JVM is started here: the start is a future the test resolves)."""

from __future__ import annotations

import threading
from concurrent.futures import Future
from pathlib import Path

import pytest

from spillway.inspect.topology import load_plan
from spillway.rescale import spark_job
from spillway.rescale.execute import run_local
from spillway.rescale.plan import build_plan
from spillway.storage.load import load_checkpoint

FIXTURE = Path(__file__).parents[1] / "fixtures" / "2.3.0-counted"


def _plan():  # type: ignore[no-untyped-def]
    ld = load_checkpoint(next(FIXTURE.glob("checkpoints/*/chk-*")))
    ld.resolve_files()
    return build_plan(ld.checkpoint, load_plan(FIXTURE / "jobgraph.json"), ld.resolver, {"parse": 3})


@pytest.mark.parametrize("master", ["local[1]", "local[2]"])
def test_driver_routes_every_channel_smallest_first_while_spark_starts(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, master: str
) -> None:
    plan = _plan()
    assert len(plan.sources) > 2
    starting: Future[object] = Future()  # a JVM that is still starting
    monkeypatch.setattr(spark_job, "_pending", (master, starting))
    order: list[int] = []
    real = spark_job.stage_source

    def recorded(src, *args):  # type: ignore[no-untyped-def]
        order.append(src.sid)
        return real(src, *args)

    monkeypatch.setattr(spark_job, "stage_source", recorded)
    claims = spark_job.Claims(plan.sources)
    reports, refs = spark_job._route_while_starting(plan, str(tmp_path / "a"), master, claims)
    assert claims.rest() == []  # nothing left for the route job
    sizes = {s.sid: s.payload_bytes for s in plan.sources}
    assert sorted(order) == sorted(sizes)
    assert [sizes[sid] for sid in order] == sorted(sizes.values())  # smallest first
    # what the driver routed is what the in-process backend routes for the same old channels
    reference = {r.sid: r for r in run_local(plan, str(tmp_path / "b")).sources}
    assert len(reports) == len(reference)
    for r in reports:
        assert r == reference[r.sid]
    assert {ref.sid for ref in refs} <= {r.sid for r in reports}
    assert sum(ref.records for ref in refs) == sum(r.copies for r in reports) > 0


def test_once_spark_is_up_it_takes_the_rest_and_the_driver_stops(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    plan = _plan()
    starting: Future[object] = Future()
    monkeypatch.setattr(spark_job, "_pending", ("local[2]", starting))
    claims = spark_job.Claims(plan.sources)
    taken: list[list[int]] = []
    real = spark_job.stage_source

    def spark_comes_up(src, *args):  # type: ignore[no-untyped-def]
        # Spark is up while the driver routes its first channel: the route job takes all the others
        starting.set_result(object())
        taken.append([s.sid for s in claims.rest()])
        return real(src, *args)

    monkeypatch.setattr(spark_job, "stage_source", spark_comes_up)
    reports, _ = spark_job._route_while_starting(plan, str(tmp_path), "local[2]", claims)
    assert len(reports) == 1  # the channel it was on, no other
    smallest = min(plan.sources, key=lambda s: s.payload_bytes)
    assert reports[0].sid == smallest.sid
    assert sorted([reports[0].sid, *taken[0]]) == sorted(s.sid for s in plan.sources)  # each exactly once
    assert claims.handed_out and claims.withdraw()


def test_driver_routes_nothing_once_spark_is_up(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    plan = _plan()
    up: Future[object] = Future()
    up.set_result(object())
    monkeypatch.setattr(spark_job, "_pending", ("local[1]", up))
    claims = spark_job.Claims(plan.sources)
    assert spark_job._route_while_starting(plan, str(tmp_path), "local[1]", claims) == ([], [])
    # another master's start is no reason to wait either
    monkeypatch.setattr(spark_job, "_pending", ("local[2]", Future()))
    assert spark_job._route_while_starting(plan, str(tmp_path), "local[1]", claims) == ([], [])
    assert len(claims.rest()) == len(plan.sources)
    assert claims.withdraw()  # handed out: a failing driver must stop their route job first


def test_staging_leaves_the_output_at_once_and_is_deleted_meanwhile(tmp_path: Path) -> None:
    from spillway.rescale.staging import STAGING_DIR, staging_dir

    out = tmp_path / ".o.spillway-1234.partial"
    (out / "kept.channels").parent.mkdir()
    (out / "kept.channels").write_bytes(b"x")
    for i in range(3):
        Path(staging_dir(str(out)), f"{i:09d}.runs").write_bytes(b"r" * 1000)
    remover = spark_job.discard_staging(str(out))
    assert not (out / STAGING_DIR).exists()  # gone from the output before the function returns
    assert remover is not None
    remover.join(timeout=30)
    assert sorted(p.name for p in tmp_path.iterdir()) == [out.name]  # and deleted, nothing left beside it
    assert [p.name for p in out.iterdir()] == ["kept.channels"]
    assert spark_job.discard_staging(str(out)) is None  # nothing staged: nothing to do


class _FakeJob:
    """A Spark route job that runs until it is cancelled (what ``cancelAllJobs`` does to a real one)."""

    def __init__(self) -> None:
        self.running = threading.Event()
        self.cancelled = threading.Event()
        self.ended = threading.Event()
        self.defaultParallelism = 2

    def parallelize(self, data: object, n: int) -> _FakeJob:
        return self

    def mapPartitions(self, f: object) -> _FakeJob:  # Spark's name
        return self

    def collect(self) -> list[object]:
        self.running.set()
        try:
            assert self.cancelled.wait(30), "never cancelled"
            raise RuntimeError("job cancelled")
        finally:
            self.ended.set()

    def cancelAllJobs(self) -> None:  # Spark's name
        self.cancelled.set()


def test_a_driver_failure_stops_the_route_job_before_staging_is_removed(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import pyspark

    from spillway.rescale.route_error import RouteError

    plan = _plan()
    job = _FakeJob()
    up = threading.Event()
    monkeypatch.setattr(spark_job, "_pending", None)
    monkeypatch.setattr(spark_job, "_start", lambda master: (up.wait(30), job)[1])
    monkeypatch.setattr(pyspark.SparkContext, "_active_spark_context", job)

    def fails_while_the_job_runs(src, *args):  # type: ignore[no-untyped-def]
        up.set()  # Spark is up: the route job takes the other channels and runs
        assert job.running.wait(30)
        raise RouteError("a record the router cannot place")

    monkeypatch.setattr(spark_job, "stage_source", fails_while_the_job_runs)
    removed: list[bool] = []
    monkeypatch.setattr(spark_job, "remove_staging", lambda d: removed.append(job.ended.is_set()))
    with pytest.raises(RouteError):
        spark_job.run_spark(plan, str(tmp_path / "out"), "local[2]")
    assert removed == [True]  # staging went only once the route job had ended
    assert job.cancelled.is_set()
