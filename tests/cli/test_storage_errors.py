"""Storage that cannot be reached or read (issue 21, item 4): exit code 3, one line, no traceback, and
never a hang — every remote call is bounded by ``--storage-timeout`` / ``SPILLWAY_STORAGE_TIMEOUT``.

The endpoints are on 127.0.0.1: a port nothing listens on (connect refused) and a server that accepts
and never answers (only a read timeout ends the request). Runs the installed console script.
"""

from __future__ import annotations

import json

import pytest
from support.console import spillway
from support.endpoints import closed_port, silent_server

EXIT_STORAGE = 3  # docs/cli.md, "Exit codes"
NO_AWS = {
    "AWS_ACCESS_KEY_ID": "testing",
    "AWS_SECRET_ACCESS_KEY": "testing",
    "AWS_REGION": "us-east-1",
    "AWS_EC2_METADATA_DISABLED": "true",
}


def one_error_line(stderr: str, uri: str) -> str:
    lines = [line for line in stderr.splitlines() if line.strip()]
    assert len(lines) == 1, stderr
    assert lines[0].startswith(f"error: {uri}"), stderr
    assert "Traceback" not in stderr
    return lines[0]


@pytest.mark.parametrize("command", ["dump", "files", "validate"])
def test_a_refused_connection_is_a_storage_error_at_once(command: str) -> None:
    env = {**NO_AWS, "AWS_ENDPOINT_URL": f"http://127.0.0.1:{closed_port()}"}
    run = spillway(command, "s3://bucket/job/chk-1", env=env, timeout=60)
    assert run.code == EXIT_STORAGE, run.output
    one_error_line(run.err, "s3://bucket/job/chk-1")
    assert run.seconds < 20


@pytest.mark.parametrize("how", ["option", "environment"])
def test_a_silent_endpoint_is_given_up_after_the_timeout(how: str) -> None:
    timeout = 2.0
    with silent_server() as port:
        env = {**NO_AWS, "AWS_ENDPOINT_URL": f"http://127.0.0.1:{port}"}
        if how == "option":
            run = spillway("--storage-timeout", str(timeout), "dump", "s3://bucket/job/chk-1", "--json", env=env)
        else:
            env["SPILLWAY_STORAGE_TIMEOUT"] = str(timeout)
            run = spillway("dump", "s3://bucket/job/chk-1", "--json", env=env)
    assert run.code == EXIT_STORAGE, run.output
    one_error_line(run.err, "s3://bucket/job/chk-1")
    # it waited for the read timeout (the connection itself succeeds), and not much longer: one retry
    assert timeout <= run.seconds < 2 * timeout + 10
    doc = json.loads(run.out)
    assert doc["schema"] == "spillway.error/1"
    assert (doc["category"], doc["exit_code"], doc["kind"]) == ("storage", EXIT_STORAGE, "StorageError")


def test_the_timeout_must_be_a_positive_number() -> None:
    run = spillway("dump", "s3://bucket/job/chk-1", env={**NO_AWS, "SPILLWAY_STORAGE_TIMEOUT": "soon"})
    assert run.code == 2 and "SPILLWAY_STORAGE_TIMEOUT 'soon'" in run.err
    run = spillway("--storage-timeout", "0", "dump", "s3://bucket/job/chk-1")
    assert run.code == 2


def test_hdfs_without_a_client_says_what_is_missing_in_one_line() -> None:
    env = {"JAVA_HOME": "", "ARROW_LIBHDFS_DIR": "", "HADOOP_HOME": "", "CLASSPATH": ""}
    run = spillway("dump", "hdfs://nn:8020/flink/job/chk-1", env=env, timeout=60)
    assert run.code == EXIT_STORAGE, run.output
    line = one_error_line(run.err, "hdfs://nn:8020")
    assert "JAVA_HOME" in line and "libhdfs.so" in line and "CLASSPATH" in line
    assert "dlopen" not in run.output


def test_gcs_without_credentials_or_network_does_not_hang() -> None:
    """Was 900 s of silent retries: now bounded by the timeout (no credentials are configured here)."""
    env = {"GOOGLE_APPLICATION_CREDENTIALS": "", "CLOUD_STORAGE_EMULATOR_ENDPOINT": "", "SPILLWAY_STORAGE_TIMEOUT": "3"}
    run = spillway("files", "gs://nobucket/x/chk-1", env=env, timeout=60)  # a hang fails here (TimeoutExpired)
    assert run.code == EXIT_STORAGE, run.output
    one_error_line(run.err, "gs://nobucket/x/chk-1")
    assert run.seconds < 30


def test_a_client_without_a_read_timeout_is_stopped_by_the_watchdog() -> None:
    """GCS has no read timeout of its own: a server that never answers is given up after the timeout."""
    import time
    from datetime import timedelta

    import pyarrow.fs as pafs

    from spillway.errors import StorageError
    from spillway.storage import fs, timeouts

    with silent_server() as port:
        gcs = pafs.GcsFileSystem(
            anonymous=True, endpoint_override=f"127.0.0.1:{port}", scheme="http", retry_time_limit=timedelta(seconds=60)
        )
        timeouts.set_timeout(1)
        start = time.monotonic()
        try:
            with pytest.raises(StorageError, match=r"gs://b/x: cannot look it up: no answer within 3 s"):
                fs.info(fs.Location("gs://b/x", gcs, "b/x"))
        finally:
            timeouts.set_timeout(None)
        assert time.monotonic() - start < 10
