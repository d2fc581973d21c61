"""What each command transfers from an object store, counted at the server (a moto S3 server whose every
answer is counted by key, tests/support/counting_s3.py), and that a remote checkpoint's ``--json`` equals the
same checkpoint's on local disk.

Which bytes a command may read comes from where Flink wrote them, never from spillway: a checkpoint's own
directory (``chk-N``: ``_metadata`` and the exclusive files, here channel state) and the job's ``shared/``
directory (RocksDB's incremental SST files: keyed state). ``dump``, ``files`` and ``diff`` need ``_metadata``
only; ``validate``, ``analyze`` and ``report`` add the channel state; ``rescale`` re-assigns keyed state by
handle and must never read a byte of it.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner
from support.console import Run, spillway
from support.counting_s3 import Counter, counting_s3
from support.endpoints import S3Server, upload
from support.fixtures import Fixture, fixture_named, fixture_params

from spillway.cli.app import app
from spillway.errors import StorageError
from spillway.formats.metadata_codec import decode_metadata
from spillway.model.checkpoint import is_file_backed
from spillway.model.walk import leaf_stream_handles
from spillway.storage import fs

FIXTURE = "2.3.0-rocksdb-incremental"
TESTS = Path(__file__).parents[1]
BUDGET = 1.05  # validate / analyze / report: _metadata + channel state, within 5 %


@pytest.fixture(scope="module")
def served() -> Iterator[tuple[S3Server, Counter]]:
    with counting_s3(buckets=("ckpt",)) as pair:
        yield pair


def data_root(fx: Fixture) -> Path:
    """The fixture's directory Flink wrote into (``checkpoints`` or ``savepoints``)."""
    return fx.root / fx.info["checkpoint"].split("/")[0]


def uploaded(s3: S3Server, fx: Fixture) -> tuple[str, str]:
    """The fixture's data under ``s3://ckpt/<fixture>/`` (once per server): the checkpoint's URI and the rebase
    rule sending the paths Flink wrote to the bucket."""
    assert s3.client is not None
    root = data_root(fx)
    if s3.client.get_file_info(f"ckpt/{fx.name}").type.name != "Directory":
        upload(s3.client, root, f"ckpt/{fx.name}")
    prefix = f"s3://ckpt/{fx.name}"
    uri = f"{prefix}/{fx.checkpoint_dir.relative_to(root).as_posix()}"
    return uri, f"{fx.info['generated_at']}/{root.name}={prefix}"


def key_of(fx: Fixture, local: Path) -> str:
    return f"ckpt/{fx.name}/{local.relative_to(data_root(fx)).as_posix()}"


def run_counted(counter: Counter, *args: str, env: dict[str, str]) -> Run:
    counter.reset()
    run = spillway(*args, env=env, timeout=600)
    assert run.code in (0, 1), run.output
    return run


def test_dump_files_and_diff_transfer_metadata_only(served: tuple[S3Server, Counter]) -> None:
    s3, counter = served
    fx = fixture_named(FIXTURE)
    uri, rule = uploaded(s3, fx)
    metadata = key_of(fx, fx.metadata)
    shared = {key_of(fx, p) for p in (fx.checkpoint_dir.parent / "shared").iterdir()}
    assert shared, "the fixture's keyed state is in shared/"
    for args, reads in (
        (("dump", uri, "--rebase", rule, "--json"), 1),
        (("dump", uri, "--rebase", rule, "--tree"), 1),
        (("files", uri, "--rebase", rule, "--json"), 1),
        (("diff", uri, uri, "--rebase", rule, "--json"), 2),
    ):
        run = run_counted(counter, *args, env=s3.env())
        assert counter.bytes_read() == {metadata: reads * fx.metadata.stat().st_size}, args
        assert not counter.of("HEAD") or all(r.key not in shared for r in counter.of("HEAD")), args
        if args[0] == "files":
            doc = json.loads(run.out)
            listed = {f["path"]: f["size"] for f in doc["files"]}
            # existence and size of every keyed-state file, from the listing, without reading one
            for p in (fx.checkpoint_dir.parent / "shared").iterdir():
                assert listed[f"s3://{key_of(fx, p)}"] == p.stat().st_size
            assert doc["missing"] == []


