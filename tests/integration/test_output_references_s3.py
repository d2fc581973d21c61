"""The writers' reference check on files in an object store: one info call (HEAD) per file, on a real local
S3 server (moto); a missing object is named, and nothing is downloaded to find out."""

from __future__ import annotations

from pathlib import Path

import pytest
from support.endpoints import moto_s3, upload
from support.written import written

from spillway.formats.metadata_codec import decode_metadata, encode_metadata
from spillway.inspect.references import missing_references
from spillway.model.checkpoint import FileHandle, StreamHandle, StreamLeaf
from spillway.model.walk import transform_stream_handles

pytestmark = pytest.mark.timeout(120)


def test_remote_references_are_asked_for_and_a_missing_object_is_named(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    staging, job = written(tmp_path, "2.3.0-rocksdb-incremental")
    with moto_s3(buckets=("ckpt",)) as server:
        assert server.client is not None
        for key, value in server.env().items():
            monkeypatch.setenv(key, value)
        upload(server.client, job / "shared", "ckpt/job/shared")

        def remote(leaf: StreamLeaf) -> StreamHandle:
            if isinstance(leaf, FileHandle) and leaf.path.startswith(f"file:{job}/"):
                return leaf.with_file_name("s3://ckpt/job" + leaf.path[len(f"file:{job}") :])
            return leaf

        cp = decode_metadata((staging / "_metadata").read_bytes())
        transform_stream_handles(cp, remote)
        (staging / "_metadata").write_bytes(encode_metadata(cp))
        assert missing_references(staging, None) == []
        gone = sorted((job / "shared").iterdir())[0].name
        server.client.delete_file(f"ckpt/job/shared/{gone}")
        problems = missing_references(staging, None)
        assert problems and all(p.startswith(f"s3://ckpt/job/shared/{gone}: referenced by ") for p in problems)
        assert all("does not exist" in p for p in problems)
