"""``spillway salvage`` and ``repair strip-channel-state --salvage`` on the ``2.3.0-counted`` fixture. Expected
values come from Flink and the job, not from the code under test: every record's place (operator, subtask,
side, gate/channel, file, offset) is a channel-state handle Flink's own loader reports (oracle.json), the
operators are Flink's ids (ids.json), the values are the counted job's data (parse emits (v % 32, v) for the
source's v in 0..N-1, each v in flight at most once), and the counts per channel are analyze's (whose counts
the real-Flink strip test, tests/integration/test_repair_restore.py, ties to the records Flink lost)."""

from __future__ import annotations

import base64
import json
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from click.testing import CliRunner
from support.fixtures import fixture_named

import spillway
from spillway import api
from spillway.cli.app import app
from spillway.formats import values
from spillway.formats.values import Type, read_string
from spillway.inspect import salvage as salvage_module
from spillway.inspect import salvage_options

COUNTED = fixture_named("2.3.0-counted")
PLAN = str(COUNTED.root / "jobgraph.json")
N = 200_000  # Counted.N
KEYS = 32  # Counted.KEYS
TYPES = ["--value-type", "src=long", "--value-type", "parse->count=tuple(long,long)", "--value-type", "count=long"]
runner = CliRunner()


def cli(*args: str) -> tuple[int, Any]:
    res = runner.invoke(app, [*args, "--json"])
    return res.exit_code, json.loads(res.stdout) if res.stdout.strip().startswith("{") else res.output


def flink_ids() -> dict[str, str]:
    """uid -> operator id, as Flink's own hasher gave them (ids.json)."""
    return {n["uid"]: n["operator_id"] for n in json.loads((COUNTED.root / "ids.json").read_text())["stream_nodes"]}


def flink_handles() -> dict[tuple[str, str, int, int, int], tuple[str, list[int], int]]:
    """(operator id, side, subtask, gate/partition, channel/subpartition) -> (file name, chunk offsets, state size)
    of every channel-state handle, as Flink's loader read the _metadata (oracle.json)."""
    doc = json.loads((COUNTED.root / "oracle.json").read_text())
    found = {}
    for op in doc["operators"]:
        for sub in op["subtasks"]:
            for side, key, (a, b) in (
                ("input", "input_channel_state", ("gate_index", "input_channel_index")),
                ("output", "result_subpartition_state", ("partition_index", "subpartition_index")),
            ):
                for merged in sub[key]:
                    for h in merged["channels"]:
                        where = (op["operator_id"], side, h["subtask_index"], h[a], h[b])
                        found[where] = (merged["delegate"]["relative_path"], h["offsets"], h["state_size"])
    return found


@pytest.fixture(scope="module")
def exported(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, dict[str, Any]]:
    out = tmp_path_factory.mktemp("salvage") / "all"
    code, doc = cli("salvage", str(COUNTED.checkpoint_dir), "--plan", PLAN, "--out", str(out), *TYPES)
    assert code == 0, doc
    return out, doc


def rows(out: Path, doc: dict[str, Any]) -> list[dict[str, Any]]:
    return [r for e in doc["edges"] for r in pq.read_table(out / e["file"]).to_pylist()]


def test_every_record_sits_in_a_channel_state_handle_flink_reports(exported: tuple[Path, dict[str, Any]]) -> None:
    out, doc = exported
    handles = flink_handles()
    ids = flink_ids()
    records = rows(out, doc)
    assert len(records) == doc["records"] > 0
    first_input: dict[tuple[str, str, int, int, int], int] = {}
    for r in records:
        assert r["checkpoint_id"] == 3  # the fixture's chk-3
        holder = r["downstream_operator"] if r["side"] == "input" else r["upstream_operator"]
        assert r["operator"] == holder and r["operator_id"] == ids[holder]
        assert r["upstream_operator_id"] == ids[r["upstream_operator"]]
        assert r["downstream_operator_id"] == ids[r["downstream_operator"]]
        assert r["subtask"] == (r["downstream_subtask"] if r["side"] == "input" else r["upstream_subtask"])
        where = (r["operator_id"], r["side"], r["subtask"], r["gate"], r["channel_index"])
        name, offsets, size = handles[where]
        assert Path(r["file"]).name == name
        # the record's length field lies in a chunk of that handle (each chunk: a 4-byte length, then the data)
        assert any(o + 4 <= r["offset"] < o + 4 + size for o in offsets), r
        assert r["kind"] == "record" and r["tag"] in (0, 1)
        if r["side"] == "input":
            first = first_input.get(where)
            if first is None or r["seq"] < records[first]["seq"]:
                first_input[where] = records.index(r)
    # Flink starts an input channel's recovered data at a record boundary: its first record opens the first chunk
    for where, i in first_input.items():
        assert records[i]["offset"] == handles[where][1][0] + 4


