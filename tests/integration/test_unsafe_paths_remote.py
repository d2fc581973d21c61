"""A crafted handle path in a remote checkpoint (moto S3): the working copy is never written outside its
directory and no path with a NUL is handed to the file system; every command answers in one line or JSON."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest
from support.console import spillway
from support.damaged import copy_fixture, rewrite
from support.endpoints import S3Server, moto_s3, upload

from spillway.model.checkpoint import is_file_backed
from spillway.model.walk import transform_stream_handles


@pytest.fixture(scope="module")
def s3() -> Iterator[S3Server]:
    with moto_s3(buckets=("ckpt",)) as server:
        yield server


@pytest.mark.parametrize("written", ["../../../../victim", "channel\0.bak"])
def test_a_remote_checkpoint_with_an_unsafe_relative_path(s3: S3Server, tmp_path: Path, written: str) -> None:
    copy = copy_fixture("2.3.0-unaligned", tmp_path / "src")
    done: list[bool] = []

    def change(h: object) -> object:
        if done or not is_file_backed(h):
            return h
        done.append(True)
        return h.with_file_name(written)

    rewrite(copy, lambda cp: transform_stream_handles(cp, change))
    assert s3.client is not None
    prefix = f"ckpt/{tmp_path.name}"
    upload(s3.client, copy.chk, prefix)
    for command in ("validate", "files", "dump"):
        run = spillway(command, f"s3://{prefix}", "--json", env=s3.env(), timeout=120)
        assert "Traceback" not in run.output and "embedded null byte" not in run.output, run.output
        assert run.code == 1, run.output
        doc = json.loads(run.out)
        assert doc["schema"] == "spillway.error/1" and "escapes the checkpoint directory" in doc["error"], doc
