"""``row(name:T, ...)`` on real channel state: the row-counted fixtures (RowCounted.java; Flink 2.3.0 and 1.20.3,
parallelism 2 and 3) move Flink ``Row``s with named fields, typed by ``Types.ROW_NAMED`` and written by Flink's
RowSerializer, on two keyed edges (by the field ``user``, by a key derived from it). Every in-flight record decodes
to the Row the job logged when it emitted it (records.jsonl.gz: kind and fields read back from the Row object),
in salvage's and analyze's Parquet too, and each key sits on the subtask Flink's own keyBy routed the record to."""

from __future__ import annotations

import gzip
import json
from pathlib import Path
from typing import Any

import pyarrow.parquet as pq
import pytest
from click.testing import CliRunner
from support.fixtures import fixture_named
from support.user_group_counted import assert_keys_routed, in_flight

from spillway.cli.app import app
from spillway.errors import SpillwayError
from spillway.formats.values import RowValue, decode_value, json_data
from spillway.inspect.topology import load_plan
from spillway.storage.load import load_checkpoint

# RowCounted.EVENT / META: Types.ROW_NAMED fields in the order the job declares them (a row is positional).
EVENT = "row(user:string,seq:long,bucket:int,meta:row(origin:string,shard:int,stamp:long),score:double)"
BY_USER = f"{EVENT}:user"  # UserKey: r.getFieldAs("user")
BY_GROUP = f"{EVENT}:user|before(':')|lower"  # GroupKey: user.substring(0, user.indexOf(':')).toLowerCase()
FIXTURES = ["2.3.0-row-counted", "1.20.3-row-counted", "2.3.0-row-counted-p3", "1.20.3-row-counted-p3"]
KIND_BYTES = {"+I": 0, "-U": 1, "+U": 2, "-D": 3}  # RowKind.toByteValue()
FIELDS = ("user", "seq", "bucket", "meta", "score")


def logged(name: str) -> dict[int, dict]:
    """seq -> the Row as the job wrote it: {"kind": "+I", "fields": {...}}."""
    with gzip.open(fixture_named(name).root / "records.jsonl.gz", "rt", encoding="utf-8") as f:
        return {r["fields"]["seq"]: r for r in map(json.loads, f)}


@pytest.fixture(scope="module", params=FIXTURES)
def fixture(request: pytest.FixtureRequest) -> tuple[str, list[tuple[str, int, bytes]], dict[int, dict]]:
    return request.param, in_flight(request.param), logged(request.param)


def test_every_in_flight_row_is_the_row_the_job_wrote(fixture) -> None:  # type: ignore[no-untyped-def]
    name, records, log = fixture
    seen = {"count": 0, "group": 0}
    kinds: set[str] = set()
    nulls = {"bucket": 0, "meta": 0, "stamp": 0, "meta+U": 0}
    for down, _, raw in records:
        value = decode_value(EVENT, raw)
        assert isinstance(value, RowValue)
        got = json_data(value)
        assert isinstance(got, dict)
        want = log[got["fields"]["seq"]]
        assert got == want, (name, got, want)
        seen[down] += 1
        kinds.add(got["kind"])
        meta = got["fields"]["meta"]
        nulls["bucket"] += got["fields"]["bucket"] is None
        nulls["meta"] += meta is None
        nulls["stamp"] += meta is not None and meta["fields"]["stamp"] is None
        nulls["meta+U"] += meta is not None and meta["kind"] == "+U"
    assert seen["count"] > 100 and seen["group"] > 100, seen  # both keyed edges hold channel state
    assert kinds == set(KIND_BYTES), kinds  # every RowKind the job emits is in flight
    assert all(n > 0 for n in nulls.values()), nulls  # null field, null nested row, null inside it, nested kind


def test_rowserializer_writes_the_kind_and_null_mask_first_on_both_releases(fixture) -> None:  # type: ignore[no-untyped-def]
    """RowSerializer (non-legacy) starts with ceil((2 + 5) / 8) = 1 mask byte, most significant bit first: kind & 1,
    kind & 2, then one "is null" bit per field. Expected from the job's log alone, so a release writing another
    header (field names, no kind) fails here."""
    _name, records, log = fixture
    by_seq = {}
    for r in log.values():
        kind = KIND_BYTES[r["kind"]]
        mask = (kind & 1) << 7 | (kind >> 1 & 1) << 6
        for i, field in enumerate(FIELDS):
            mask |= (r["fields"][field] is None) << (5 - i)
        by_seq[r["fields"]["seq"]] = mask
    for _, _, raw in records:
        # the first non-null field is user (never null): its StringValue length+1, then seq after it
        user_len = raw[1] - 1
        assert raw[1] < 0x80 and raw[2 : 2 + user_len].isascii()
        seq = int.from_bytes(raw[2 + user_len : 10 + user_len], "big")
        assert raw[0] == by_seq[seq], (seq, hex(raw[0]))


