"""repair on object stores: a real S3-compatible server (moto, started here on a loopback port) holds the
checkpoints; spillway reads and writes them through pyarrow.fs (spillway/storage/fs.py)."""

from __future__ import annotations

import json
import os
from collections.abc import Iterator
from pathlib import Path

import pyarrow.fs as pafs
import pytest
from click.testing import CliRunner
from support.endpoints import moto_s3
from support.fixtures import fixture_named

from spillway.cli.app import app
from spillway.formats.metadata_codec import decode_metadata, encode_metadata
from spillway.repair.relocate import relocate
from spillway.storage import fs

runner = CliRunner()
FIXTURE = "2.3.0-rocksdb-incremental"  # FileStateHandles in shared/ plus a relative channel-state file


@pytest.fixture(scope="module")
def s3() -> Iterator[pafs.S3FileSystem]:
    with moto_s3(buckets=("bucket-a", "bucket-b")) as server:
        saved = {k: os.environ.get(k) for k in server.env()}
        os.environ.update(server.env())
        fs._filesystem.cache_clear()
        try:
            assert server.client is not None
            yield server.client
        finally:
            for k, v in saved.items():
                if v is None:
                    os.environ.pop(k, None)
                else:
                    os.environ[k] = v
            fs._filesystem.cache_clear()


def repair(*args: str) -> tuple[int, str]:
    res = runner.invoke(app, ["repair", *args])
    return res.exit_code, res.output


def objects(client: pafs.S3FileSystem, bucket: str) -> dict[str, bytes]:
    out = {}
    for i in client.get_file_info(pafs.FileSelector(bucket, recursive=True)):
        if i.type == pafs.FileType.File:
            with client.open_input_stream(i.path) as fh:
                out[i.path[len(bucket) + 1 :]] = fh.read()
    return out


@pytest.fixture(scope="module")
def in_bucket_a(s3: pafs.S3FileSystem) -> str:
    """The fixture uploaded to bucket A by relocate itself (local -> s3://, --copy-data)."""
    fx = fixture_named(FIXTURE)
    job = fx.info["job_id"]
    old = "file:" + fx.info["generated_at"] + "/checkpoints"
    uri = f"s3://bucket-a/flink/{job}/{fx.checkpoint_dir.name}"
    code, output = repair(
        "relocate", str(fx.checkpoint_dir), "--out", uri, "--from", old, "--to", "s3://bucket-a/flink", "--copy-data"
    )
    assert code == 0, output
    return uri


def test_relocate_between_buckets_with_copy_data(s3: pafs.S3FileSystem, in_bucket_a: str, tmp_path: Path) -> None:
    fx = fixture_named(FIXTURE)
    job = fx.info["job_id"]
    out = f"s3://bucket-b/moved/{job}/{fx.checkpoint_dir.name}"
    code, output = repair(
        "relocate",
        in_bucket_a,
        "--out",
        out,
        "--from",
        "s3://bucket-a/flink",
        "--to",
        "s3://bucket-b/moved",
        "--copy-data",
        "--json",
    )
    assert code == 0, output
    changes = {c["what"]: c["count"] for c in json.loads(output)["changes"]}
    assert changes["paths rewritten in FileStateHandle"] == 14
    assert changes["referenced files copied to their new location"] == 14
    assert changes["files published (each read back and compared)"] == 2  # _metadata + the relative file

    # Byte for byte: every data object is the fixture's file; _metadata is the original with only the prefix moved.
    stored = objects(s3, "bucket-b")
    local_root = fx.root / "checkpoints" / job
    expected = {
        f"moved/{job}/{p.relative_to(local_root).as_posix()}": p.read_bytes()
        for p in local_root.rglob("*")
        if p.is_file() and p.name != "_metadata"
    }
    meta_key = f"moved/{job}/{fx.checkpoint_dir.name}/_metadata"
    assert {k: v for k, v in stored.items() if k != meta_key} == expected
    original = decode_metadata(fx.metadata.read_bytes())
    want = relocate(original, "file:" + fx.info["generated_at"] + "/checkpoints", "s3://bucket-b/moved").checkpoint
    assert stored[meta_key] == encode_metadata(want)
    assert not [k for k in {**stored, **objects(s3, "bucket-a")} if "spillway" in k], "no temporary objects left"

    # Read back from s3://: spillway validate / dump of the written URI (the bytes were compared above).
    args = [out]
    res = runner.invoke(app, ["validate", *args, "--json"])
    assert res.exit_code == 0, res.output
    summary = json.loads(res.stdout)["summary"]
    assert summary["files_checked"] == 15  # exit code 0: no error findings
    res = runner.invoke(app, ["dump", *args, "--json"])
    assert res.exit_code == 0, res.output
    assert "s3://bucket-b/moved/" in res.stdout and "bucket-a" not in res.stdout


