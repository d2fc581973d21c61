"""Proof in real Flink: a checkpoint rescaled by spillway restores at the new parallelism and the bounded
"counted" job's final result is exactly-once — the one the known source implies and, on 2.3.0, the same result
Flink's own rescaling of the original checkpoint gives.

Releases: 2.3.0 (metadata V6) with every case; 2.0.0 (V5), 1.20.3 (V4) and 1.15.4 (V3) with the most telling
one (parse and count 2 -> 3: a HASH edge between two rescaled vertices plus keyed state), each on its own
`<release>-counted` fixture, restored in the release that wrote it. Operators are bound by the job-graph plan
(jobgraph.json) on every release.

The job (tests/fixtures/generator/java/.../Counted.java): src -rebalance-> parse -keyBy-> count (keyed
state) -rebalance-> check (operator state). Each restore runs the job to its end (~4 s with jars cached).
"""

from __future__ import annotations

from pathlib import Path

import pytest
from support.flink_harness import restore

from spillway.inspect.topology import load_plan
from spillway.rescale.rescale import rescale
from spillway.storage.load import load_checkpoint

FIXTURES = Path(__file__).parents[1] / "fixtures"
N, KEYS = 200_000, 32
OLDER_RELEASES = ["2.0.0", "1.20.3", "1.15.4"]  # one JVM restore each (the up-hash-keyed case)


def fixture_dir(release: str) -> Path:
    return FIXTURES / f"{release}-counted"


def checkpoint_dir(release: str = "2.3.0") -> Path:
    return next(fixture_dir(release).glob("checkpoints/*/chk-*"))


def expected() -> list[str]:
    lines = [f"count {k} {len(range(k, N, KEYS))} {sum(range(k, N, KEYS))}" for k in range(KEYS)]
    return sorted(lines)


def summarize(result: dict) -> tuple[list[str], tuple[int, int]]:
    """(sorted per-key count lines, (records, sum) over all check subtasks)."""
    assert result["outcome"] == "restored", result.get("error")
    assert result.get("job_status") == "FINISHED", result
    lines = result["results"]
    counts = sorted(line for line in lines if line.startswith("count "))
    checks = [line.split() for line in lines if line.startswith("check ")]
    return counts, (sum(int(c[1]) for c in checks), sum(int(c[2]) for c in checks))


def rescaled(
    tmp_path: Path,
    parallelism: dict[str, int],
    keys: dict[str, str] | None = None,
    release: str = "2.3.0",
    flavour: str = "jobgraph.json",
) -> Path:
    loaded = load_checkpoint(checkpoint_dir(release))
    loaded.resolve_files()
    rules = [f"{r['from']}={r['to']}" for r in loaded.resolver.rebases()]
    out = tmp_path / "rescaled"
    # The stream-graph plan shows names, not uids: the source's uid ("src", name "Source: seq") is given, as
    # a user would with --uid; the others' uids equal their names and bind by Flink's uid hash.
    uids = {"Source: seq": "src"} if flavour == "plan.json" else None
    plan = load_plan(fixture_dir(release) / flavour, uids)
    rescale(loaded, plan, parallelism, out, keys=keys, master=None, rebase=rules)
    return out


@pytest.fixture(scope="module")
def flink_own_rescale() -> tuple[list[str], tuple[int, int]]:
    """The original checkpoint, rescaled by Flink itself at restore (parse and count 3)."""
    return summarize(
        restore("2.3.0", "counted", checkpoint_dir(), vertex_parallelism={"parse": 3, "count": 3}, until_finished=True)
    )


