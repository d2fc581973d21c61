"""analyze / keygroup through the CLI; the finished-state verdict on real and modified plans."""

from __future__ import annotations

import json
from pathlib import Path

import pyarrow.parquet as pq
import pytest
from click.testing import CliRunner
from support.fixtures import fixture_named, fixture_params

from spillway.cli.app import app
from spillway.cli.common import human_bytes
from spillway.inspect.analyze import analyze, edges
from spillway.inspect.finished import check
from spillway.inspect.parquet_out import analyze_to_parquet
from spillway.inspect.topology import load_plan, parse_plan
from spillway.storage.load import load_checkpoint

runner = CliRunner()


def test_analyze_json_schema_and_truth() -> None:
    fx = fixture_named("2.3.0-unaligned")
    res = runner.invoke(
        app,
        [
            "analyze",
            str(fx.checkpoint_dir),
            "--plan",
            str(fx.root / "jobgraph.json"),
            "--json",
            "--decode",
            "3",
            "--value-type",
            "string",
        ],
    )
    assert res.exit_code == 0, res.output
    doc = json.loads(res.output)
    assert doc["schema"] == "spillway.analyze/1"
    for op in doc["operators"]:
        assert {"operator_id", "finished_state", "finished_subtasks", "in_flight_bytes", "in_flight_records"} <= set(op)
        assert op["finished_state"] in ("FULLY_FINISHED", "PARTIALLY_FINISHED", "RUNNING", "NOT_RECORDED")
    tostr = next(o for o in doc["operators"] if o["uid"] == "tostr")
    assert tostr["in_flight_bytes"] > 0 and tostr["in_flight_records"] > 0
    ch = next(c for c in doc["channels"] if c["ship_strategy"] == "HASH")
    assert {"buffers", "records", "bytes", "upstream", "downstream"} <= set(ch)
    assert ch["upstream"]["subtask"] in (0, 1) and ch["downstream"]["subtask"] in (0, 1)
    # The job's tostr maps each number to the String "key:subtask:seq" (fixture.json): the JSON value is that
    # String as data, not its Python text ('1:0:1'), and the record (tag 0, no event time) has a null timestamp.
    record = ch["first_records"][0]
    key, subtask, seq = record["value"].split(":")
    assert int(subtask) == ch["upstream"]["subtask"] and int(key) >= 0 and int(seq) > 0
    assert record["timestamp"] is None
    assert doc["restore_verdict"]["restorable"] is True


def test_analyze_parquet(tmp_path: Path) -> None:
    fx = fixture_named("2.3.0-unaligned-p3")
    res = runner.invoke(
        app,
        [
            "analyze",
            str(fx.checkpoint_dir),
            "--plan",
            str(fx.root / "jobgraph.json"),
            "--parquet",
            str(tmp_path / "out"),
            "--records",
        ],
    )
    assert res.exit_code == 0, res.output
    channels = pq.read_table(tmp_path / "out" / "channels.parquet").to_pylist()
    records = pq.read_table(tmp_path / "out" / "records.parquet")
    assert sum(c["records"] or 0 for c in channels) == records.num_rows > 0
    assert not list((tmp_path / "out").glob("*.partial"))


