#!/usr/bin/env python3
"""Print what spillway's caches hold and how big they are (``make test`` runs this before and after the
suite): the Flink jars per release (tools/flink_jars.py, fetched from PyPI when a test first needs a
release), the Spark class-data caches, the compiled Flink test jobs and the other small caches.

    python tools/caches.py
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "tools"))

from flink_jars import cache_root as flink_root  # noqa: E402


def spillway_root() -> Path:
    return Path(os.environ.get("SPILLWAY_CACHE", Path.home() / ".cache" / "spillway"))


def size(path: Path) -> int:
    if path.is_file():
        return path.stat().st_size
    return sum(p.stat().st_size for p in path.rglob("*") if p.is_file() and not p.is_symlink())


def mb(n: int) -> str:
    return f"{n / 1e9:.1f} GB" if n >= 1e9 else f"{n / 1e6:.0f} MB"


def main() -> int:
    flink = flink_root()
    releases = sorted(
        (d for d in flink.iterdir() if (d / "lib" / ".complete").exists()) if flink.is_dir() else [],
        key=lambda d: [int(x) for x in d.name.split(".") if x.isdigit()],
    )
    jar_sizes = {d.name: size(d) for d in releases}
    print(f"Flink jars in {flink}: {len(releases)} releases, {mb(sum(jar_sizes.values()))}")
    if jar_sizes:
        print("  " + ", ".join(f"{r} {mb(n)}" for r, n in jar_sizes.items()))
    print("  a release not listed is fetched from PyPI when a test first needs it (190-300 MB, announced)")
    root = spillway_root()
    for d in sorted(root.iterdir()) if root.is_dir() else []:
        if d.resolve() != flink.resolve():
            print(f"{d.name} in {root}: {mb(size(d))}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
