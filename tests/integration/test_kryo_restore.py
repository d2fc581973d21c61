"""Proof in real Flink for kryo2(...)/kryo5(...) specs: the "counted-kryo" job (KryoCounted.java) moves Events that
Flink serializes with its KryoSerializer (Kryo 2 on 1.20.3, Kryo 5 on 2.3.0) over a keyBy(user) edge held in
channel state. Every in-flight Event decodes to what the job wrote (user = "user-" + v % 32, bucket = v % 7 - 3,
score = v / 4), and spillway's rescale of parse and count 2 -> 3, keyed by the spec's String field, restores in
the same release's MiniCluster with every per-key count and sum exactly-once (the decoding itself:
tests/unit/test_kryo_fixtures.py)."""

from __future__ import annotations

from pathlib import Path

import pytest
from support.flink_harness import restore

from spillway.inspect.topology import load_plan
from spillway.rescale.rescale import rescale
from spillway.storage.load import load_checkpoint

FIXTURES = Path(__file__).parents[1] / "fixtures"
N, KEYS = 200_000, 32
FIELDS = "user:String, v:long, bucket:int, score:double"  # KryoCounted.FIELDS
SPECS = {"1.20.3": f"kryo2({FIELDS})", "2.3.0": f"kryo5({FIELDS})"}


def checkpoint(release: str) -> Path:
    return next((FIXTURES / f"{release}-counted-kryo").glob("checkpoints/*/chk-*"))


def expected() -> list[str]:
    return sorted(f"count user-{k} {len(range(k, N, KEYS))} {sum(range(k, N, KEYS))}" for k in range(KEYS))


@pytest.mark.parametrize("release", SPECS)
def test_rescaled_by_the_kryo_key_restores_exactly_once(tmp_path: Path, release: str) -> None:
    loaded = load_checkpoint(checkpoint(release))
    loaded.resolve_files()
    rules = [f"{r['from']}={r['to']}" for r in loaded.resolver.rebases()]
    plan = load_plan(FIXTURES / f"{release}-counted-kryo" / "jobgraph.json")
    parallelism = {"parse": 3, "count": 3}
    out = tmp_path / "rescaled"
    report = rescale(
        loaded, plan, parallelism, out, keys={"count": f"{SPECS[release]}:user"}, master=None, rebase=rules
    )
    assert report.to_json()["records_moved"] > 0
    result = restore(release, "counted-kryo", out, vertex_parallelism=parallelism, until_finished=True)
    assert result["outcome"] == "restored", result.get("error")
    assert result.get("job_status") == "FINISHED", result
    counts = sorted(line for line in result["results"] if line.startswith("count "))
    assert counts == expected()
    checks = [line.split() for line in result["results"] if line.startswith("check ")]
    assert (sum(int(c[1]) for c in checks), sum(int(c[2]) for c in checks)) == (N, N * (N - 1) // 2)
    started = result["tasks_at_start"] or result["tasks"]
    for uid, p in parallelism.items():
        assert any(f"({p}/{p})" in name for name in started if name.startswith(uid)), (uid, started)
