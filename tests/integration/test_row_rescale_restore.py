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
from support.user_group_counted import assert_restored_exactly_once, rescale_and_restore

EVENT = "row(user:string,seq:long,bucket:int,meta:row(origin:string,shard:int,stamp:long),score:double)"
KEYS = {"count": f"{EVENT}:user", "group": f"{EVENT}:user|before(':')|lower"}


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
    rescale_and_restore(name, parallelism, KEYS, tmp_path / "rescaled")


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
    assert_restored_exactly_once(fx.release, "row-counted", out, new, 3)
