"""While the JVM starts, the Spark backend's driver routes the smallest old channels itself (real 2.3.0
fixture "counted"; no JVM is started here: the start is a future that never finishes)."""

from __future__ import annotations

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


@pytest.mark.parametrize(("master", "kept"), [("local[1]", 1), ("local[2]", 2)])
def test_driver_routes_the_smallest_while_spark_starts_and_leaves_one_per_core(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, master: str, kept: int
) -> None:
    plan = _plan()
    assert len(plan.sources) > 2
    starting: Future[object] = Future()  # a JVM that is still starting
    monkeypatch.setattr(spark_job, "_pending", (master, starting))
    sources = sorted(plan.sources, key=lambda s: -s.payload_bytes)
    biggest = [s.sid for s in sources[:kept]]
    reports, refs = spark_job._route_while_starting(plan, str(tmp_path / "a"), master, sources)
    assert [s.sid for s in sources] == biggest  # left for Spark: the biggest, one per core
    assert len(reports) == len(plan.sources) - kept
    # what the driver routed is what the in-process backend routes for the same old channels
    reference = {r.sid: r for r in run_local(plan, str(tmp_path / "b")).sources}
    for r in reports:
        assert r == reference[r.sid]
    assert {ref.sid for ref in refs} <= {r.sid for r in reports}
    assert sum(ref.records for ref in refs) == sum(r.copies for r in reports) > 0


def test_driver_routes_nothing_once_spark_is_up(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    plan = _plan()
    up: Future[object] = Future()
    up.set_result(object())
    monkeypatch.setattr(spark_job, "_pending", ("local[1]", up))
    sources = list(plan.sources)
    assert spark_job._route_while_starting(plan, str(tmp_path), "local[1]", sources) == ([], [])
    assert len(sources) == len(plan.sources)
    # another master's start is no reason to wait either
    monkeypatch.setattr(spark_job, "_pending", ("local[2]", Future()))
    assert spark_job._route_while_starting(plan, str(tmp_path), "local[1]", sources) == ([], [])


@pytest.mark.parametrize(
    ("master", "cores"),
    [("local", 1), ("local[1]", 1), ("local[3]", 3), ("local[4,2]", 4), ("spark://127.0.0.1:7077", 2)],
)
def test_expected_cores_from_the_master_url(master: str, cores: int) -> None:
    # Spark's own reading of a master URL: "local" is one thread, local[N] (and local[N,F], F = retries) N
    assert spark_job._expected_cores(master) == cores


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
