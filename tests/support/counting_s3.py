"""A moto S3 server that counts what every request transfers, at the server: per object key, how many GETs
(and how many body bytes they sent), HEADs and LISTs. The count is taken where the bytes leave the server, so
it holds whatever the client (pyarrow, boto, a Spark worker) does, caches or retries.

The server runs in this process (a WSGI middleware around moto's own application), on a free loopback port;
spillway, run as a subprocess, reaches it through :meth:`S3Server.env` like the plain :func:`moto_s3`.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import unquote

import pyarrow.fs as pafs
from moto.server import DomainDispatcherApplication, MotoRequestHandler, create_backend_app
from werkzeug.serving import make_server

from support.endpoints import S3Server


@dataclass(frozen=True)
class Request:
    """One request as the server answered it: ``kind`` is GET / HEAD / LIST / PUT / POST / DELETE / COPY."""

    kind: str
    bucket: str
    key: str  # "" for a request on the bucket (a LIST)
    sent: int  # body bytes the server sent back
    ranged: bool = False


@dataclass
class Counter:
    """Every request since the last :meth:`reset`."""

    requests: list[Request] = field(default_factory=list)
    # ``bucket/key`` -> how many GETs of it still fail with 503 SlowDown (a transient error S3 clients retry)
    failing: dict[str, int] = field(default_factory=dict)
    _lock: threading.Condition = field(default_factory=threading.Condition)
    _in_flight: int = 0

    def started(self) -> None:
        with self._lock:
            self._in_flight += 1

    def settle(self, timeout: float = 5.0) -> None:
        """Wait until every request begun has been recorded: the server records one after its last byte is
        sent, which the client may see before the server's thread gets there."""
        with self._lock:
            self._lock.wait_for(lambda: self._in_flight == 0, timeout)

    def fail_next(self, key: str, times: int) -> None:
        """The next ``times`` GETs of ``bucket/key`` are answered 503 SlowDown (counted as kind FAILED)."""
        with self._lock:
            self.failing[key] = times

    def _take_failure(self, key: str) -> bool:
        with self._lock:
            left = self.failing.get(key, 0)
            if left > 0:
                self.failing[key] = left - 1
            return left > 0

    def add(self, request: Request) -> None:
        with self._lock:
            self.requests.append(request)
            self._in_flight -= 1
            self._lock.notify_all()

    def reset(self) -> None:
        self.settle()
        with self._lock:
            self.requests.clear()

    def taken(self) -> list[Request]:
        self.settle()
        with self._lock:
            return list(self.requests)

    def of(self, kind: str) -> list[Request]:
        return [r for r in self.taken() if r.kind == kind]

    def bytes_read(self) -> dict[str, int]:
        """Body bytes GET sent, per ``bucket/key``."""
        out: dict[str, int] = {}
        for r in self.of("GET"):
            out[f"{r.bucket}/{r.key}"] = out.get(f"{r.bucket}/{r.key}", 0) + r.sent
        return out

    def keys_read(self) -> set[str]:
        """``bucket/key`` of every object a GET was answered for (with or without bytes)."""
        return {f"{r.bucket}/{r.key}" for r in self.of("GET")}


class _QuietHandler(MotoRequestHandler):
    """Moto's request handler without a log line per request on stderr."""

    def log_request(self, code: int | str = "-", size: int | str = "-") -> None:
        pass


def _kind(method: str, key: str, environ: dict[str, Any]) -> str:
    if method == "GET":
        return "GET" if key else "LIST"
    if method == "PUT" and environ.get("HTTP_X_AMZ_COPY_SOURCE"):
        return "COPY"
    return method


def _counting(app: Callable[..., Iterable[bytes]], counter: Counter) -> Callable[..., Iterable[bytes]]:
    def counted(environ: dict[str, Any], start_response: Callable[..., Any]) -> Iterator[bytes]:
        method = environ["REQUEST_METHOD"]
        bucket, _, key = unquote(environ.get("PATH_INFO", "")).lstrip("/").partition("/")
        kind = _kind(method, key, environ)
        ranged = "HTTP_RANGE" in environ
        counter.started()
        if kind == "GET" and counter._take_failure(f"{bucket}/{key}"):
            counter.add(Request("FAILED", bucket, key, 0, ranged))
            start_response("503 Slow Down", [("Content-Type", "application/xml")])
            yield b"<Error><Code>SlowDown</Code><Message>Please reduce your request rate.</Message></Error>"
            return
        body = app(environ, start_response)
        sent = 0
        try:
            for chunk in body:
                if kind != "HEAD":  # the server sends no body for a HEAD
                    sent += len(chunk)
                yield chunk
        finally:
            close = getattr(body, "close", None)
            if close is not None:
                close()
            counter.add(Request(kind, bucket, key, sent, ranged))

    return counted


@contextmanager
def counting_s3(buckets: tuple[str, ...] = ()) -> Iterator[tuple[S3Server, Counter]]:
    """A moto S3 server on a free loopback port, with the :class:`Counter` of what it answers."""
    counter = Counter()
    app = _counting(DomainDispatcherApplication(create_backend_app), counter)
    server = make_server("127.0.0.1", 0, app, threaded=True, request_handler=_QuietHandler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        port = server.server_address[1]
        client = pafs.S3FileSystem(
            endpoint_override=f"127.0.0.1:{port}",
            scheme="http",
            access_key="testing",
            secret_key="testing",
            region="us-east-1",
            allow_bucket_creation=True,
        )
        for bucket in buckets:
            client.create_dir(bucket)
        counter.reset()
        yield S3Server(port, client), counter
    finally:
        server.shutdown()
        thread.join(timeout=10)