def test_values_are_the_jobs_records(exported: tuple[Path, dict[str, Any]]) -> None:
    out, doc = exported
    seen: list[int] = []
    for e in doc["edges"]:
        values = pq.read_table(out / e["file"]).column("value").to_pylist()
        if (e["upstream"], e["downstream"]) == ("parse", "count"):
            assert e["value_type"] == "tuple(long,long)"
            assert all(set(t) == {"f0", "f1"} and t["f0"] == t["f1"] % KEYS for t in values)
            seen += [t["f1"] for t in values]
        else:
            assert e["value_type"] == "long"
            seen += values
    assert all(0 <= v < N for v in seen)
    assert len(seen) == len(set(seen)) == doc["records"]


def test_counts_per_channel_are_analyzes(exported: tuple[Path, dict[str, Any]]) -> None:
    _, doc = exported
    code, analysis = cli("analyze", str(COUNTED.checkpoint_dir), "--plan", PLAN)
    assert code == 0
    expected = {c["label"]: c["records"] for c in analysis["channels"]}
    got = {c["channel"]: c["records"] for e in doc["edges"] for c in e["channels"]}
    assert got == expected and sum(got.values()) == doc["records"]


def test_manifest_and_jsonl_hold_the_same_records(tmp_path: Path) -> None:
    out = tmp_path / "one"
    code, doc = cli("salvage", str(COUNTED.checkpoint_dir), "--plan", PLAN, "--out", str(out), "--operator", "check")
    assert code == 0, doc
    assert [(e["upstream"], e["downstream"]) for e in doc["edges"]] == [("count", "check")]
    manifest = json.loads((out / "salvage.json").read_text())
    assert manifest["records"] == doc["records"] and manifest["edges"][0]["value_type"] is None
    table = pq.read_table(out / doc["edges"][0]["file"])
    assert "value" not in table.column_names  # no spec: the raw bytes only
    raw = [int.from_bytes(v, "big") for v in table.column("value_raw").to_pylist()]  # LongSerializer: 8 bytes
    assert all(0 <= v < N for v in raw)

    lines = tmp_path / "lines"
    code, doc2 = cli(
        "salvage", str(COUNTED.checkpoint_dir), "--plan", PLAN, "--out", str(lines), "--operator", "check", "--jsonl"
    )
    assert code == 0, doc2
    records = [json.loads(x) for x in (lines / "records.jsonl").read_text().splitlines()]
    assert [int.from_bytes(base64.b64decode(r["value_raw_base64"]), "big") for r in records] == raw


def test_the_api_is_the_same_door(tmp_path: Path) -> None:
    cp = spillway.open(COUNTED.checkpoint_dir, plan=PLAN)
    report = cp.salvage(api.SalvageOptions(tmp_path / "x", operators=["count"], value_types={"count": "long"}))
    ups = {(e.upstream, e.downstream): e.value_type for e in report.edges}
    assert ups == {("parse", "count"): None, ("count", "check"): "long"}
    assert {p.name for p in report.written} == {e.file for e in report.edges} | {"salvage.json"}
    dry = cp.salvage(api.SalvageOptions(tmp_path / "y", operators=["count"], dry_run=True))
    assert dry.records == report.records and not (tmp_path / "y").exists()


def test_strip_salvages_exactly_what_it_drops(tmp_path: Path) -> None:
    for operator in ("check", None):
        tag = operator or "all"
        args = ["--operator", operator] if operator else []
        code, doc = cli(
            "repair",
            "strip-channel-state",
            str(COUNTED.checkpoint_dir),
            "--plan",
            PLAN,
            "--out",
            str(tmp_path / f"out-{tag}"),
            "--salvage",
            str(tmp_path / f"salvaged-{tag}"),
            *args,
        )
        assert code == 0, doc
        assert doc["salvage"]["records"] == doc["records_dropped"] > 0
        dropped = {c["channel"]: c["records"] for c in doc["channels"]}
        salvaged = {c["channel"]: c["records"] for e in doc["salvage"]["edges"] for c in e["channels"]}
        assert salvaged == dropped
        assert (tmp_path / f"out-{tag}" / "_metadata").is_file()