@pytest.mark.parametrize("command", ["validate", "analyze", "report"])
def test_validate_analyze_and_report_transfer_metadata_and_channel_state(
    served: tuple[S3Server, Counter], command: str, tmp_path: Path
) -> None:
    s3, counter = served
    fx = fixture_named(FIXTURE)
    uri, rule = uploaded(s3, fx)
    own = {key_of(fx, p): p.stat().st_size for p in fx.checkpoint_dir.iterdir()}  # _metadata + channel state
    extra = ["--out", str(tmp_path / "report.html")] if command == "report" else ["--json"]
    run = run_counted(counter, command, uri, "--rebase", rule, *extra, env=s3.env())
    read = counter.bytes_read()
    assert set(read) == set(own), f"{command} read {sorted(read)}"  # nothing of shared/: no keyed state
    needed = sum(own.values())
    assert needed <= sum(read.values()) <= BUDGET * needed
    # one request per channel-state file (each under one 8 MiB read): its GET, no HEAD (the listing gave the size)
    channel = set(own) - {key_of(fx, fx.metadata)}
    gets = [f"{r.bucket}/{r.key}" for r in counter.of("GET")]
    assert {k: gets.count(k) for k in channel} == dict.fromkeys(channel, 1), command
    assert not {f"{r.bucket}/{r.key}" for r in counter.of("HEAD")} & channel, command
    if command == "validate":
        summary = json.loads(run.out)["summary"]
        assert summary["files_checked"] == len(own) - 1 + len(list((fx.checkpoint_dir.parent / "shared").iterdir()))


def test_rescale_never_reads_keyed_state(served: tuple[S3Server, Counter], tmp_path: Path) -> None:
    s3, counter = served
    fx = fixture_named(FIXTURE)
    uri, rule = uploaded(s3, fx)
    out = tmp_path / "rescaled"
    plan = str(fx.root / "jobgraph.json")
    args = ["-p", "slow=4", "--key-fn", "slow=support.keyfns:key_of", "--master", "inprocess", "--plan", plan]
    env = {**s3.env(), "PYTHONPATH": f"{TESTS.parent}:{TESTS}"}  # the key function is tests/support/keyfns.py
    run = run_counted(counter, "rescale", uri, "--rebase", rule, "--out", str(out), *args, "--json", env=env)
    assert run.code == 0, run.output
    shared = {key_of(fx, p) for p in (fx.checkpoint_dir.parent / "shared").iterdir()}
    assert not counter.keys_read() & shared
    assert counter.keys_read() == {key_of(fx, p) for p in fx.checkpoint_dir.iterdir()}
    channel = {key_of(fx, p) for p in fx.checkpoint_dir.iterdir() if p.name != "_metadata"}
    gets = [f"{r.bucket}/{r.key}" for r in counter.of("GET")]
    assert {k: gets.count(k) for k in channel} == dict.fromkeys(channel, 1)  # one request each: no HEAD
    assert not {f"{r.bucket}/{r.key}" for r in counter.of("HEAD")} & channel
    # the rescaled keyed state still names Flink's SST files: through the same rule they are those in the bucket
    written = spillway("files", str(out), "--rebase", rule, "--json", env=s3.env())
    assert written.code == 0, written.err
    paths = {f["path"] for f in json.loads(written.out)["files"]}
    assert {f"s3://{k}" for k in shared} <= paths


