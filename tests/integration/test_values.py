"""Value decoding and key extraction against bytes, hash codes and routing computed by real Flink 2.3.0 classes
(ValueOracle: TupleSerializer, RowSerializer, RowDataSerializer, KeyGroupRangeAssignment), and RowData decoding on
the SQL fixture's real channel state."""

from __future__ import annotations

import pytest
from support.fixtures import fixture_named
from support.value_oracle import expected, same, value_oracle

from spillway.flink.keygroups import key_group_for_hash, murmur_hash, operator_index
from spillway.formats.values import (
    RowValue,
    Undecoded,
    ValueSpecError,
    decode_value,
    parse_key_extractor,
    parse_value_spec,
    render_value,
)
from spillway.inspect.analyze import analyze
from spillway.inspect.topology import load_plan
from spillway.storage.load import load_checkpoint


@pytest.fixture(scope="module")
def oracle() -> dict:
    return value_oracle()


def test_oracle_covers_the_interesting_cases(oracle: dict) -> None:
    specs = {c["spec"] for c in oracle["cases"]}
    assert {"long", "int", "string", "boolean", "double", "float", "short", "byte"} <= specs
    assert {"tuple(long,string)", "row(long,int,string)", "rowdata(bigint,string)"} <= specs
    assert sum(len(c["keys"]) for c in oracle["cases"]) > 200
    assert any(c["spec"].startswith("row(int,int,int,int,int,int,int)") for c in oracle["cases"]), "2-byte mask"


def test_decoding_matches_flinks_serializers(oracle: dict) -> None:
    for case in oracle["cases"]:
        raw = bytes.fromhex(case["hex"])
        got = decode_value(case["spec"], raw)
        assert same(got, expected(case["value"])), f"{case['spec']} {case['hex']}: {got!r}"


def test_key_extractors_hash_and_route_like_flink(oracle: dict) -> None:
    routes = oracle["routes"]
    checked = 0
    for case in oracle["cases"]:
        raw = bytes.fromhex(case["hex"])
        for k in case["keys"]:
            extract = parse_key_extractor(k["extractor"])
            assert extract.spec == k["extractor"]
            key, h = extract(raw)
            assert same(key, expected(k["key"])), f"{k['extractor']} on {case['hex']}: {key!r}"
            assert h == k["hash"], f"{k['extractor']} on {case['hex']}: hash {h} != {k['hash']}"
            assert murmur_hash(h) == k["murmur"]
            for (max_p, p), (kg, sub) in zip(routes, k["routing"], strict=True):
                assert key_group_for_hash(h, max_p) == kg
                assert operator_index(max_p, p, kg) == sub
            # memoryview payloads (what a reader over a mapped file hands out) give the same answer
            assert extract(memoryview(raw)) == (key, h) or same(extract(memoryview(raw))[0], key)
            checked += 1
    assert checked > 200


def test_unknown_fields_decode_as_far_as_possible(oracle: dict) -> None:
    case = next(c for c in oracle["cases"] if c["spec"] == "tuple(long,string)" and c["hex"].endswith("6b3137"))
    raw = bytes.fromhex(case["hex"])
    first, rest = decode_value("tuple(long,?)", raw)
    assert first == 1 and isinstance(rest, Undecoded) and rest.raw == bytes.fromhex("046b3137")
    row = next(c for c in oracle["cases"] if c["spec"] == "row(long,int,string)")
    value = decode_value("row(long,?,string)", bytes.fromhex(row["hex"]))
    assert isinstance(value, RowValue) and value.fields[0] == 0 and value.fields[2] == Undecoded(b"")
    assert repr(decode_value("row(long,int,string)", bytes.fromhex("20000000050278"))) == "+I[None, 5, 'x']"


