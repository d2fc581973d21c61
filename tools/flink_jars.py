#!/usr/bin/env python3
"""Fetch the jars of one Apache Flink release from PyPI and print the directory holding them.

Flink 1.14+ publishes its jars in ``apache-flink-libraries``; older releases ship them inside the
``apache-flink`` source archive. Only ``lib/*.jar`` is extracted (flink-dist, table, logging) —
that is all a local MiniCluster job needs. Results are cached, so repeated calls are free.

    python tools/flink_jars.py 2.3.0          # -> ~/.cache/spillway/flink/2.3.0/lib
"""

from __future__ import annotations

import os
import subprocess
import sys
import tarfile
import tempfile
import zipfile
from pathlib import Path


def cache_root() -> Path:
    return Path(os.environ.get("SPILLWAY_FLINK_CACHE", Path.home() / ".cache" / "spillway" / "flink"))


def _package_for(version: str) -> tuple[str, list[str]]:
    major, minor = (int(p) for p in version.split(".")[:2])
    if (major, minor) >= (1, 14):
        return "apache-flink-libraries", []
    return "apache-flink", ["--no-binary", ":all:"]


def _is_lib_jar(name: str) -> bool:
    parts = name.split("/")
    return name.endswith(".jar") and len(parts) >= 2 and parts[-2] == "lib"


def fetch(version: str) -> Path:
    lib = cache_root() / version / "lib"
    if (lib / ".complete").exists():
        return lib
    package, extra = _package_for(version)
    with tempfile.TemporaryDirectory() as tmp:
        subprocess.run(
            [sys.executable, "-m", "pip", "download", "--no-deps", "-q", *extra, f"{package}=={version}", "-d", tmp],
            check=True,
            stdout=subprocess.DEVNULL,
        )
        (archive,) = list(Path(tmp).iterdir())
        staging = lib.with_name("lib.partial")
        staging.mkdir(parents=True, exist_ok=True)
        if archive.suffix in (".whl", ".zip"):
            with zipfile.ZipFile(archive) as zf:
                for name in zf.namelist():
                    if _is_lib_jar(name):
                        (staging / Path(name).name).write_bytes(zf.read(name))
        else:
            with tarfile.open(archive) as tf:
                for member in tf:
                    if member.isfile() and _is_lib_jar(member.name):
                        src = tf.extractfile(member)
                        assert src is not None
                        (staging / Path(member.name).name).write_bytes(src.read())
        if not any(staging.glob("flink-dist*.jar")):
            raise SystemExit(f"no flink-dist jar found in {archive.name}")
        (staging / ".complete").write_text(version)
        if lib.exists():
            import shutil

            shutil.rmtree(lib)
        staging.rename(lib)
    return lib


def main(argv: list[str]) -> int:
    if len(argv) != 2:
        print(__doc__, file=sys.stderr)
        return 2
    print(fetch(argv[1]))
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv))