@pytest.mark.parametrize(
    "command",
    [
        ["preflight", "{cp}", "--plan", "{plan}", "--json"],
        ["repair", "relocate", "{cp}", "--from", "file:/", "--to", "file:/", "--out", "{out}", "--json"],
        ["repair", "strip-channel-state", "{cp}", "--operator", "tostr", "--plan", "{plan}", "--out", "{out}"],
        ["repair", "drop-operator", "{cp}", "--operator", "len", "--plan", "{plan}", "--force", "--out", "{out}"],
    ],
    ids=lambda c: " ".join(c[: c.index("{cp}")]),
)
def test_preflight_and_the_repairs_never_read_keyed_state(
    served: tuple[S3Server, Counter], command: list[str], tmp_path: Path
) -> None:
    """preflight and the repairs read at most _metadata and the checkpoint's own files (channel state, which they
    check or rewrite): not a byte of the job's shared/ keyed state, whose handles they keep as they are."""
    s3, counter = served
    fx = fixture_named(FIXTURE)
    uri, rule = uploaded(s3, fx)
    fill = {"{cp}": uri, "{plan}": str(fx.root / "jobgraph.json"), "{out}": str(tmp_path / "out")}
    counter.reset()
    run = spillway(*(fill.get(a, a) for a in command), "--rebase", rule, env=s3.env(), timeout=600)
    assert run.code in (0, 1, 4), run.output  # 4: preflight's "unknown" (the plan gives names, not uids)
    shared = {key_of(fx, p) for p in (fx.checkpoint_dir.parent / "shared").iterdir()}
    own = {key_of(fx, p) for p in fx.checkpoint_dir.iterdir()}
    assert key_of(fx, fx.metadata) in counter.keys_read() <= own, run.output
    assert not counter.keys_read() & shared
    if "{out}" in command:
        assert (tmp_path / "out" / "_metadata").is_file(), run.output


def normalised(run: Run, root: str, command: str) -> str:
    """The ``--json`` with the checkpoint's root (a local directory or ``s3://bucket/prefix``) as ``<ROOT>``.
    ``files`` names a file's place on this machine in ``local``, which a file in a store has not (docs/cli.md:
    null): it is left out of the comparison."""
    text = run.out.replace(root, "<ROOT>")
    if command != "files":
        return text
    doc = json.loads(text)
    for f in doc["files"]:
        f.pop("local")
    return json.dumps(doc)


