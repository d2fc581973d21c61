"""A store that answers, but too slowly to ever finish (issue 29, item 6), through the installed console script:
``spillway --storage-timeout 2 validate s3://…`` against moto behind a proxy that, once the client asks for one
object, hands out its answer one byte every 0.2 s (fast enough for curl's low-speed limit, so only a deadline
on the transfer ends it). The run ends within the documented bound (the call's 2 × 2 s + 2 s, plus a second
per started MiB, plus the start-up), exit 3, one line naming the object's URI; the source on the store is
untouched. (A client without a read timeout of its own, GCS: tests/cli/test_storage_errors.py and
tests/unit/test_transfer_deadline.py.)
"""

from __future__ import annotations

import json
from collections.abc import Iterator

import pytest
from support.console import Run, spillway
from support.endpoints import S3Server, dripping_proxy, moto_s3, upload
from support.fixtures import fixture_named

EXIT_STORAGE = 3  # docs/cli.md, "Exit codes"
TIMEOUT = 2.0
S3_CALL = 2 * TIMEOUT + 2  # docs/cli.md: S3 retries once; the watchdog waits 2 s past the client's timeouts
MARGIN = 8.0  # start-up, the calls before the slow one, a busy machine
FIXTURE = fixture_named("2.3.0-unaligned")
CHK = "s3://ckpt/job/chk-3"


@pytest.fixture(scope="module")
def s3() -> Iterator[S3Server]:
    with moto_s3(buckets=("ckpt",)) as server:
        assert server.client is not None
        upload(server.client, FIXTURE.checkpoint_dir, "ckpt/job/chk-3")
        yield server


def one_storage_error(run: Run, uri: str) -> str:
    assert run.code == EXIT_STORAGE, run.output
    lines = [line for line in run.err.splitlines() if line.strip()]
    assert len(lines) == 1 and lines[0].startswith(f"error: {uri}: "), run.err
    assert "Traceback" not in run.output
    doc = json.loads(run.out)
    assert (doc["category"], doc["exit_code"]) == ("storage", EXIT_STORAGE)
    return lines[0]


@pytest.mark.timeout(120)
@pytest.mark.parametrize("name", ["_metadata", "data file"])
def test_a_dripping_object_store_read_ends_at_its_deadline(s3: S3Server, name: str) -> None:
    if name == "data file":
        name = next(p.name for p in FIXTURE.checkpoint_dir.iterdir() if p.name != "_metadata")
    size = (FIXTURE.checkpoint_dir / name).stat().st_size
    assert s3.client is not None
    with dripping_proxy(s3.port, f"GET /ckpt/job/chk-3/{name} ".encode()) as port:
        env = {**s3.env(), "AWS_ENDPOINT_URL": f"http://127.0.0.1:{port}"}
        run = spillway("--storage-timeout", str(TIMEOUT), "validate", CHK, "--json", env=env, timeout=100)
    line = one_storage_error(run, f"{CHK}/{name}")
    assert "--storage-timeout" in line, line  # the setting that bounds it
    assert TIMEOUT <= run.seconds < S3_CALL + -(-size // (1 << 20)) + MARGIN, run.seconds
    # the source is as it was
    with s3.client.open_input_stream(f"ckpt/job/chk-3/{name}") as stored:
        assert stored.read() == (FIXTURE.checkpoint_dir / name).read_bytes()