@pytest.mark.parametrize(("spec", "operator"), [(BY_USER, "count"), (BY_GROUP, "group")])
def test_keys_sit_on_the_subtask_flink_routed_them_to(fixture, spec: str, operator: str) -> None:  # type: ignore[no-untyped-def]
    name, records, log = fixture

    def user_of(raw: bytes) -> str:
        seq = json_data(decode_value(EVENT, raw))["fields"]["seq"]  # type: ignore[index]
        return log[seq]["fields"]["user"]

    assert_keys_routed(name, records, spec, operator, user_of)


def as_arrow(logged_row: dict[str, Any] | None) -> dict[str, Any] | None:
    """A logged Row in salvage's Arrow shape: a struct of the kind and the fields by name (nested rows alike)."""
    if logged_row is None:
        return None
    fields = logged_row["fields"]
    return {"kind": logged_row["kind"], **{k: as_arrow(v) if k == "meta" else v for k, v in fields.items()}}


def cli(*args: str) -> tuple[int, Any]:
    res = CliRunner().invoke(app, [*args, "--json"])
    return res.exit_code, json.loads(res.stdout) if res.stdout.strip().startswith("{") else res.output


def test_salvaged_rows_are_structs_equal_to_what_the_job_logged(tmp_path: Path) -> None:
    fx = fixture_named("2.3.0-row-counted")
    log = logged(fx.name)
    out = tmp_path / "rows"
    code, doc = cli(
        "salvage",
        str(fx.checkpoint_dir),
        "--plan",
        str(fx.root / "jobgraph.json"),
        "--out",
        str(out),
        "--value-type",
        f"parse->count={EVENT}",
        "--value-type",
        f"count->group={EVENT}",
        "--operator",
        "count",
    )  # fmt: skip  (the channels into and out of count: both keyed edges)
    assert code == 0, doc
    rows = [r for e in doc["edges"] for r in pq.read_table(out / e["file"]).to_pylist() if r["kind"] == "record"]
    values = [r["value"] for r in rows]
    assert len(values) > 200 and sorted(e["upstream"] + "->" + e["downstream"] for e in doc["edges"]) == [
        "count->group",
        "parse->count",
    ]
    assert values == [as_arrow(log[v["seq"]]) for v in values]
    assert any(v["meta"] is None for v in values) and any(v["bucket"] is None for v in values)


def test_rows_in_records_parquet_are_the_rows_the_job_logged(tmp_path: Path) -> None:
    fx = fixture_named("1.20.3-row-counted")
    out = tmp_path / "analyze"
    code, doc = cli(
        "analyze", str(fx.checkpoint_dir), "--plan", str(fx.root / "jobgraph.json"), "--parquet", str(out),
        "--records", "--value-type", f"parse->count={EVENT}", "--value-type", f"count->group={EVENT}",
    )  # fmt: skip
    assert code == 0, doc
    log = logged(fx.name)
    checked = 0
    for r in pq.read_table(out / "records.parquet").to_pylist():
        up, down = (side.rsplit("#", 1)[0] for side in r["channel"].split(" -> "))
        if r["tag"] != "record" or f"{up}->{down}" not in ("parse->count", "count->group"):
            continue
        value = r[f"decoded[{up}->{down}]"]
        assert r["decode_problem"] is None and value == as_arrow(log[value["seq"]]), r
        checked += 1
    assert checked > 200


def test_rescale_refuses_a_row_key_that_is_not_the_jobs_key(tmp_path: Path) -> None:
    """group is keyed by the derived key; the field key puts its records on other subtasks than Flink did."""
    from spillway.rescale.rescale import rescale

    fx = fixture_named("1.20.3-row-counted")
    loaded = load_checkpoint(fx.checkpoint_dir)
    with pytest.raises(SpillwayError) as err:  # RescaleRefused, from the rescale's source check
        rescale(loaded, load_plan(fx.root / "jobgraph.json"), {"group": 3}, tmp_path / "out", keys={"group": BY_USER})
    assert "sit on a subtask that does not own their key group" in str(err.value)
