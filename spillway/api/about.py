"""What this installation of spillway is: its version and the versions of what it runs on, for a bug report."""

from __future__ import annotations

import platform
import sys
from dataclasses import dataclass, field
from importlib import metadata
from typing import Any

SCHEMA = "spillway.version/1"
# What spillway runs on (pyproject.toml's dependencies) and pyspark, which rescale needs for --master other than
# inprocess: the installed distribution's version, None when it is not installed.
DISTRIBUTIONS = ("click", "rich", "construct", "pyarrow", "numpy", "mmh3", "pyspark")


@dataclass(frozen=True)
class VersionInfo:
    """spillway's version, the Python running it and the installed version of each of ``DISTRIBUTIONS``."""

    spillway: str
    python: str
    platform: str
    distributions: dict[str, str | None] = field(default_factory=dict)

    def to_json(self) -> dict[str, Any]:
        """``spillway version --json``: schema ``spillway.version/1``."""
        return {
            "schema": SCHEMA,
            "spillway": self.spillway,
            "python": self.python,
            "platform": self.platform,
            "distributions": dict(self.distributions),
        }


def version() -> VersionInfo:
    """This installation's versions, read from the installed distributions' metadata (nothing is imported)."""
    from spillway import __version__

    found: dict[str, str | None] = {}
    for name in DISTRIBUTIONS:
        try:
            found[name] = metadata.version(name)
        except metadata.PackageNotFoundError:
            found[name] = None
    python = f"{platform.python_implementation()} {platform.python_version()}"
    return VersionInfo(__version__, python, sys.platform, found)
