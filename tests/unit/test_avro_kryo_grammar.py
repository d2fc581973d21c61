"""avro(...) and kryo2/kryo5(...) as specs of the one grammar, on real channel state: the "counted-avro-*" and
"counted-kryo" fixtures (AvroCounted.java / KryoCounted.java) hold the job's records in flight on its keyBy edge
parse -> count. Expected values come from the job and from Flink, never from the code under test: each value is
the record the job wrote for its v (the jobs' formulas below), and each record sits on the subtask Flink routed it
to (its channel), which a key spec must reproduce — the job keys by user id, so a derived key that keeps the id
(``|lower`` of an all-lower-case id) routes the same and one that changes it (``|upper``) does not."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from click.testing import CliRunner

from spillway.cli.app import app
from spillway.flink.keygroups import key_group_for_hash, operator_index
from spillway.formats.values import ValueSpecError, decode_value, json_data, parse_key_extractor, parse_value_spec

FIXTURES = Path(__file__).parents[1] / "fixtures"
SCHEMA = FIXTURES / "avro" / "event.avsc"  # AvroCounted.SCHEMA_JSON
KRYO_FIELDS = "user:String, v:long, bucket:int, score:double"  # KryoCounted.FIELDS
KEYS = 32
MAX_PARALLELISM = 128  # the fixtures' jobs
SPECS = {
    "1.20.3-counted-avro-specific": f"avro({SCHEMA})",
    "2.3.0-counted-avro-generic": f"avro({SCHEMA})",
    "1.20.3-counted-kryo": f"kryo2({KRYO_FIELDS})",
    "2.3.0-counted-kryo": f"kryo5({KRYO_FIELDS})",
}
KEY_PATHS = {"avro": "user.id", "kryo": "user"}


def written_by_the_job(name: str, v: int) -> dict[str, object]:
    if "avro" in name:  # AvroCounted's record for v
        return {
            "user": {"id": f"user-{v % KEYS}", "tier": None if v % 3 == 0 else v % 5},
            "v": v,
            "tags": [f"t{v % 4}"] * (v % 3),
            "score": None if v % 2 == 0 else v / 4.0,
        }
    return {"user": f"user-{v % KEYS}", "v": v, "bucket": v % 7 - 3, "score": v / 4.0}  # KryoCounted's


def checkpoint(name: str) -> Path:
    return next((FIXTURES / name).glob("checkpoints/*/chk-*"))


_salvaged: dict[str, tuple[pa.Table, dict[str, Any]]] = {}


def salvaged(name: str, tmp_path_factory: pytest.TempPathFactory) -> tuple[pa.Table, dict[str, Any]]:
    """The keyed edge's in-flight records, exported by ``spillway salvage`` with the job's value spec."""
    if name not in _salvaged:
        out = tmp_path_factory.mktemp("salvage") / name
        args = ["salvage", str(checkpoint(name)), "--plan", str(FIXTURES / name / "jobgraph.json"), "--out", str(out)]
        res = CliRunner().invoke(app, [*args, "--value-type", f"parse->count={SPECS[name]}", "--json"])
        assert res.exit_code == 0, res.output
        doc = json.loads(res.stdout)
        edge = next(e for e in doc["edges"] if (e["upstream"], e["downstream"]) == ("parse", "count"))
        _salvaged[name] = (pq.read_table(out / edge["file"]), edge)
    return _salvaged[name]


@pytest.mark.parametrize("name", SPECS)
def test_salvage_writes_the_records_as_arrow_structs(name: str, tmp_path_factory: pytest.TempPathFactory) -> None:
    table, edge = salvaged(name, tmp_path_factory)
    assert edge["value_type"] == SPECS[name]
    assert "value_json" not in table.column_names
    column = table.schema.field("value").type
    assert pa.types.is_struct(column)
    if "avro" in name:
        assert [column.field(i).name for i in range(column.num_fields)] == ["user", "v", "tags", "score"]
        assert pa.types.is_struct(column.field("user").type) and pa.types.is_list(column.field("tags").type)
        assert column.field("v").type == pa.int64() and column.field("score").type == pa.float64()
    else:
        assert {column.field(i).name: column.field(i).type for i in range(column.num_fields)} == {
            "user": pa.string(),
            "v": pa.int64(),
            "bucket": pa.int32(),
            "score": pa.float64(),
        }
    values = table.column("value").to_pylist()
    assert len(values) > 500
    assert all(value == written_by_the_job(name, value["v"]) for value in values)
    assert len({value["v"] for value in values}) == len(values)  # each v is in flight at most once


def routed_subtasks(table: pa.Table) -> list[tuple[bytes, int]]:
    """(value bytes, the count subtask Flink routed the record to): on the output side of parse the channel is
    the receiving subtask, on the input side of count the record's own subtask."""
    out = []
    for r in table.select(["value_raw", "side", "subtask", "channel_index"]).to_pylist():
        out.append((r["value_raw"], r["channel_index"] if r["side"] == "output" else r["subtask"]))
    return out


