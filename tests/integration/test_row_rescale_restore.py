"""Proof in real Flink: the row-counted job's checkpoints (Flink Rows with named fields in flight on two keyed
edges, one keyed by the field ``user`` and one by a key derived from it) rescaled by spillway with ``row(...)`` key
specs restore, and the bounded job's result is exactly-once: per user and per group the count and sum of seq the
job's definition implies (RowCounted.java: v -> user "U<v % 32>:<v % 3>", group "u<v % 32>"), and every record
once at check. On 2.3.0 (metadata V6) and 1.20.3 (V4), each restored in the release that wrote it; once through
the installed script with --key."""

from __future__ import annotations

from pathlib import Path

import pytest
from support.console import spillway
from support.fixtures import fixture_named
from support.flink_harness import restore

from spillway.inspect.topology import load_plan
from spillway.rescale.rescale import rescale
from spillway.storage.load import load_checkpoint

N, USERS = 200_000, 32
EVENT = "row(user:string,seq:long,bucket:int,meta:row(origin:string,shard:int,stamp:long),score:double)"
KEYS = {"count": f"{EVENT}:user", "group": f"{EVENT}:user|before(':')|lower"}


def expected() -> tuple[list[str], list[str]]:
    users: dict[str, list[int]] = {}
    groups: dict[str, list[int]] = {}
    for v in range(N):
        user = f"U{v % USERS}:{v % 3}"
        users.setdefault(user, []).append(v)
        groups.setdefault(user.split(":")[0].lower(), []).append(v)
    return (
        sorted(f"count {k} {len(vs)} {sum(vs)}" for k, vs in users.items()),
        sorted(f"group {k} {len(vs)} {sum(vs)}" for k, vs in groups.items()),
    )


@pytest.mark.flink
@pytest.mark.parametrize(
    ("name", "parallelism"),
    [
        pytest.param("2.3.0-row-counted", 3, id="2.3.0-2-to-3"),
        pytest.param("2.3.0-row-counted-p3", 2, id="2.3.0-3-to-2"),
        pytest.param("1.20.3-row-counted", 3, id="1.20.3-2-to-3"),
        pytest.param("1.20.3-row-counted-p3", 2, id="1.20.3-3-to-2"),
    ],
)
def test_rescaled_row_job_restores_exactly_once(tmp_path: Path, name: str, parallelism: int) -> None:
    fx = fixture_named(name)
    loaded = load_checkpoint(fx.checkpoint_dir)
    loaded.resolve_files()
    rules = [f"{r['from']}={r['to']}" for r in loaded.resolver.rebases()]
    new = {"parse": parallelism, "count": parallelism, "group": parallelism}
    out = tmp_path / "rescaled"
    report = rescale(loaded, load_plan(fx.root / "jobgraph.json"), new, out, keys=KEYS, master=None, rebase=rules)
    assert report.to_json()["records_moved"] > 0

    assert_exactly_once(fx.release, out, new, parallelism)


def assert_exactly_once(release: str, out: Path, new: dict[str, int], parallelism: int) -> None:
    result = restore(release, "row-counted", out, vertex_parallelism=new, until_finished=True)
    assert result["outcome"] == "restored", result.get("error")
    assert result.get("job_status") == "FINISHED", result
    started = result["tasks_at_start"] if result.get("tasks_at_start") else result["tasks"]
    for uid in new:  # Flink restored what spillway wrote, at the new parallelism, without rescaling itself
        assert any(f"({parallelism}/{parallelism})" in t for t in started if t.startswith(uid)), (uid, started)
    lines = result["results"]
    counts, groups = expected()
    assert sorted(line for line in lines if line.startswith("count ")) == counts
    assert sorted(line for line in lines if line.startswith("group ")) == groups
    checks = [line.split() for line in lines if line.startswith("check ")]
    assert (sum(int(c[1]) for c in checks), sum(int(c[2]) for c in checks)) == (N, N * (N - 1) // 2)


@pytest.mark.flink
def test_rescaled_by_the_command_line_with_row_keys_restores_exactly_once(tmp_path: Path) -> None:
    """What a user types: the installed script with ``--key OPERATOR=row(...):FIELD[|functions]``."""
    fx = fixture_named("1.20.3-row-counted")
    out = tmp_path / "rescaled"
    new = {"parse": 3, "count": 3, "group": 3}
    run = spillway(
        "rescale", str(fx.checkpoint_dir), "--plan", str(fx.root / "jobgraph.json"), "--out", str(out),
        *(a for op, n in new.items() for a in ("--parallelism", f"{op}={n}")),
        *(a for op, key in KEYS.items() for a in ("--key", f"{op}={key}")), "--master", "inprocess",
    )  # fmt: skip
    assert run.code == 0, run.output
    assert_exactly_once(fx.release, out, new, 3)
