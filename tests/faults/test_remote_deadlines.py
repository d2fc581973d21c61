"""Remote work within one deadline: a plan server (``preflight --plan http://…``) and an S3 endpoint
(``AWS_ENDPOINT_URL``) that never answer, that drip their answer one byte a second (each read well within
``--storage-timeout 3``, the whole answer days long: only a deadline for the whole request ends it) or one byte
every 5 s, or that redirect to ``file:///etc/passwd``. Each run ends within timeout x 3 + 10 s with exit 3
(storage), one error line naming what it tried to reach, and never the redirect target's content."""

from __future__ import annotations

from collections.abc import Callable
from contextlib import AbstractContextManager
from pathlib import Path

import pytest
from support.console import spillway
from support.endpoints import dripping_server, redirecting_server, silent_server
from support.fixtures import fixture_named

TIMEOUT = 3
LIMIT = TIMEOUT * 3 + 10
SERVERS: dict[str, Callable[[], AbstractContextManager[int]]] = {
    "silent": silent_server,
    "drip": lambda: dripping_server(interval=1.0),  # a byte a second: only a deadline for the whole request ends it
    "drip-5s": lambda: dripping_server(interval=5.0),  # slower than the timeout: a per-read limit ends it too
    "redirect": lambda: redirecting_server("file:///etc/passwd"),
}
FX = fixture_named("2.3.0-unaligned")
JOB = "0123456789abcdef0123456789abcdef"
AWS = {
    "AWS_ACCESS_KEY_ID": "testing",
    "AWS_SECRET_ACCESS_KEY": "testing",
    "AWS_REGION": "us-east-1",
    "AWS_EC2_METADATA_DISABLED": "true",
}


def _args_and_env(target: str, port: int) -> tuple[list[str], dict[str, str], str]:
    if target == "plan":
        url = f"http://127.0.0.1:{port}/jobs/{JOB}"
        return ["preflight", str(FX.checkpoint_dir), "--plan", url], {}, url
    uri = "s3://bucket/job/chk-3"
    return ["validate", uri], {**AWS, "AWS_ENDPOINT_URL": f"http://127.0.0.1:{port}"}, uri


@pytest.mark.timeout(LIMIT + 30)
@pytest.mark.parametrize("server", list(SERVERS))
@pytest.mark.parametrize("target", ["plan", "s3"])
def test_a_misbehaving_endpoint_ends_in_bounded_time_with_exit_3(tmp_path: Path, server: str, target: str) -> None:
    with SERVERS[server]() as port:
        args, env, reached = _args_and_env(target, port)
        done = spillway("--storage-timeout", str(TIMEOUT), *args, env=env, timeout=LIMIT + 5)
    assert done.seconds < LIMIT, f"{done.seconds:.1f}s: not bounded by one deadline\n{done.output}"
    assert "Traceback" not in done.output, done.output
    assert done.code == 3, f"exit {done.code}, not 3 (storage)\n{done.output}"
    errors = [line for line in done.err.splitlines() if line.startswith("error: ")]
    assert len(errors) == 1 and reached in errors[0], done.err
    assert "root:" not in done.output, "the redirect target's content must never be read"
