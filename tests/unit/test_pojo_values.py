"""POJO value specs and keys by field / derived key, checked on real Flink checkpoints of the pojo-counted job
(PojoCounted.java, 2.3.0 and 1.20.3, parallelism 2 and 3): every in-flight record decodes to exactly the Event the
job logged when it emitted it (records.jsonl.gz), and the key each extractor takes sits on the subtask Flink's own
keyBy routed the record to."""

from __future__ import annotations

import gzip
import json
import math

import pytest
from support.fixtures import fixture_named
from support.user_group_counted import assert_keys_routed, in_flight

from spillway.errors import SpillwayError
from spillway.formats.value_composites import FieldsValue
from spillway.formats.values import (
    ValueSpecError,
    decode_value,
    json_data,
    parse_key_extractor,
    parse_value_spec,
)
from spillway.inspect.topology import load_plan
from spillway.storage.load import load_checkpoint

# The job's Event and Meta, fields in any order (spillway sorts them as Flink does).
EVENT = (
    "pojo(user:string,seq:long,bucket:int,meta:pojo(origin:string,shard:int,stamp:long),tags:array(string),"
    "parts:array(int),history:objarray(long),score:double)"
)
BY_USER = f"{EVENT}:user"  # UserKey: e.user
BY_GROUP = f"{EVENT}:user|before(':')|lower"  # GroupKey: e.user.substring(0, e.user.indexOf(':')).toLowerCase()
FIXTURES = ["2.3.0-pojo-counted", "1.20.3-pojo-counted", "2.3.0-pojo-counted-p3", "1.20.3-pojo-counted-p3"]


def logged(name: str) -> dict[int, dict]:
    """seq -> the Event as the job wrote it."""
    fx = fixture_named(name)
    with gzip.open(fx.root / "records.jsonl.gz", "rt", encoding="utf-8") as f:
        return {r["seq"]: r for r in map(json.loads, f)}


@pytest.fixture(scope="module", params=FIXTURES)
def fixture(request: pytest.FixtureRequest) -> tuple[str, list[tuple[str, int, bytes]], dict[int, dict]]:
    return request.param, in_flight(request.param), logged(request.param)


def as_logged(value: object) -> object:
    """A decoded Event in the job log's JSON shape (field names, lists, nulls)."""
    data = json_data(value)
    assert isinstance(data, dict)
    return data


def test_every_in_flight_pojo_is_the_event_the_job_wrote(fixture) -> None:  # type: ignore[no-untyped-def]
    name, records, log = fixture
    spec = parse_value_spec(EVENT)
    seen = {"count": 0, "group": 0}
    nulls = {"bucket": 0, "meta": 0, "stamp": 0, "tag": 0}
    for down, _, raw in records:
        value = decode_value(spec.spec, raw)
        assert isinstance(value, FieldsValue)
        got = as_logged(value)
        want = log[got["seq"]]
        assert got == want, (name, got, want)
        assert math.isclose(got["score"], got["seq"] / 4.0)
        seen[down] += 1
        nulls["bucket"] += got["bucket"] is None
        nulls["meta"] += got["meta"] is None
        nulls["stamp"] += got["meta"] is not None and got["meta"]["stamp"] is None
        nulls["tag"] += got["tags"][1] is None
    assert seen["count"] > 100 and seen["group"] > 100, seen  # both keyed edges hold channel state
    assert all(n > 0 for n in nulls.values()), nulls  # null boxed field, null nested POJO, nulls inside both


def test_flinks_field_order_is_javas_sorted_order() -> None:
    # PojoTypeInfo sorts the fields by name; Event declares user, seq, bucket, meta, tags, parts, history, score.
    assert parse_value_spec(EVENT).spec == (
        "pojo(bucket:int,history:objarray(long),meta:pojo(origin:string,shard:int,stamp:long),parts:array(int),"
        "score:double,seq:long,tags:array(string),user:string)"
    )
    # String.compareTo: upper case before lower case, shorter prefix first.
    assert parse_value_spec("pojo(b:int,B:int,a:int,aa:int)").spec == "pojo(B:int,a:int,aa:int,b:int)"


@pytest.mark.parametrize(("spec", "operator"), [(BY_USER, "count"), (BY_GROUP, "group")])
def test_keys_sit_on_the_subtask_flink_routed_them_to(fixture, spec: str, operator: str) -> None:  # type: ignore[no-untyped-def]
    name, records, _log = fixture
    assert_keys_routed(name, records, spec, operator, lambda raw: as_logged(decode_value(EVENT, raw))["user"])


def test_a_pojo_subclass_is_refused_with_its_name_or_tag() -> None:
    records = in_flight("2.3.0-pojo-counted")
    raw = records[0][2]
    assert raw[0] == 0x02  # PojoSerializer's NO_SUBCLASS flag
    name = b"com.example.SpecialEvent"
    by_name = b"\x04" + len(name).to_bytes(2, "big") + name + raw[1:]
    with pytest.raises(ValueSpecError, match=r"offset 0: a subclass com\.example\.SpecialEvent of the POJO"):
        decode_value(EVENT, by_name)
    with pytest.raises(ValueSpecError, match=r"registered subclass \(tag 3\)"):
        parse_key_extractor(BY_USER)(b"\x08\x03" + raw[1:])
    assert decode_value(EVENT, b"\x01") is None  # a null POJO is its flags byte alone


