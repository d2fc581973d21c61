"""HTTP endpoints on 127.0.0.1 that misbehave on purpose, for the fault suite's remote cases: one that drips
its answer a byte at a time (each byte well within a per-read timeout, the whole far beyond any deadline) and
one that redirects to ``file:///etc/passwd``. (A server that never answers: support.endpoints.silent_server.)"""

from __future__ import annotations

import socket
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager, suppress

DRIP_ANSWER = b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: 1000000\r\n\r\n" + b" " * 1_000_000
REDIRECT_ANSWER = (
    b"HTTP/1.1 302 Found\r\nLocation: file:///etc/passwd\r\nContent-Length: 0\r\nConnection: close\r\n\r\n"
)


@contextmanager
def _serve(answer: Callable[[socket.socket, threading.Event], None]) -> Iterator[int]:
    server = socket.socket()
    server.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    server.bind(("127.0.0.1", 0))
    server.listen(64)
    stop = threading.Event()

    def handle(conn: socket.socket) -> None:
        with conn:
            try:
                conn.settimeout(1)
                with suppress(TimeoutError):
                    conn.recv(65536)  # the request; its content does not matter
                answer(conn, stop)
            except OSError:
                return  # the client gave up

    def accept() -> None:
        while not stop.is_set():
            try:
                conn, _ = server.accept()
            except OSError:
                return
            threading.Thread(target=handle, args=(conn,), daemon=True).start()

    threading.Thread(target=accept, daemon=True).start()
    try:
        yield server.getsockname()[1]
    finally:
        stop.set()
        server.close()


@contextmanager
def dripping_server(every: float = 1.0) -> Iterator[int]:
    """A port whose answer (a valid start of a 1 MB response) comes one byte per ``every`` seconds."""

    def drip(conn: socket.socket, stop: threading.Event) -> None:
        for i in range(len(DRIP_ANSWER)):
            if stop.wait(every):
                return
            conn.sendall(DRIP_ANSWER[i : i + 1])

    with _serve(drip) as port:
        yield port


@contextmanager
def redirecting_server() -> Iterator[int]:
    """A port that answers every request with a redirect to ``file:///etc/passwd``."""

    def redirect(conn: socket.socket, stop: threading.Event) -> None:
        conn.sendall(REDIRECT_ANSWER)
        time.sleep(0.1)

    with _serve(redirect) as port:
        yield port
