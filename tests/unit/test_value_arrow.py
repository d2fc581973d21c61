"""Decoded values as Arrow/Parquet columns: the pojo-counted fixture's in-flight POJOs written to Parquet and read
back are the Events the job logged (struct by field name, arrays as lists, nulls as nulls); a row, a map and a field
of unknown type keep their shape."""

from __future__ import annotations

import gzip
import json
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
from support.fixtures import fixture_named

from spillway.formats.values import decode, parse_value_spec
from spillway.inspect.analyze import analyze
from spillway.inspect.topology import load_plan
from spillway.inspect.value_arrow import arrow_column, arrow_type
from spillway.storage.load import load_checkpoint

EVENT = (
    "pojo(user:string,seq:long,bucket:int,meta:pojo(origin:string,shard:int,stamp:long),tags:array(string),"
    "parts:array(int),history:objarray(long),score:double)"
)


def test_in_flight_pojos_round_trip_through_parquet(tmp_path: Path) -> None:
    fx = fixture_named("2.3.0-pojo-counted")
    with gzip.open(fx.root / "records.jsonl.gz", "rt", encoding="utf-8") as f:
        log = {r["seq"]: r for r in map(json.loads, f)}
    result = analyze(load_checkpoint(fx.checkpoint_dir), load_plan(fx.root / "jobgraph.json"), keep_records=10**9)
    t = parse_value_spec(EVENT)
    values = [
        decode(t, rec["value"])
        for ch in result.channels
        if ch.downstream["operator"] in ("count", "group")
        for rec in ch.record_list
        if rec["tag"] == "record"
    ]
    assert len(values) > 500
    pq.write_table(pa.table({"value": arrow_column(t, values)}), tmp_path / "v.parquet")
    back = pq.read_table(tmp_path / "v.parquet").column("value").to_pylist()
    assert [log[v["seq"]] for v in back] == back
    assert any(v["meta"] is None for v in back) and any(v["bucket"] is None for v in back)


def test_rows_maps_and_unknown_fields_keep_their_shape() -> None:
    row = parse_value_spec("row(id:long,name:string)")
    # Row mask 0x00 (+I, no nulls), 5L, "ab"
    col = arrow_column(row, [decode(row, b"\x00" + (5).to_bytes(8, "big") + b"\x03ab"), None])
    assert col.to_pylist() == [{"kind": "+I", "id": 5, "name": "ab"}, None]
    m = parse_value_spec("map(string,long)")
    # MapSerializer: size 2; "a" -> 1; "b" -> null
    raw = (2).to_bytes(4, "big") + b"\x02a" + b"\x00" + (1).to_bytes(8, "big") + b"\x02b" + b"\x01"
    assert arrow_column(m, [decode(m, raw)]).to_pylist() == [[("a", 1), ("b", None)]]
    part = parse_value_spec("tuple(long,?,string)")
    assert arrow_type(part) == pa.struct([("f0", pa.int64()), ("f1", pa.binary()), ("f2", pa.string())])
    value = decode(part, (7).to_bytes(8, "big") + b"\x01\x02")
    assert arrow_column(part, [value]).to_pylist() == [{"f0": 7, "f1": b"\x01\x02", "f2": None}]