def owner(hash_code: int) -> int:
    return operator_index(MAX_PARALLELISM, 2, key_group_for_hash(hash_code, MAX_PARALLELISM))


@pytest.mark.parametrize("name", SPECS)
def test_nested_in_a_tuple_the_value_and_its_key_are_found(name: str, tmp_path_factory: pytest.TempPathFactory) -> None:
    """TupleSerializer writes its fields back to back (tests/integration/test_values.py): a long before the
    record's real bytes is a Tuple2<Long, record>; the key at field 1's path routes as the job routed it."""
    table, _ = salvaged(name, tmp_path_factory)
    spec = f"tuple(long,{SPECS[name]})"
    key = parse_key_extractor(f"{spec}:1.{KEY_PATHS['avro' if 'avro' in name else 'kryo']}")
    checked = 0
    for raw, subtask in routed_subtasks(table):
        value = json_data(decode_value(spec, (7).to_bytes(8, "big") + raw))
        assert isinstance(value, list) and isinstance(value[1], dict)
        v = value[1]["v"]
        assert value == [7, written_by_the_job(name, v)]
        found, h = key((7).to_bytes(8, "big") + raw)
        assert found == f"user-{v % KEYS}" and owner(h) == subtask
        checked += 1
    assert checked > 500


@pytest.mark.parametrize("name", SPECS)
def test_derived_keys_route_like_the_job(name: str, tmp_path_factory: pytest.TempPathFactory) -> None:
    table, _ = salvaged(name, tmp_path_factory)
    path = KEY_PATHS["avro" if "avro" in name else "kryo"]
    same = parse_key_extractor(f"{SPECS[name]}:{path}|lower")  # the ids are lower case: the job's key
    other = parse_key_extractor(f"{SPECS[name]}:{path}|upper")
    prefix = parse_key_extractor(f"{SPECS[name]}:{path}|after('-')|str")
    routed = routed_subtasks(table)
    assert all(owner(same(raw)[1]) == subtask for raw, subtask in routed)
    assert any(owner(other(raw)[1]) != subtask for raw, subtask in routed)
    assert {prefix(raw)[0] for raw, _ in routed} == {str(i) for i in range(KEYS)}


def test_avro_and_kryo_keys_refuse_what_the_grammar_refuses() -> None:
    with pytest.raises(ValueSpecError, match="lower takes a string, the key here is a long"):
        parse_key_extractor(f"avro({SCHEMA}):v|lower")
    with pytest.raises(ValueSpecError, match=r"@utf8 is for string fields of avro\(...\) records"):
        parse_key_extractor(f"kryo5({KRYO_FIELDS}):user@utf8")
    with pytest.raises(
        ValueSpecError, match=r"a spillway\.fixtures\.avro\.User key has no content-based Java hashCode"
    ):
        parse_key_extractor(f"tuple(long,avro({SCHEMA})):1.user")
    with pytest.raises(ValueSpecError, match="picks a key"):
        parse_value_spec(f"tuple(long,avro({SCHEMA})):1.v")
