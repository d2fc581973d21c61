"""Which copies of relocate --copy-data the store makes itself: only object to object on one store (one scheme;
spillway reaches every bucket of a scheme through one endpoint), and only what one S3 CopyObject may copy (5 GiB)."""

from __future__ import annotations

import pyarrow.fs as pafs

from spillway.storage import fs

GIB = 1 << 30


def s3_object(uri: str) -> fs.Location:
    # built by hand: no endpoint is contacted to construct the client
    client = pafs.S3FileSystem(region="us-east-1", endpoint_override="127.0.0.1:9", scheme="http")
    return fs.Location(uri, client, uri.removeprefix("s3://"))


def test_an_object_is_copied_by_the_store_to_another_bucket_or_prefix_of_the_same_store() -> None:
    source = s3_object("s3://a/job/shared/sst")
    assert fs.copies_in_store(source, "s3://b/moved/shared/sst", 100)
    assert fs.copies_in_store(source, "s3a://a/other/sst", 100)  # s3a is Flink's name for the same store
    assert fs.copies_in_store(source, "s3://b/x", 5 * GIB)  # CopyObject's own limit, inclusive


def test_other_stores_local_targets_and_objects_over_5_gib_pass_through_this_machine() -> None:
    source = s3_object("s3://a/job/shared/sst")
    assert not fs.copies_in_store(source, "gs://b/moved/sst", 100)
    assert not fs.copies_in_store(source, "/tmp/moved/sst", 100)
    assert not fs.copies_in_store(source, "file:///tmp/moved/sst", 100)
    assert not fs.copies_in_store(source, "s3://b/x", 5 * GIB + 1)
    local = fs.Location("/tmp/job/shared/sst", pafs.LocalFileSystem(), "/tmp/job/shared/sst")
    assert not fs.copies_in_store(local, "s3://b/moved/sst", 100)
