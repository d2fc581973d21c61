#!/usr/bin/env python3
"""Fetch the jars of one Apache Flink release from PyPI and print the directory holding them
(``spillway.storage.flink_release``; cached, so repeated calls are free).

    python tools/flink_jars.py 2.3.0          # -> ~/.cache/spillway/flink/2.3.0/lib
"""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from spillway.storage.flink_release import cache_root, fetch_release

__all__ = ["cache_root", "fetch"]


def fetch(version: str) -> Path:
    return fetch_release(version, lambda message: print(message, file=sys.stderr))


def main(argv: list[str]) -> int:
    if len(argv) != 2:
        print(__doc__, file=sys.stderr)
        return 2
    print(fetch(argv[1]))
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv))
