"""A running job's plan from its JobManager's REST API (``GET /jobs/<job id>/plan``).

``http://HOST:PORT/jobs/JOB_ID`` names the job; the answer is Flink's job-graph plan (the same JSON as
``JsonPlanGenerator``, wrapped in ``{"plan": …}``), read with one bounded request.
"""

from __future__ import annotations

import json
import re
import urllib.parse
from typing import Any, ClassVar

from spillway.errors import SpillwayError, UsageError

TIMEOUT = 30.0  # seconds for connecting and for reading the answer
MAX_BYTES = 64 << 20  # a plan is a few KiB to a few MiB; anything beyond is not a plan
_JOB_URL = re.compile(r"^(https?://[^/\s]+)(?:/v1)?/jobs/([0-9a-fA-F]{32})/?$")


class RestUnreachable(SpillwayError):
    """The JobManager could not be reached or did not answer with a plan."""

    exit_code: ClassVar[int] = 3  # not the checkpoint's fault: unreachable (the storage code of issue 21)


def is_job_url(value: str) -> bool:
    return value.startswith(("http://", "https://"))


def plan_url(job_url: str) -> str:
    """``http://HOST:PORT/jobs/JOB_ID`` -> the plan's REST address; anything else is a usage error."""
    m = _JOB_URL.match(job_url.strip())
    if m is None:
        raise UsageError(f"{job_url}: expected http://HOST:PORT/jobs/JOB_ID (a 32-hex-digit job id)")
    return f"{m.group(1)}/jobs/{m.group(2).lower()}/plan"


def fetch_plan(job_url: str, timeout: float = TIMEOUT) -> dict[str, Any]:
    """The job-graph plan JSON of the job at ``job_url``."""
    return _get(plan_url(job_url), timeout)


def latest_checkpoint(job_url: str, timeout: float = TIMEOUT) -> str:
    """The external path of the job's latest completed checkpoint (REST ``/jobs/<id>/checkpoints``,
    ``latest.completed.external_path``); a ``file:`` URI as a local path."""
    url = plan_url(job_url).rsplit("/", 1)[0] + "/checkpoints"
    doc = _get(url, timeout)
    latest = (doc.get("latest") or {}).get("completed") if isinstance(doc.get("latest"), dict) else None
    path = latest.get("external_path") if isinstance(latest, dict) else None
    if not isinstance(path, str) or not path or path == "<checkpoint-not-externally-addressable>":
        raise RestUnreachable(f"{url}: the job has no completed checkpoint with an external path yet")
    if path.startswith("file:"):  # Flink names local checkpoints as file: URIs; the loaders take paths
        return urllib.parse.unquote(urllib.parse.urlparse(path).path)
    return path


def _get(url: str, timeout: float) -> dict[str, Any]:
    import urllib.error  # here, not at the top: urllib.request (http.client, ssl, email) is ~15 ms of the start-up
    import urllib.request  # of every command given a plan file, which only asks is_job_url

    try:
        with urllib.request.urlopen(url, timeout=timeout) as answer:  # http(s) only: plan_url checked it
            body = answer.read(MAX_BYTES + 1)
    except urllib.error.HTTPError as exc:
        detail = exc.read(2000).decode("utf-8", "replace").strip()
        raise RestUnreachable(f"{url}: HTTP {exc.code} {exc.reason} {detail}".strip()) from None
    except (urllib.error.URLError, OSError, TimeoutError) as exc:
        reason = getattr(exc, "reason", exc)
        raise RestUnreachable(f"{url}: cannot reach the JobManager ({reason})") from None
    if len(body) > MAX_BYTES:
        raise RestUnreachable(f"{url}: answer larger than {MAX_BYTES} bytes: not a plan")
    try:
        doc = json.loads(body)
    except ValueError as exc:
        raise RestUnreachable(f"{url}: the answer is not JSON ({exc})") from None
    if not isinstance(doc, dict):
        raise RestUnreachable(f"{url}: the answer is not a JSON object")
    return doc
