"""Many calls of a small Java checking program's ``main`` in one JVM (``MainLoop``, tests/support/java/loop/): for a
program that runs for milliseconds, starting a JVM and loading Flink's classes is nearly all of a call's cost.

    loop = JavaLoop(["java", "-cp", f"{classes}:{lib}/*", "MainLoop"])   # MainLoop.java compiled beside the program
    code, stdout = loop.call("ReaderCheck", str(path), "4096", "100", "200")
    loop.close()

The program must keep no state between calls. Its stderr (and the JVM's) goes to a file of its own, shown when a
call fails or times out, so that it never mixes into what a call printed.
"""

from __future__ import annotations

import atexit
import contextlib
import queue
import subprocess
import tempfile
import threading
from pathlib import Path

SOURCE = Path(__file__).parent / "java" / "loop" / "MainLoop.java"
DONE = "spillway-main-done "


class JavaLoop:
    def __init__(self, command: list[str]) -> None:
        self.errors = tempfile.TemporaryFile(mode="w+")  # noqa: SIM115 (open as long as the JVM runs; closed by close())
        self.proc = subprocess.Popen(
            command, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=self.errors, text=True, bufsize=1
        )
        self.lines: queue.Queue[str | None] = queue.Queue()
        threading.Thread(target=self._read, daemon=True).start()
        atexit.register(self.close)  # a loop nobody closed still ends with the tests (and is waited for)

    def _read(self) -> None:
        assert self.proc.stdout is not None
        for line in self.proc.stdout:
            self.lines.put(line)
        self.lines.put(None)

    def stderr(self) -> str:
        self.errors.seek(0)
        return self.errors.read()[-4000:]

    def call(self, *args: str, timeout: float = 120) -> tuple[int, str]:
        """``main(args[1:])`` of class ``args[0]``: 0 (or 1 if it threw) and what it printed."""
        if any("\t" in a or "\n" in a for a in args):
            raise ValueError(f"a tab or newline in an argument: {args}")
        assert self.proc.stdin is not None
        self.proc.stdin.write("\t".join(args) + "\n")
        self.proc.stdin.flush()
        printed: list[str] = []
        while True:
            try:
                line = self.lines.get(timeout=timeout)
            except queue.Empty:
                self.close(kill=True)
                raise TimeoutError(f"{args[0]} did not answer within {timeout}s; stderr:\n{self.stderr()}") from None
            if line is None:
                raise RuntimeError(f"the JVM ended (rc={self.proc.wait()}); stderr:\n{self.stderr()}")
            if line.startswith(DONE):
                return int(line[len(DONE) :]), "".join(printed)[:-1]  # less the newline MainLoop adds
            printed.append(line)

    def close(self, kill: bool = False) -> None:
        if self.errors.closed:
            return
        if kill:
            self.proc.kill()
        if self.proc.stdin is not None:
            with contextlib.suppress(OSError):
                self.proc.stdin.close()  # MainLoop ends at the end of its input
        self.proc.wait(timeout=30)
        self.errors.close()
