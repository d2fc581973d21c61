"""``spillway preflight [http://HOST:PORT/jobs/JOB_ID] --plan http://HOST:PORT/jobs/JOB_ID`` against a real Flink
MiniCluster's REST API on loopback.

The restore harness runs the 2.3.0-unaligned job restored from its own checkpoint with the REST endpoint on a free
127.0.0.1 port; while it runs, preflight fetches the job's plan from ``/jobs/<id>/plan``. The plan Flink serves must
be the fixture's job-graph plan (what the fixture was written by), and preflight's answer on the URL must be its
answer on that file, word for word. Then the running job's own latest completed checkpoint, named by the job's URL,
checked against the job's plan: restorable.
"""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import threading
import time
import urllib.request
from pathlib import Path
from typing import Any

import pytest
from support.fixtures import fixture_named
from support.flink_harness import restore

pytestmark = pytest.mark.flink

ROOT = Path(__file__).resolve().parents[2]
SPILLWAY = Path(sys.executable).parent / "spillway"


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def running_job(port: int, deadline: float) -> str:
    while time.monotonic() < deadline:
        try:
            with urllib.request.urlopen(f"http://127.0.0.1:{port}/jobs", timeout=5) as answer:
                jobs = json.loads(answer.read())["jobs"]
            running = [j["id"] for j in jobs if j["status"] == "RUNNING"]
            if running:
                return running[0]
        except OSError:
            pass
        time.sleep(0.5)
    raise AssertionError(f"no RUNNING job on 127.0.0.1:{port}")


def completed_checkpoint(port: int, job_id: str, deadline: float) -> str:
    while time.monotonic() < deadline:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/jobs/{job_id}/checkpoints", timeout=5) as answer:
            latest = json.loads(answer.read()).get("latest") or {}
        if latest.get("completed"):
            return str(latest["completed"]["external_path"])
        time.sleep(0.5)
    raise AssertionError("no completed checkpoint")


# what the unaligned job's user knows and its plan does not show: its uids (FixtureJob.java), no max parallelism set
UNALIGNED_JOB = [
    *("--uid", "Source: seq=src", "--uid", "tostr=tostr", "--uid", "slow=slow", "--uid", "len=len"),
    *("--uid", "sink: Writer=sink", "--max-parallelism", "none"),
]


def preflight(checkpoint: Path | str, plan: str) -> tuple[int, dict[str, Any]]:
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    res = subprocess.run(
        [str(SPILLWAY), "preflight", str(checkpoint), "--plan", plan, *UNALIGNED_JOB, "--json"],
        capture_output=True,
        text=True,
        env=env,
        timeout=120,
        check=False,
    )
    assert res.returncode in (0, 1, 4), res.stdout + res.stderr
    return res.returncode, json.loads(res.stdout)


def test_plan_from_a_running_jobmanager(tmp_path: Path) -> None:
    fx = fixture_named("2.3.0-unaligned")
    port = free_port()
    outcome: dict[str, Any] = {}
    seen_enough = tmp_path / "seen-enough"  # the job keeps running until the checks below are done

    def run() -> None:
        outcome.update(
            restore(
                fx.release,
                fx.info["scenario"],
                fx.checkpoint_dir,
                run_seconds=40,
                workdir=tmp_path / "work",
                rest_port=port,
                stop_file=seen_enough,
            )
        )

    job = threading.Thread(target=run)
    job.start()
    try:
        job_id = running_job(port, time.monotonic() + 100)
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/jobs/{job_id}/plan", timeout=10) as answer:
            served = json.loads(answer.read())["plan"]
        job_url = f"http://127.0.0.1:{port}/jobs/{job_id}"
        code_url, doc_url = preflight(fx.checkpoint_dir, job_url)
        # the running job's own latest checkpoint, named by the job's URL, into the job's own plan
        written = completed_checkpoint(port, job_id, time.monotonic() + 60)
        code_live, doc_live = preflight(job_url, job_url)
    finally:
        seen_enough.touch()
        job.join(timeout=180)
    assert outcome.get("outcome") == "restored", outcome
    recorded = json.loads((fx.root / "jobgraph.json").read_text())
    served.pop("jid"), recorded.pop("jid")
    assert served == recorded
    code_file, doc_file = preflight(fx.checkpoint_dir, str(fx.root / "jobgraph.json"))
    doc_url.pop("plan"), doc_file.pop("plan")
    assert (code_url, doc_url) == (code_file, doc_file)
    assert code_url == 0 and doc_url["restorable"] is True
    assert code_live == 0 and doc_live["restorable"] is True, doc_live
    # a checkpoint of the job at least as new as the one seen completed, under the job's checkpoint directory
    seen = Path(written.removeprefix("file:"))
    used = Path(doc_live["checkpoint"])
    assert used.parent == seen.parent and int(used.name[4:]) >= int(seen.name[4:]), (used, seen)
    assert used.is_relative_to(tmp_path / "work" / "checkpoints")
