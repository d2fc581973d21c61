"""spillway rescale without a JVM for Flink: planner rules, routing, refusals, self-check, CLI, and the
Spark backend writing byte-identical output to the in-process one (real 2.3.0 fixture "counted")."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from spillway.cli.app import app
from spillway.formats.channel_file import FileBlob, read_chunk_header
from spillway.formats.record_reader import RecordReader
from spillway.inspect.blobs import DelegateBlobs
from spillway.inspect.channels import logical_channels
from spillway.inspect.load import load_checkpoint
from spillway.inspect.topology import bind, load_plan
from spillway.rescale.plan import BALANCED, KEEP, RescaleRefused, build_plan
from spillway.rescale.rescale import rescale, rescaled_topology

FIXTURE = Path(__file__).parent / "fixtures" / "2.3.0-counted"
PLAN = FIXTURE / "jobgraph.json"
runner = CliRunner()


def checkpoint_dir() -> Path:
    return next(FIXTURE.glob("checkpoints/*/chk-*"))


def loaded():  # type: ignore[no-untyped-def]
    ld = load_checkpoint(checkpoint_dir())
    ld.resolve_files()
    return ld


def rebases(ld) -> list[str]:  # type: ignore[no-untyped-def]
    return [f"{r['from']}={r['to']}" for r in ld.resolver.rebases()]


def channel_records(path: Path, topology) -> list[tuple[str, str, list[bytes]]]:  # type: ignore[no-untyped-def]
    """(upstream, label, element payloads in replay order) of every logical channel, framed independently of
    the rescale code (RecordReader over the chunks of each part)."""
    ld = load_checkpoint(path)
    ld.resolve_files()
    cp = ld.checkpoint
    blobs = DelegateBlobs(ld.resolver)
    out = []
    try:
        for lc in logical_channels(topology, bind(topology, cp), cp).channels:
            reader = RecordReader()
            elements: list[bytes] = []
            for part in lc.parts:
                blob = blobs.get(part.handle.delegate)
                assert blob is not None
                for off in part.handle.offsets:
                    chunk = read_chunk_header(blob, off)
                    elements += [r.payload for r in reader.feed(blob.read_at(off + 4, chunk.length), None)]
            assert reader.leftover == 0, lc.label()
            out.append((f"{lc.upstream}->{lc.downstream}", lc.label(), elements))
    finally:
        blobs.close()
    return out


def records_by_edge(path: Path, topology) -> dict[str, list[bytes]]:  # type: ignore[no-untyped-def]
    out: dict[str, list[bytes]] = {}
    for edge, _, elements in channel_records(path, topology):
        out.setdefault(edge, []).extend(e for e in elements if e[0] in (0, 1))
    return out


def test_plan_rules_and_balanced_segments() -> None:
    ld = loaded()
    plan = build_plan(ld.checkpoint, load_plan(PLAN), ld.resolver, {"parse": 3})
    rules = {e.label: e.rule for e in plan.edges}
    assert rules == {"parse -> count (HASH)": KEEP, "Source: seq -> parse (REBALANCE)": BALANCED}
    # byte-balanced: each new parse subtask gets a third of the rebalance edge's bytes (± one source cut)
    edge = next(e for e in plan.edges if e.rule == BALANCED)
    per_target: dict[int, int] = {}
    for s in plan.sources:
        if s.edge != edge.index:
            continue
        start = 0
        for limit, target in s.segments:
            per_target[target] = per_target.get(target, 0) + limit - start
            start = limit
    total = sum(per_target.values())
    assert sorted(per_target) == [0, 1, 2]
    assert max(per_target.values()) - min(per_target.values()) <= total // 3 // 10 + 8


def test_hash_edge_without_key_is_refused() -> None:
    ld = loaded()
    with pytest.raises(RescaleRefused, match="--key"):
        build_plan(ld.checkpoint, load_plan(PLAN), ld.resolver, {"count": 3})


def test_plan_refusals() -> None:
    ld = loaded()
    with pytest.raises(RescaleRefused, match="max parallelism 128"):
        build_plan(ld.checkpoint, load_plan(PLAN), ld.resolver, {"parse": 129})
    with pytest.raises(RescaleRefused, match="no vertex"):
        build_plan(ld.checkpoint, load_plan(PLAN), ld.resolver, {"nope": 2})
    with pytest.raises(RescaleRefused, match="at least 1"):
        build_plan(ld.checkpoint, load_plan(PLAN), ld.resolver, {"parse": 0})


def test_rescale_moves_every_record_exactly_once(tmp_path: Path) -> None:
    ld = loaded()
    topology = load_plan(PLAN)
    out = tmp_path / "p3"
    report = rescale(ld, topology, {"parse": 3}, out, master=None, rebase=rebases(ld))
    before = records_by_edge(checkpoint_dir(), topology)
    after = records_by_edge(out, rescaled_topology(topology, report.plan))
    for edge in ("src->parse", "parse->count"):
        assert sorted(before[edge]) == sorted(after[edge]), edge
        assert before[edge]
    # untouched edge (count -> check): same bytes as before
    assert before["count->check"] == after["count->check"]
    doc = report.to_doc()
    assert doc["records_moved"] == len(before["src->parse"]) + len(before["parse->count"])
    new = load_checkpoint(out).checkpoint
    ops = {o.uid: o for o in new.operators}
    assert ops["parse"].parallelism == 3 and ops["count"].parallelism == 2
    assert not any(s.result_subpartition_state for s in ops["parse"].subtasks)  # moved into count's input
    assert not any(s.result_subpartition_state for s in ops["src"].subtasks)  # moved into parse's input
    assert ops["src"].coordinator_state == ld.checkpoint.operator(ops["src"].operator_id).coordinator_state


def test_rescale_keeps_source_order_per_old_channel(tmp_path: Path) -> None:
    """Records of one old upstream subtask stay in order on their new channel (src emits increasing longs)."""
    ld = loaded()
    topology = load_plan(PLAN)
    out = tmp_path / "p3"
    report = rescale(ld, topology, {"parse": 3}, out, master=None, rebase=rebases(ld))
    seen = 0
    for edge, label, elements in channel_records(out, rescaled_topology(topology, report.plan)):
        if edge != "src->parse":
            continue
        # StreamRecord with timestamp (tag 0): the Long value is the last 8 bytes
        values = [int.from_bytes(e[-8:], "big", signed=True) for e in elements if e[0] in (0, 1)]
        assert values == sorted(values), label
        seen += len(values)
    assert seen > 1000


def test_chunks_respect_buffer_size(tmp_path: Path) -> None:
    ld = loaded()
    out = tmp_path / "small"
    rescale(ld, load_plan(PLAN), {"parse": 3}, out, master=None, buffer_size=512, rebase=rebases(ld))
    files = list(out.glob("spillway-rescaled-*.channels"))
    assert files
    for f in files:
        blob = FileBlob(f)
        pos = 4
        while pos < blob.size:
            chunk = read_chunk_header(blob, pos)
            assert chunk.length <= 512
            pos = chunk.end
        blob.close()


def test_output_is_never_overwritten_and_source_untouched(tmp_path: Path) -> None:
    before = {p: p.read_bytes() for p in checkpoint_dir().rglob("*") if p.is_file()}
    out = tmp_path / "exists"
    out.mkdir()
    res = runner.invoke(
        app,
        [
            "rescale",
            str(checkpoint_dir()),
            "--plan",
            str(PLAN),
            "-p",
            "parse=3",
            "--out",
            str(out),
            "--master",
            "inprocess",
        ],
    )
    assert res.exit_code == 1 and "already exists" in res.output
    assert before == {p: p.read_bytes() for p in checkpoint_dir().rglob("*") if p.is_file()}
    assert not [p for p in tmp_path.iterdir() if p.name.startswith(".")]  # no partial output left


def test_cli_refusal_is_one_clear_line(tmp_path: Path) -> None:
    res = runner.invoke(
        app,
        [
            "rescale",
            str(checkpoint_dir()),
            "--plan",
            str(PLAN),
            "-p",
            "count=3",
            "--out",
            str(tmp_path / "o"),
            "--master",
            "inprocess",
        ],
    )
    assert res.exit_code == 1
    assert "keyBy (HASH) edge" in res.output and "Traceback" not in res.output
    assert not (tmp_path / "o").exists()
    bad = runner.invoke(app, ["rescale", str(checkpoint_dir()), "--plan", str(PLAN), "-p", "parse", "--out", "x"])
    assert bad.exit_code == 2


def test_cli_json_dry_run(tmp_path: Path) -> None:
    res = runner.invoke(
        app,
        [
            "rescale",
            str(checkpoint_dir()),
            "--plan",
            str(PLAN),
            "-p",
            "parse=3",
            "--out",
            str(tmp_path / "o"),
            "--dry-run",
            "--json",
        ],
    )
    assert res.exit_code == 0, res.output
    doc = json.loads(res.output)
    assert doc["schema"] == "spillway.rescale/1" and doc["dry_run"] is True
    assert doc["vertices"] == [{"vertex": "parse", "old_parallelism": 2, "new_parallelism": 3}]
    assert not (tmp_path / "o").exists()


def test_spark_backend_writes_the_same_bytes_as_inprocess(tmp_path: Path) -> None:
    ld = loaded()
    topology = load_plan(PLAN)
    a, b = tmp_path / "inprocess", tmp_path / "spark"
    rescale(ld, topology, {"parse": 3}, a, master=None, rebase=rebases(ld))
    report = rescale(
        load_checkpoint(checkpoint_dir()), topology, {"parse": 3}, b, master="local[2]", rebase=rebases(ld)
    )
    files_a = sorted(p.relative_to(a) for p in a.rglob("*") if p.is_file())
    files_b = sorted(p.relative_to(b) for p in b.rglob("*") if p.is_file())
    assert files_a == files_b
    for rel in files_a:
        assert (a / rel).read_bytes() == (b / rel).read_bytes(), rel
    assert report.to_doc()["records_moved"] > 0