@pytest.mark.parametrize(
    ("args", "exit_code", "fragment"),
    [
        (["--value-type", "tuple(long,long)"], 1, "is not a tuple(long,long)"),  # count->check holds longs
        (["--value-type", "tuple(long,"], 2, "--value-type tuple(long,"),
        (["--value-type", "nosuch=long"], 1, "no exported edge"),
    ],
)
def test_a_failed_salvage_writes_nothing_and_strip_refuses(
    tmp_path: Path, args: list[str], exit_code: int, fragment: str
) -> None:
    out = tmp_path / "salvaged"
    code, doc = cli("salvage", str(COUNTED.checkpoint_dir), "--plan", PLAN, "--out", str(out), *args)
    assert code == exit_code and fragment in doc["error"]
    assert not out.exists()
    stripped = tmp_path / "stripped"
    code, doc = cli(
        "repair",
        "strip-channel-state",
        str(COUNTED.checkpoint_dir),
        "--plan",
        PLAN,
        "--out",
        str(stripped),
        "--salvage",
        str(out),
        *args,
    )
    assert code == exit_code and fragment in doc["error"]
    assert not out.exists() and not stripped.exists()


def test_output_side_without_plan_is_refused_not_skipped(tmp_path: Path) -> None:
    code, doc = cli("salvage", str(COUNTED.checkpoint_dir), "--out", str(tmp_path / "s"))
    assert code == 1 and "--plan" in doc["error"]
    assert not (tmp_path / "s").exists()


def test_never_into_the_checkpoint_nor_over_files(tmp_path: Path) -> None:
    code, doc = cli("salvage", str(COUNTED.checkpoint_dir), "--plan", PLAN, "--out", str(COUNTED.checkpoint_dir / "x"))
    assert code == 2 and "never writes into its input" in doc["error"]
    assert not (COUNTED.checkpoint_dir / "x").exists()
    (tmp_path / "used").mkdir()
    (tmp_path / "used" / "keep.txt").write_text("mine")
    code, doc = cli("salvage", str(COUNTED.checkpoint_dir), "--plan", PLAN, "--out", str(tmp_path / "used"))
    assert code == 2 and "not empty" in doc["error"]
    assert [p.name for p in (tmp_path / "used").iterdir()] == ["keep.txt"]


class Shout(Type):
    """A spec type salvage has no Arrow mapping for: stands for one added to the value-spec grammar later."""

    @property
    def spec(self) -> str:
        return "shout"

    def read(self, data: bytes, pos: int) -> tuple[object, int]:
        text, pos = read_string(data, pos)
        return (None if text is None else text.upper(),), pos


class ShoutWithArrow(Shout):
    """The same, saying its own Arrow type: its values become a struct column."""

    def arrow_type(self) -> pa.DataType:
        return pa.struct([("text", pa.string())])

    def arrow_value(self, value: tuple[str]) -> dict[str, str]:
        return {"text": value[0]}


@pytest.mark.parametrize("kind", [Shout, ShoutWithArrow])
def test_a_new_spec_type_is_exported_without_changes_here(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, kind: type[Shout]
) -> None:
    """A spec type the grammar gains later reaches salvage through parse_value_spec alone: as JSON text
    (value_json), or as the Arrow type it names. The strings are the unaligned fixture's keyed input."""
    fx = fixture_named("1.20.3-unaligned")
    real = values.parse_value_spec
    for module in (salvage_module, salvage_options):
        monkeypatch.setattr(module, "parse_value_spec", lambda s: kind() if s == "shout" else real(s))
    out = tmp_path / "s"
    code, doc = cli(
        "salvage", str(fx.checkpoint_dir), "--plan", str(fx.root / "plan.json"), "--out", str(out), "--operator",
        "slow", "--value-type", "tostr->slow=shout",
    )  # fmt: skip
    assert code == 0, doc
    edge = next(e for e in doc["edges"] if (e["upstream"], e["downstream"]) == ("tostr", "slow"))
    table = pq.read_table(out / edge["file"])
    texts = [read_string(raw)[0] for raw in table.column("value_raw").to_pylist()]
    assert table.num_rows > 0 and all(t for t in texts)
    if kind is Shout:
        assert edge["value_column"] == "value_json"
        assert [json.loads(v) for v in table.column("value_json").to_pylist()] == [[t.upper()] for t in texts]
    else:
        assert edge["value_column"] == "value"
        assert table.column("value").to_pylist() == [{"text": t.upper()} for t in texts]


