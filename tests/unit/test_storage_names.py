"""The names every part of spillway agrees on (spillway/storage/names.py): Flink's ``_metadata`` and ``chk-N``
(``AbstractFsCheckpointStorageAccess``: ``METADATA_FILE_NAME``, ``CHECKPOINT_DIR_PREFIX``), and which paths are on
another file system than this machine's (a URI's scheme, RFC 3986: a letter, then letters, digits, ``+ . -``)."""

from __future__ import annotations

from pathlib import Path

import pytest

from spillway.storage.names import CHK_DIR, METADATA, is_remote, scheme_of


def test_flinks_names() -> None:
    assert METADATA == "_metadata"
    assert [m.group(1) if (m := CHK_DIR.match(n)) else None for n in ("chk-0", "chk-12", "chk-", "xchk-1")] == [
        "0",
        "12",
        None,
        None,
    ]
    assert CHK_DIR.match("chk-1x") is None


@pytest.mark.parametrize(
    ("text", "scheme"),
    [
        ("s3://bucket/key", "s3"),
        ("S3A://bucket/key", "s3a"),
        ("hdfs://nn:8020/x", "hdfs"),
        ("file:///tmp/x", "file"),
        ("a+b.c-d://x", "a+b.c-d"),
        ("/tmp/x", None),
        ("file:/tmp/x", None),  # Flink's own spelling of a local path: no authority part
        ("1s3://bucket", None),  # a scheme starts with a letter
        ("s3:/bucket", None),
        ("x s3://bucket", None),  # only at the start
        ("", None),
    ],
    ids=lambda v: str(v).replace("/", "-").replace(":", "").replace(" ", "_") or "empty",
)
def test_the_scheme_of_a_uri(text: str, scheme: str | None) -> None:
    assert scheme_of(text) == scheme


def test_what_is_remote() -> None:
    assert is_remote("s3://b/k") and is_remote("GS://b/k") and is_remote("hdfs://nn/x")
    assert not is_remote("file:///tmp/x") and not is_remote("FILE:///tmp/x")
    assert not is_remote("/tmp/x") and not is_remote("file:/tmp/x") and not is_remote(Path("/tmp/x"))
    assert scheme_of(Path("/tmp/x")) is None
