"""avro(...) value and key specs against records written by Avro's own datum writers (generic and specific) in
the layout of Flink's AvroSerializer, with hash codes and key groups computed by Flink 2.3.0's
KeyGroupRangeAssignment (tests/support/java_values.py, AvroOracle)."""

from __future__ import annotations

import json
import math
import struct
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any, ClassVar

import pytest
from support.java_values import avro_oracle

from spillway.errors import StorageError
from spillway.flink.keygroups import key_group_for_hash
from spillway.formats.avro_schema import load_schema
from spillway.formats.values import (
    Float32,
    ValueSpecError,
    decode_value,
    json_data,
    parse_key_extractor,
    render_value,
)


@pytest.fixture(scope="module")
def oracle() -> dict[str, Any]:
    return avro_oracle()


@pytest.fixture(scope="module")
def schema_files(oracle: dict[str, Any], tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    root = tmp_path_factory.mktemp("avsc")
    files = {}
    for name, text in oracle["schemas"].items():
        files[name] = root / f"{name}.avsc"
        files[name].write_text(text, encoding="utf-8")
    return files


def expected(desc: Any) -> Any:
    if desc is None:
        return None
    t, v = desc["t"], desc["v"]
    if t == "record":
        return {k: expected(f) for k, f in v.items()}
    if t == "array":
        return [expected(x) for x in v]
    if t == "map":
        return {k: expected(x) for k, x in v.items()}
    if t in ("string", "enum", "boolean"):
        return v
    if t in ("int", "long"):
        return int(v)
    if t in ("bytes", "fixed"):
        return bytes.fromhex(v)
    if t == "double":
        return struct.unpack(">d", struct.pack(">Q", int(v, 16)))[0]
    if t == "float":
        return struct.unpack(">f", struct.pack(">I", int(v, 16)))[0]
    raise ValueError(f"unknown description {desc!r}")


def same(a: Any, b: Any) -> bool:
    if isinstance(a, float) or isinstance(b, float):
        both = isinstance(a, float) and isinstance(b, float)
        return both and ((math.isnan(a) and math.isnan(b)) or struct.pack(">d", a) == struct.pack(">d", b))
    if isinstance(a, dict) and isinstance(b, dict):
        return list(a) == list(b) and all(same(a[k], b[k]) for k in a)
    if isinstance(a, list) and isinstance(b, list):
        return len(a) == len(b) and all(same(x, y) for x, y in zip(a, b, strict=True))
    return type(a) is type(b) and a == b


def test_oracle_covers_generic_and_specific_records(oracle: dict[str, Any]) -> None:
    kinds = [c["schema"] for c in oracle["cases"]]
    assert kinds.count("purchase") >= 5 and kinds.count("click") >= 4
    assert any(len(c["value"]["v"]["tags"]["v"]) >= 128 for c in oracle["cases"] if c["schema"] == "purchase")
    assert any(c["value"]["v"]["referrer"] is not None for c in oracle["cases"] if c["schema"] == "purchase")


@pytest.mark.parametrize("schema", ["purchase", "purchase-as-avro-prints-it"])
def test_records_decode_to_what_avro_wrote(oracle: dict[str, Any], schema_files: dict[str, Path], schema: str) -> None:
    checked = 0
    for case in oracle["cases"]:
        name = schema if case["schema"] == "purchase" else case["schema"]
        got = decode_value(f"avro({schema_files[name]})", bytes.fromhex(case["hex"]))
        assert same(got, expected(case["value"])), f"{case['hex']}: {got!r}"
        checked += 1
    assert checked == len(oracle["cases"]) >= 9


def test_key_fields_hash_and_route_like_flink(oracle: dict[str, Any], schema_files: dict[str, Path]) -> None:
    checked = nulls = utf8_checked = 0
    for case in oracle["cases"]:
        raw = bytes.fromhex(case["hex"])
        for k in case["keys"]:
            extract = parse_key_extractor(f"avro({schema_files[case['schema']]}):{k['path']}")
            if k.get("null"):
                with pytest.raises(ValueSpecError, match="null in this value; Flink refuses null keys"):
                    extract(raw)
                nulls += 1
                continue
            key, h = extract(memoryview(raw))
            assert h == k["hash"], f"{k['path']} of {case['hex']}"
            if "utf8_hash" in k:  # a KeySelector returning the field itself keys by Avro's Utf8
                utf8 = parse_key_extractor(f"avro({schema_files[case['schema']]}):{k['path']}@utf8")
                assert utf8(raw) == (key, k["utf8_hash"]), f"{k['path']}@utf8 of {case['hex']}"
                utf8_checked += 1
            assert key_group_for_hash(h, 128) == k["key_group_128"]
            checked += 1
    assert checked >= 40 and nulls >= 5 and utf8_checked >= 14


def test_decoded_records_render_and_serialize_as_json(oracle: dict[str, Any], schema_files: dict[str, Path]) -> None:
    case = next(c for c in oracle["cases"] if c["schema"] == "click")
    spec = f"avro({schema_files['click']})"
    text, problem = render_value(bytes.fromhex(case["hex"]), spec)
    assert problem is None and text.startswith("{'user': 'alice', 'n': 0, 'score': 0.0, 'page': {'path': '/p/0'")
    doc = json_data(decode_value(spec, bytes.fromhex(case["hex"])))
    assert json.loads(json.dumps(doc)) == {
        "user": "alice",
        "n": 0,
        "score": 0.0,
        "page": {"path": "/p/0", "section": 0},
    }
    purchase = next(c for c in oracle["cases"] if c["schema"] == "purchase")
    as_json = json_data(decode_value(f"avro({schema_files['purchase']})", bytes.fromhex(purchase["hex"])))
    assert isinstance(as_json, dict) and as_json["digest"] == {"hex": "00ff0080"} and as_json["kind"] == "BUY"
    assert isinstance(
        decode_value(f"avro({schema_files['purchase']})", bytes.fromhex(purchase["hex"]))["ratio"], Float32
    )


def test_damaged_records_name_field_and_offset(oracle: dict[str, Any], schema_files: dict[str, Path]) -> None:
    case = next(c for c in oracle["cases"] if c["schema"] == "click")
    raw = bytes.fromhex(case["hex"])
    spec = f"avro({schema_files['click']})"
    with pytest.raises(ValueSpecError, match=r"not a avro\(.*\): page.section \(int\) at offset \d+ needs 4 bytes"):
        decode_value(spec, raw[:-2])
    with pytest.raises(ValueSpecError, match="1 bytes left over"):
        decode_value(spec, raw + b"\x00")
    bad_union = raw[:17] + b"\x00\x00\x00\x07" + raw[21:]  # user "alice" (4 + 5) and n (8): the union index
    with pytest.raises(ValueSpecError, match=r"score: union index 7 at offset 17 is not one of the 2 branches"):
        decode_value(spec, bad_union)
    huge = b"\x7f\xff\xff\xff" + raw[4:]
    with pytest.raises(ValueSpecError, match=r"user \(string of 2147483647 bytes\) at offset 4"):
        decode_value(spec, huge)


@pytest.mark.parametrize(
    ("key", "fragment"),
    [
        (":nope", "record spillway.values.Click has no field 'nope' (fields: user, n, score, page)"),
        (":page", "a spillway.values.Page key has no content-based Java hashCode"),
        (":user.x", "user is a string, not a record with field 'x'"),
        ("", "name the key field: avro("),
        (":n@utf8", "@utf8 is for string fields; this one is a long"),
        (":page.", "empty field name"),
    ],
)
def test_bad_key_specs_say_what_to_write(schema_files: dict[str, Path], key: str, fragment: str) -> None:
    with pytest.raises(ValueSpecError) as err:
        parse_key_extractor(f"avro({schema_files['click']}){key}")
    assert fragment in str(err.value)


def test_bad_schemas_are_one_line_errors(tmp_path: Path) -> None:
    missing = tmp_path / "missing.avsc"
    with pytest.raises(ValueSpecError, match=f"Avro schema file {missing} does not exist"):
        decode_value(f"avro({missing})", b"")
    broken = tmp_path / "broken.avsc"
    broken.write_text('{"type": "record", "name": "R", "fields": [{"name": "a", "type": "Nope"}]}')
    with pytest.raises(ValueSpecError, match="unknown type 'Nope'"):
        decode_value(f"avro({broken})", b"")
    not_json = tmp_path / "not-json.avsc"
    not_json.write_text("{type: record}")
    with pytest.raises(ValueSpecError, match="not JSON"):
        decode_value(f"avro({not_json})", b"")


class _Registry(BaseHTTPRequestHandler):
    schemas: ClassVar[dict[str, str]] = {}

    def do_GET(self) -> None:
        body = self.schemas.get(self.path)
        if body is None:
            self.send_response(404, "Subject not found")
            self.end_headers()
            return
        data = body.encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/vnd.schemaregistry.v1+json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def log_message(self, format: str, *args: object) -> None:
        pass


@pytest.fixture
def registry(oracle: dict[str, Any]) -> Iterator[str]:
    click = oracle["schemas"]["click"]
    _Registry.schemas = {
        "/subjects/clicks-value/versions/3": json.dumps(
            {"subject": "clicks-value", "version": 3, "id": 7, "schema": click}
        ),
        "/schemas/ids/7": json.dumps({"schema": click}),
        "/subjects/clicks-value/versions/3/schema": click,
        "/subjects/protos/versions/1": json.dumps({"schema": "syntax = 'proto3';", "schemaType": "PROTOBUF"}),
    }
    server = ThreadingHTTPServer(("127.0.0.1", 0), _Registry)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}"
    finally:
        server.shutdown()
        server.server_close()
        load_schema.cache_clear()


def test_schema_from_a_registry_url(oracle: dict[str, Any], registry: str) -> None:
    cases = [c for c in oracle["cases"] if c["schema"] == "click"]
    for path in ("/subjects/clicks-value/versions/3", "/schemas/ids/7", "/subjects/clicks-value/versions/3/schema"):
        for case in cases:
            raw = bytes.fromhex(case["hex"])
            assert same(decode_value(f"avro({registry}{path})", raw), expected(case["value"]))
            key = next(k for k in case["keys"] if k["path"] == "user")
            assert parse_key_extractor(f"avro({registry}{path}):user")(raw)[1] == key["hash"]
    with pytest.raises(ValueSpecError, match="schema type PROTOBUF, not AVRO"):
        decode_value(f"avro({registry}/subjects/protos/versions/1)", b"")
    with pytest.raises(StorageError, match=r"schema registry .*/subjects/other/versions/1: HTTP 404"):
        decode_value(f"avro({registry}/subjects/other/versions/1)", b"")
