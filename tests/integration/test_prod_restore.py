"""Real Flink restores the production-shaped fixtures (uid != name, mixed or no uids, chain cuts).

``prod-counted`` / ``prod-counted-no-uid`` (Counted.buildProd) are bounded: restored, they run to their end and
write the per-key counts and per-subtask totals the known source implies (exactly-once), at the parallelism
they were taken with and rescaled by Flink itself (count-per-key and forward-values 2 -> 3, addressed by the
same per-vertex keys with and without uids). ``prod`` (Prod.java, unbounded) restores and keeps running, also
with slow-count rescaled by Flink, and so does ``prod-finished`` (FLIP-147: Flink accepts its finished
branches). These are the baselines the lead's binding work (issue 20) is proven against; nothing of spillway is
involved here.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from support.flink_harness import restore

FIXTURES = Path(__file__).parents[1] / "fixtures"
N, KEYS = 200_000, 32


def checkpoint_dir(name: str) -> Path:
    return next((FIXTURES / name).glob("checkpoints/*/chk-*"))


def expected() -> list[str]:
    return sorted(f"count {k} {len(range(k, N, KEYS))} {sum(range(k, N, KEYS))}" for k in range(KEYS))


def assert_exactly_once(result: dict) -> None:
    assert result["outcome"] == "restored", result.get("error")
    assert result.get("job_status") == "FINISHED", result
    lines = result["results"]
    checks = [line.split() for line in lines if line.startswith("check ")]
    assert sorted(line for line in lines if line.startswith("count ")) == expected()
    assert (sum(int(c[1]) for c in checks), sum(int(c[2]) for c in checks)) == (N, N * (N - 1) // 2)


@pytest.mark.parametrize(
    ("release", "scenario", "parallelism"),
    [
        pytest.param("1.20.3", "prod-counted", None, id="1.20.3-prod-counted"),
        pytest.param("1.20.3", "prod-counted-no-uid", None, id="1.20.3-prod-counted-no-uid"),
        pytest.param("1.15.4", "prod-counted", None, id="1.15.4-prod-counted"),
        pytest.param("2.3.0", "prod-counted-no-uid", None, id="2.3.0-prod-counted-no-uid"),
        pytest.param("1.20.3", "prod-counted-no-uid", {"counter": 3}, id="1.20.3-prod-counted-no-uid-counter-3"),
        pytest.param("1.15.4", "prod-counted-no-uid", {"counter": 3}, id="1.15.4-prod-counted-no-uid-counter-3"),
    ],
)
def test_flink_restores_the_counted_job_exactly_once(release: str, scenario: str, parallelism) -> None:  # type: ignore[no-untyped-def]
    result = restore(
        release, scenario, checkpoint_dir(f"{release}-{scenario}"), vertex_parallelism=parallelism, until_finished=True
    )
    assert_exactly_once(result)
    if parallelism:  # Flink ran count-per-key and forward-values at the new parallelism
        for name in ("count-per-key", "forward-values"):
            assert any(task.startswith(name) and "(3/3)" in task for task in result["tasks"]), result["tasks"]


@pytest.mark.parametrize(
    ("scenario", "parallelism"),
    [("prod", None), ("prod", {"slow": 3}), ("prod-finished", None)],
    ids=["prod", "prod-slow-count-3", "prod-finished"],
)
def test_flink_restores_the_prod_job(scenario: str, parallelism) -> None:  # type: ignore[no-untyped-def]
    result = restore(
        "1.20.3", scenario, checkpoint_dir(f"1.20.3-{scenario}"), vertex_parallelism=parallelism, run_seconds=3
    )
    assert result["outcome"] == "restored", result.get("error")
    if parallelism:
        assert any(task.startswith("slow-count") and "(3/3)" in task for task in result["tasks"]), result["tasks"]


@pytest.mark.parametrize("scenario", ["prod", "prod-no-uid"])
def test_flink_1_16_restores_its_prod_job(scenario: str) -> None:
    """The 1.16.3 production-shaped fixtures (metadata V4, made for the 1.16 line) restore into their own job."""
    result = restore("1.16.3", scenario, checkpoint_dir(f"1.16.3-{scenario}"), run_seconds=3)
    assert result["outcome"] == "restored", result.get("error")
    assert result["allow_non_restored_state"] is False
