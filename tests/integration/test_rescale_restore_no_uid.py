"""Proof in real Flink (issue 20, item 6): a 1.x checkpoint rescaled by spillway with ONLY the stream-graph plan
(``plan.json`` = ``env.getExecutionPlan()``) and no uid typed restores exactly-once — for a job whose uids differ
from its names (``prod-counted``: source uid "numbers", name "seq") and for a job without a single uid that cuts
its chains (``prod-counted-no-uid``: ``startNewChain()`` before forward-values, ``disableChaining()`` on discard).

The job (Counted.buildProd): Source: seq -rebalance-> parse -keyBy(f0)-> count-per-key (keyed "acc")
=FORWARD=> forward-values -rebalance-> check-totals (operator list state) =FORWARD=> discard. Each case rescales
parse, count-per-key and forward-values 2 -> 3 (forward-values must follow count-per-key: a FORWARD edge needs
equal parallelism): a HASH edge between two rescaled vertices, keyed state split, a REBALANCE edge on each side.

Expected values never come from spillway: operator ids from the generator's record of Flink's stream graph
(ids.json), which operators hold state from Flink's own decode of _metadata (oracle.json), the result from the
job's own data (per key k < 32: the count and sum of v < 200000 with v % 32 == k), the key-group ranges each new
subtask must own from Flink's KeyGroupRangeAssignment rule, and the restore itself from Flink's log.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
from support.console import spillway
from support.flink_harness import restore

from spillway.api import RescaleOptions
from spillway.api import open as open_checkpoint
from spillway.inspect.topology import load_plan

pytestmark = pytest.mark.flink

FIXTURES = Path(__file__).parents[1] / "fixtures"
N, KEYS, MAX_PARALLELISM = 200_000, 32, 128  # Counted.java: N, KEYS; buildProd: env.setMaxParallelism(128)
KEY = {"count-per-key": "tuple:0:long"}  # parse emits Tuple2<Long, Long> (v % 32, v); keyBy(f0)


def fixture_dir(release: str, scenario: str) -> Path:
    return FIXTURES / f"{release}-{scenario}"


def checkpoint_dir(release: str, scenario: str) -> Path:
    return next(fixture_dir(release, scenario).glob("checkpoints/*/chk-*"))


def flink_ids(release: str, scenario: str) -> dict[str, str]:
    """Plan operator name -> the operator id Flink gave it (the generator's record of Flink's stream graph)."""
    doc = json.loads((fixture_dir(release, scenario) / "ids.json").read_text())
    return {n["name"]: n["operator_id"] for n in doc["stream_nodes"]}


def stateful_ids(release: str, scenario: str) -> set[str]:
    """Operator ids that hold operator, keyed or coordinator state, from Flink's own decode of _metadata."""
    doc = json.loads((fixture_dir(release, scenario) / "oracle.json").read_text())
    kinds = ("managed_operator_state", "raw_operator_state", "managed_keyed_state", "raw_keyed_state")
    return {
        o["operator_id"]
        for o in doc["operators"]
        if o.get("coordinator_state") or any(s.get(k) for s in o["subtasks"] for k in kinds)
    }


def expected_counts() -> list[str]:
    return sorted(f"count {k} {len(range(k, N, KEYS))} {sum(range(k, N, KEYS))}" for k in range(KEYS))


