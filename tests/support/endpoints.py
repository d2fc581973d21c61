"""Storage endpoints for tests, all on 127.0.0.1: a real S3-compatible server (moto), a port nothing
listens on, and a server that accepts connections and never answers (to prove read timeouts)."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
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
    server = socket.socket()
    server.bind(("127.0.0.1", 0))
    server.listen(64)
    held: list[socket.socket] = []
    stop = threading.Event()

    def accept() -> None:
        while not stop.is_set():
            try:
                conn, _ = server.accept()
            except OSError:
                return
            held.append(conn)

    thread = threading.Thread(target=accept, daemon=True)
    thread.start()
    try:
        yield server.getsockname()[1]
    finally:
        stop.set()
        server.close()
        for conn in held:
            conn.close()
