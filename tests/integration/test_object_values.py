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
