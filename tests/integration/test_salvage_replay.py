"""Salvage closes the loop with real Flink: strip every channel of the ``*-counted`` checkpoint (2.3.0, 1.20.3) with
``--salvage``, restore the stripped checkpoint into the counted job with the exported records replayed where
they were in flight (variant "replay": Replay.java reads records.jsonl and deserializes each value_raw with the
edge's own Flink serializer), and the job's own exactly-once check passes again: every key's count and sum, and
the records and sum that reached ``check``, are those of a run that lost nothing (Counted.java's expectation
from its input 0..N-1, not from spillway).

Without the replay the same stripped checkpoint loses exactly the records reported
(tests/integration/test_repair_restore.py); here the decoded Parquet values are also checked against the job's
data: parse's output is (v % 32, v), every v lies in 0..N-1 and no v is in flight twice.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from click.testing import CliRunner
from support.fixtures import fixture_named
from support.flink_harness import restore
from support.value_oracle import expected, same, value_oracle

from spillway.cli.app import app
from spillway.formats.values import decode, parse_value_spec
from spillway.inspect.value_arrow import arrow_type, arrow_value

pytestmark = pytest.mark.flink

runner = CliRunner()
N = 200_000  # Counted.N: the source's sequence 0..N-1
KEYS = 32  # Counted.KEYS


def explain(res: dict) -> str:
    return json.dumps({k: res.get(k) for k in ("outcome", "stage", "error", "causes", "log")}, indent=1)


@pytest.mark.parametrize("release", ["2.3.0", "1.20.3"])
def test_stripped_checkpoint_with_replayed_salvage_counts_exactly_once(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, release: str
) -> None:
    fx = fixture_named(f"{release}-counted")
    out, salvaged = tmp_path / "stripped", tmp_path / "salvaged"
    # each edge's spec named by its upstream operator's id as Flink's own hasher gave it (ids.json): before 2.0 the
    # checkpoint stores no names, and the plan calls the source "Source: seq"
    ids = {n["uid"]: n["operator_id"] for n in json.loads((fx.root / "ids.json").read_text())["stream_nodes"]}
    res = runner.invoke(
        app,
        [
            "repair",
            "strip-channel-state",
            str(fx.checkpoint_dir),
            "--out",
            str(out),
            "--plan",
            str(fx.root / "jobgraph.json"),
            "--salvage",
            str(salvaged),
            "--value-type",
            f"{ids['src']}=long",
            "--value-type",
            f"{ids['parse']}=tuple(long,long)",
            "--value-type",
            f"{ids['count']}=long",
            "--jsonl",
            "--json",
        ],
    )
    assert res.exit_code == 0, res.output
    doc = json.loads(res.stdout)
    assert doc["salvage"]["records"] == doc["records_dropped"] > 0

    edges = {e["downstream"]: e for e in doc["salvage"]["edges"]}
    assert set(edges) == {"parse", "count", "check"}
    seen: list[int] = []
    for down, e in edges.items():
        table = pq.read_table(salvaged / e["file"])
        assert table.num_rows == e["records"] > 0
        assert set(table.column("upstream_operator_id").to_pylist()) == {
            ids[{"parse": "src", "count": "parse", "check": "count"}[down]]
        }
        values = table.column("value").to_pylist()
        if down == "count":
            assert all(t["f0"] == t["f1"] % KEYS for t in values)
            seen += [t["f1"] for t in values]
        else:
            seen += values
    assert all(0 <= v < N for v in seen)
    assert len(set(seen)) == len(seen) == doc["records_dropped"]

    monkeypatch.setenv("SPILLWAY_REPLAY", str(salvaged / "records.jsonl"))
    result = restore(fx.release, "counted", out, variant="replay", until_finished=True, workdir=tmp_path / "work")
    assert result["outcome"] == "restored", explain(result)
    per_key: dict[int, tuple[int, int]] = {}
    checked = checked_sum = 0
    for line in result["results"]:
        kind, *fields = line.split()
        if kind == "count":
            per_key[int(fields[0])] = (int(fields[1]), int(fields[2]))
        elif kind == "check":
            checked += int(fields[0])
            checked_sum += int(fields[1])
    expected = {k: (len(range(k, N, KEYS)), sum(range(k, N, KEYS))) for k in range(KEYS)}
    assert per_key == expected
    assert (checked, checked_sum) == (N, N * (N - 1) // 2)


def arrow_form(desc: Any) -> Any:
    """ValueOracle's typed description of a value Flink serialized, as the Arrow column should hold it: tuples as
    structs f0…, rows as structs kind, f0…; floats compared bit for bit (``same``)."""
    value = expected(desc)
    if desc is None:
        return None
    if desc["t"] == "tuple":
        return {f"f{i}": arrow_form(f) for i, f in enumerate(desc["v"])}
    if desc["t"] == "row":
        return {"kind": desc["kind"], **{f"f{i}": arrow_form(f) for i, f in enumerate(desc["v"])}}
    if isinstance(value, str):  # a lone surrogate (Java allows one) cannot be UTF-8: docs/salvage.md says U+FFFD
        return "".join("\ufffd" if 0xD800 <= ord(ch) <= 0xDFFF else ch for ch in value)
    return value


def same_data(a: Any, b: Any) -> bool:
    if isinstance(a, dict) and isinstance(b, dict):
        return a.keys() == b.keys() and all(same_data(a[k], b[k]) for k in a)
    return same(a, b)


def test_parquet_values_are_what_flinks_serializers_wrote(tmp_path: Path) -> None:
    """Every case of ValueOracle (bytes written by Flink 2.3.0's own serializers, the value it serialized) whose
    spec has a full Arrow mapping: the Parquet column, written and read back, holds that value."""
    checked = 0
    for case in value_oracle()["cases"]:
        spec = parse_value_spec(case["spec"])
        typ = arrow_type(spec)
        if typ is None or not spec.known or case["spec"].startswith("rowdata"):
            continue  # rowdata: its cases describe the SQL row; checked on the sql fixture's channels elsewhere
        decoded = decode(spec, bytes.fromhex(case["hex"]))
        path = tmp_path / f"{checked}.parquet"
        pq.write_table(pa.table({"value": pa.array([arrow_value(spec, decoded)], typ)}), path)
        got = pq.read_table(path).column("value").to_pylist()[0]
        assert same_data(got, arrow_form(case["value"])), f"{case['spec']} {case['hex']}: {got!r}"
        checked += 1
    assert checked > 50
