"""A JobManager's REST API that does not answer properly (``preflight --plan http://HOST:PORT/jobs/ID`` and a job's
URL as the checkpoint): one deadline for the whole request, whatever the server does.

Servers on 127.0.0.1 (tests/support/endpoints.py): one that never answers, one that answers one byte every few
seconds (each read gets a byte long before a per-read timeout, so only a deadline on the whole request ends it),
ones that redirect elsewhere (never followed), and a plain HTTP server serving a fixture's plan (the request
itself works). Each run must end within the timeout and a start-up margin (wall time asserted), exit 3, one line
naming the URL; pytest-timeout fails a hang instead of stalling the suite.
"""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest
from support.console import Run, spillway
from support.endpoints import dripping_server, redirecting_server, silent_server

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures"
FIXTURE = FIXTURES / "2.3.0-counted"
CHECKPOINT = str(next(FIXTURE.glob("checkpoints/*/chk-*")))
PLAN = FIXTURE / "jobgraph.json"
JOB = "a" * 32
EXIT_STORAGE, EXIT_USAGE = 3, 2  # docs/cli.md, "Exit codes"
TIMEOUT = 2.0
MARGIN = 6.0  # the console script's start-up and exit on a busy machine


def job_url(port: int) -> str:
    return f"http://127.0.0.1:{port}/jobs/{JOB}"


def preflight(plan: str, *global_options: str, checkpoint: str = CHECKPOINT, env: dict[str, str] | None = None) -> Run:
    return spillway(*global_options, "preflight", checkpoint, "--plan", plan, "--json", env=env, timeout=120)


def storage_failure(run: Run, url: str) -> str:
    """The run failed as unreachable storage: exit 3, one line on stderr naming ``url``, the JSON error document."""
    assert run.code == EXIT_STORAGE, run.output
    lines = [line for line in run.err.splitlines() if line.strip()]
    assert len(lines) == 1 and lines[0].startswith(f"error: {url}"), run.err
    assert "Traceback" not in run.output
    doc = json.loads(run.out)
    assert (doc["schema"], doc["category"], doc["exit_code"]) == ("spillway.error/1", "storage", EXIT_STORAGE)
    return lines[0]


@pytest.mark.timeout(60)
@pytest.mark.parametrize("how", ["option", "environment"])
def test_a_dripping_jobmanager_is_given_up_at_the_deadline(how: str) -> None:
    with dripping_server(interval=0.5) as port:
        if how == "option":
            run = preflight(job_url(port), "--storage-timeout", str(TIMEOUT))
        else:
            run = preflight(job_url(port), env={"SPILLWAY_STORAGE_TIMEOUT": str(TIMEOUT)})
    line = storage_failure(run, f"{job_url(port)}/plan")
    assert f"no complete answer within {TIMEOUT:g} s" in line and "--storage-timeout" in line, line
    assert TIMEOUT <= run.seconds < TIMEOUT + MARGIN, run.seconds


@pytest.mark.timeout(60)
def test_a_dripping_jobmanager_asked_for_its_latest_checkpoint_is_given_up_at_the_deadline() -> None:
    with dripping_server(interval=0.5) as port:
        run = preflight(str(PLAN), "--storage-timeout", str(TIMEOUT), checkpoint=job_url(port))
    line = storage_failure(run, f"{job_url(port)}/checkpoints")
    assert f"within {TIMEOUT:g} s" in line, line
    assert TIMEOUT <= run.seconds < TIMEOUT + MARGIN, run.seconds


@pytest.mark.timeout(60)
def test_a_jobmanager_that_never_answers_is_given_up_at_the_deadline() -> None:
    with silent_server() as port:
        run = preflight(job_url(port), "--storage-timeout", str(TIMEOUT))
    line = storage_failure(run, f"{job_url(port)}/plan")
    assert f"within {TIMEOUT:g} s" in line, line
    assert TIMEOUT <= run.seconds < TIMEOUT + MARGIN, run.seconds


@contextmanager
def plan_server() -> Iterator[int]:
    """A plain HTTP server answering every GET with the fixture's plan as Flink's REST API wraps it."""
    body = json.dumps({"plan": json.loads(PLAN.read_text())}).encode()

    class Plan(BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            self.send_response(200)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *args: object) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Plan)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        yield server.server_address[1]
    finally:
        server.shutdown()
        server.server_close()


@pytest.mark.timeout(60)
def test_a_served_plan_is_the_plan_file() -> None:
    """The bounded request reads a whole answer: the plan over HTTP gives preflight's answer on the file."""
    with plan_server() as port:
        served = preflight(job_url(port))
    from_file = preflight(str(PLAN))
    assert served.code == from_file.code and served.code != EXIT_STORAGE, served.output
    doc_served, doc_file = json.loads(served.out), json.loads(from_file.out)
    doc_served.pop("plan"), doc_file.pop("plan")
    assert doc_served == doc_file


@pytest.mark.timeout(60)
@pytest.mark.parametrize("target", ["file", "ftp", "other host"])
def test_a_redirect_is_never_followed(target: str) -> None:
    """Not even to a place that holds the plan: the answer must come from the address given."""
    with plan_server() as elsewhere:
        location = {
            "file": PLAN.as_uri(),
            "ftp": f"ftp://127.0.0.1:{elsewhere}/plan",
            "other host": f"http://localhost:{elsewhere}/jobs/{JOB}/plan",
        }[target]
        with redirecting_server(location) as port:
            run = preflight(job_url(port), "--storage-timeout", str(TIMEOUT))
    line = storage_failure(run, f"{job_url(port)}/plan")
    assert f"redirect to {location}: not followed" in line, line
    assert run.seconds < TIMEOUT + MARGIN, run.seconds


def test_a_job_url_with_an_impossible_port_is_a_usage_error() -> None:
    run = preflight(f"http://127.0.0.1:99999/jobs/{JOB}")
    assert run.code == EXIT_USAGE, run.output
    assert "Traceback" not in run.output
    assert run.err.startswith(f"error: http://127.0.0.1:99999/jobs/{JOB}/plan"), run.err
