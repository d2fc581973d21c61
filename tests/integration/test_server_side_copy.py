"""``repair relocate --copy-data`` from one bucket to another on the same S3 store: the store copies each
referenced file itself (CopyObject), so not one byte of it is read by spillway (counted at the server,
tests/support/counting_s3.py), and what lands at the new place is Flink's file byte for byte."""

from __future__ import annotations

import json

import pyarrow.fs as pafs
from support.console import spillway
from support.counting_s3 import counting_s3
from support.endpoints import upload
from support.fixtures import fixture_named

FIXTURE = "2.3.0-rocksdb-incremental"  # keyed state as FileStateHandles in the job's shared/ directory


def test_relocate_copy_data_on_one_store_copies_in_the_store() -> None:
    fx = fixture_named(FIXTURE)
    root = fx.root / "checkpoints"  # where Flink wrote: <job>/chk-N and <job>/shared
    job = fx.info["job_id"]
    shared = sorted((root / job / "shared").iterdir())
    assert shared, "the fixture's keyed state is in shared/"
    with counting_s3(buckets=("ckpt", "moved")) as (s3, counter):
        assert s3.client is not None
        upload(s3.client, root, "ckpt/flink")
        src = f"s3://ckpt/flink/{job}/{fx.checkpoint_dir.name}"
        flink_wrote = "file:" + fx.info["generated_at"] + "/checkpoints"
        out = f"s3://moved/flink/{job}/{fx.checkpoint_dir.name}"
        counter.reset()
        run = spillway(
            "repair",
            "relocate",
            src,
            "--rebase",
            f"{flink_wrote}=s3://ckpt/flink",
            "--out",
            out,
            "--from",
            flink_wrote,
            "--to",
            "s3://moved/flink",
            "--copy-data",
            "--json",
            env=s3.env(),
            timeout=600,
        )
        assert run.code == 0, run.output
        changes = {c["what"]: c["count"] for c in json.loads(run.out)["changes"]}
        assert changes["referenced files copied to their new location"] == len(shared)

        source_keys = {f"ckpt/flink/{job}/shared/{p.name}" for p in shared}
        moved_keys = {f"moved/flink/{job}/shared/{p.name}" for p in shared}
        assert not counter.keys_read() & source_keys, "a copied file's bytes were read by spillway"
        assert not counter.keys_read() & moved_keys, "a copy's bytes were read back by spillway"
        into_shared = [f"{r.bucket}/{r.key}" for r in counter.of("COPY") if f"/{job}/shared/" in r.key]
        # one copy per file to a temporary name, one more to move it into place (S3 has no rename)
        assert {k for k in into_shared if not k.rpartition("/")[2].startswith(".")} == moved_keys
        assert len(into_shared) == 2 * len(shared)
        assert not counter.of("PUT") or all(f"{r.bucket}/{r.key}" not in moved_keys for r in counter.of("PUT"))

        for p in shared:  # Flink's bytes at the new place, nothing left under a temporary name
            with s3.client.open_input_stream(f"moved/flink/{job}/shared/{p.name}") as fh:
                assert fh.read() == p.read_bytes(), p.name
        listed = s3.client.get_file_info(pafs.FileSelector("moved", recursive=True))
        assert not [i.path for i in listed if "spillway" in i.path], "temporary objects left"
        assert s3.client.get_file_info("ckpt/flink").type == pafs.FileType.Directory  # the source stays

        # the relocated checkpoint names the copies, and validate finds them where they are
        check = spillway("validate", out, "--json", env=s3.env())
        assert check.code == 0, check.output
        files = spillway("files", out, "--json", env=s3.env())
        paths = {f["path"] for f in json.loads(files.out)["files"]}
        assert {f"s3://{k}" for k in moved_keys} <= paths


def test_a_copy_refused_midway_leaves_only_what_was_there() -> None:
    """A destination already holding other bytes: refused in one line naming it, and every copy this run made
    before it is deleted again (the store keeps only what it held before). Buckets of its own: moto's objects
    outlive a server within one process."""
    fx = fixture_named(FIXTURE)
    root = fx.root / "checkpoints"
    job = fx.info["job_id"]
    shared = sorted((root / job / "shared").iterdir())
    taken = f"refused-dst/flink/{job}/shared/{shared[-1].name}"  # the last one copied (copies go in key order)
    with counting_s3(buckets=("refused-src", "refused-dst")) as (s3, _):
        assert s3.client is not None
        upload(s3.client, root, "refused-src/flink")
        with s3.client.open_output_stream(taken) as fh:
            fh.write(b"someone else's object")
        flink_wrote = "file:" + fx.info["generated_at"] + "/checkpoints"
        run = spillway(
            "repair",
            "relocate",
            f"s3://refused-src/flink/{job}/{fx.checkpoint_dir.name}",
            "--rebase",
            f"{flink_wrote}=s3://refused-src/flink",
            "--out",
            f"s3://refused-dst/flink/{job}/{fx.checkpoint_dir.name}",
            "--from",
            flink_wrote,
            "--to",
            "s3://refused-dst/flink",
            "--copy-data",
            env=s3.env(),
            timeout=600,
        )
        assert run.code != 0
        assert run.err.strip().splitlines() == [f"error: s3://{taken}: exists with different content; not overwritten"]
        listed = s3.client.get_file_info(pafs.FileSelector("refused-dst", recursive=True))
        assert [i.path for i in listed if i.type == pafs.FileType.File] == [taken]
        with s3.client.open_input_stream(taken) as fh:
            assert fh.read() == b"someone else's object"
