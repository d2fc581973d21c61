"""The jars of one Apache Flink release: ``$FLINK_HOME/lib`` when ``FLINK_HOME`` is set, else downloaded once from
PyPI into a cache (``~/.cache/spillway/flink/<release>/lib``; ``SPILLWAY_FLINK_CACHE`` moves it).

Flink 1.14+ publishes its jars in ``apache-flink-libraries`` (so does 1.13.6, the only 1.13 release there);
older releases ship them inside the ``apache-flink`` source archive. The other package is tried when the first
one does not exist for the version or holds no flink-dist jar. Only ``lib/*.jar`` is kept (flink-dist, table,
logging): all that planning or running a job locally needs. A download is staged in a directory of its own and
renamed into place, so concurrent first uses never see half a release.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tarfile
import tempfile
import zipfile
from collections.abc import Callable
from pathlib import Path

from spillway.errors import StorageError, UsageError
from spillway.progress import stage

__all__ = ["cache_root", "fetch_release", "flink_lib"]

Notify = Callable[[str], None]

_LIBRARIES: tuple[str, list[str]] = ("apache-flink-libraries", [])
_SDIST: tuple[str, list[str]] = ("apache-flink", ["--no-binary", ":all:"])
_COMPLETE = ".complete"


def cache_root() -> Path:
    return Path(os.environ.get("SPILLWAY_FLINK_CACHE", Path.home() / ".cache" / "spillway" / "flink"))


def flink_lib(release: str, notify: Notify | None = None) -> Path:
    """The directory holding the jars of Flink ``release``: ``$FLINK_HOME/lib`` if ``FLINK_HOME`` is set (its
    release must be ``release``), else the cached download (fetched now if missing)."""
    home = os.environ.get("FLINK_HOME")
    if home:
        lib = Path(home) / "lib"
        dist = sorted(lib.glob("flink-dist*.jar"))
        if not dist:
            raise UsageError(f"FLINK_HOME={home}: no lib/flink-dist*.jar there (not a Flink distribution)")
        found = dist[0].stem.rpartition("-")[2]
        if found != release:
            raise UsageError(
                f"FLINK_HOME={home} is Flink {found}, the job is for {release}: "
                "unset FLINK_HOME or point it at that release"
            )
        return lib
    return fetch_release(release, notify)


def _packages_for(version: str) -> list[tuple[str, list[str]]]:
    """Packages to try, in order (the second only if the first fails or has no flink-dist jar)."""
    major, minor = (int(p) for p in version.split(".")[:2])
    if (major, minor) >= (1, 13):
        return [_LIBRARIES, _SDIST]
    return [_SDIST, _LIBRARIES]


def _is_lib_jar(name: str) -> bool:
    parts = name.split("/")
    return name.endswith(".jar") and len(parts) >= 2 and parts[-2] == "lib"


def fetch_release(version: str, notify: Notify | None = None) -> Path:
    """``lib/*.jar`` of Flink ``version`` from PyPI, cached; the cached copy when there is one."""
    parts = version.split(".")
    if len(parts) < 2 or not all(p.isdigit() for p in parts):
        raise UsageError(f"Flink release {version!r}: expected a version like 1.20.3")
    lib = cache_root() / version / "lib"
    if (lib / _COMPLETE).exists():
        return lib
    problems = []
    for package, extra in _packages_for(version):
        said = f"downloading Flink {version}'s jars ({package} from PyPI, 100-400 MB; cached in {lib.parent})"
        if notify is not None:
            notify(said)
        shown = stage(said, None, "files")
        try:
            problem = _fetch_from(package, extra, version, lib)
        finally:
            shown.done()
        if problem is None:
            return lib
        problems.append(problem)
    raise StorageError(f"no jars for Flink {version}: " + "; ".join(problems) + " (or set FLINK_HOME)")


def _fetch_from(package: str, extra: list[str], version: str, lib: Path) -> str | None:
    """Extract ``lib/*.jar`` of ``package==version`` into ``lib``; None on success, else why not."""
    lib.parent.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(dir=lib.parent, prefix=".download-") as tmp:
        download = Path(tmp) / "download"
        res = subprocess.run(
            [
                sys.executable,
                "-m",
                "pip",
                "download",
                "--no-deps",
                "-q",
                *extra,
                f"{package}=={version}",
                "-d",
                f"{download}",
            ],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
            text=True,
        )
        if res.returncode != 0:
            last = res.stderr.strip().splitlines()[-1:] or ["pip failed"]
            return f"{package}=={version} not downloadable ({last[0]})"
        (archive,) = list(download.iterdir())
        staging = Path(tmp) / "lib"
        staging.mkdir()
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
                        if src is not None:
                            (staging / Path(member.name).name).write_bytes(src.read())
        if not any(staging.glob("flink-dist*.jar")):
            return f"no flink-dist jar found in {archive.name}"
        (staging / _COMPLETE).write_text(version)
        if (lib / _COMPLETE).exists():
            return None  # another process finished first
        if lib.exists():
            shutil.rmtree(lib)  # an incomplete copy of an older layout
        try:
            staging.rename(lib)
        except OSError:
            if not (lib / _COMPLETE).exists():
                raise
    return None