def test_flink_own_rescale_is_exactly_once(flink_own_rescale) -> None:  # type: ignore[no-untyped-def]
    counts, totals = flink_own_rescale
    assert counts == expected()
    assert totals == (N, N * (N - 1) // 2)


@pytest.mark.parametrize(
    ("release", "parallelism", "flavour"),
    [
        pytest.param("2.3.0", {"parse": 3}, "jobgraph.json", id="2.3.0-rebalance-in-up-hash-out"),
        pytest.param("2.3.0", {"parse": 3, "count": 3}, "jobgraph.json", id="2.3.0-up-hash-keyed"),
        pytest.param("2.3.0", {"parse": 1, "count": 1}, "jobgraph.json", id="2.3.0-down-hash-keyed"),
        pytest.param("2.3.0", {"count": 4}, "jobgraph.json", id="2.3.0-up-keyed-only"),
        *(pytest.param(r, {"parse": 3, "count": 3}, "jobgraph.json", id=f"{r}-up-hash-keyed") for r in OLDER_RELEASES),
        # Before 2.0 the checkpoint stores ids only: bound through Flink's ids from the stream-graph plan.
        pytest.param("1.20.3", {"parse": 3, "count": 3}, "plan.json", id="1.20.3-up-hash-keyed-stream-graph-plan"),
    ],
)
def test_spillway_rescale_restores_exactly_once(tmp_path: Path, release: str, parallelism, flavour, request) -> None:  # type: ignore[no-untyped-def]
    keys = {"count": "tuple:0:long"} if "count" in parallelism else None
    out = rescaled(tmp_path, parallelism, keys, release, flavour)
    result = restore(release, "counted", out, vertex_parallelism=parallelism, until_finished=True)
    counts, totals = summarize(result)
    assert counts == expected()
    assert totals == (N, N * (N - 1) // 2)
    if release == "2.3.0":
        assert (counts, totals) == request.getfixturevalue("flink_own_rescale")
    # Flink restored without rescaling anything itself: every task started at the parallelism we wrote.
    started = result["tasks_at_start"] if result.get("tasks_at_start") else result["tasks"]
    for uid, p in parallelism.items():
        assert sum(1 for name in started if name.startswith(uid + " (") or name.startswith(uid)) >= 1
        assert any(f"({p}/{p})" in name for name in started if name.startswith(uid)), (uid, started)


def test_rocksdb_incremental_job_rescaled_2_to_4_restores(tmp_path: Path) -> None:
    """Whole job 2 -> 4 on RocksDB incremental state with in-flight Strings keyed by a prefix (--key-fn): each
    new subtask gets its old RocksDB instance whole and Flink clips it to the new key-group range."""
    import shutil

    from support.flink_harness import stage

    fixture = Path(__file__).parents[1] / "fixtures" / "2.3.0-rocksdb-incremental"
    source = next(fixture.glob("checkpoints/*/chk-*"))
    staged, cleanup = stage(source, tmp_path)  # the shared SST files must sit where _metadata names them
    try:
        loaded = load_checkpoint(staged)
        out = tmp_path / "p4"
        report = rescale(
            loaded,
            load_plan(fixture / "jobgraph.json"),
            {"slow": 4, "tostr": 4, "len": 4},
            out,
            key_fns={"slow": "support.keyfns:key_of"},
            master=None,
        )
        assert report.to_json()["records_moved"] > 0
        result = restore("2.3.0", "rocksdb-incremental", out, parallelism=4, workdir=tmp_path / "run")
        assert result["outcome"] == "restored", result.get("error")
        log = Path(result["log"]).read_text(errors="replace")
        for lo, hi in ((0, 31), (32, 63), (64, 95), (96, 127)):
            assert f"target key-groups range [{lo}, {hi}]" in log
    finally:
        if cleanup is not None:
            shutil.rmtree(cleanup, ignore_errors=True)


@pytest.mark.parametrize(
    ("release", "flavour"),
    [("2.3.0", "jobgraph.json"), ("1.20.3", "jobgraph.json"), ("1.15.4", "jobgraph.json"), ("1.20.3", "plan.json")],
)
def test_forced_rescale_of_a_damaged_source_restores_without_exactly_the_lost_records(
    tmp_path: Path, release: str, flavour: str
) -> None:
    """`rescale --force` on a source with one damaged channel (src#0 -> parse#1: its first record's length
    field overwritten) leaves that channel out whole; Flink restores the output and the job's result lacks
    exactly that channel's records — as decoded by `analyze` from the undamaged checkpoint — and nothing
    else is lost or doubled. Operator ids from the generator's record of Flink's stream graph (ids.json);
    chunk offsets from Flink's own decode of _metadata (oracle.json)."""
    import json
    import shutil

    from click.testing import CliRunner

    import spillway
    from spillway.api import RescaleOptions
    from spillway.cli.app import app

    fixture = fixture_dir(release)
    ids = {n["uid"]: n["operator_id"] for n in json.loads((fixture / "ids.json").read_text())["stream_nodes"]}
    res = CliRunner().invoke(
        app,
        [
            "analyze",
            str(checkpoint_dir(release)),
            "--plan",
            str(fixture / "jobgraph.json"),
            "--json",
            "--decode",
            "100000",
        ],
    )
    assert res.exit_code == 0, res.output
    (channel,) = [
        c
        for c in json.loads(res.output)["channels"]
        if (c["upstream"]["operator_id"], c["upstream"]["subtask"]) == (ids["src"], 0)
        and (c["downstream"]["operator_id"], c["downstream"]["subtask"]) == (ids["parse"], 1)
    ]
    lost = [int(r["value"]) for r in channel["first_records"]]
    assert len(lost) == channel["records"] > 0

    copy = tmp_path / "src"
    shutil.copytree(fixture, copy)
    chk = next(copy.glob("checkpoints/*/chk-*"))
    oracle = json.loads((fixture / "oracle.json").read_text())
    parse = next(o for o in oracle["operators"] if o["operator_id"] == ids["parse"])
    ((handle, file_name),) = [
        (ch, top["delegate"]["relative_path"])
        for top in next(s for s in parse["subtasks"] if s["index"] == 1)["input_channel_state"]
        for ch in top.get("channels", [top])  # merged handles (2.x) hold the channels; older ones are the channel
        if (ch["gate_index"], ch["input_channel_index"]) == (0, 0)
    ]
    path = chk / file_name
    data = bytearray(path.read_bytes())
    data[handle["offsets"][0] + 4 : handle["offsets"][0] + 8] = (0x7FFFFFF0).to_bytes(4, "big")
    path.write_bytes(bytes(data))

    out = tmp_path / "forced"
    parallelism = {"parse": 3, "count": 3}
    # the stream-graph plan shows names, not uids: the source's uid is given as a user would (--uid)
    plan = load_plan(copy / flavour, {"Source: seq": "src"} if flavour == "plan.json" else None)
    options = RescaleOptions(parallelism, out, keys={"count": "tuple:0:long"}, master=None, force=True)
    report = spillway.open(chk, plan=plan).rescale(options)
    assert [x.channel for x in report.plan.lost] == [channel["label"]]
    counts, totals = summarize(restore(release, "counted", out, vertex_parallelism=parallelism, until_finished=True))
    gone = set(lost)
    assert totals == (N - len(lost), N * (N - 1) // 2 - sum(lost))
    kept = {k: [v for v in range(k, N, KEYS) if v not in gone] for k in range(KEYS)}
    assert counts == sorted(f"count {k} {len(vs)} {sum(vs)}" for k, vs in kept.items())


@pytest.mark.parametrize(
    ("scenario", "release", "old_p", "new_p"),
    [
        *(
            (scenario, release, old_p, new_p)
            for scenario in ("counted-rocksdb-incremental", "counted-changelog")
            for release in ("2.3.0", "1.20.3")
            for old_p, new_p in ((2, 3), (3, 2))
        ),
        ("counted-forst", "2.3.0", 2, 3),
        ("counted-forst", "2.3.0", 3, 2),
    ],
)
def test_rocksdb_and_changelog_counted_job_rescaled_across_instances_is_exactly_once(
    tmp_path: Path, scenario: str, release: str, old_p: int, new_p: int
) -> None:
    """The counted job on RocksDB with incremental checkpoints, on ForSt (2.x, incremental), and on the changelog
    state backend (materialized RocksDB snapshots plus DSTL changelog increments), parse and count 2 -> 3 and
    3 -> 2 with their in-flight records: a new count subtask needs the state of two old ones (files named in
    place). Run to its end in real Flink, every key's count and sum and the check totals are exactly-once. The
    changelog backend cannot take the full first checkpoint of a NO_CLAIM restore, so those restore in CLAIM mode
    (as the docs tell users)."""
    import shutil

    from support.flink_harness import stage

    root = FIXTURES / (f"{release}-{scenario}" + ("-p3" if old_p == 3 else ""))
    staged, cleanup = stage(next(root.glob("checkpoints/*/chk-*")), tmp_path)  # files where _metadata names them
    try:
        out = tmp_path / "rescaled"
        parallelism = {"parse": new_p, "count": new_p}
        report = rescale(
            load_checkpoint(staged),
            load_plan(root / "jobgraph.json"),
            parallelism,
            out,
            keys={"count": "tuple:0:long"},
            master=None,
        )
        handed = "changelog increments" if scenario == "counted-changelog" else "snapshots of old subtasks"
        assert any(handed in n for n in report.notes), report.notes
        result = restore(
            release,
            scenario,
            out,
            parallelism=old_p,
            vertex_parallelism=parallelism,
            until_finished=True,
            workdir=tmp_path / "run",
            claim=scenario == "counted-changelog",
        )
        counts, totals = summarize(result)
        assert counts == expected()
        assert totals == (N, N * (N - 1) // 2)
        started = result["tasks_at_start"] if result.get("tasks_at_start") else result["tasks"]
        assert any(f"({new_p}/{new_p})" in name for name in started if name.startswith("count")), started
    finally:
        if cleanup is not None:
            shutil.rmtree(cleanup, ignore_errors=True)