def test_strip_from_s3_to_s3(s3: pafs.S3FileSystem, in_bucket_a: str) -> None:
    """Any repair reads and writes URIs: strip all channel state of the bucket-A checkpoint into bucket B."""
    out = "s3://bucket-b/stripped/chk-3"
    code, output = repair("strip-channel-state", in_bucket_a, "--out", out, "--json")
    assert code == 0, output
    assert json.loads(output)["records_dropped"] is None or json.loads(output)["bytes_dropped"] > 0
    stored = objects(s3, "bucket-b")
    assert [k for k in stored if k.startswith("stripped/")] == ["stripped/chk-3/_metadata"]
    cp = decode_metadata(stored["stripped/chk-3/_metadata"])
    assert not any(s.input_channel_state or s.result_subpartition_state for o in cp.operators for s in o.subtasks)


def test_failures_are_clear_and_leave_nothing(s3: pafs.S3FileSystem, in_bucket_a: str) -> None:
    before = {b: objects(s3, b) for b in ("bucket-a", "bucket-b")}

    # missing bucket for the output: a wrong path, exit 2 like a missing local path (not 3: the store answered)
    code, output = repair("strip-channel-state", in_bucket_a, "--out", "s3://no-such-bucket/x/chk-3")
    assert code == 2 and "bucket 'no-such-bucket' does not exist" in output and "Traceback" not in output

    # missing source object: exit 2, as for a local path that does not exist
    code, output = repair("strip-channel-state", "s3://bucket-a/nothing/chk-9", "--out", "s3://bucket-b/y/chk-9")
    assert code == 2 and "s3://bucket-a/nothing/chk-9: no such file or directory" in output

    # the output exists already
    code, output = repair("strip-channel-state", in_bucket_a, "--out", in_bucket_a)
    assert code == 1 and "never overwrites" in output

    # a referenced object is missing: copying it to its new place fails, nothing is left in bucket B
    job = fixture_named(FIXTURE).info["job_id"]
    shared = sorted(k for k in before["bucket-a"] if k.startswith(f"flink/{job}/shared/"))
    s3.copy_file(f"bucket-a/{shared[0]}", "bucket-a/keep-aside")
    s3.delete_file(f"bucket-a/{shared[0]}")
    try:
        code, output = repair(
            "relocate",
            in_bucket_a,
            "--out",
            "s3://bucket-b/broken/chk-3",
            "--from",
            "s3://bucket-a/flink",
            "--to",
            "s3://bucket-b/broken",
            "--copy-data",
        )
        # The missing object is a finding about the source (validate: missing file), not a storage failure.
        assert code == 1, output
        assert "missing file" in output and "Traceback" not in output
    finally:
        s3.move("bucket-a/keep-aside", f"bucket-a/{shared[0]}")
    assert {b: objects(s3, b) for b in ("bucket-a", "bucket-b")} == before


def test_rescale_between_buckets_equals_local_rescale(s3: pafs.S3FileSystem, tmp_path: Path) -> None:
    """spillway rescale reads s3://bucket-a and publishes to s3://bucket-b; the objects equal a local rescale."""
    fx = fixture_named("2.3.0-counted")
    chk = fx.checkpoint_dir
    for f in chk.rglob("*"):
        if f.is_file():
            with s3.open_output_stream(f"bucket-a/counted/{chk.name}/{f.relative_to(chk)}") as out:
                out.write(f.read_bytes())
    plan = str(fx.root / "jobgraph.json")
    args = ["-p", "parse=3", "-p", "count=3", "--key", "count=tuple:0:long", "--master", "inprocess", "--plan", plan]
    res = runner.invoke(app, ["rescale", f"s3://bucket-a/counted/{chk.name}", "--out", "s3://bucket-b/rescaled", *args])
    assert res.exit_code == 0, res.output
    local = tmp_path / "local"
    res = runner.invoke(app, ["rescale", str(chk), "--out", str(local), *args])
    assert res.exit_code == 0, res.output
    remote = {k[len("rescaled/") :]: v for k, v in objects(s3, "bucket-b").items() if k.startswith("rescaled/")}
    assert remote == {str(p.relative_to(local)): p.read_bytes() for p in local.rglob("*") if p.is_file()}
    res = runner.invoke(app, ["rescale", f"s3://bucket-a/counted/{chk.name}", "--out", "s3://no-such-bucket/x", *args])
    assert res.exit_code == 2 and "Traceback" not in res.output


