"""A running job's plan from its JobManager's REST API (``GET /jobs/<job id>/plan``).

``http://HOST:PORT/jobs/JOB_ID`` names the job; the answer is Flink's job-graph plan (the same JSON as
``JsonPlanGenerator``, wrapped in ``{"plan": …}``), read with one bounded request: connecting, the headers and
the whole body share one deadline (the storage timeout), so a server that sends a byte now and then cannot keep
the command waiting. A redirect is never followed: the answer must come from the address given.
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import threading
import time
import urllib.parse
from typing import TYPE_CHECKING, Any

from spillway.errors import Message, StorageError, UsageError
from spillway.storage.timeouts import TIMEOUT_SETTING, timeout

if TYPE_CHECKING:
    import http.client

MAX_BYTES = 64 << 20  # a plan is a few KiB to a few MiB; anything beyond is not a plan
_CHUNK = 64 << 10
_JOB_URL = re.compile(r"^(https?://[^/\s]+)(?:/v1)?/jobs/([0-9a-fA-F]{32})/?$")


class RestUnreachable(StorageError):
    """The JobManager could not be reached or did not answer with a plan (exit 3: not the checkpoint's fault)."""


def is_job_url(value: str) -> bool:
    return value.startswith(("http://", "https://"))


def plan_url(job_url: str) -> str:
    """``http://HOST:PORT/jobs/JOB_ID`` -> the plan's REST address; anything else is a usage error."""
    m = _JOB_URL.match(job_url.strip())
    if m is None:
        raise UsageError(f"{job_url}: expected http://HOST:PORT/jobs/JOB_ID (a 32-hex-digit job id)")
    return f"{m.group(1)}/jobs/{m.group(2).lower()}/plan"


def fetch_plan(job_url: str, seconds: float | None = None) -> dict[str, Any]:
    """The job-graph plan JSON of the job at ``job_url``, within ``seconds`` (None: the storage timeout)."""
    return _get(plan_url(job_url), seconds)


def latest_checkpoint(job_url: str, seconds: float | None = None) -> str:
    """The external path of the job's latest completed checkpoint (REST ``/jobs/<id>/checkpoints``,
    ``latest.completed.external_path``); a ``file:`` URI as a local path."""
    url = plan_url(job_url).rsplit("/", 1)[0] + "/checkpoints"
    doc = _get(url, seconds)
    latest = (doc.get("latest") or {}).get("completed") if isinstance(doc.get("latest"), dict) else None
    path = latest.get("external_path") if isinstance(latest, dict) else None
    if not isinstance(path, str) or not path or path == "<checkpoint-not-externally-addressable>":
        raise RestUnreachable(f"{url}: the job has no completed checkpoint with an external path yet")
    if path.startswith("file:"):  # Flink names local checkpoints as file: URIs; the loaders take paths
        return urllib.parse.unquote(urllib.parse.urlparse(path).path)
    return path


def job_checkpoint(path: str | os.PathLike[str]) -> str:
    """``path`` itself, or for a running job's ``http://HOST:PORT/jobs/JOB_ID`` its latest completed checkpoint."""
    return latest_checkpoint(str(path)) if is_job_url(str(path)) else str(path)


def _get(url: str, seconds: float | None) -> dict[str, Any]:
    seconds = timeout() if seconds is None else seconds
    exchange = _Exchange(url, seconds)
    # In a daemon thread: a socket timeout bounds each read, not the request, and a name lookup cannot be
    # interrupted at all. The caller waits for the deadline only; then the socket is shut, which ends a read.
    worker = threading.Thread(target=exchange.run, name="spillway-rest", daemon=True)
    worker.start()
    worker.join(seconds)
    if worker.is_alive():
        exchange.abort()
        raise RestUnreachable(Message(f"{url}: no complete answer within {seconds:g} s (", TIMEOUT_SETTING, ")"))
    if exchange.error is not None:
        raise exchange.error
    try:
        doc = json.loads(exchange.body)
    except ValueError as exc:
        raise RestUnreachable(f"{url}: the answer is not JSON ({exc})") from None
    if not isinstance(doc, dict):
        raise RestUnreachable(f"{url}: the answer is not a JSON object")
    return doc


class _Exchange:
    """One GET of ``url``: its body, or the error to raise in the caller's thread."""

    def __init__(self, url: str, seconds: float) -> None:
        self.url, self.seconds = url, seconds
        self.deadline = time.monotonic() + seconds
        self.body = b""
        self.error: StorageError | UsageError | None = None
        self._connection: http.client.HTTPConnection | None = None
        self._aborted = False

    def run(self) -> None:
        import http.client  # here, not at the top: http.client (email, ssl) costs the start-up of every command

        try:
            self.body = self._fetch()
        except (StorageError, UsageError) as exc:
            self.error = exc
        except ValueError as exc:  # http.client.InvalidURL and the like: the address itself is wrong
            self.error = UsageError(f"{self.url}: not a usable address ({exc})")
        except OSError as exc:  # refused, reset, name unknown, TLS, a socket timeout
            self.error = RestUnreachable(f"{self.url}: cannot reach the JobManager ({exc})")
        except http.client.HTTPException as exc:  # a protocol error: BadStatusLine, IncompleteRead …
            self.error = RestUnreachable(f"{self.url}: not an HTTP answer ({type(exc).__name__}: {exc})")

    def abort(self) -> None:
        """Give up: a read still waiting on the socket returns at once."""
        import socket

        self._aborted = True
        connection = self._connection
        sock = connection.sock if connection is not None else None
        if sock is not None:
            with contextlib.suppress(OSError):
                sock.shutdown(socket.SHUT_RDWR)

    def _fetch(self) -> bytes:
        import http.client

        parts = urllib.parse.urlsplit(self.url)
        try:
            port = parts.port
        except ValueError as exc:
            raise UsageError(f"{self.url}: {exc}") from None
        host = parts.hostname or ""
        kind = http.client.HTTPSConnection if parts.scheme == "https" else http.client.HTTPConnection
        connection = kind(host, port, timeout=self.seconds)
        self._connection = connection
        try:
            connection.request("GET", parts.path or "/", headers={"Accept": "application/json"})
            answer = connection.getresponse()
            if 300 <= answer.status < 400:
                target = answer.getheader("Location") or "nowhere"
                raise RestUnreachable(
                    f"{self.url}: HTTP {answer.status} redirect to {target}: not followed "
                    "(give the JobManager's own http(s)://HOST:PORT/jobs/JOB_ID)"
                )
            if answer.status != 200:
                detail = answer.read(2000).decode("utf-8", "replace").strip()
                raise RestUnreachable(f"{self.url}: HTTP {answer.status} {answer.reason} {detail}".strip())
            return self._body(answer)
        finally:
            connection.close()

    def _body(self, answer: http.client.HTTPResponse) -> bytes:
        parts: list[bytes] = []
        size = 0
        while chunk := answer.read1(_CHUNK):
            if self._aborted or time.monotonic() > self.deadline:
                raise RestUnreachable(f"{self.url}: no complete answer within {self.seconds:g} s")
            parts.append(chunk)
            size += len(chunk)
            if size > MAX_BYTES:
                raise RestUnreachable(f"{self.url}: answer larger than {MAX_BYTES} bytes: not a plan")
        return b"".join(parts)
