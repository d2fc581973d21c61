"""kryo2(...)/kryo5(...) specs on real channel state: the "counted-kryo" fixtures (KryoCounted.java; Flink 1.20.3
writes Events with Kryo 2, 2.3.0 with Kryo 5) hold Events in flight on the keyBy(user) edge. Every one decodes to
what the job wrote (user = "user-" + v % 32, bucket = v % 7 - 3, score = v / 4), and rescale's source check
accepts the job's real key and refuses another field (the restore in Flink: tests/integration/test_kryo_restore.py)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from click.testing import CliRunner

from spillway.cli.app import app
from spillway.inspect.topology import load_plan
from spillway.rescale.plan import RescaleRefused
from spillway.rescale.rescale import rescale
from spillway.storage.load import load_checkpoint

FIXTURES = Path(__file__).parents[1] / "fixtures"
KEYS = 32
FIELDS = "user:String, v:long, bucket:int, score:double"  # KryoCounted.FIELDS
SPECS = {"1.20.3": f"kryo2({FIELDS})", "2.3.0": f"kryo5({FIELDS})"}


def checkpoint(release: str) -> Path:
    return next((FIXTURES / f"{release}-counted-kryo").glob("checkpoints/*/chk-*"))


def written_by_the_job(v: int) -> dict[str, object]:
    return {"user": f"user-{v % KEYS}", "v": v, "bucket": v % 7 - 3, "score": v / 4.0}


def keyed_channels(release: str, spec: str) -> list[dict]:
    fixture = FIXTURES / f"{release}-counted-kryo"
    ids = {n["uid"]: n["operator_id"] for n in json.loads((fixture / "ids.json").read_text())["stream_nodes"]}
    args = ["analyze", str(checkpoint(release)), "--plan", str(fixture / "jobgraph.json"), "--json"]
    res = CliRunner().invoke(app, [*args, "--decode", "100000", "--value-type", spec])
    assert res.exit_code == 0, res.output
    return [c for c in json.loads(res.output)["channels"] if c["upstream"]["operator_id"] == ids["parse"]]


@pytest.mark.parametrize("release", SPECS)
def test_in_flight_kryo_records_decode_to_what_the_job_wrote(release: str) -> None:
    keyed = keyed_channels(release, SPECS[release])
    assert len(keyed) == 4
    seen = 0
    for channel in keyed:
        assert len(channel["first_records"]) == channel["records"] > 0
        for record in channel["first_records"]:
            assert "value_error" not in record, record
            assert record["value"] == written_by_the_job(record["value"]["v"]), record
            seen += 1
    assert seen > 1000


@pytest.mark.parametrize("release", SPECS)
def test_the_other_kryo_version_does_not_decode_them(release: str) -> None:
    other = "kryo5" if SPECS[release].startswith("kryo2") else "kryo2"
    records = [r for c in keyed_channels(release, f"{other}({FIELDS})") for r in c["first_records"]]
    assert records and all(r["value"] != written_by_the_job(r["value"].get("v", -1)) for r in records)


def rescale_by(release: str, key: str, out: Path) -> dict:
    loaded = load_checkpoint(checkpoint(release))
    loaded.resolve_files()
    rules = [f"{r['from']}={r['to']}" for r in loaded.resolver.rebases()]
    plan = load_plan(FIXTURES / f"{release}-counted-kryo" / "jobgraph.json")
    report = rescale(loaded, plan, {"parse": 3, "count": 3}, out, keys={"count": key}, master=None, rebase=rules)
    return report.to_json()


@pytest.mark.parametrize("release", SPECS)
def test_rescale_accepts_the_jobs_key_and_refuses_another_field(release: str, tmp_path: Path) -> None:
    doc = rescale_by(release, f"{SPECS[release]}:user", tmp_path / "by-user")
    assert doc["records_moved"] > 0
    with pytest.raises(RescaleRefused, match="sit on a subtask that does not own their key group"):
        rescale_by(release, f"{SPECS[release]}:v", tmp_path / "by-v")
