"""spillway rescale without a JVM for Flink: planner rules, routing, refusals, self-check, CLI, and the
Spark backend writing byte-identical output to the in-process one (real 2.3.0 fixture "counted")."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from click.testing import CliRunner

from spillway.cli.app import app
from spillway.formats.channel_file import FileBlob, read_chunk_header
from spillway.formats.record_reader import RecordReader
from spillway.inspect.channels import logical_channels
from spillway.inspect.topology import bind, load_plan
from spillway.rescale.rescale import rescale, rescaled_topology
from spillway.storage.blobs import DelegateBlobs
from spillway.storage.load import load_checkpoint

FIXTURE = Path(__file__).parents[1] / "fixtures" / "2.3.0-counted"
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
    doc = report.to_json()
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


def test_a_missing_key_is_one_clear_usage_line(tmp_path: Path) -> None:
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
    assert res.exit_code == 2  # --key/--key-fn missing: a usage error, not a refusal of the checkpoint
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
    assert report.to_json()["records_moved"] > 0


def test_finished_vertices_stay_finished_and_refusals_name_the_reason(tmp_path: Path) -> None:
    fixture = Path(__file__).parents[1] / "fixtures" / "2.3.0-finished"
    chk = str(next(fixture.glob("checkpoints/*/chk-*")))
    plan = str(fixture / "jobgraph.json")
    base = ["rescale", chk, "--plan", plan, "--master", "inprocess"]
    res = runner.invoke(app, [*base, "-p", "bmap=3", "--out", str(tmp_path / "a")])
    assert res.exit_code == 1 and "FORWARD edge needs equal parallelism" in res.output
    res = runner.invoke(app, [*base, "-p", "pmap=3", "--out", str(tmp_path / "b")])
    assert res.exit_code == 1 and "partially finished" in res.output
    res = runner.invoke(app, [*base, "-p", "bsrc=3", "-p", "bmap=3", "-p", "bsink=3", "--out", str(tmp_path / "c")])
    assert res.exit_code == 0, res.output
    ops = {o.uid: o for o in load_checkpoint(tmp_path / "c").checkpoint.operators}
    for uid in ("bsrc", "bmap", "bsink"):
        assert ops[uid].fully_finished and ops[uid].parallelism == 3
    assert ops["pmap"].parallelism == 2 and [s.index for s in ops["pmap"].subtasks if s.finished] == [0]
    assert not [p for p in tmp_path.iterdir() if p.name.startswith(".")]


def test_a_failed_self_check_leaves_no_output(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    import spillway.rescale.rescale as rescale_module
    from spillway.storage.safe_writer import WriteError

    monkeypatch.setattr(rescale_module, "self_check", lambda *a: ["new channel 3: 1 record read back, 2 routed"])
    ld = loaded()
    with pytest.raises(WriteError, match="self-check: new channel 3: 1 record read back"):
        rescale(ld, load_plan(PLAN), {"parse": 3}, tmp_path / "o", master=None, rebase=rebases(ld))
    assert list(tmp_path.iterdir()) == []  # neither the output nor its temporary directory


def test_an_executor_failure_is_one_clear_line(tmp_path: Path) -> None:
    """A user --key-fn that fails on a Spark executor: the CLI says why in one line (exit 1), no Java or
    Python traceback, nothing written."""
    import os
    import subprocess
    import sys

    root = Path(__file__).parents[2]
    env = {**os.environ, "PYTHONPATH": str(Path(__file__).parents[1] / "support"), "SPARK_LOCAL_IP": "127.0.0.1"}
    cmd = [sys.executable, "-m", "spillway", "rescale", str(checkpoint_dir()), "--plan", str(PLAN)]
    cmd += ["-p", "count=3", "--key-fn", "count=keyfns:not_a_key", "--out", str(tmp_path / "o")]
    res = subprocess.run([*cmd, "--master", "local[1]"], capture_output=True, text=True, env=env, cwd=root)
    assert res.returncode == 1, res.stderr[-3000:]
    errors = [line for line in res.stderr.splitlines() if line.startswith("error:")]
    expected = "error: --key-fn returned list; return the key's Java hashCode (int) or a str"
    assert errors == [expected], res.stderr[-3000:]
    assert "Traceback" not in res.stderr and "at org.apache" not in res.stderr
    assert list(tmp_path.iterdir()) == []


def test_an_unwritable_output_is_one_clear_line(tmp_path: Path) -> None:
    blocker = tmp_path / "file"
    blocker.write_text("not a directory")
    res = runner.invoke(
        app,
        ["rescale", str(checkpoint_dir()), "--plan", str(PLAN), "-p", "parse=3", "--out", str(blocker / "o")],
    )
    assert res.exit_code == 3, res.output  # the output's place cannot be written: storage, not findings
    assert f"error: {blocker / 'o'}: cannot write: Not a directory (errno 20); nothing was left behind" in res.output
    assert "Traceback" not in res.output
    assert isinstance(res.exception, SystemExit)


def test_each_written_file_is_flushed_once_complete(tmp_path: Path) -> None:
    from spillway.rescale.channel_writer import background_fsync, write_sorted_runs

    element = (5).to_bytes(4, "big") + b"\x01abcd"  # a framed record
    rows = [("a" * 32, down, 0, up, element * 3, 3, 0) for down in (0, 1) for up in (0, 1)]
    flushed: list[str] = []
    files = write_sorted_runs(str(tmp_path), rows, 64, flushed.append)
    assert [Path(p).name for p in flushed] == [f.name for f in files] and len(files) == 2
    with background_fsync() as synced:
        for p in flushed:
            synced(p)
    with pytest.raises(FileNotFoundError), background_fsync() as synced:  # a failed flush is not swallowed
        synced(str(tmp_path / "missing"))
