"""What ``hdfs://`` needs on this machine, checked before pyarrow tries to load it.

pyarrow reaches HDFS through Hadoop's ``libhdfs``, which runs a JVM inside this process: it needs
``libjvm.so`` (found through ``JAVA_HOME``), ``libhdfs.so`` (``ARROW_LIBHDFS_DIR``, ``HADOOP_HOME``'s
``lib/native`` or the system's library path) and Hadoop's jars on ``CLASSPATH``. Without them pyarrow
prints one ``dlopen(...) failed`` line per place it looked (89 here) and raises "Unable to load
libjvm"; this module says in one line what is missing and how to provide it.
"""

from __future__ import annotations

import ctypes.util
import os
import sys
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

# Where a JDK or JRE keeps libjvm.so below JAVA_HOME (JDK 9+, then JDK 8 layouts).
_JVM_PLACES = ("lib/server", "jre/lib/server", "jre/lib/amd64/server", "lib/amd64/server", "jre/lib/aarch64/server")


def _libjvm(java_home: str) -> Path | None:
    for place in _JVM_PLACES:
        candidate = Path(java_home) / place / "libjvm.so"
        if candidate.is_file():
            return candidate
    return None


def _libhdfs() -> Path | str | None:
    for var, sub in (("ARROW_LIBHDFS_DIR", ""), ("HADOOP_HOME", "lib/native")):
        base = os.environ.get(var)
        if base and (Path(base) / sub / "libhdfs.so").is_file():
            return Path(base) / sub / "libhdfs.so"
    return ctypes.util.find_library("hdfs")


def why_no_hdfs_client() -> str | None:
    """None when libhdfs can be loaded here; else what is missing and how to provide it (one line)."""
    missing = []
    java_home = os.environ.get("JAVA_HOME")
    if not java_home:
        missing.append("JAVA_HOME is not set (point it at a JDK or JRE: it must hold lib/server/libjvm.so)")
    elif _libjvm(java_home) is None:
        missing.append(f"no libjvm.so under JAVA_HOME={java_home} (looked in {', '.join(_JVM_PLACES)})")
    if _libhdfs() is None:
        missing.append(
            "libhdfs.so not found (set ARROW_LIBHDFS_DIR to its directory, or HADOOP_HOME to a Hadoop "
            "installation with lib/native/libhdfs.so)"
        )
    if "hadoop" not in os.environ.get("CLASSPATH", "").lower():
        missing.append("CLASSPATH does not name Hadoop's jars (export CLASSPATH=$(hadoop classpath --glob))")
    return "; ".join(missing) or None


@contextmanager
def quiet_stderr() -> Iterator[None]:
    """Keep what the native client writes on file descriptor 2 (the JVM, libhdfs) off the terminal
    while it connects; what it said is dropped (the error raised says what went wrong)."""
    sys.stderr.flush()
    saved = os.dup(2)
    with tempfile.TemporaryFile() as sink:
        os.dup2(sink.fileno(), 2)
        try:
            yield
        finally:
            os.dup2(saved, 2)
            os.close(saved)