def key_group_ranges(parallelism: int) -> set[tuple[int, int]]:
    """The key groups Flink assigns each subtask (KeyGroupRangeAssignment: operator index i of p owns
    [ceil(i * max / p), floor(((i + 1) * max - 1) / p)])."""
    m = MAX_PARALLELISM
    return {((i * m + parallelism - 1) // parallelism, ((i + 1) * m - 1) // parallelism) for i in range(parallelism)}


def assert_binding_exact(binding: list[dict] | None, release: str, scenario: str) -> None:
    """Every operator spillway bound is bound to Flink's id; every operator holding state is bound exactly."""
    assert binding, "the rescale report carries no binding"
    ids = flink_ids(release, scenario)
    by_name = {b["operator"]: b for b in binding}
    assert set(by_name) == set(ids), (sorted(by_name), sorted(ids))
    for name, b in by_name.items():
        if b["exact"]:
            assert b["operator_id"] == ids[name], (name, b)
    stateful = stateful_ids(release, scenario)
    assert stateful, "the fixture holds no state: nothing to prove"
    for name, flink_id in ids.items():
        if flink_id in stateful:
            b = by_name[name]
            assert b["method"] != "unbound" and b["exact"], (name, b)
            assert b["operator_id"] == flink_id, (name, b)


def assert_restored_exactly_once(result: dict, new_p: dict[str, int]) -> None:
    """Flink restored the rescaled checkpoint at the parallelism written (it rescaled nothing itself), restored
    its keyed and source state, ran the bounded job to its end, and every record counted exactly once."""
    assert result["outcome"] == "restored", result.get("error")
    assert result.get("job_status") == "FINISHED", result
    started = result.get("tasks_at_start") or result["tasks"]
    for name, p in new_p.items():
        tasks = [t for t in started if t.startswith(name + " (")]
        assert tasks and all(t.endswith(f"/{p})") for t in tasks) and len(tasks) == p, (name, p, started)
    log = Path(result["log"]).read_text(errors="replace")
    # Not a fresh start that would give the same result: Flink's own log of the keyed state it restored (the
    # new key-group ranges of count-per-key, together all 128) and of the source's split enumerator.
    restored = {
        (int(a), int(b))
        for line in log.splitlines()
        if "Finished restoring from state handle" in line
        for a, b in re.findall(r"startKeyGroup=(\d+), endKeyGroup=(\d+)", line)
    }
    covered = {g for lo, hi in restored for g in range(lo, hi + 1)}
    assert covered == set(range(MAX_PARALLELISM)), sorted(restored)
    assert "Restoring SplitEnumerator of source Source: seq from checkpoint" in log
    lines = result["results"]
    assert sorted(line for line in lines if line.startswith("count ")) == expected_counts()
    checks = [line.split() for line in lines if line.startswith("check ")]
    assert len(checks) == 2  # check-totals keeps parallelism 2: one total per subtask
    assert (sum(int(c[1]) for c in checks), sum(int(c[2]) for c in checks)) == (N, N * (N - 1) // 2)


# Rescaled by spillway (plan operator names) and by the harness (Counted.buildProd's per-vertex keys, the same
# with and without uids: "counter" sets count-per-key and forward-values).
UP = {"parse": 3, "count-per-key": 3, "forward-values": 3}
UP_HARNESS = {"parse": 3, "counter": 3}
DOWN = {"parse": 1, "count-per-key": 1, "forward-values": 1}
DOWN_HARNESS = {"parse": 1, "counter": 1}


@pytest.mark.parametrize(
    ("release", "scenario"),
    [
        pytest.param("1.15.4", "prod-counted", id="1.15.4-uid-not-name"),
        pytest.param("1.15.4", "prod-counted-no-uid", id="1.15.4-no-uid-chain-cuts"),
        pytest.param("1.20.3", "prod-counted-no-uid", id="1.20.3-no-uid-chain-cuts"),
        pytest.param("2.3.0", "prod-counted", id="2.3.0-uid-not-name"),
        pytest.param("2.3.0", "prod-counted-no-uid", id="2.3.0-no-uid-chain-cuts"),
    ],
)
def test_stream_graph_plan_alone_rescales_and_restores_exactly_once(
    tmp_path: Path, release: str, scenario: str
) -> None:
    fixture = fixture_dir(release, scenario)
    out = tmp_path / "rescaled"
    cp = open_checkpoint(checkpoint_dir(release, scenario), plan=load_plan(fixture / "plan.json"))
    report = cp.rescale(RescaleOptions(UP, out, keys=KEY, master=None))
    assert_binding_exact(report.binding, release, scenario)
    assert report.to_json()["records_moved"] > 0
    result = restore(
        release, scenario, out, vertex_parallelism=UP_HARNESS, until_finished=True, workdir=tmp_path / "run"
    )
    assert_restored_exactly_once(result, UP)


def test_console_script_rescales_a_no_uid_job_down_and_flink_restores_it_exactly_once(tmp_path: Path) -> None:
    """The installed ``spillway`` script, as a user runs it: 1.20.3, no uid anywhere, chains cut, 2 -> 1."""
    release, scenario = "1.20.3", "prod-counted-no-uid"
    out = tmp_path / "p1"
    args = [f"--parallelism={k}={v}" for k, v in DOWN.items()] + [f"--key={k}={v}" for k, v in KEY.items()]
    run = spillway(
        "rescale",
        str(checkpoint_dir(release, scenario)),
        "--plan",
        str(fixture_dir(release, scenario) / "plan.json"),
        *args,
        "--out",
        str(out),
        "--master",
        "inprocess",
        "--json",
    )
    assert run.code == 0, run.output
    doc = json.loads(run.out)
    assert doc["schema"] == "spillway.rescale/1"
    assert_binding_exact(doc["binding"], release, scenario)
    assert {v["vertex"]: v["new_parallelism"] for v in doc["vertices"]} == DOWN
    result = restore(
        release, scenario, out, vertex_parallelism=DOWN_HARNESS, until_finished=True, workdir=tmp_path / "run"
    )
    assert_restored_exactly_once(result, DOWN)


def test_uid_not_name_on_1_20_binds_no_wrong_id_and_the_one_uid_asked_for_restores_exactly_once(
    tmp_path: Path,
) -> None:
    """1.20.3-prod-counted, stream-graph plan alone: whatever spillway binds is Flink's id, and check-totals,
    which the checkpoint cannot tell from discard, is left open with Flink's id among its candidates. With the
    one uid spillway's binding table asks for (--uid check-totals=checker) the job rescales and restores
    exactly-once."""
    from spillway.inspect.reports import binding_json
    from spillway.inspect.topology import operator_binding
    from spillway.storage.load import load_checkpoint

    release, scenario = "1.20.3", "prod-counted"
    fixture, ids = fixture_dir(release, scenario), flink_ids(release, scenario)
    plan_alone = binding_json(
        operator_binding(
            load_plan(fixture / "plan.json"), load_checkpoint(checkpoint_dir(release, scenario)).checkpoint
        )
    )
    assert plan_alone
    open_ones = []
    for b in plan_alone:
        if b["exact"]:
            assert b["operator_id"] == ids[b["operator"]], b
        else:
            open_ones.append(b["operator"])
            assert ids[b["operator"]] in b["reason"], b  # "could be any of …" names Flink's id
    assert "check-totals" in open_ones

    out = tmp_path / "rescaled"
    plan = load_plan(fixture / "plan.json", {"check-totals": "checker"})
    cp = open_checkpoint(checkpoint_dir(release, scenario), plan=plan)
    report = cp.rescale(RescaleOptions(UP, out, keys=KEY, master=None))
    assert_binding_exact(report.binding, release, scenario)
    result = restore(
        release, scenario, out, vertex_parallelism=UP_HARNESS, until_finished=True, workdir=tmp_path / "run"
    )
    assert_restored_exactly_once(result, UP)