@pytest.mark.parametrize("name", ["2.3.0-unaligned-p3", "2.3.0-sql"])
def test_records_parquet_streams_in_bounded_batches(tmp_path: Path, name: str) -> None:
    """records.parquet is written batch by batch while the channels are read: nothing is kept in memory for
    it (no record_list), it has many row groups, and its rows are exactly analyze's records, channel by
    channel and in replay order."""
    fx = fixture_named(name)
    loaded = load_checkpoint(fx.checkpoint_dir)
    topology = load_plan(fx.root / "jobgraph.json")
    result, written = analyze_to_parquet(loaded, topology, tmp_path, with_records=True, batch_rows=1000)
    assert [p.name for p in written] == ["channels.parquet", "records.parquet"]
    assert all(not c.record_list for c in result.channels)
    meta = pq.ParquetFile(tmp_path / "records.parquet").metadata
    total = sum(c.records or 0 for c in result.channels)
    assert meta.num_rows == total > 1000
    assert meta.num_row_groups == -(-total // 1000)
    table = pq.read_table(tmp_path / "records.parquet", columns=["channel", "seq", "tag"]).to_pydict()
    per_channel: dict[str, list[int]] = {}
    for label, seq in zip(table["channel"], table["seq"], strict=True):
        per_channel.setdefault(label, []).append(seq)
    for c in result.channels:
        assert per_channel.get(c.label, []) == list(range(c.records or 0)), c.label
    # the same records, in the same order, as analyze keeps when asked to
    full = analyze(loaded, topology, keep_records=10**9)
    values = pq.read_table(tmp_path / "records.parquet", columns=["value"]).column("value").to_pylist()
    assert values == [r["value"] for c in full.channels for r in c.record_list]


def test_records_needs_parquet() -> None:
    fx = fixture_named("2.3.0-unaligned")
    res = runner.invoke(app, ["analyze", str(fx.checkpoint_dir), "--records"])
    assert res.exit_code == 2


def _plan_with(fx, edit) -> dict:
    plan = json.loads((fx.root / "jobgraph.json").read_text())
    edit({n["description"].split("<br/>")[0]: n for n in plan["nodes"]})
    return plan


def test_finished_verdict_accepts_the_original_topology() -> None:
    fx = fixture_named("2.3.0-finished")
    verdict = check(
        parse_plan(json.loads((fx.root / "jobgraph.json").read_text())), load_checkpoint(fx.checkpoint_dir).checkpoint
    )
    assert verdict.restorable
    assert verdict.classification["Source: bseq"] == "FULLY_FINISHED"
    assert verdict.classification["Source: pseq -> pmap -> psink: Writer"] == "PARTIALLY_FINISHED"


@pytest.mark.parametrize(
    ("edit", "rule"),
    [
        # A running vertex now feeds the fully finished sink.
        (
            lambda n: n["bsink: Writer"]["inputs"].append(
                {"id": n["slow"]["id"], "num": 1, "ship_strategy": "REBALANCE"}
            ),
            "fully-finished-predecessor",
        ),
        # The partially finished chain now reads from the running source over an all-to-all edge.
        (
            lambda n: (
                n["Source: pseq"]
                .setdefault("inputs", [])
                .append({"id": n["slow"]["id"], "num": 0, "ship_strategy": "REBALANCE"})
            ),
            "all-to-all-predecessor",
        ),
        (
            lambda n: (
                n["Source: pseq"]
                .setdefault("inputs", [])
                .append({"id": n["slow"]["id"], "num": 0, "ship_strategy": "FORWARD"})
            ),
            "pointwise-predecessor",
        ),
    ],
)
def test_finished_verdict_refuses_what_flink_refuses(edit, rule: str) -> None:
    fx = fixture_named("2.3.0-finished")
    verdict = check(parse_plan(_plan_with(fx, edit)), load_checkpoint(fx.checkpoint_dir).checkpoint)
    assert not verdict.restorable
    assert [v.rule for v in verdict.violations] == [rule]


@pytest.mark.parametrize("fx", fixture_params())
def test_analyze_runs_on_every_fixture(fx) -> None:
    res = runner.invoke(app, ["analyze", str(fx.checkpoint_dir), "--plan", str(fx.root / "jobgraph.json"), "--json"])
    assert res.exit_code == 0, res.output
    doc = json.loads(res.output)
    assert all(c["problem"] is None for c in doc["channels"]), [c["problem"] for c in doc["channels"]]
    total = sum(o["in_flight_bytes"] for o in doc["operators"])
    assert total == sum(c["bytes"] for c in doc["channels"])


def _cells(output: str, title: str) -> dict[str, list[str]]:
    """The rows of the table titled ``title`` in rich's text output: first cell -> the other cells."""
    lines = output.splitlines()
    start = next(i for i, ln in enumerate(lines) if title in ln)
    rows: dict[str, list[str]] = {}
    for ln in lines[start + 1 :]:
        if ln.startswith("└"):
            break
        if ln.startswith("│"):
            cells = [c.strip() for c in ln.strip("│").split("│")]
            rows[cells[0]] = cells[1:]
    return rows


def test_heat_map_shows_each_channels_bytes() -> None:
    fx = fixture_named("2.3.0-unaligned-p3")
    args = ["analyze", str(fx.checkpoint_dir), "--plan", str(fx.root / "jobgraph.json")]
    res = runner.invoke(app, args)
    assert res.exit_code == 0, res.output
    result = analyze(load_checkpoint(fx.checkpoint_dir), load_plan(fx.root / "jobgraph.json"))
    shown = 0
    for e in edges(result):
        rows = _cells(res.output, f"in-flight bytes  {e.upstream} → {e.downstream}")
        grid = e.grid()
        assert set(rows) == {f"#{u}" for u in range(e.upstream_parallelism)} | {"Σ"}
        for u in range(e.upstream_parallelism):
            cells = rows[f"#{u}"]
            for d in range(e.downstream_parallelism):
                c = grid.get((u, d))
                assert cells[d] == ("·" if c is None else "0" if c.bytes == 0 else human_bytes(c.bytes))
            assert cells[-1] == human_bytes(sum(c.bytes for (uu, _), c in grid.items() if uu == u))
        assert rows["Σ"][-1] == human_bytes(e.bytes)
        assert f"{e.records} records in {len(e.channels)} channels" in res.output
        # no fixture job emits watermarks before its exchanges: the view says so
        assert e.watermarks == 0 and f"no watermarks in flight on {e.upstream} → {e.downstream}" in res.output
        shown += 1
    assert shown == 2  # tostr -> slow (HASH, 3 x 3) and slow -> len (REBALANCE)
    hidden = runner.invoke(app, [*args, "--no-heatmap"])
    assert hidden.exit_code == 0 and "in-flight bytes  " not in hidden.output


def test_value_type_specs_through_the_cli() -> None:
    fx = fixture_named("2.3.0-sql")
    base = ["analyze", str(fx.checkpoint_dir), "--plan", str(fx.root / "jobgraph.json"), "--json", "--decode", "2"]
    res = runner.invoke(app, [*base, "--value-type", "rowdata(int,bigint)"])
    assert res.exit_code == 0, res.output
    doc = json.loads(res.output)
    firsts = [r for c in doc["channels"] for r in c["first_records"]]
    # JSON data, not text: a RowData value is its kind and its fields (an int and a bigint)
    assert firsts and all(
        r["value"]["kind"] == "+I" and [type(f) for f in r["value"]["fields"]] == [int, int] and "value_error" not in r
        for r in firsts
    )
    res = runner.invoke(app, [*base, "--value-type", "tuple(long,long,long)"])
    doc = json.loads(res.output)
    r = doc["channels"][0]["first_records"][0]
    assert "left over" in r["value_error"] and len(r["value"]["hex"]) == 2 * 28  # hex of the 28-byte value
    bad = runner.invoke(app, [*base, "--value-type", "tuple(long,strin)"])
    assert bad.exit_code == 2 and "strin" in bad.output


def test_json_fields_are_documented() -> None:
    """Every field --json emits is described in docs/analyze.md (and the issue's required ones are there)."""
    docs = (Path(__file__).parents[2] / "docs" / "analyze.md").read_text()
    fx = fixture_named("2.3.0-unaligned")
    res = runner.invoke(
        app,
        ["analyze", str(fx.checkpoint_dir), "--plan", str(fx.root / "jobgraph.json"), "--json", "--decode", "1"],
    )
    doc = json.loads(res.output)
    keys = set(doc) | set(doc["operators"][0]) | set(doc["edges"][0]) | set(doc["channels"][0])
    keys |= set(doc["channels"][0]["first_records"][0]) | set(doc["channels"][0]["buffer_sequence"][0])
    keys |= set(doc["restore_verdict"])
    assert {"operators", "channels", "finished_state", "finished_subtasks", "in_flight_bytes"} <= keys
    assert {"in_flight_records", "buffers", "records", "bytes", "upstream", "downstream"} <= keys
    undocumented = sorted(k for k in keys if f'"{k}"' not in docs)
    assert not undocumented
    edge = next(e for e in doc["edges"] if e["ship_strategy"] == "HASH")
    hash_channels = [c for c in doc["channels"] if c["ship_strategy"] == "HASH"]
    assert edge["channels"] == len(hash_channels)
    assert edge["bytes"] == sum(c["bytes"] for c in hash_channels)
    assert edge["records"] == sum(c["records"] for c in hash_channels)


def test_records_parquet_memory_does_not_grow_with_records(tmp_path: Path) -> None:
    """Python-heap peak while streaming 28k records in batches of 1000 stays far below keeping them."""
    import tracemalloc

    fx = fixture_named("2.3.0-operator-states")
    loaded = load_checkpoint(fx.checkpoint_dir)
    topology = load_plan(fx.root / "jobgraph.json")
    analyze_to_parquet(loaded, topology, tmp_path / "warm", True, batch_rows=1000)  # imports, caches

    def peak(action) -> int:
        tracemalloc.start()
        try:
            action()
            return tracemalloc.get_traced_memory()[1]
        finally:
            tracemalloc.stop()

    kept = peak(lambda: analyze(loaded, topology, keep_records=10**9))
    streamed = peak(lambda: analyze_to_parquet(loaded, topology, tmp_path / "s", True, batch_rows=1000))
    assert streamed * 4 < kept, (streamed, kept)
