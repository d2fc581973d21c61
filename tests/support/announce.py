"""Lines that reach the terminal while pytest captures output: what a test run downloads or builds once
(Flink jars, ~200 MB a release) must not leave ``make test`` silent for minutes."""

from __future__ import annotations

import sys
from typing import Any

_config: Any = None  # the session's pytest config (tests/conftest.py installs it)


def install(config: Any) -> None:
    global _config
    _config = config


def announce(message: str) -> None:
    """Print ``message`` on its own line now, past pytest's capture (on stderr outside pytest)."""
    capture = _config.pluginmanager.getplugin("capturemanager") if _config is not None else None
    if capture is None:
        print(message, file=sys.stderr, flush=True)
        return
    with capture.global_and_fixture_disabled():
        writer = _config.get_terminal_writer()
        writer.line()
        writer.line(f"[spillway tests] {message}")
        writer.flush()