@pytest.mark.parametrize(
    ("spec", "fragment"),
    [
        ("row:2:string", "row(T0,T1,...):2"),
        ("row:0:long", "null mask"),
        ("tuple:1:string", "tuple(T0,...,T1,?):1"),
        ("tuple(long,string)", ":N"),
        ("tuple(?,string):1", "unknown type"),
        ("tuple(long,string):2", "does not exist"),
        ("rowdata(bigint,?):1", "unknown type"),
        ("rowdata(bigint,string):0,2", "does not exist"),
        ("rowdata(bigint,string):1,1", "named twice"),
        ("tuple(long,string):0,1", "one field"),
        ("bytes", "identity"),
        ("row(row(string,int),long):0", "Row-valued"),
        ("tuple(long,strin):0", "unknown type 'strin'"),
        ("tuple(long,string", "expected"),
        ("long)", "unexpected"),
        ("?", "only allowed as a field"),
        ("rowdata(bigint,tuple)", "not a rowdata field type"),
    ],
)
def test_bad_specs_say_what_is_wrong(spec: str, fragment: str) -> None:
    with pytest.raises(ValueSpecError) as err:
        parse_key_extractor(spec)
    assert fragment in str(err.value)


def test_strict_extractors_refuse_values_that_do_not_fit() -> None:
    t3 = bytes.fromhex("0000000000000005046b313700000007")  # Tuple3<Long, String, Integer>(5, "k17", 7)
    with pytest.raises(ValueSpecError, match="4 bytes left over"):
        parse_key_extractor("tuple(long,string):0")(t3)
    assert parse_key_extractor("tuple(long,string,?):1")(t3) == ("k17", 104401)
    assert parse_key_extractor("tuple:0:long")(t3) == (5, 5)
    with pytest.raises(ValueSpecError, match="null"):
        parse_key_extractor("row(long,int,string):0")(bytes.fromhex("20000000050278"))
    with pytest.raises(ValueSpecError, match="needs 8 bytes"):
        parse_key_extractor("long")(b"\x00\x01")
    assert parse_key_extractor(" Tuple ( BIGINT , varchar ) : 1 ").key_type.spec == "string"


def test_rowdata_on_the_sql_fixtures_real_channel_state() -> None:
    """The SQL job's hash exchange carries RowData of src (k INT, v BIGINT): k in 0..63, v in 0..1000."""
    fx = fixture_named("2.3.0-sql")
    loaded = load_checkpoint(fx.checkpoint_dir)
    result = analyze(loaded, load_plan(fx.root / "jobgraph.json"), keep_records=10**9)
    spec = parse_value_spec("rowdata(int,bigint)")
    decoded = 0
    for ch in result.channels:
        for rec in ch.record_list:
            raw = rec["value"]
            if raw is None:
                continue
            row = decode_value(spec.spec, raw)
            assert isinstance(row, RowValue) and row.kind == "+I"
            k, v = row.fields
            assert 0 <= k <= 63 and 0 <= v <= 1000
            decoded += 1
    assert decoded == sum(c.records or 0 for c in result.channels) > 1000
    text, problem = render_value(raw, "rowdata(int,bigint)")
    assert text.startswith("+I[") and problem is None
    text, problem = render_value(raw, "tuple(long,long,long)")
    assert text == bytes(raw).hex() and "left over" in (problem or "")


def test_sql_keys_route_every_record_of_the_sql_fixture_to_its_channel() -> None:
    """GROUP BY k: the exchange keys by the projection of k into a BinaryRowData; routing each in-flight record
    by ``rowdata(int,bigint):0`` must give the downstream subtask of the channel it was found on."""
    fx = fixture_named("2.3.0-sql")
    loaded = load_checkpoint(fx.checkpoint_dir)
    result = analyze(loaded, load_plan(fx.root / "jobgraph.json"), keep_records=10**9)
    agg = next(o for o in loaded.checkpoint.operators if o.operator_id == "20ba6b65f97481d5570070de90e4e791")
    extract = parse_key_extractor("rowdata(int,bigint):0")
    routed = 0
    for ch in result.channels:
        for rec in ch.record_list:
            key, h = extract(rec["value"])
            assert isinstance(key, RowValue) and len(key.fields) == 1
            kg = key_group_for_hash(h, agg.max_parallelism)
            assert operator_index(agg.max_parallelism, agg.parallelism, kg) == ch.downstream["subtask"]
            routed += 1
    assert routed == sum(c.records or 0 for c in result.channels) > 1000
