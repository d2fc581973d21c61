"""Checkpoints on a real S3-compatible server (moto on 127.0.0.1), read like local ones (issue 21, item 4):
``files`` and ``dump`` read every ``chk-N`` of a remote job directory, pass over a damaged one, honour a
``file:`` -> ``s3://`` rebase, show the user's URIs (never the local working copy), and a server that
refuses the request gives exit code 3 at once.

Expected values come from the fixtures' own files and ``oracle.json``. Runs the installed console script.
"""

from __future__ import annotations

import json
import shutil
from collections.abc import Iterator
from pathlib import Path

import pytest
from support.console import spillway
from support.endpoints import S3Server, moto_s3, upload
from support.fixtures import Fixture, fixture_named

EXIT_STORAGE = 3  # docs/cli.md, "Exit codes"
TEMPORARY = "spillway-remote-"  # the prefix of spillway's local working copies: never shown


@pytest.fixture(scope="module")
def s3() -> Iterator[S3Server]:
    with moto_s3(buckets=("ckpt",)) as server:
        yield server


def oracle_operator_ids(fx: Fixture) -> list[str]:
    return sorted(op["operator_id"] for op in json.loads(fx.oracle.read_text())["operators"])


def test_a_store_that_refuses_without_credentials_gives_exit_3_quickly() -> None:
    with moto_s3(authenticate=True) as server:
        env = {
            "AWS_ENDPOINT_URL": server.url,
            "AWS_REGION": "us-east-1",
            "AWS_ACCESS_KEY_ID": "",
            "AWS_SECRET_ACCESS_KEY": "",
            "AWS_SESSION_TOKEN": "",
            "AWS_SHARED_CREDENTIALS_FILE": "/nonexistent",
            "AWS_CONFIG_FILE": "/nonexistent",
            "AWS_EC2_METADATA_DISABLED": "true",
        }
        run = spillway("dump", "s3://ckpt/job/chk-1", "--json", env=env, timeout=120)
    assert run.code == EXIT_STORAGE, run.output
    lines = [line for line in run.err.splitlines() if line.strip()]
    assert len(lines) == 1 and lines[0].startswith("error: s3://ckpt/job/chk-1: "), run.err
    assert json.loads(run.out)["category"] == "storage"
    assert run.seconds < 15  # was 14 s of retries before giving up with exit 1


def test_a_remote_job_directory_is_read_like_a_local_one(s3: S3Server, tmp_path: Path) -> None:
    fx = fixture_named("2.3.0-unaligned")
    job = tmp_path / "job"
    for name in ("chk-2", "chk-3", "chk-4"):
        shutil.copytree(fx.checkpoint_dir, job / name)
    (job / "chk-4" / "_metadata").write_bytes(fx.metadata.read_bytes()[:100])  # a truncated newest chk-N
    assert s3.client is not None
    upload(s3.client, job, "ckpt/flink/job")
    uri = "s3://ckpt/flink/job"
    own = {p.name: p.stat().st_size for p in fx.checkpoint_dir.iterdir() if p.name != "_metadata"}

    files = spillway("files", uri, "--json", env=s3.env())
    assert files.code == 1, files.output  # a damaged checkpoint is a finding
    doc = json.loads(files.out)
    assert [c["directory"] for c in doc["checkpoints"]] == ["chk-2", "chk-3"]
    assert [c["metadata"] for c in doc["checkpoints"]] == [f"{uri}/chk-2/_metadata", f"{uri}/chk-3/_metadata"]
    assert [d["checkpoint"] for d in doc["damaged"]] == [f"{uri}/chk-4"]
    assert doc["missing"] == []
    for i, chk in enumerate(("chk-2", "chk-3")):
        mine = {f["path"]: f["size"] for f in doc["files"] if i in f["checkpoints"]}
        assert mine == {f"{uri}/{chk}/{name}": size for name, size in own.items()}
    text = spillway("files", uri, env=s3.env())
    assert text.code == 1 and f"{uri}/chk-4: damaged, left out" in text.err

    dump = spillway("dump", uri, "--json", env=s3.env())
    assert dump.code == 1, dump.output
    ddoc = json.loads(dump.out)
    assert ddoc["source"]["metadata_path"] == f"{uri}/chk-3/_metadata"
    assert [d["checkpoint"] for d in ddoc["source"]["damaged"]] == [f"{uri}/chk-4"]
    assert sorted(op["operator_id"] for op in ddoc["operators"]) == oracle_operator_ids(fx)
    tree = spillway("dump", uri, "--tree", env=s3.env())
    for run in (files, text, dump, tree):
        assert TEMPORARY not in run.out + run.err


def test_a_file_to_s3_rebase_is_honoured_by_files(s3: S3Server, tmp_path: Path) -> None:
    """The chk-N is local, the job's shared/ was moved to the bucket: the rule sends file:/… there."""
    fx = fixture_named("2.3.0-rocksdb-incremental")
    job_id = fx.info["job_id"]
    shared = fx.root / "checkpoints" / job_id / "shared"
    assert s3.client is not None
    upload(s3.client, shared, f"ckpt/moved/{job_id}/shared")
    chk = tmp_path / fx.checkpoint_dir.name
    shutil.copytree(fx.checkpoint_dir, chk)
    rule = f"{fx.info['generated_at']}/checkpoints=s3://ckpt/moved"

    run = spillway("files", str(chk), "--rebase", rule, "--json", env=s3.env())
    assert run.code == 0, run.output
    doc = json.loads(run.out)
    assert doc["missing"] == []
    remote = {f["path"]: f["size"] for f in doc["files"] if f["path"].startswith("s3://")}
    assert remote == {f"s3://ckpt/moved/{job_id}/shared/{p.name}": p.stat().st_size for p in shared.iterdir()}
    assert doc["checkpoints"][0]["rebased"] == [{"from": rule.split("=")[0], "to": "s3://ckpt/moved", "paths": 14}]
    assert TEMPORARY not in run.out + run.err


def test_a_remote_root_holding_one_job_is_found_like_a_local_one(s3: S3Server, tmp_path: Path) -> None:
    """<root>/<job-id>/chk-N: the root names the job's newest checkpoint, in a bucket as on disk; a root holding
    two jobs is a usage error naming both, in a bucket as on disk."""
    fx = fixture_named("2.3.0-unaligned")
    job = fx.info["job_id"]
    root = tmp_path / "root"
    shutil.copytree(fx.checkpoint_dir, root / job / fx.checkpoint_dir.name)
    assert s3.client is not None
    upload(s3.client, root, "ckpt/one-job")
    remote = spillway("dump", "s3://ckpt/one-job", "--json", env=s3.env())
    local = spillway("dump", str(root), "--json", env=s3.env())
    assert remote.code == local.code == 0, remote.output + local.output
    meta = f"{job}/{fx.checkpoint_dir.name}/_metadata"
    assert json.loads(remote.out)["source"]["metadata_path"] == f"s3://ckpt/one-job/{meta}"
    assert json.loads(local.out)["source"]["metadata_path"] == f"{root}/{meta}"

    shutil.copytree(fx.checkpoint_dir, root / "other-job" / fx.checkpoint_dir.name)
    upload(s3.client, root / "other-job", "ckpt/one-job/other-job")
    for where in ("s3://ckpt/one-job", str(root)):
        run = spillway("dump", where, env=s3.env())
        assert run.code == 2, run.output
        assert f"{where}: holds checkpoints of several jobs ({job}, other-job); name one of them" in run.err
