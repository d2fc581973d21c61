"""Where spillway keeps what it builds once and reuses (the native framer, the Spark class archive)."""

from __future__ import annotations

import os
from pathlib import Path


def cache_root() -> Path:
    """``$SPILLWAY_CACHE``, else ``~/.cache/spillway``."""
    return Path(os.environ.get("SPILLWAY_CACHE", Path.home() / ".cache" / "spillway"))
