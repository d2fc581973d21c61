"""Opening a checkpoint kept in an object store (spillway/storage/load.py's remote paths) on a local S3 server
(moto): read from a local working copy, shown by its URIs; a job directory's checkpoints listed as URIs; a local
checkpoint whose files were moved to the store (``--rebase file:/x=s3://…``) read from a local mirror. The
expected files are those Flink named (the fixture's oracle.json) and wrote."""

from __future__ import annotations

import json
import shutil
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from support.endpoints import S3Server, moto_s3, upload
from support.fixtures import fixture_named, flink_files

from spillway.model.checkpoint import RelativeFileHandle
from spillway.storage.load import job_checkpoints, load_checkpoint, load_newest_readable

FIXTURE = "2.3.0-unaligned"  # its channel state: relative files inside chk-3
KEYED = "1.10.3-aligned"  # absolute files inside chk-3


# spillway keeps one store client per bucket for the process; a process forked after an earlier server ended (a
# mutation run) would still hold that server's client. A bucket named after its server's port is never one an
# earlier client knows.
@pytest.fixture(scope="session")
def server() -> Iterator[S3Server]:
    with moto_s3() as s3:
        assert s3.client is not None
        s3.client.create_dir(f"ckpt-{s3.port}")
        yield s3


@pytest.fixture
def bucket(s3: S3Server) -> str:
    return f"ckpt-{s3.port}"


@pytest.fixture
def s3(server: S3Server, monkeypatch: pytest.MonkeyPatch) -> S3Server:
    for key, value in server.env().items():
        monkeypatch.setenv(key, value)
    return server


def test_a_checkpoint_on_a_store_is_read_from_a_local_copy_and_shown_by_its_uris(s3: S3Server, bucket: str) -> None:
    fx = fixture_named(FIXTURE)
    chk = fx.checkpoint_dir
    assert s3.client is not None
    upload(s3.client, chk.parent, f"{bucket}/one/{chk.parent.name}")
    uri = f"s3://{bucket}/one/{chk.parent.name}/{chk.name}"
    loaded = load_checkpoint(uri)
    assert loaded.location.uri == f"{uri}/_metadata" and loaded.location.shown == f"{uri}/_metadata"
    assert loaded.location.metadata_path.read_bytes() == fx.metadata.read_bytes()
    assert any(p.name.startswith("spillway-remote-") for p in loaded.location.metadata_path.parents)  # a new one
    names = flink_files(FIXTURE)[1]
    assert loaded.survey_files() == (len(names), 0)
    for name in names:
        assert loaded.resolver.shown_text(RelativeFileHandle(name, 0)) == f"{uri}/{name}"


def test_a_jobs_checkpoints_on_a_store_are_listed_and_the_newest_readable_picked(s3: S3Server, bucket: str) -> None:
    fx = fixture_named(FIXTURE)
    chk = fx.checkpoint_dir
    assert s3.client is not None
    job = f"{bucket}/two/{chk.parent.name}"
    upload(s3.client, chk.parent, job)
    with s3.client.open_output_stream(f"{job}/chk-9/_metadata") as out:
        out.write(b"\x00\x00\x00\x01 not a checkpoint")
    assert job_checkpoints(f"s3://{job}") == [f"s3://{job}/{chk.name}", f"s3://{job}/chk-9"]
    loaded, damaged = load_newest_readable(f"s3://{job}")
    assert loaded.location.uri == f"s3://{job}/{chk.name}/_metadata"
    assert [d.checkpoint for d in damaged] == [f"s3://{job}/chk-9"]
    assert loaded.location.note == f"picked the newest readable of 2 checkpoints: {chk.name} (1 newer damaged)"


def test_a_local_checkpoint_whose_files_moved_to_the_store_reads_them_from_a_mirror(
    s3: S3Server, bucket: str, tmp_path: Path
) -> None:
    fx = fixture_named(KEYED)
    root = tmp_path / fx.name
    shutil.copytree(fx.root, root)
    chk = root / fx.info["checkpoint"]
    flink = json.loads((fx.root / "oracle.json").read_text())
    files = sorted({p.name for p in chk.iterdir() if p.name != "_metadata"})
    assert files
    assert s3.client is not None
    for name in files:
        with s3.client.open_output_stream(f"{bucket}/moved/{name}") as out:
            out.write((chk / name).read_bytes())
        (chk / name).unlink()  # only on the store now
    written = _flink_dir(flink)
    loaded = load_checkpoint(chk, [f"{written}=s3://{bucket}/moved"], workdir=tmp_path / "work")
    assert loaded.survey_files() == (len(files), 0)
    resolved = loaded.resolve_files()
    assert {r.via for r in resolved.values()} == {f"s3://{bucket}/moved/{n}" for n in files}
    assert all(r.local is not None and r.local.is_relative_to(tmp_path / "work" / "mirror") for r in resolved.values())
    assert loaded.unmatched_rebase == []


def _flink_dir(node: Any) -> str:
    """The directory Flink wrote the keyed state files into (every absolute path of the fixture's oracle.json)."""
    paths: set[str] = set()

    def walk(n: Any) -> None:
        if isinstance(n, dict):
            if isinstance(n.get("path"), str) and n.get("type", "").endswith("StateHandle"):
                paths.add(n["path"].rpartition("/")[0])
            for v in n.values():
                walk(v)
        elif isinstance(n, list):
            for v in n:
                walk(v)

    walk(node)
    (only,) = paths
    return only
