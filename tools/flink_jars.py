#!/usr/bin/env python3
"""Fetch the jars of one Apache Flink release from PyPI and print the directory holding them.

Flink 1.14+ publishes its jars in ``apache-flink-libraries`` (so does 1.13.6, the only 1.13 release there);
older releases ship them inside the ``apache-flink`` source archive. The other package is tried when the first
one does not exist for the version or holds no flink-dist jar. Only ``lib/*.jar`` is extracted (flink-dist,
table, logging) — that is all a local MiniCluster job needs. Results are cached, so repeated calls are free.

    python tools/flink_jars.py 2.3.0          # -> ~/.cache/spillway/flink/2.3.0/lib
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tarfile
import tempfile
import zipfile
from pathlib import Path


def cache_root() -> Path:
    return Path(os.environ.get("SPILLWAY_FLINK_CACHE", Path.home() / ".cache" / "spillway" / "flink"))


LIBRARIES = ("apache-flink-libraries", [])
SDIST = ("apache-flink", ["--no-binary", ":all:"])


def _packages_for(version: str) -> list[tuple[str, list[str]]]:
    """Packages to try, in order (the second only if the first fails or has no flink-dist jar)."""
    major, minor = (int(p) for p in version.split(".")[:2])
    if (major, minor) >= (1, 13):
        return [LIBRARIES, SDIST]
    return [SDIST, LIBRARIES]


def _is_lib_jar(name: str) -> bool:
    parts = name.split("/")
    return name.endswith(".jar") and len(parts) >= 2 and parts[-2] == "lib"


def fetch(version: str) -> Path:
    lib = cache_root() / version / "lib"
    if (lib / ".complete").exists():
        return lib
    problems = []
    for package, extra in _packages_for(version):
        problem = _fetch_from(package, extra, version, lib)
        if problem is None:
            return lib
        problems.append(problem)
    raise SystemExit(f"no jars for Flink {version}: " + "; ".join(problems))


def _fetch_from(package: str, extra: list[str], version: str, lib: Path) -> str | None:
    """Extract ``lib/*.jar`` of ``package==version`` into ``lib``; None on success, else why not."""
    with tempfile.TemporaryDirectory() as tmp:
        res = subprocess.run(
            [sys.executable, "-m", "pip", "download", "--no-deps", "-q", *extra, f"{package}=={version}", "-d", tmp],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
            text=True,
        )
        if res.returncode != 0:
            return f"{package}=={version} not downloadable ({res.stderr.strip().splitlines()[-1:]})"
        (archive,) = list(Path(tmp).iterdir())
        staging = lib.with_name("lib.partial")
        if staging.exists():
            shutil.rmtree(staging)
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
            return f"no flink-dist jar found in {archive.name}"
        (staging / ".complete").write_text(version)
        if lib.exists():
            shutil.rmtree(lib)
        staging.rename(lib)
    return None


def main(argv: list[str]) -> int:
    if len(argv) != 2:
        print(__doc__, file=sys.stderr)
        return 2
    print(fetch(argv[1]))
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv))
