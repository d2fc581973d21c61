"""kryo2(...) / kryo5(...) value and key specs against objects serialized by the release's own KryoSerializer
(Flink 1.20.3: Kryo 2.24; Flink 2.3.0: Kryo 5), with hash codes and key groups from Flink's
KeyGroupRangeAssignment (tests/support/java_values.py, KryoOracle)."""

from __future__ import annotations

import math
import re
import struct
from typing import Any

import pytest
from support.java_values import kryo_oracle

from spillway.flink.keygroups import key_group_for_hash
from spillway.formats.values import ValueSpecError, decode_value, parse_key_extractor, parse_value_spec

RELEASES = {"1.20.3": "kryo2", "2.3.0": "kryo5"}


def expected(desc: Any) -> Any:
    if desc is None:
        return None
    t, v = desc["t"], desc["v"]
    if t in ("string", "boolean"):
        return v
    if t == "integer":
        return int(v)
    if t == "char":
        return chr(v)
    if t == "double":
        return struct.unpack(">d", struct.pack(">Q", int(v, 16)))[0]
    if t == "float":
        return struct.unpack(">f", struct.pack(">I", int(v, 16)))[0]
    raise ValueError(f"unknown description {desc!r}")


def same(a: Any, b: Any) -> bool:
    if isinstance(a, float) or isinstance(b, float):
        both = isinstance(a, float) and isinstance(b, float)
        return both and ((math.isnan(a) and math.isnan(b)) or struct.pack(">d", a) == struct.pack(">d", b))
    return type(a) is type(b) and a == b


@pytest.mark.parametrize("release", RELEASES)
def test_objects_decode_to_what_flinks_kryo_wrote(release: str) -> None:
    oracle = kryo_oracle(release)
    spec = f"{RELEASES[release]}({oracle['fields']})"
    for case in oracle["cases"]:
        got = decode_value(spec, bytes.fromhex(case["hex"]))
        want = {name: expected(d) for name, d in case["value"].items()}
        assert isinstance(got, dict) and list(got) == list(want), case["hex"]
        for name in want:
            assert same(got[name], want[name]), f"{release} {name} of {case['hex']}: {got[name]!r} != {want[name]!r}"
    assert len(oracle["cases"]) >= 9


@pytest.mark.parametrize("release", RELEASES)
def test_key_fields_hash_and_route_like_flink(release: str) -> None:
    oracle = kryo_oracle(release)
    spec = f"{RELEASES[release]}({oracle['fields']})"
    checked = nulls = 0
    for case in oracle["cases"]:
        raw = bytes.fromhex(case["hex"])
        for k in case["keys"]:
            extract = parse_key_extractor(f"{spec}:{k['field']}")
            if k.get("null"):
                with pytest.raises(ValueSpecError, match="Flink refuses null keys"):
                    extract(raw)
                nulls += 1
                continue
            _, h = extract(memoryview(raw))
            assert h == k["hash"], f"{release} {k['field']} of {case['hex']}"
            assert key_group_for_hash(h, 128) == k["key_group_128"]
            checked += 1
    assert checked >= 120 and nulls >= 20


@pytest.mark.parametrize("release", RELEASES)
def test_the_other_kryo_version_does_not_fit(release: str) -> None:
    """Kryo 2 writes fixed-width fields big-endian, Kryo 5 little-endian: the wrong version must not decode."""
    oracle = kryo_oracle(release)
    other = "kryo5" if RELEASES[release] == "kryo2" else "kryo2"
    case = oracle["cases"][1]
    got = decode_value(f"{other}({oracle['fields']})", bytes.fromhex(case["hex"]))
    assert isinstance(got, dict) and got["value"] != expected(case["value"]["value"])


@pytest.mark.parametrize("release", RELEASES)
def test_inherited_fields_sort_with_the_classs_own(release: str) -> None:
    """Derived (a, c, e) extends Base (b, d, transient skipped): Kryo writes a..e by name, skipping transients."""
    inherited = kryo_oracle(release)["inherited"]
    got = decode_value(f"{RELEASES[release]}({inherited['fields']})", bytes.fromhex(inherited["hex"]))
    assert got == {"a": 3, "b": 1, "c": 4, "d": 2, "e": 5}


@pytest.mark.parametrize("release", RELEASES)
def test_a_subclass_written_by_name_is_refused(release: str) -> None:
    oracle = kryo_oracle(release)
    spec = f"{RELEASES[release]}({oracle['fields']})"
    with pytest.raises(ValueSpecError, match=rf"class {re.escape(oracle['subclass']['class'])} is written by name"):
        decode_value(spec, bytes.fromhex(oracle["subclass"]["hex"]))


@pytest.mark.parametrize("release", RELEASES)
def test_a_wrong_field_list_leaves_bytes_or_runs_out(release: str) -> None:
    oracle = kryo_oracle(release)
    raw = bytes.fromhex(oracle["cases"][1]["hex"])
    fewer = oracle["fields"].replace(", zone:Short", "")  # zone is the last field in Kryo's order
    with pytest.raises(ValueSpecError, match="bytes left over"):
        decode_value(f"{RELEASES[release]}({fewer})", raw)
    with pytest.raises(ValueSpecError, match="bytes left over after offset"):
        parse_key_extractor(f"{RELEASES[release]}({fewer}):sensor")(raw)
    with pytest.raises(ValueSpecError, match=r"needs \d+ bytes, 0 left|does not start"):
        decode_value(f"{RELEASES[release]}({oracle['fields']}, zzz:double)", raw)


@pytest.mark.parametrize(
    ("spec", "fragment"),
    [
        ("kryo(a:int)", "kryo2(…) for Flink 1.x jobs (Kryo 2.24, big-endian), kryo5(…) for Flink 2.x"),
        ("kryo5()", "name the class's fields: kryo5(name:type, …)"),
        ("kryo5(a:List)", "field a: Kryo writes a field of type List with the class and serializer it resolves"),
        ("kryo5(a:List)", "pass --key-fn MODULE:FUNCTION"),
        ("kryo2(a:int, a:long)", "field a is named twice"),
        ("kryo2(a int)", "'a int' is not NAME:TYPE"),
        ("kryo5(a:int):a", "picks a key"),
    ],
)
def test_refusals_say_why_and_what_to_pass(spec: str, fragment: str) -> None:
    with pytest.raises(ValueSpecError) as err:
        parse_value_spec(spec)
    assert fragment in str(err.value)


def test_key_spec_needs_an_existing_field() -> None:
    with pytest.raises(ValueSpecError, match=r"no field 'b' \(fields: a\)"):
        parse_key_extractor("kryo5(a:int):b")
    with pytest.raises(ValueSpecError, match="name the key field"):
        parse_key_extractor("kryo5(a:int)")