@pytest.mark.parametrize(
    ("spec", "raw", "key"),
    [
        # StringValue "Ab:Cd:e" = length+1 then the chars; expected keys from Java's String methods
        ("string|before(':')", b"\x08Ab:Cd:e", "Ab"),
        ("string|after(':')", b"\x08Ab:Cd:e", "Cd:e"),
        ("string|beforelast(':')", b"\x08Ab:Cd:e", "Ab:Cd"),
        ("string|afterlast(':')", b"\x08Ab:Cd:e", "e"),
        ("string|part(':', 1)|upper", b"\x08Ab:Cd:e", "CD"),
        ("string|substring(1,4)", b"\x08Ab:Cd:e", "b:C"),
        ("string|substring(5)", b"\x08Ab:Cd:e", ":e"),
        ("string|before('#')", b"\x04abc", "abc"),  # no separator: the whole string (split(S)[0])
        ("string|trim|lower", b"\x06 AbC\t", "abc"),
        ("long|mod(10)", (-17).to_bytes(8, "big", signed=True), -7),  # Java's % keeps the dividend's sign
        ("long|str", (42).to_bytes(8, "big"), "42"),
        ("tuple(long,string):1|before('-')", (5).to_bytes(8, "big") + b"\x04x-y", "x"),
        ("row(id:long,name:string):name", b"\x00" + (1).to_bytes(8, "big") + b"\x02n", "n"),
        ("caseclass(id:long,name:string):id", (9).to_bytes(8, "big") + b"\x02n", 9),
    ],
)
def test_derived_keys_follow_javas_string_and_number_methods(spec: str, raw: bytes, key: object) -> None:
    got, _ = parse_key_extractor(spec)(raw)
    assert got == key


def test_derived_key_hash_is_the_java_hash_of_the_derived_value() -> None:
    # "u7".hashCode() = 31 * 'u' + '7' = 31 * 117 + 55 = 3682; 42L.hashCode() = 42; "42".hashCode() = 1662
    assert parse_key_extractor("string|before(':')|lower")(b"\x06U7:12") == ("u7", 3682)
    assert parse_key_extractor("long|mod(100)")((142).to_bytes(8, "big")) == (42, 42)
    assert parse_key_extractor("long|str")((42).to_bytes(8, "big")) == ("42", 1662)


@pytest.mark.parametrize(
    ("spec", "fragment"),
    [
        (f"{EVENT}:nope", "has no field 'nope'"),
        (f"{EVENT}:meta", "own hashCode"),
        (f"{EVENT}:3", "by name, not by number"),
        (f"{EVENT}:seq|lower", "lower takes a string, the key here is a long"),
        (f"{EVENT}:user|shout", "unknown key function 'shout'"),
        (EVENT, "pick the key field"),
        ("pojo(a:string,b:?):b", "the key field has an unknown type"),
        ("pojo(a:?,b:string):b", "a field serialized before 'b' has an unknown type"),
        ("pojo(a:string,a:long):a", "twice"),
        ("pojo(a:string,long):a", "name every field or none"),
        ("string|before('')", "not empty"),
        ("long|mod(0)", "divides by zero"),
        ("array(?)", "only allowed as a field"),
        ("array(tuple(long,?))", "known type"),
    ],
)
def test_bad_pojo_and_derived_specs_say_what_is_wrong(spec: str, fragment: str) -> None:
    with pytest.raises(ValueSpecError) as err:
        parse_key_extractor(spec)
    assert fragment in str(err.value)


def test_a_nested_key_before_an_unknown_field_is_found() -> None:
    # pojo flags 0x02; field a: marker 0, nested flags 0x02, x: marker 0 + "k", y: marker 0 + 2 unknown bytes
    raw = b"\x02" + b"\x00\x02" + b"\x00\x02k" + b"\x00\xff\xee"
    assert parse_key_extractor("pojo(a:pojo(x:string,y:?)):a.x")(raw) == ("k", ord("k"))


def test_nested_path_key_and_null_on_the_path() -> None:
    records = in_flight("1.20.3-pojo-counted")
    extract = parse_key_extractor(f"{EVENT}:meta.origin")
    outcomes = {"key": 0, "null": 0}
    for _, _, raw in records:
        meta = as_logged(decode_value(EVENT, raw))["meta"]
        if meta is None:
            with pytest.raises(ValueSpecError, match="meta is null in this value"):
                extract(raw)
            outcomes["null"] += 1
        else:
            assert extract(raw)[0] == meta["origin"]
            outcomes["key"] += 1
    assert outcomes["key"] > 0 and outcomes["null"] > 0


def test_rescale_refuses_a_key_spec_that_is_not_the_jobs_key(tmp_path) -> None:  # type: ignore[no-untyped-def]
    """group is keyed by the derived key; its field key puts records on other subtasks than Flink did."""
    from spillway.rescale.rescale import rescale

    fx = fixture_named("2.3.0-pojo-counted")
    loaded = load_checkpoint(fx.checkpoint_dir)
    with pytest.raises(SpillwayError) as err:  # RescaleRefused, from the rescale's source check
        rescale(loaded, load_plan(fx.root / "jobgraph.json"), {"group": 3}, tmp_path / "out", keys={"group": BY_USER})
    assert "sit on a subtask that does not own their key group" in str(err.value)
    assert "key 'U" in str(err.value)