def test_files_and_diff_on_s3(s3: pafs.S3FileSystem, in_bucket_a: str) -> None:
    """`files` and `diff` read a checkpoint in a bucket as they read a local one (names from oracle.json)."""
    fx = fixture_named(FIXTURE)
    oracle = json.loads(fx.oracle.read_text())
    job, chk = fx.info["job_id"], fx.checkpoint_dir.name
    expected: set[str] = set()

    def walk(node: object) -> None:
        if isinstance(node, dict):
            if node.get("type") == "FileStateHandle":
                expected.add(str(node["path"]).split(f"/{job}/", 1)[1])
            elif node.get("type") == "RelativeFileStateHandle":
                expected.add(f"{chk}/{node['relative_path']}")
            for v in node.values():
                walk(v)
        elif isinstance(node, list):
            for v in node:
                walk(v)

    walk(oracle["operators"])
    res = runner.invoke(app, ["files", in_bucket_a, "--json"])
    assert res.exit_code == 0, res.output
    doc = json.loads(res.stdout)
    assert {f["shown"] for f in doc["files"]} == expected
    for f in doc["files"]:
        assert f["area"] in ("shared", chk) and f["exists"], f
        assert f["size"] == (fx.checkpoint_dir.parent / f["shown"]).stat().st_size
        if f["area"] == "shared":
            assert f["path"].startswith(f"s3://bucket-a/flink/{job}/shared/")
    assert doc["checkpoints"][0]["groups"]["external"]["files"] == 0
    same = runner.invoke(app, ["diff", in_bucket_a, in_bucket_a])
    assert same.exit_code == 0, same.output


@pytest.mark.parametrize("name", ["1.10.3-aligned", "1.10.3-rocksdb-incremental"])
def test_moving_a_whole_job_into_a_bucket(s3: pafs.S3FileSystem, name: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """Flink 1.10 writes absolute files into its own chk-N: moved with the job they land inside the output,
    are published with it, and the result validates from the bucket; a failed self-check leaves nothing."""
    from spillway.repair import workflow
    from spillway.storage.safe_writer import WriteError

    fx = fixture_named(name)
    job = fx.info["job_id"]
    old = "file:" + fx.info["generated_at"] + "/checkpoints/" + job
    prefix = f"jobmove-{name}"

    def move(to: str) -> tuple[int, str]:
        new_job = f"s3://bucket-b/{to}/{job}"
        out = f"{new_job}/{fx.checkpoint_dir.name}"
        return repair("relocate", str(fx.checkpoint_dir), "--out", out, "--from", old, "--to", new_job, "--copy-data")

    def refuse(*args: object, **kwargs: object):
        def check(tmp: Path, plan: object) -> None:
            raise WriteError("self-check: injected failure")

        return check

    monkeypatch.setattr(workflow, "validated_output", refuse)
    code, output = move(f"{prefix}-failed")
    assert code == 1 and "injected failure" in output, output
    assert not [k for k in objects(s3, "bucket-b") if k.startswith(f"{prefix}-failed/")]
    monkeypatch.undo()

    code, output = move(prefix)
    assert code == 0, output
    written = {k: v for k, v in objects(s3, "bucket-b").items() if k.startswith(f"{prefix}/")}
    local = {
        f"{prefix}/{job}/{p.relative_to(fx.checkpoint_dir.parent).as_posix()}": p.read_bytes()
        for p in fx.checkpoint_dir.parent.rglob("*")
        if p.is_file() and p.name != "_metadata"
    }
    assert {k: v for k, v in written.items() if not k.endswith("/_metadata")} == local
    res = runner.invoke(app, ["validate", f"s3://bucket-b/{prefix}/{job}/{fx.checkpoint_dir.name}", "--json"])
    assert res.exit_code == 0 and json.loads(res.output)["ok"], res.output
