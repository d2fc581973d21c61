"""The counted jobs with a String user on two keyed edges (PojoCounted.java, RowCounted.java and the
caseclass-counted job in ScalaScenarios.java): parse turns v into a record of user "U<v % 32>:<v % 3>" and seq v,
count is keyed by the user, group by the user's part before ':' in lower case ("U7:2" -> "u7").

What their tests share: the records in flight on the keyed edges, that each key sits on the subtask Flink's own
keyBy routed it to, and the result lines a restored job must print to be exactly-once (from the job's definition,
never from spillway)."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from spillway.flink.keygroups import key_group_for_hash, operator_index
from spillway.formats.values import parse_key_extractor
from spillway.inspect.analyze import analyze
from spillway.inspect.topology import load_plan
from spillway.rescale.rescale import rescale
from spillway.storage.load import load_checkpoint
from support.fixtures import fixture_named
from support.flink_harness import restore

N, USERS = 200_000, 32
KEYED = ("count", "group")


def in_flight(name: str) -> list[tuple[str, int, bytes]]:
    """(downstream operator, downstream subtask, value bytes) of every record on the two keyed edges."""
    fx = fixture_named(name)
    result = analyze(load_checkpoint(fx.checkpoint_dir), load_plan(fx.root / "jobgraph.json"), keep_records=10**9)
    out = []
    for ch in result.channels:
        down = ch.downstream["operator"]
        if down not in KEYED:
            continue
        assert ch.ship_strategy == "HASH"
        out += [(down, ch.downstream["subtask"], bytes(r["value"])) for r in ch.record_list if r["tag"] == "record"]
    return out


def assert_keys_routed(
    name: str, records: list[tuple[str, int, bytes]], spec: str, operator: str, user_of: Callable[[bytes], str]
) -> None:
    """Every key ``spec`` takes from a record in flight to ``operator`` is the job's key for that record's user
    (``user_of``: the user as the job logged it) and sits on the subtask Flink routed the record to."""
    parallelism = 3 if name.endswith("-p3") else 2
    extract = parse_key_extractor(spec)
    checked = 0
    for down, subtask, raw in records:
        if down != operator:
            continue
        key, h = extract(raw)
        user = user_of(raw)
        # the job's KeySelectors: "U7:2" is keyed by "U7:2" on count and by "u7" on group
        assert key == (user if operator == "count" else user.split(":")[0].lower())
        assert operator_index(128, parallelism, key_group_for_hash(h, 128)) == subtask, (name, key)
        checked += 1
    assert checked > 100


def expected_results() -> tuple[list[str], list[str]]:
    """The sorted "count USER COUNT SUM" and "group GROUP COUNT SUM" lines the job's definition implies."""
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


def rescale_and_restore(name: str, parallelism: int, keys: dict[str, str], out: Path) -> None:
    """Rescales fixture ``name`` with spillway (the operators ``keys`` names and parse to ``parallelism``, the
    fixture's files found through its own rebase rules) into ``out``, then asserts Flink restores it exactly-once."""
    fx = fixture_named(name)
    loaded = load_checkpoint(fx.checkpoint_dir)
    loaded.resolve_files()
    rules = [f"{r['from']}={r['to']}" for r in loaded.resolver.rebases()]
    new = {"parse": parallelism} | dict.fromkeys(keys, parallelism)
    report = rescale(loaded, load_plan(fx.root / "jobgraph.json"), new, out, keys=keys, master=None, rebase=rules)
    assert report.to_json()["records_moved"] > 0
    assert_restored_exactly_once(fx.release, fx.info["scenario"], out, new, parallelism)


def assert_restored_exactly_once(release: str, scenario: str, out: Path, new: dict[str, int], parallelism: int) -> None:
    """Flink restores ``out`` in ``release`` at the parallelism ``new`` gives (without rescaling itself), runs the
    bounded job to its end, and every record counts once: per user (when the job has a count stage), per group and
    at check."""
    result = restore(release, scenario, out, vertex_parallelism=new, until_finished=True)
    assert result["outcome"] == "restored", result.get("error")
    assert result.get("job_status") == "FINISHED", result
    started = result["tasks_at_start"] if result.get("tasks_at_start") else result["tasks"]
    for uid in new:
        assert any(f"({parallelism}/{parallelism})" in t for t in started if t.startswith(uid)), (uid, started)
    lines = result["results"]
    counts, groups = expected_results()
    assert sorted(line for line in lines if line.startswith("count ")) == (counts if "count" in new else [])
    assert sorted(line for line in lines if line.startswith("group ")) == groups
    checks = [line.split() for line in lines if line.startswith("check ")]
    assert (sum(int(c[1]) for c in checks), sum(int(c[2]) for c in checks)) == (N, N * (N - 1) // 2)
