"""Run the installed ``spillway`` console script as a user would: a real process, this checkout's code
first on the path, the terminal width given by ``COLUMNS``."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
SCRIPT = Path(sys.executable).with_name("spillway")


def run(
    args: list[str], env: dict[str, str] | None = None, columns: int | None = None, cwd: Path | None = None
) -> tuple[int, str, str]:
    """``spillway ARGS`` -> (exit code, stdout, stderr)."""
    full = {**os.environ, "PYTHONPATH": str(ROOT), **(env or {})}
    full.pop("COLUMNS", None)
    if columns is not None:
        full["COLUMNS"] = str(columns)
    done = subprocess.run([str(SCRIPT), *args], env=full, cwd=cwd, capture_output=True, text=True, timeout=600)
    return done.returncode, done.stdout, done.stderr
