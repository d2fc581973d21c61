"""``analyze --parquet DIR --records --value-type …`` (and ``AnalyzeOptions(value_type=…, value_types=…)``): the
records in ``records.parquet`` decoded with the value spec of their edge, through the same Arrow mapping as
salvage, next to the raw bytes. Expected values are the records the jobs wrote: the POJOs and case classes they
logged (records.jsonl.gz), AvroCounted's and Counted's records (the job's data, as in test_avro_fixtures and
test_salvage)."""

from __future__ import annotations

import gzip
import json
from pathlib import Path
from typing import Any

import pyarrow.parquet as pq
import pytest
from click.testing import CliRunner
from support.avro_counted import SCHEMA, written_by_the_job
from support.fixtures import fixture_named

import spillway
from spillway import api
from spillway.cli.app import app

KEYS = 32  # Counted.KEYS
N = 200_000  # Counted.N
EVENT = (  # PojoCounted.Event, as test_salvage decodes it
    "pojo(user:string,seq:long,bucket:int,meta:pojo(origin:string,shard:int,stamp:long),tags:array(string),"
    "parts:array(int),history:objarray(long),score:double)"
)
PAIR = "caseclass(user:string,seq:long)"  # the caseclass-counted job's scala.Tuple2[String, Long]


def analyze_cli(name: str, out: Path, *args: str) -> tuple[int, Any]:
    fx = fixture_named(name)
    argv = ["analyze", str(fx.checkpoint_dir), "--plan", str(fx.root / "jobgraph.json"), "--json"]
    res = CliRunner().invoke(app, [*argv, "--parquet", str(out), "--records", *args])
    return res.exit_code, json.loads(res.stdout) if res.stdout.strip().startswith("{") else res.output


def records(out: Path) -> list[dict[str, Any]]:
    return [r for r in pq.read_table(out / "records.parquet").to_pylist() if r["tag"] == "record"]


def logged(name: str) -> dict[int, Any]:
    with gzip.open(fixture_named(name).root / "records.jsonl.gz", "rt", encoding="utf-8") as f:
        return {r["seq"]: r for r in map(json.loads, f)}


def edge(row: dict[str, Any]) -> str:
    """``UP->DOWN`` of a row's channel label (``UP#i -> DOWN#j (gate g)``)."""
    up, down = row["channel"].split(" -> ")
    return f"{up.rsplit('#', 1)[0]}->{down.rsplit('#', 1)[0]}"


def test_pojos_in_records_parquet_are_the_events_the_job_logged(tmp_path: Path) -> None:
    out = tmp_path / "pojo"
    code, doc = analyze_cli(
        "2.3.0-pojo-counted", out, "--value-type", f"parse->count={EVENT}", "--value-type", f"count->group={EVENT}"
    )
    assert code == 0, doc
    log = logged("2.3.0-pojo-counted")
    rows = records(out)
    keyed = [r for r in rows if edge(r) in ("parse->count", "count->group")]
    assert len(keyed) > 200
    for r in keyed:
        value = r[f"decoded[{edge(r)}]"]
        assert value == log[value["seq"]], r
        assert r["decode_problem"] is None
    assert any(r[f"decoded[{edge(r)}]"]["meta"] is None for r in keyed)  # the job's null field stays null
    others = [r for r in rows if r not in keyed]
    assert others and all(r["decoded[parse->count]"] is r["decoded[count->group]"] is None for r in others)
    # the raw bytes stay: the value column is what analyze always wrote
    assert all(isinstance(r["value"], bytes) and len(r["value"]) + 1 <= r["length"] for r in rows)


def test_case_classes_in_records_parquet_are_the_pairs_the_job_logged(tmp_path: Path) -> None:
    out = tmp_path / "caseclass"
    code, doc = analyze_cli("1.20.3-caseclass-counted", out, "--value-type", f"parse->group={PAIR}")
    assert code == 0, doc
    log = logged("1.20.3-caseclass-counted")
    keyed = [r for r in records(out) if edge(r) == "parse->group"]
    assert len(keyed) > 500
    assert [r["decoded[parse->group]"] for r in keyed] == [log[r["decoded[parse->group]"]["seq"]] for r in keyed]


@pytest.mark.parametrize("name", ["2.3.0-counted-avro-specific", "2.3.0-counted-avro-generic"])
def test_avro_records_through_the_api_are_what_the_job_wrote(name: str, tmp_path: Path) -> None:
    fx = fixture_named(name)
    cp = spillway.open(fx.checkpoint_dir, plan=fx.root / "jobgraph.json")
    options = api.AnalyzeOptions(parquet=tmp_path, records=True, value_types={"parse->count": f"avro({SCHEMA})"})
    result = cp.analyze(options)
    assert sorted(p.name for p in result.written) == ["channels.parquet", "records.parquet"]
    keyed = [r for r in records(tmp_path) if edge(r) == "parse->count"]
    assert len(keyed) > 500
    for r in keyed:
        value = r["decoded[parse->count]"]
        assert value == written_by_the_job(value["v"]), r


def test_tuples_and_scalars_by_edge_and_for_every_other_edge(tmp_path: Path) -> None:
    """Counted: src -> parse carries v (long), parse -> count Tuple2(v % KEYS, v), count -> check v again."""
    out = tmp_path / "counted"
    code, doc = analyze_cli(
        "2.3.0-counted", out, "--value-type", "long", "--value-type", "parse->count=tuple(long,long)", "--decode", "3"
    )
    assert code == 0, doc
    rows = records(out)
    pairs = [r["decoded[parse->count]"] for r in rows if edge(r) == "parse->count"]
    longs = [r["decoded"] for r in rows if edge(r) != "parse->count"]
    assert pairs and longs and len(pairs) + len(longs) == len(rows)
    assert all(p["f0"] == p["f1"] % KEYS for p in pairs)
    seen = [p["f1"] for p in pairs] + longs
    assert all(0 <= v < N for v in seen) and len(set(seen)) == len(seen)  # each v in flight once
    assert all(r["decode_problem"] is None for r in rows)
    # --decode shows each edge's records with its spec too
    for c in doc["channels"]:
        for shown in c["first_records"]:
            if (c["upstream"]["operator"], c["downstream"]["operator"]) == ("parse", "count"):
                key, v = shown["value"]
                assert key == v % KEYS
            else:
                assert isinstance(shown["value"], int)


def test_a_record_that_does_not_fit_keeps_its_bytes_and_says_why(tmp_path: Path) -> None:
    out = tmp_path / "int"
    code, doc = analyze_cli("2.3.0-counted", out, "--value-type", "count->check=int")
    assert code == 0, doc
    rows = [r for r in records(out) if edge(r) == "count->check"]
    assert rows
    for r in rows:  # Counted's count emits longs: 8 bytes, not an int's 4
        assert r["decoded[count->check]"] is None and r["decode_problem"] == "not a int: 4 bytes left over"
        assert len(r["value"]) == 8


def test_a_spec_for_an_edge_not_in_flight_writes_nothing(tmp_path: Path) -> None:
    out = tmp_path / "typo"
    code, doc = analyze_cli("2.3.0-counted", out, "--value-type", "parse->cont=tuple(long,long)")
    assert code == 2
    assert doc["error"].startswith("value spec for parse->cont: no edge with data in flight is called so")
    assert not (out / "records.parquet").exists() and not (out / "channels.parquet").exists()
