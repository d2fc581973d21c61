"""Proof in real Flink for avro(...) key specs: the "counted-avro-specific" / "counted-avro-generic" jobs
(AvroCounted.java; Avro records in the layout of Flink's AvroSerializer, keyed by user.id) rescaled by spillway
2 -> 3 (parse and count) with `avro(event.avsc):user.id` restore in the same release's MiniCluster, every
per-key count and sum exactly-once (the decoding itself: tests/unit/test_avro_fixtures.py)."""

from __future__ import annotations

from pathlib import Path

import pytest
from support.flink_harness import restore

from spillway.inspect.topology import load_plan
from spillway.rescale.rescale import rescale
from spillway.storage.load import load_checkpoint

FIXTURES = Path(__file__).parents[1] / "fixtures"
SCHEMA = FIXTURES / "avro" / "event.avsc"
N, KEYS = 200_000, 32


def expected() -> list[str]:
    return sorted(f"count user-{k} {len(range(k, N, KEYS))} {sum(range(k, N, KEYS))}" for k in range(KEYS))


@pytest.mark.parametrize("release", ["1.20.3", "2.3.0"])
@pytest.mark.parametrize("kind", ["specific", "generic"])
def test_rescaled_by_the_avro_key_restores_exactly_once(tmp_path: Path, release: str, kind: str) -> None:
    name = f"{release}-counted-avro-{kind}"
    loaded = load_checkpoint(next((FIXTURES / name).glob("checkpoints/*/chk-*")))
    loaded.resolve_files()
    rules = [f"{r['from']}={r['to']}" for r in loaded.resolver.rebases()]
    parallelism = {"parse": 3, "count": 3}
    out = tmp_path / "rescaled"
    report = rescale(
        loaded,
        load_plan(FIXTURES / name / "jobgraph.json"),
        parallelism,
        out,
        keys={"count": f"avro({SCHEMA}):user.id"},
        master=None,
        rebase=rules,
    )
    assert report.to_json()["records_moved"] > 0
    result = restore(release, f"counted-avro-{kind}", out, vertex_parallelism=parallelism, until_finished=True)
    assert result["outcome"] == "restored", result.get("error")
    assert result.get("job_status") == "FINISHED", result
    assert sorted(line for line in result["results"] if line.startswith("count ")) == expected()
    checks = [line.split() for line in result["results"] if line.startswith("check ")]
    assert (sum(int(c[1]) for c in checks), sum(int(c[2]) for c in checks)) == (N, N * (N - 1) // 2)
    started = result["tasks_at_start"] or result["tasks"]
    for uid, p in parallelism.items():
        assert any(f"({p}/{p})" in name for name in started if name.startswith(uid)), (uid, started)
