"""Storage endpoints for tests, all on 127.0.0.1: a real S3-compatible server (moto), a port nothing
listens on, a server that accepts connections and never answers (to prove read timeouts), one that answers a
byte at a time (to prove a deadline on the whole request) and one that redirects."""

from __future__ import annotations

import contextlib
import os
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

import pyarrow.fs as pafs


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@dataclass(frozen=True)
class S3Server:
    port: int
    client: pafs.S3FileSystem | None  # None when the server demands real credentials

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def env(self) -> dict[str, str]:
        """What spillway needs to reach it (credentials moto accepts)."""
        return {
            "AWS_ENDPOINT_URL": self.url,
            "AWS_ACCESS_KEY_ID": "testing",
            "AWS_SECRET_ACCESS_KEY": "testing",
            "AWS_REGION": "us-east-1",
        }


@contextmanager
def moto_s3(buckets: tuple[str, ...] = (), authenticate: bool = False) -> Iterator[S3Server]:
    """A moto S3 server on a free loopback port. ``authenticate``: it checks credentials like AWS does
    (moto's ``INITIAL_NO_AUTH_ACTION_COUNT=0``), so a request without valid ones is refused."""
    port = free_port()
    env = {"INITIAL_NO_AUTH_ACTION_COUNT": "0"} if authenticate else {}
    proc = subprocess.Popen(
        [sys.executable, "-m", "moto.server", "-H", "127.0.0.1", "-p", str(port)],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        env={**os.environ, **env},
    )
    try:
        deadline = time.monotonic() + 30
        while True:
            try:
                with socket.create_connection(("127.0.0.1", port), timeout=1):
                    break
            except OSError:
                if time.monotonic() > deadline or proc.poll() is not None:
                    raise
                time.sleep(0.2)
        client = None
        if not authenticate:
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
        yield S3Server(port, client)
    finally:
        proc.terminate()
        proc.wait(timeout=10)


def upload(client: pafs.S3FileSystem, local_dir: Path, prefix: str) -> int:
    """Copy every file under ``local_dir`` to ``bucket/prefix/…``; returns how many."""
    root = local_dir
    n = 0
    for f in sorted(root.rglob("*")):
        if f.is_file():
            with client.open_output_stream(f"{prefix}/{f.relative_to(root).as_posix()}") as out:
                out.write(f.read_bytes())
            n += 1
    return n


def closed_port() -> int:
    """A loopback port nothing listens on (connections are refused at once)."""
    return free_port()


@contextmanager
def silent_server() -> Iterator[int]:
    """A loopback port that accepts every connection and never sends a byte: only a read timeout ends
    a request to it."""

    def hold(conn: socket.socket, stop: threading.Event) -> None:
        stop.wait()

    yield from _serve(hold)


def _serve(handle: Callable[[socket.socket, threading.Event], None]) -> Iterator[int]:
    """A loopback port whose every connection is given to ``handle(conn, stop)`` in a thread of its own; on exit
    ``stop`` is set and every connection closed (a handler must return soon after ``stop``)."""
    server = socket.socket()
    server.bind(("127.0.0.1", 0))
    server.listen(64)
    held: list[socket.socket] = []
    stop = threading.Event()

    def serve(conn: socket.socket) -> None:
        with contextlib.suppress(OSError):  # the client went away: nothing more to send
            handle(conn, stop)

    def accept() -> None:
        while not stop.is_set():
            try:
                conn, _ = server.accept()
            except OSError:
                return
            held.append(conn)
            threading.Thread(target=serve, args=(conn,), daemon=True).start()

    threading.Thread(target=accept, daemon=True).start()
    try:
        yield server.getsockname()[1]
    finally:
        stop.set()
        server.close()
        for conn in held:
            conn.close()


def _request_head(conn: socket.socket, stop: threading.Event) -> bytes:
    """The request's line and headers as the client sent them (up to the blank line)."""
    conn.settimeout(0.5)
    data = b""
    while b"\r\n\r\n" not in data and not stop.is_set():
        try:
            chunk = conn.recv(4096)
        except TimeoutError:
            continue
        if not chunk:
            break
        data += chunk
    return data


@contextmanager
def dripping_server(interval: float = 5.0) -> Iterator[int]:
    """An HTTP server that reads the request, then answers ``200 OK`` one byte every ``interval`` seconds, for
    ever: each read gets a byte well within any per-read timeout, so only a deadline on the whole request ends
    it."""
    answer = b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: 100000\r\n\r\n" + b" " * 100000

    def drip(conn: socket.socket, stop: threading.Event) -> None:
        _request_head(conn, stop)
        for byte in answer:
            conn.sendall(bytes([byte]))
            if stop.wait(interval):
                return

    yield from _serve(drip)


@contextmanager
def redirecting_server(location: str) -> Iterator[int]:
    """An HTTP server answering every request with ``302 Found`` to ``location`` (``file:///…``, ``ftp://…``,
    another host's ``http://…``)."""

    def redirect(conn: socket.socket, stop: threading.Event) -> None:
        _request_head(conn, stop)
        conn.sendall(f"HTTP/1.1 302 Found\r\nLocation: {location}\r\nContent-Length: 0\r\n\r\n".encode())
        stop.wait(30)  # keep the connection open: the client decides what to do with the answer

    yield from _serve(redirect)


@contextmanager
def dripping_proxy(upstream: int, trigger: bytes, interval: float = 0.2) -> Iterator[int]:
    """A loopback TCP proxy in front of ``upstream`` (e.g. moto) that passes everything through at full speed
    until the client sends a request starting with ``trigger`` (``b"GET /bucket/key "``); from then on that
    connection's answers come one byte every ``interval`` seconds. Fast enough for a client's low-speed limit
    (curl's: 1 byte/s), so only a deadline on the whole transfer ends it."""

    def relay(client: socket.socket, stop: threading.Event) -> None:
        server = socket.create_connection(("127.0.0.1", upstream), timeout=10)
        server.settimeout(None)
        slow = threading.Event()

        def upward() -> None:
            with contextlib.suppress(OSError):
                while data := client.recv(65536):
                    if data.startswith(trigger):
                        slow.set()
                    server.sendall(data)
            with contextlib.suppress(OSError):
                server.shutdown(socket.SHUT_WR)

        threading.Thread(target=upward, daemon=True).start()
        try:
            while data := server.recv(65536):
                if not slow.is_set():
                    client.sendall(data)
                    continue
                for byte in data:
                    client.sendall(bytes([byte]))
                    if stop.wait(interval):
                        return
        finally:
            server.close()
            with contextlib.suppress(OSError):
                client.shutdown(socket.SHUT_RDWR)

    yield from _serve(relay)
