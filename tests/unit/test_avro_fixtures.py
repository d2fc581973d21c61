"""avro(...) specs on real channel state: the "counted-avro-specific" / "counted-avro-generic" fixtures
(AvroCounted.java, Flink 1.20.3 and 2.3.0) hold Avro records — written by Avro's own Specific/GenericDatumWriter
in the layout of Flink's AvroSerializer — in flight on a keyBy(user.id) edge. Every one decodes to what the job
wrote, and rescale's source check accepts the job's key (from a schema file or a registry URL) and refuses
keys the job did not use (the restore in Flink: tests/integration/test_avro_restore.py)."""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest
from click.testing import CliRunner
from support.avro_counted import written_by_the_job

from spillway.cli.app import app
from spillway.formats.avro_schema import load_schema
from spillway.inspect.topology import load_plan
from spillway.rescale.plan import RescaleRefused
from spillway.rescale.rescale import rescale
from spillway.storage.load import load_checkpoint

FIXTURES = Path(__file__).parents[1] / "fixtures"
SCHEMA = FIXTURES / "avro" / "event.avsc"  # AvroCounted.SCHEMA_JSON
KEYS = 32
CASES = [f"{release}-counted-avro-{kind}" for release in ("1.20.3", "2.3.0") for kind in ("specific", "generic")]


def checkpoint(name: str) -> Path:
    return next((FIXTURES / name).glob("checkpoints/*/chk-*"))


@pytest.mark.parametrize("name", CASES)
def test_in_flight_avro_records_decode_to_what_the_job_wrote(name: str) -> None:
    fixture = FIXTURES / name
    ids = {n["uid"]: n["operator_id"] for n in json.loads((fixture / "ids.json").read_text())["stream_nodes"]}
    args = ["analyze", str(checkpoint(name)), "--plan", str(fixture / "jobgraph.json"), "--json", "--decode", "100000"]
    res = CliRunner().invoke(app, [*args, "--value-type", f"avro({SCHEMA})"])
    assert res.exit_code == 0, res.output
    keyed = [c for c in json.loads(res.output)["channels"] if c["upstream"]["operator_id"] == ids["parse"]]
    assert len(keyed) == 4
    seen = 0
    for channel in keyed:
        assert len(channel["first_records"]) == channel["records"] > 0
        for record in channel["first_records"]:
            assert "value_error" not in record, record
            assert record["value"] == written_by_the_job(record["value"]["v"]), record
            seen += 1
    assert seen > 500


def rescale_by(name: str, key: str, out: Path) -> dict:
    loaded = load_checkpoint(checkpoint(name))
    loaded.resolve_files()
    rules = [f"{r['from']}={r['to']}" for r in loaded.resolver.rebases()]
    plan = load_plan(FIXTURES / name / "jobgraph.json")
    report = rescale(loaded, plan, {"parse": 3, "count": 3}, out, keys={"count": key}, master=None, rebase=rules)
    return report.to_json()


@pytest.mark.parametrize("name", CASES)
def test_rescale_accepts_the_jobs_key_and_refuses_others(name: str, tmp_path: Path) -> None:
    assert rescale_by(name, f"avro({SCHEMA}):user.id", tmp_path / "by-user")["records_moved"] > 0
    # the job's KeySelector returns user.id.toString(): keyed as Avro's Utf8 the records sit elsewhere
    for wrong in ("user.id@utf8", "v"):
        with pytest.raises(RescaleRefused, match="sit on a subtask that does not own their key group"):
            rescale_by(name, f"avro({SCHEMA}):{wrong}", tmp_path / wrong)


class _Registry(BaseHTTPRequestHandler):
    def do_GET(self) -> None:
        if self.path != "/subjects/events-value/versions/1":
            self.send_response(404)
            self.end_headers()
            return
        body = json.dumps({"subject": "events-value", "version": 1, "id": 1, "schema": SCHEMA.read_text()}).encode()
        self.send_response(200)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, format: str, *args: object) -> None:
        pass


@pytest.fixture
def registry() -> Iterator[str]:
    server = ThreadingHTTPServer(("127.0.0.1", 0), _Registry)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}/subjects/events-value/versions/1"
    finally:
        server.shutdown()
        server.server_close()
        load_schema.cache_clear()


def test_the_schema_from_a_registry_keys_the_same(registry: str, tmp_path: Path) -> None:
    doc = rescale_by("2.3.0-counted-avro-generic", f"avro({registry}):user.id", tmp_path / "registry")
    assert (
        doc["records_moved"]
        == rescale_by("2.3.0-counted-avro-generic", f"avro({SCHEMA}):user.id", tmp_path / "file")["records_moved"]
    )
