"""avro(...) against bytes written by Flink's own AvroSerializer (flink-avro compiled from apache/flink's sources and
run on Flink 1.20.3 and 2.3.0 jars; tests/fixtures/generator/flink-avro-oracle/README.md): every generic and
specific record decodes to the record AvroCounted writes for its v, and the in-flight bytes of the real
counted-avro jobs are byte for byte what Flink's AvroSerializer writes for the same record."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pyarrow.parquet as pq
import pytest
from click.testing import CliRunner
from support.avro_counted import written_by_the_job

from spillway.cli.app import app
from spillway.formats.values import decode_value, parse_key_extractor

FIXTURES = Path(__file__).parents[1] / "fixtures"
SCHEMA = FIXTURES / "avro" / "event.avsc"
KEYS = 32
RELEASES = ("1.20.3", "2.3.0")


def flink_oracle(release: str) -> dict[str, Any]:
    doc: dict[str, Any] = json.loads((FIXTURES / "avro" / f"flink-avroserializer-{release}.json").read_text())
    assert doc["flink_version"] == release
    return doc


@pytest.mark.parametrize("release", RELEASES)
def test_records_of_flinks_avro_serializer_decode_to_what_was_written(release: str) -> None:
    records = flink_oracle(release)["records"]
    assert len(records) >= 100 and set(range(96)) <= {r["v"] for r in records}
    key = parse_key_extractor(f"avro({SCHEMA}):user.id")
    for r in records:
        for kind in ("generic", "specific"):
            raw = bytes.fromhex(r[kind])
            assert decode_value(f"avro({SCHEMA})", raw) == written_by_the_job(r["v"]), (kind, r)
            assert key(raw)[0] == f"user-{r['v'] % KEYS}"


@pytest.mark.parametrize(
    ("fixture", "release"), [("1.20.3-counted-avro-specific", "1.20.3"), ("2.3.0-counted-avro-generic", "2.3.0")]
)
def test_the_jobs_in_flight_bytes_are_flinks_avro_serializer_bytes(fixture: str, release: str, tmp_path: Path) -> None:
    by_v = {r["v"]: r for r in flink_oracle(release)["records"]}
    chk = next((FIXTURES / fixture).glob("checkpoints/*/chk-*"))
    args = ["salvage", str(chk), "--plan", str(FIXTURES / fixture / "jobgraph.json"), "--out", str(tmp_path / "s")]
    res = CliRunner().invoke(app, [*args, "--value-type", f"parse->count=avro({SCHEMA})", "--json"])
    assert res.exit_code == 0, res.output
    edge = next(e for e in json.loads(res.stdout)["edges"] if (e["upstream"], e["downstream"]) == ("parse", "count"))
    rows = pq.read_table(tmp_path / "s" / edge["file"]).select(["value", "value_raw"]).to_pylist()
    compared = 0
    for row in rows:
        oracle = by_v.get(row["value"]["v"])
        if oracle is not None:
            assert row["value_raw"].hex() == oracle["generic"] == oracle["specific"]
            compared += 1
    assert compared >= 64  # the oracle holds the first 64 in-flight v of each fixture