def test_new_plan_exports_exactly_what_the_restore_drops(tmp_path: Path) -> None:
    """Flink 2.3.0 restored the unaligned job without slow (--allow-non-restored-state) and dropped slow's
    channel state (preflight-matrix/2.3.0/removed-keyed-allowed/flink.json). salvage --new-plan exports the
    records held in those halves and nothing else; preflight's count of slow's input half is what it exports."""
    matrix = COUNTED.root.parent / "preflight-matrix" / "2.3.0"
    assert json.loads((matrix / "removed-keyed-allowed" / "flink.json").read_text())["outcome"] == "restored"
    fx = fixture_named("2.3.0-unaligned")
    slow = {n["uid"]: n["operator_id"] for n in json.loads((fx.root / "ids.json").read_text())["stream_nodes"]}["slow"]
    new = [
        "--new-plan", str(matrix / "removed-keyed-allowed" / "jobgraph.json"), "--allow-non-restored-state",
        "--max-parallelism", "none", "--uid", "Source: seq=src", "--uid", "sink: Writer=sink", "--uid", "tostr=tostr",
        "--uid", "slow=slow", "--uid", "len=len",
    ]  # fmt: skip
    out = tmp_path / "s"
    code, doc = cli(
        "salvage", str(fx.checkpoint_dir), "--plan", str(fx.root / "jobgraph.json"), "--out", str(out), *new
    )
    assert code == 0, doc
    assert doc["restore"]["answer"] == "restores-with-loss"
    records = rows(out, doc)
    assert {(r["operator_id"], r["side"]) for r in records} == {(slow, "input"), (slow, "output")}
    code, answer = cli("preflight", str(fx.checkpoint_dir), "--plan", *new[1:])
    lost = {(d["operator"], d["side"]): d["records"] for d in answer["loss"]["in_flight"]}
    assert sum(r["side"] == "input" for r in records) == lost[(slow, "input")] > 0
    code, doc = cli("salvage", str(fx.checkpoint_dir), "--out", str(tmp_path / "t"), "--operator", "slow", *new)
    assert code == 2 and "--operator and --new-plan" in doc["error"]


def test_a_dry_run_strip_counts_the_salvage_and_writes_neither(tmp_path: Path) -> None:
    out, salvaged = tmp_path / "out", tmp_path / "salvaged"
    code, doc = cli(
        "repair", "strip-channel-state", str(COUNTED.checkpoint_dir), "--plan", PLAN, "--out", str(out),
        "--salvage", str(salvaged), "--dry-run",
    )  # fmt: skip
    assert code == 0, doc
    assert doc["dry_run"] and doc["salvage"]["records"] == doc["records_dropped"] > 0
    assert not out.exists() and not salvaged.exists()


def test_in_flight_pojos_salvage_as_structs_equal_to_what_the_job_logged(tmp_path: Path) -> None:
    """The pojo-counted job logs every Event it emits (records.jsonl.gz); salvaged with a pojo spec, each
    in-flight Event on the keyed edges is a Parquet struct equal to the logged one (nested POJO, nulls, arrays)."""
    import gzip

    fx = fixture_named("2.3.0-pojo-counted")
    event = (
        "pojo(user:string,seq:long,bucket:int,meta:pojo(origin:string,shard:int,stamp:long),tags:array(string),"
        "parts:array(int),history:objarray(long),score:double)"
    )
    with gzip.open(fx.root / "records.jsonl.gz", "rt", encoding="utf-8") as f:
        logged = {r["seq"]: r for r in map(json.loads, f)}
    out = tmp_path / "pojo"
    code, doc = cli(
        "salvage", str(fx.checkpoint_dir), "--plan", str(fx.root / "jobgraph.json"), "--out", str(out),
        "--value-type", f"parse->count={event}", "--value-type", f"count->group={event}", "--operator", "count",
    )  # fmt: skip
    assert code == 0, doc
    values = [r["value"] for r in rows(out, doc) if r["kind"] == "record"]
    assert len(values) > 200
    assert values == [logged[v["seq"]] for v in values]
    assert any(v["meta"] is None for v in values)
