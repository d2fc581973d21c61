"""Run the installed ``spillway`` console script (the entry point users run, not click's test runner)
with this checkout's code first on the path, in a separate process.

The script is the one installed next to the Python running the tests (``.venv/bin/spillway``); with
``PYTHONPATH`` set to this checkout it runs the code under test, whichever checkout installed it.
"""

from __future__ import annotations

import os
import subprocess
import sys
import time
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).parents[2]
SCRIPT = Path(sys.executable).parent / "spillway"


@dataclass(frozen=True)
class Run:
    code: int
    out: str
    err: str
    seconds: float

    @property
    def output(self) -> str:
        return self.out + self.err


def spillway(*args: str, env: Mapping[str, str] | None = None, timeout: float = 300) -> Run:
    """``spillway ARGS…`` in a new process: exit code, stdout, stderr and how long it took. ``env`` is
    added to the test's environment (a value of "" removes that variable)."""
    full = {**os.environ, "PYTHONPATH": os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")]).rstrip(":")}
    full.pop("SPILLWAY_STORAGE_TIMEOUT", None)  # each test says which timeout it wants
    for key, value in (env or {}).items():
        if value == "":
            full.pop(key, None)
        else:
            full[key] = value
    start = time.monotonic()
    done = subprocess.run(
        [str(SCRIPT), *args], env=full, capture_output=True, text=True, timeout=timeout, stdin=subprocess.DEVNULL
    )
    return Run(done.returncode, done.stdout, done.stderr, time.monotonic() - start)


def run(
    args: list[str], env: Mapping[str, str] | None = None, columns: int | None = None, cwd: Path | None = None
) -> tuple[int, str, str]:
    """``spillway ARGS`` -> (exit code, stdout, stderr), the terminal ``columns`` wide (``COLUMNS``; None: no
    COLUMNS, as in a pipe), in the working directory ``cwd``."""
    full = {**os.environ, "PYTHONPATH": str(ROOT), **(env or {})}
    full.pop("COLUMNS", None)
    if columns is not None:
        full["COLUMNS"] = str(columns)
    done = subprocess.run(
        [str(SCRIPT), *args], env=full, cwd=cwd, capture_output=True, text=True, timeout=600, stdin=subprocess.DEVNULL
    )
    return done.returncode, done.stdout, done.stderr
