"""A class-data-sharing archive (Java AppCDS) for the local Spark driver JVM.

Most of a small local rescale is JVM warm-up: loading Spark's classes takes about 7 s to start the
session and 4 s for the first job on a 2-core machine; with the classes mapped from an archive it is about
4 s and 2 s (measured, docs/rescale.md). The first ``local[…]`` run without an archive asks its JVM
to write one when it exits (``-XX:ArchiveClassesAtExit``, into a ``.part`` file), and records the JVM's
pid; a later run renames the ``.part`` into place once that JVM is gone, and from then on every local run
maps it (``-XX:SharedArchiveFile``). The archive is keyed by the pyspark release and the java binary; a
JVM that cannot use it (another JDK, changed jars) ignores it and starts as usual. Only speed depends on
this. ``SPILLWAY_SPARK_CDS=0`` turns it off.

Spark's launcher puts its configuration directory (``SPARK_CONF_DIR``, else ``SPARK_HOME/conf``) first on the
driver's class path, and a JVM maps an archive only with the class path it was dumped with (else it says
"shared class paths mismatch" and starts without it): so the archive is keyed by that directory too. A JVM cannot
dump one at all while a non-empty directory is on its class path ("non-empty directory"), so with a
``SPARK_CONF_DIR`` that holds files (a ``spark-defaults.conf``) no archive is built or used.
"""

from __future__ import annotations

import hashlib
import os
import shutil
import time
from pathlib import Path
from typing import Any

from spillway.cache import cache_root

STALE = 15 * 60  # seconds after which an archive build that never recorded its JVM is given up
MAGIC = bytes.fromhex("a8ab0bf0")  # a dynamic CDS archive's magic number 0xf00baba8, little-endian
# JVM warnings go to stderr (a log file while Spark runs) instead of stdout, where --json goes; the CDS
# dump's own per-class warnings (hundreds) are dropped.
QUIET = "-Xlog:disable -Xlog:all=warning,cds*=off:stderr"


def cache_dir() -> Path:
    return cache_root() / "spark-cds"


def _java() -> str:
    home = os.environ.get("JAVA_HOME")
    found = str(Path(home) / "bin" / "java") if home else shutil.which("java")
    return os.path.realpath(found) if found else ""


def conf_dir() -> str:
    """The directory Spark's launcher puts first on the driver JVM's class path: ``SPARK_CONF_DIR``, else
    ``SPARK_HOME/conf`` (``SPARK_HOME``: the pyspark package, where pip installs Spark)."""
    import pyspark

    home = os.environ.get("SPARK_HOME") or os.path.dirname(pyspark.__file__)
    return os.environ.get("SPARK_CONF_DIR") or os.path.join(home, "conf")


def _holds_files(directory: str) -> bool:
    try:
        with os.scandir(directory) as entries:
            return any(True for _ in entries)
    except OSError:  # missing (the usual SPARK_HOME/conf of a pip install) or not a directory
        return False


def archive_key() -> str:
    import pyspark

    java = _java()
    stamp = os.stat(java).st_mtime_ns if java else 0
    text = f"{pyspark.__version__}|{os.path.dirname(pyspark.__file__)}|{java}|{stamp}|{conf_dir()}"
    return hashlib.sha256(text.encode()).hexdigest()[:16]


def _paths(key: str) -> tuple[Path, Path, Path]:
    d = cache_dir()
    return d / f"spark-{key}.jsa", d / f"spark-{key}.jsa.part", d / f"spark-{key}.building"


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)  # PermissionError: alive, just not ours
    except ProcessLookupError:
        return False
    except PermissionError:
        pass
    return True


def _promote(key: str) -> None:
    """Move a finished build into place, or clear an abandoned one."""
    final, part, building = _paths(key)
    try:
        text = building.read_text().strip()
        age = time.time() - building.stat().st_mtime
    except OSError:
        return
    if not text.isdigit():
        if age > STALE:  # the JVM never started (or its pid was never recorded)
            part.unlink(missing_ok=True)
            building.unlink(missing_ok=True)
        return
    if _alive(int(text)):
        return
    try:
        with open(part, "rb") as f:
            good = f.read(4) == MAGIC
    except OSError:
        good = False
    if good:
        os.replace(part, final)
    else:
        part.unlink(missing_ok=True)
    building.unlink(missing_ok=True)


def java_options() -> tuple[str, Path | None]:
    """Extra driver JVM options, and the build marker to pass to ``record_jvm`` once the JVM runs (None
    when this run does not build the archive)."""
    if os.environ.get("SPILLWAY_SPARK_CDS", "1") == "0":
        return "", None
    try:
        if _holds_files(conf_dir()):  # no archive can be dumped with it on the class path, none mapped
            return "", None
        key = archive_key()
        final, part, building = _paths(key)
        _promote(key)
        if final.is_file():
            return f"-XX:SharedArchiveFile={final} -Xshare:auto {QUIET}", None
        building.parent.mkdir(parents=True, exist_ok=True)
        os.close(os.open(building, os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o644))
    except OSError:  # another run is building it, or the cache is not writable: start as usual
        return "", None
    part.unlink(missing_ok=True)
    return f"-XX:ArchiveClassesAtExit={part} {QUIET}", building


def record_jvm(sc: Any, building: Path) -> None:
    """Note the driver JVM's pid (``sc``: its SparkContext), so a later run knows when its archive is complete."""
    try:
        pid = sc._jvm.java.lang.ProcessHandle.current().pid()
        building.write_text(str(pid))
    except Exception:  # only speed depends on this; the marker goes stale and is cleared
        pass
