"""pojo(...), named row(...), caseclass(...), arrays, lists, maps and nullable values against bytes written by
Flink's own serializers of 2.3.0 and 1.20.3 (ObjectOracle: PojoSerializer as TypeInformation.of gives it, RowSerializer
of a named row type, ScalaCaseClassSerializer where flink-scala ships), with the key each extractor takes checked
against the Java hashCode and KeyGroupRangeAssignment of the key the equivalent KeySelector returns."""

from __future__ import annotations

import pytest
from support.value_oracle import object_oracle

from spillway.flink.keygroups import key_group_for_hash, operator_index
from spillway.formats.values import ValueSpecError, decode_value, json_data, parse_key_extractor

RELEASES = ["2.3.0", "1.20.3"]
ROUTES = [(128, 3), (32768, 100)]

pytestmark = pytest.mark.flink


@pytest.fixture(scope="module", params=RELEASES)
def oracle(request: pytest.FixtureRequest) -> dict:
    return object_oracle(request.param)


def test_oracle_covers_the_object_serializers(oracle: dict) -> None:
    specs = {c["spec"].split("(")[0] for c in oracle["cases"]}
    assert {"pojo", "row"} <= specs
    refusals = [c for c in oracle["cases"] if "refusal" in c]
    assert len(refusals) == 2
    if oracle["release"].startswith("1."):
        assert "caseclass" in specs  # flink-scala_2.12 ships ScalaCaseClassSerializer and scala-library
    else:
        assert any("nullable(list(" in c["spec"] for c in oracle["cases"])  # 2.x List/Map POJO fields


def test_values_decode_as_flink_wrote_them(oracle: dict) -> None:
    decoded = 0
    for case in oracle["cases"]:
        if "refusal" in case:
            continue
        got = json_data(decode_value(case["spec"], bytes.fromhex(case["hex"])))
        assert got == case["value"], (case["spec"], case["hex"])
        decoded += 1
    assert decoded >= 15


def test_keys_hash_and_route_like_flink(oracle: dict) -> None:
    checked = nulls = 0
    for case in oracle["cases"]:
        raw = bytes.fromhex(case["hex"])
        for k in case.get("keys", []):
            extract = parse_key_extractor(k["extractor"])
            if k.get("null"):
                with pytest.raises(ValueSpecError, match="null"):
                    extract(raw)
                nulls += 1
                continue
            _, h = extract(raw)
            assert h == k["hash"], (k["extractor"], case["hex"])
            for (max_p, p), (kg, sub) in zip(ROUTES, k["routing"], strict=True):
                assert key_group_for_hash(h, max_p) == kg
                assert operator_index(max_p, p, kg) == sub
            checked += 1
    assert checked >= 50 and nulls >= 3


def test_subclasses_are_refused_with_what_flink_wrote(oracle: dict) -> None:
    for case in oracle["cases"]:
        if "refusal" in case:
            with pytest.raises(ValueSpecError) as err:
                decode_value(case["spec"], bytes.fromhex(case["hex"]))
            assert case["refusal"] in str(err.value)


RECORD = "pojo(name:string,id:long,score:double,inner:pojo(city:string,zip:int))"


@pytest.mark.parametrize("release", RELEASES)
def test_java_records_are_pojos_to_flink_and_to_spillway(release: str, tmp_path) -> None:  # type: ignore[no-untyped-def]
    """RecordOracle (compiled here with --release 17: the fixture trees target Java 8) serializes Java records
    with the serializer TypeInformation.of gives them on this release."""
    import subprocess
    from pathlib import Path

    from support.flink_harness import _generator, prepare

    lib, _ = prepare(release)
    gen = _generator()
    source = Path(gen.__file__).parent / "java-records" / "src" / "spillway" / "fixtures" / "RecordOracle.java"
    classes = tmp_path / "classes"
    subprocess.run(
        ["javac", "--release", "17", "-cp", f"{lib}/*", "-d", str(classes), str(source)], check=True, timeout=120
    )
    res = subprocess.run(
        ["java", *gen.JVM_OPENS, "-cp", f"{classes}:{lib}/*", "spillway.fixtures.RecordOracle"],
        capture_output=True,
        text=True,
        timeout=120,
        check=True,
    )
    lines = [line.split("\t") for line in res.stdout.splitlines() if "\t" in line]
    assert len(lines) == 6
    for hex_, id_, name, score, inner in lines:
        value = json_data(decode_value(RECORD, bytes.fromhex(hex_)))
        want_inner = None if inner == "null" else {"city": inner.split("|")[0], "zip": int(inner.split("|")[1])}
        assert value == {
            "id": int(id_),
            "inner": want_inner,
            "name": None if name == "null" else name,
            "score": None if score == "null" else float(score),
        }
        assert parse_key_extractor(f"{RECORD}:id")(bytes.fromhex(hex_)) == (int(id_), int(id_) ^ (int(id_) >> 32))
