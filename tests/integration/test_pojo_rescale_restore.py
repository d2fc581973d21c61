"""Proof in real Flink: the pojo-counted job's checkpoints (POJO records in flight on two keyed edges, one keyed by
a field and one by a key derived from it) rescaled by spillway with ``pojo(...)`` key specs 2 -> 3 and 3 -> 2
restore, and the bounded job's result is exactly-once: per user and per group the count and sum of seq the job's
definition implies (PojoCounted.java: v -> user "U<v % 32>:<v % 3>", group "u<v % 32>"), and every record once
at check. On 2.3.0 (metadata V6) and 1.20.3 (V4), each restored in the release that wrote it. The same for the
caseclass-counted job (1.20.3 only: Scala case-class records, keyed by the derived group)."""

from __future__ import annotations

from pathlib import Path

import pytest
from support.user_group_counted import rescale_and_restore

EVENT = (
    "pojo(user:string,seq:long,bucket:int,meta:pojo(origin:string,shard:int,stamp:long),tags:array(string),"
    "parts:array(int),history:objarray(long),score:double)"
)
KEYS = {"count": f"{EVENT}:user", "group": f"{EVENT}:user|before(':')|lower"}
PAIR_KEYS = {"group": "caseclass(user:string,seq:long):user|before(':')|lower"}


@pytest.mark.flink
@pytest.mark.parametrize(
    ("name", "parallelism"),
    [
        pytest.param("2.3.0-pojo-counted", 3, id="2.3.0-2-to-3"),
        pytest.param("2.3.0-pojo-counted-p3", 2, id="2.3.0-3-to-2"),
        pytest.param("1.20.3-pojo-counted", 3, id="1.20.3-2-to-3"),
        pytest.param("1.20.3-pojo-counted-p3", 2, id="1.20.3-3-to-2"),
        pytest.param("1.20.3-caseclass-counted", 3, id="1.20.3-caseclass-2-to-3"),
        pytest.param("1.20.3-caseclass-counted-p3", 2, id="1.20.3-caseclass-3-to-2"),
    ],
)
def test_rescaled_pojo_job_restores_exactly_once(tmp_path: Path, name: str, parallelism: int) -> None:
    keys = PAIR_KEYS if "caseclass" in name else KEYS
    rescale_and_restore(name, parallelism, keys, tmp_path / "rescaled")