@pytest.mark.parametrize("fx", fixture_params())
def test_json_on_the_store_equals_json_on_local_disk(
    served: tuple[S3Server, Counter], fx: Fixture, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Each command's --json (and its stderr) on the store equals the local run, on every bundled fixture. The
    CLI runs in this process (click's runner): 8 runs x every fixture as new processes would cost the suite
    minutes of interpreter start-up; the installed script on S3 is run by the budget tests above."""
    s3, _ = served
    for key, value in s3.env().items():
        monkeypatch.setenv(key, value)
    fs._filesystem.cache_clear()
    uri, rule = uploaded(s3, fx)
    root = data_root(fx)
    local_rule = f"{fx.info['generated_at']}/{root.name}={root}"
    for command in ("dump", "files", "validate", "analyze"):
        here = _in_process(command, str(fx.checkpoint_dir), "--rebase", local_rule, "--json")
        there = _in_process(command, uri, "--rebase", rule, "--json")
        assert (there.code, there.err) == (here.code, here.err.replace(str(root), f"s3://ckpt/{fx.name}")), command
        remote, local = normalised(there, f"s3://ckpt/{fx.name}", command), normalised(here, str(root), command)
        if remote != local and os.environ.get("SPILLWAY_DEBUG_PARITY"):
            Path(os.environ["SPILLWAY_DEBUG_PARITY"]).write_text(remote + "\n" + local)
        assert remote == local, command
    fs._filesystem.cache_clear()


def _in_process(*args: str) -> Run:
    start = time.monotonic()
    result = CliRunner().invoke(app, list(args))
    assert result.exception is None or isinstance(result.exception, SystemExit), result.exception
    return Run(result.exit_code, result.stdout, result.stderr, time.monotonic() - start)


def test_ranged_reads_bring_every_file_whole(
    served: tuple[S3Server, Counter], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """fetch_files: parts of 1 MiB, 4 in flight, over three files: each arrives byte for byte, each part is one
    ranged GET of its own bytes (counted at the server), and nothing is read twice."""
    s3, counter = served
    assert s3.client is not None
    for key, value in s3.env().items():
        monkeypatch.setenv(key, value)
    fs._filesystem.cache_clear()
    mib = 1 << 20
    sizes = {"empty": 0, "five": 5 * mib + 3, "half": mib // 2}
    contents = {name: os.urandom(size) for name, size in sizes.items()}
    for name, data in contents.items():
        with s3.client.open_output_stream(f"ckpt/ranged/{name}") as out:
            out.write(data)
    transfers = [fs.Transfer(fs.locate(f"s3://ckpt/ranged/{n}"), tmp_path / n, s) for n, s in sizes.items()]
    counter.reset()
    assert fs.fetch_files(transfers, workers=4, part=mib) == sum(sizes.values())
    assert {n: (tmp_path / n).read_bytes() for n in sizes} == contents
    gets = counter.of("GET")
    assert len(gets) == 6 + 1 and all(r.ranged for r in gets)  # ceil(size / part) per file, none for 0 bytes
    assert counter.of("HEAD") == []  # the sizes are the caller's (a listing's): no request asks for them
    assert counter.bytes_read() == {f"ckpt/ranged/{n}": s for n, s in sizes.items() if s}
    fs._filesystem.cache_clear()


def test_a_file_shorter_than_listed_fails_naming_it_and_leaves_nothing(
    served: tuple[S3Server, Counter], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    s3, _ = served
    assert s3.client is not None
    for key, value in s3.env().items():
        monkeypatch.setenv(key, value)
    fs._filesystem.cache_clear()
    with s3.client.open_output_stream("ckpt/short/file") as out:
        out.write(b"x" * 1000)
    whole = fs.Transfer(fs.locate("s3://ckpt/short/file"), tmp_path / "whole", 1000)
    short = fs.Transfer(fs.locate("s3://ckpt/short/file"), tmp_path / "short", 3000)  # listed longer than it is
    with pytest.raises(StorageError, match=r"^s3://ckpt/short/file: cannot read bytes \d+-\d+: "):
        fs.fetch_files([whole, short], workers=2, part=1024)
    assert list(tmp_path.iterdir()) == []  # neither the failed file nor the one that arrived is left
    fs._filesystem.cache_clear()


def test_a_transient_error_is_retried_and_a_lasting_one_fails_naming_the_range(
    served: tuple[S3Server, Counter], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """503 SlowDown (S3's "retry later"): three failures in a row on one object are outlasted (the S3 client's
    own retry, then fetch_files' backoff), the bytes arrive whole; a store that keeps failing gives up after
    a bounded number of requests, naming the object and the byte range, and leaves no file behind."""
    s3, counter = served
    assert s3.client is not None
    for key, value in s3.env().items():
        monkeypatch.setenv(key, value)
    fs._filesystem.cache_clear()
    data = os.urandom(300_000)
    with s3.client.open_output_stream("ckpt/flaky/file") as out:
        out.write(data)
    counter.reset()
    counter.fail_next("ckpt/flaky/file", 3)
    flaky = fs.Transfer(fs.locate("s3://ckpt/flaky/file"), tmp_path / "flaky", len(data))
    start = time.monotonic()
    assert fs.fetch_files([flaky], workers=1) == len(data)
    assert time.monotonic() - start >= 0.5  # it backed off (0.5 s) before trying again, not at once
    assert (tmp_path / "flaky").read_bytes() == data
    assert len(counter.of("FAILED")) == 3 and counter.bytes_read() == {"ckpt/flaky/file": len(data)}
    counter.reset()
    counter.fail_next("ckpt/flaky/file", 1000)
    lasting = fs.Transfer(fs.locate("s3://ckpt/flaky/file"), tmp_path / "lasting", len(data))
    with pytest.raises(StorageError, match=r"^s3://ckpt/flaky/file: cannot read bytes 0-299999: "):
        fs.fetch_files([lasting], workers=1)
    assert not (tmp_path / "lasting").exists()
    assert 3 <= len(counter.of("FAILED")) <= 12  # bounded: a few attempts, each with the client's own retry
    counter.failing.clear()
    fs._filesystem.cache_clear()


def _written(out: Path) -> dict[str, str]:
    """What a command wrote: every file under ``out`` by its relative path, with its SHA-256 (equal digests: the
    same checkpoint byte for byte, so the same ``dump --json`` too)."""
    return {
        p.relative_to(out).as_posix(): hashlib.sha256(p.read_bytes()).hexdigest()
        for p in sorted(out.rglob("*"))
        if p.is_file()
    }


def _with_channel_state(fx: Fixture) -> str:
    """An operator of the fixture with channel state in its checkpoint (Flink's record: the ids Flink's hasher
    wrote in ids.json, the handles in _metadata), else its first operator."""
    ids = [n["operator_id"] for n in json.loads((fx.root / "ids.json").read_text())["stream_nodes"]]
    checkpoint = decode_metadata(fx.metadata.read_bytes())
    stateful = {
        op.operator_id
        for op in checkpoint.operators
        for st in op.subtasks
        if st.input_channel_state or st.result_subpartition_state
    }
    return next((i for i in ids if i in stateful), ids[0])


@pytest.mark.parametrize("fx", fixture_params())
def test_every_other_command_on_the_store_equals_local_disk(
    served: tuple[S3Server, Counter], fx: Fixture, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    """diff, report, preflight and the repairs on the store give what they give on local disk: the same exit
    code, stderr and --json (the report's page), and the same checkpoint written, byte for byte, with the
    checkpoint's root and the output directory the only text that may differ."""
    s3, _ = served
    for key, value in s3.env().items():
        monkeypatch.setenv(key, value)
    fs._filesystem.cache_clear()
    uri, rule = uploaded(s3, fx)
    root = data_root(fx)
    local_rule = f"{fx.info['generated_at']}/{root.name}={root}"
    there_root = f"s3://ckpt/{fx.name}"
    plan = str(fx.root / "jobgraph.json")
    first = json.loads((fx.root / "ids.json").read_text())["stream_nodes"][0]["operator_id"]
    in_flight = _with_channel_state(fx)
    commands: list[tuple[str, list[str], bool]] = [  # (name, arguments after the checkpoint, writes --out)
        ("diff", ["{cp}", "--json"], False),
        ("report", ["--plan", plan, "--out", "-"], False),
        ("preflight", ["--plan", plan, "--json"], False),
        ("repair relocate", ["--from", "file:/", "--to", "file:/", "--json"], True),
        ("repair strip-channel-state", ["--operator", in_flight, "--force", "--json"], True),
        ("repair drop-operator", ["--operator", first, "--force", "--json"], True),
    ]
    for name, extra, writes in commands:
        runs = {}
        for side, cp, rules, shown in (
            ("here", str(fx.checkpoint_dir), local_rule, str(root)),
            ("there", uri, rule, there_root),
        ):
            out = tmp_path / f"{name.replace(' ', '-')}-{side}"
            args = [*name.split(), cp, *(a.replace("{cp}", cp) for a in extra), "--rebase", rule]
            args[-1] = rules
            if writes:
                args += ["--out", str(out)]
            run = _in_process(*args)
            text = run.out.replace(str(out), "<OUT>").replace(shown, "<ROOT>")
            if name == "report":  # the page embeds files --json, whose "local" a file in a store has not (null)
                text = re.sub(r'"local": "<ROOT>[^"]*"', '"local": null', text)
            written = _written(out) if writes and out.exists() else None
            runs[side] = (run.code, run.err.replace(str(out), "<OUT>").replace(shown, "<ROOT>"), text, written)
        if runs["there"] != runs["here"] and os.environ.get("SPILLWAY_DEBUG_PARITY"):
            Path(os.environ["SPILLWAY_DEBUG_PARITY"]).write_text(json.dumps(runs, indent=1))
        assert runs["there"] == runs["here"], name
    fs._filesystem.cache_clear()


# The key of each fixture job's keyed operator, as the fixture's own restore tests give it to Flink: the job
# (fixture.json's scenario) -> (operator name in ids.json, key option). Every other fixture rescales its job
# graph's first keyed vertex, key unknown: where that needs a key or is otherwise impossible, the refusal must
# be the same on the store as on local disk.
KEYED = {
    "slow": ("--key-fn", "slow=support.keyfns:key_of"),  # FixtureJob's KeyOf (tests/support/keyfns.py)
    "count": ("--key", "count=tuple:0:long"),  # the counted job's Tuple2<Long, Long>, keyed by field 0
}
VERTEX_KEYS = {  # jobs whose keyed vertex is rescaled with the vertices FORWARD ties to it (_keyed_vertices)
    "prod": ("--key-fn", "slow-count=support.keyfns:key_of"),  # Prod.KeyOf: the String before the first ':'
    "prod-counted": ("--key", "count-per-key=tuple:0:long"),  # Counted's PairKey: field 0 of Tuple2<Long, Long>
}
COUNTED_TUPLES = {"counted", "counted-changelog", "counted-forst", "counted-rocksdb-incremental"}
# Keyed fixtures whose rescale spillway refuses, on local disk as on the store, and the line that says why: the
# 1.10.3 and 1.12.5 RocksDB job graphs do not bind every operator id; in 1.12.5 the stateless head behind a
# REBALANCE edge has no operator id in _metadata to take its in-flight records; 1.11.4's prod job holds channel
# state on a FORWARD edge.
REFUSED = {
    "1.10.3-aligned": "cannot tell which vertex operator(s)",
    "1.10.3-rocksdb-incremental": "cannot tell which vertex operator(s)",
    "1.12.5-rocksdb-incremental": "cannot tell which vertex operator(s)",
    "1.12.5-unaligned": "head holds no state in this checkpoint",
    "1.12.5-prod": "head holds no state in this checkpoint",
    "1.12.5-prod-no-uid": "head holds no state in this checkpoint",
    "1.11.4-prod": "is pointwise (FORWARD) yet carries channel state",
    "1.11.4-prod-no-uid": "is pointwise (FORWARD) yet carries channel state",
}
POJO_EVENT = (
    "pojo(user:string,seq:long,bucket:int,meta:pojo(origin:string,shard:int,stamp:long),tags:array(string),"
    "parts:array(int),history:objarray(long),score:double)"
)


def _rescale_arguments(fx: Fixture) -> tuple[list[str], bool]:
    """``-p`` (one more subtask) and the key for the fixture's keyed operator, from ids.json and fixture.json;
    and whether a rescale is expected to be possible (a keyed job whose key is known)."""
    nodes = json.loads((fx.root / "ids.json").read_text())["stream_nodes"]
    by_name = {n["name"]: n for n in nodes}
    scenario = fx.info["scenario"]
    if "slow" in by_name:
        name, key = "slow", KEYED["slow"]
    elif scenario in COUNTED_TUPLES and "count" in by_name:
        name, key = "count", KEYED["count"]
    elif scenario == "pojo-counted":
        name, key = "count", ("--key", f"count={POJO_EVENT}:user")
    else:
        vertex_key = VERTEX_KEYS.get(scenario.removesuffix("-no-uid").removesuffix("-finished"), ())
        vertices = [a for v in _keyed_vertices(fx) for a in ("-p", f"{v['id']}={v['parallelism'] + 1}")]
        return [*vertices, *vertex_key], bool(vertex_key)
    return ["-p", f"{name}={by_name[name]['parallelism'] + 1}", *key], True


def _keyed_vertices(fx: Fixture) -> list[dict[str, Any]]:
    """The job graph's first keyed vertex (a HASH input; else its first vertex with an input) and every vertex
    tied to it by FORWARD edges, which Flink rescales only together."""
    vertices = json.loads((fx.root / "jobgraph.json").read_text())["nodes"]
    fed = [v for v in vertices if v.get("inputs")]
    keyed = [v for v in fed if any(i["ship_strategy"] == "HASH" for i in v["inputs"])]
    chosen = {(keyed or fed)[0]["id"]}
    forward = [(i["id"], v["id"]) for v in fed for i in v["inputs"] if i["ship_strategy"] == "FORWARD"]
    while grown := {b for a, b in forward if a in chosen} | {a for a, b in forward if b in chosen}:
        if grown <= chosen:
            break
        chosen |= grown
    return [v for v in vertices if v["id"] in chosen]


@pytest.mark.parametrize("fx", fixture_params())
def test_rescale_on_the_store_equals_rescale_on_local_disk(
    served: tuple[S3Server, Counter], fx: Fixture, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    """rescale (one more subtask for the keyed operator, records routed by the job's own key) from the store
    writes what it writes from local disk: the same exit code, stderr, --json and checkpoint, byte for byte; a
    rescale refused on local disk is refused on the store with the same line."""
    s3, _ = served
    for key, value in s3.env().items():
        monkeypatch.setenv(key, value)
    monkeypatch.syspath_prepend(str(TESTS))  # the key function is tests/support/keyfns.py
    fs._filesystem.cache_clear()
    uri, rule = uploaded(s3, fx)
    root = data_root(fx)
    local_rule = f"{fx.info['generated_at']}/{root.name}={root}"
    args, possible = _rescale_arguments(fx)
    args += ["--master", "inprocess", "--plan", str(fx.root / "jobgraph.json"), "--json"]
    runs = {}
    for side, cp, rules, shown in (
        ("here", str(fx.checkpoint_dir), local_rule, str(root)),
        ("there", uri, rule, f"s3://ckpt/{fx.name}"),
    ):
        out = tmp_path / side
        run = _in_process("rescale", cp, "--rebase", rules, "--out", str(out), *args)
        text = run.out.replace(str(out), "<OUT>").replace(shown, "<ROOT>")
        if run.code == 0:
            doc = json.loads(text)
            doc.pop("timings")  # seconds each phase took: the one field two runs never share
            text = json.dumps(doc)
        written = _written(out) if out.exists() else None
        runs[side] = (run.code, run.err.replace(str(out), "<OUT>").replace(shown, "<ROOT>"), text, written)
    if runs["there"] != runs["here"] and os.environ.get("SPILLWAY_DEBUG_PARITY"):
        Path(os.environ["SPILLWAY_DEBUG_PARITY"]).write_text(json.dumps(runs, indent=1))
    assert runs["there"] == runs["here"]
    if fx.name in REFUSED:
        assert runs["here"][0] == 1 and REFUSED[fx.name] in runs["here"][1], runs["here"][1]
    elif possible:
        assert runs["here"][0] == 0 and runs["here"][3], runs["here"][1]
    else:
        assert runs["here"][0] != 0 or runs["here"][3], runs["here"][1]  # refused, or a checkpoint written
    fs._filesystem.cache_clear()


def test_validate_walks_the_first_file_while_the_others_are_still_being_read(
    served: tuple[S3Server, Counter], monkeypatch: pytest.MonkeyPatch
) -> None:
    """validate of a remote checkpoint frames each channel-state file as soon as it has arrived: with one read in
    flight, every read after the first is held until a file has been walked, which happens only if the walk does
    not wait for the last file (held reads would time out, and this test fail, if it did)."""
    from spillway.formats.native import library
    from spillway.inspect.validate_engine import Engine

    assert library() is not None, "the C walker is built here (as everywhere the suite runs)"
    s3, _ = served
    for key, value in s3.env().items():
        monkeypatch.setenv(key, value)
    monkeypatch.setenv("SPILLWAY_STORAGE_READS", "1")
    fs._filesystem.cache_clear()
    fx = fixture_named("2.3.0-one-file-per-subtask")  # three channel-state files
    uri, rule = uploaded(s3, fx)
    walked = threading.Event()
    waited: list[bool] = []
    first = threading.Lock()
    walk_task, read_part = Engine.walk_task, fs._read_part

    def walk_and_tell(self: Engine, *args: Any) -> None:
        walked.set()
        walk_task(self, *args)

    def read_when_walked(*args: Any) -> int:
        if not first.acquire(blocking=False):  # every read but the very first
            waited.append(walked.wait(30))
        return read_part(*args)

    monkeypatch.setattr(Engine, "walk_task", walk_and_tell)
    monkeypatch.setattr(fs, "_read_part", read_when_walked)
    there = _in_process("validate", uri, "--rebase", rule, "--json")
    assert there.code == 0, there.output
    channel_files = len([p for p in fx.checkpoint_dir.iterdir() if p.name != "_metadata"])
    assert len(waited) == channel_files - 1 >= 2 and all(waited)
    fs._filesystem.cache_clear()


def test_a_remote_metadata_is_decoded_once(served: tuple[S3Server, Counter], monkeypatch: pytest.MonkeyPatch) -> None:
    """The loader takes the checkpoint materialize decoded (to learn which files to stand in for) instead of
    decoding the same _metadata again: the same checkpoint, half the decode."""
    from spillway.storage import load

    s3, _ = served
    for key, value in s3.env().items():
        monkeypatch.setenv(key, value)
    fs._filesystem.cache_clear()
    fx = fixture_named(FIXTURE)
    uri, rule = uploaded(s3, fx)
    decoded: list[str] = []

    def counted(data: bytes, file: str = "_metadata") -> Any:
        decoded.append(file)
        return decode_metadata(data, file)

    monkeypatch.setattr(fs, "decode_metadata", counted)
    monkeypatch.setattr(load, "decode_metadata", counted)
    loaded = load.load_checkpoint(uri, [rule])
    assert decoded == [f"{uri}/_metadata"]
    assert loaded.checkpoint == decode_metadata(fx.metadata.read_bytes())  # Flink's file, decoded here
    fs._filesystem.cache_clear()


def test_channel_state_is_framed_from_memory_and_written_to_disk_only_when_a_path_is_needed(
    served: tuple[S3Server, Counter], monkeypatch: pytest.MonkeyPatch
) -> None:
    """A remote checkpoint's channel-state file is read into memory, not into the working directory: its blob
    has Flink's bytes while no file exists at its local path; a reader that needs the path (a Spark worker, a
    copy) gets the file written there from memory, without a second request. With a budget of 0 MiB every
    file goes to disk."""
    from spillway.storage import blobs, load, remote_copies

    s3, counter = served
    for key, value in s3.env().items():
        monkeypatch.setenv(key, value)
    fs._filesystem.cache_clear()
    fx = fixture_named("2.3.0-one-file-per-subtask")
    uri, rule = uploaded(s3, fx)
    flink = {p.name: p.read_bytes() for p in fx.checkpoint_dir.iterdir() if p.name != "_metadata"}
    for budget, in_memory in (("512", True), ("0", False)):
        monkeypatch.setenv("SPILLWAY_STORAGE_MEMORY", budget)
        monkeypatch.setattr(fs, "_in_memory", 0)
        loaded = load.load_checkpoint(uri, [rule])
        handles = [h for h in leaf_stream_handles(loaded.checkpoint) if is_file_backed(h)]
        placed = {id(h): loaded.resolver.resolve(h) for h in handles}
        own = [h for h in handles if os.path.basename(placed[id(h)].local_text or "") in flink]
        counter.reset()
        seen: set[str] = set()
        for h in own:
            local = placed[id(h)].local_text
            name = os.path.basename(local)
            blob = blobs.open_delegate(loaded.resolver, h)
            assert blob is not None
            assert (remote_copies.held(local) is not None) == in_memory
            assert os.path.exists(local) != in_memory, budget
            assert blob.read_at(0, blob.size) == flink[name][h.start_pos : h.start_pos + blob.size]
            blob.close()
            seen.add(name)
        assert seen == set(flink)
        assert sorted(r.key.rsplit("/", 1)[1] for r in counter.of("GET")) == sorted(flink)  # one GET each
        for h in own:
            local = placed[id(h)].local_text
            remote_copies.ensure_local(local)
            assert Path(local).read_bytes() == flink[os.path.basename(local)] and remote_copies.held(local) is None
        assert sorted(r.key.rsplit("/", 1)[1] for r in counter.of("GET")) == sorted(flink)  # nothing fetched again
    fs._filesystem.cache_clear()
