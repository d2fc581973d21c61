"""Flink's own graph of a job's jar: runs the job's ``main(args)`` in Flink's plan-only environment, the way
``flink info`` does (nothing is executed, no cluster contacted), with the jars of the job's Flink release, and
returns the document spillway's Java helper (``spillway/flink/java/PlanIds.java``) writes.

The helper is compiled on first use with the machine's ``javac --release 8`` against that release's jars, into
``~/.cache/spillway/planids/<release>-<source hash>/`` (``SPILLWAY_PLANIDS_CACHE`` moves it); it is compiled into
a directory of its own and renamed into place, so concurrent first uses never see half-written classes.
"""

from __future__ import annotations

import functools
import hashlib
import json
import os
import re
import shutil
import signal
import subprocess
import tempfile
import zipfile
from collections.abc import Sequence
from dataclasses import dataclass
from importlib import resources
from pathlib import Path
from typing import Any

from spillway.errors import UsageError
from spillway.progress import stage
from spillway.storage.flink_release import Notify, flink_lib

__all__ = ["DEFAULT_TIMEOUT", "JobRun", "jar_release", "plan_job", "plan_jobs"]

#: Seconds a whole planning run may take (the JVM, the job's main, building the job graph).
DEFAULT_TIMEOUT = 300.0
_HELPER_CLASS = "spillway.planids.PlanIds"
_REPORT = "spillway-planids: "
_LOG_CONFIG = "spillway-planids-log4j2.properties"
# A job's main runs Flink's closure cleaner and serializer set-up, which reach into java.base by reflection; on a
# JDK 9+ that is refused unless the packages are opened, so a job that plans fine under `flink info` (whose scripts
# pass these, as env.java.opts.all of 1.18+ does) would fail here. Older JDKs do not know the flags: they are
# passed only when the JDK is 9 or newer.
_JDK9_OPENS = tuple(
    f"--add-opens=java.base/{package}=ALL-UNNAMED"
    for package in (
        "java.lang",
        "java.lang.reflect",
        "java.io",
        "java.net",
        "java.nio",
        "sun.nio.ch",
        "java.text",
        "java.time",
        "java.util",
        "java.util.concurrent",
        "java.util.concurrent.atomic",
        "java.util.concurrent.locks",
    )
)
_FIRST_TIER_ONLY = "-XX:TieredStopAtLevel=1"
_LOG_SETTINGS = "status = off\nrootLogger.level = off\n"
_INSTALL_JDK = "install a JDK (8 or newer), e.g. `apt-get install default-jdk-headless`"


def _cache_root() -> Path:
    return Path(os.environ.get("SPILLWAY_PLANIDS_CACHE", Path.home() / ".cache" / "spillway" / "planids"))


def _helper_source() -> bytes:
    return (resources.files("spillway.flink") / "java" / "PlanIds.java").read_bytes()


def _tool(name: str) -> str:
    path = shutil.which(name)
    if path is None:
        raise UsageError(f"{name} not found: spillway runs the job's main with Flink's own classes; {_INSTALL_JDK}")
    return path


def _helper_classes(release: str, lib: Path) -> Path:
    """The compiled helper for ``release`` (compiled now unless cached)."""
    source = _helper_source()
    digest = hashlib.sha256(source + _LOG_SETTINGS.encode() + str(lib.resolve()).encode()).hexdigest()[:16]
    classes = _cache_root() / f"{release}-{digest}"
    if (classes / ".complete").exists():
        return classes
    javac = _tool("javac")
    classes.parent.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(dir=classes.parent, prefix=".compile-") as tmp:
        src = Path(tmp) / "PlanIds.java"
        src.write_bytes(source)
        out = Path(tmp) / "classes"
        res = subprocess.run(
            [javac, "-nowarn", "-encoding", "UTF-8", "--release", "8", "-cp", f"{lib}/*", "-d", str(out), str(src)],
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
            timeout=DEFAULT_TIMEOUT,
        )
        if res.returncode != 0:
            errors = [line for line in res.stdout.splitlines() if "error:" in line][:1] or res.stdout.splitlines()[:1]
            raise UsageError(
                f"cannot compile spillway's Flink helper against Flink {release} ({lib}): "
                + (errors[0].strip() if errors else f"javac exit {res.returncode}")
            )
        # Flink logs through log4j2; a job's jar often carries its own log4j2.properties (writing files where
        # the job runs): ours, named on the command line, wins and logs nothing.
        (out / _LOG_CONFIG).write_text(_LOG_SETTINGS)
        (out / ".complete").write_text(release)
        try:
            out.rename(classes)
        except OSError:
            if not (classes / ".complete").exists():
                raise
    return classes


_POM_VERSION = re.compile(r"^version=(.+)$", re.M)


def jar_release(jar: Path) -> str | None:
    """The Flink release a fat jar was built with: the version of Flink's own artifacts it bundles
    (``META-INF/maven/org.apache.flink/*/pom.properties``), None when it bundles none (Flink is ``provided``)."""
    found: set[str] = set()
    with _open_jar(jar) as zf:
        for name in zf.namelist():
            if name.startswith("META-INF/maven/org.apache.flink/") and name.endswith("/pom.properties"):
                m = _POM_VERSION.search(zf.read(name).decode("utf-8", "replace"))
                if m and re.match(r"^\d+\.\d+\.\d+$", m.group(1).strip()):
                    found.add(m.group(1).strip())
    # connectors are versioned on their own (e.g. 3.2.0-1.19); Flink's core artifacts carry the release itself
    return sorted(found, key=lambda v: tuple(int(p) for p in v.split(".")))[-1] if len(found) == 1 else None


def _open_jar(jar: Path) -> zipfile.ZipFile:
    try:
        return zipfile.ZipFile(jar)
    except FileNotFoundError:
        raise UsageError(f"{jar}: no such job jar") from None
    except IsADirectoryError:
        raise UsageError(f"{jar}: a directory, not a job jar") from None
    except (zipfile.BadZipFile, OSError) as exc:
        raise UsageError(f"{jar}: not a jar (zip) file ({exc})") from None


def plan_job(
    jar: str | os.PathLike[str],
    release: str,
    *,
    entry_class: str | None = None,
    args: Sequence[str] = (),
    timeout: float = DEFAULT_TIMEOUT,
    notify: Notify | None = None,
) -> dict[str, Any]:
    """The helper's document for ``jar`` planned with Flink ``release``: the job's ``main(args)`` (``entry_class``,
    else the jar manifest's ``Main-Class``/``program-class``) runs in the plan-only environment. A job whose main
    fails, a bad jar, no Java, or a run longer than ``timeout`` seconds is a ``UsageError`` saying so."""
    path = Path(jar)
    _open_jar(path).close()
    lib = flink_lib(release, notify)
    classes = _helper_classes(release, lib)
    with tempfile.TemporaryDirectory(prefix="spillway-planids-") as tmp:
        out = Path(tmp) / "ids.json"
        cmd = [*_helper_command(classes, lib), *_job_arguments(JobRun(path, entry_class, tuple(args)), out)]
        shown = stage(f"running {path.name}'s main with Flink {release} (plan only)", None, "runs")
        try:
            returncode, err = _run_helper(cmd, timeout, path)
        finally:
            shown.done()
        if returncode != 0:
            said = [line[len(_REPORT) :] for line in err.splitlines() if line.startswith(_REPORT)]
            if said:
                raise UsageError(f"{path}: {said[-1]}")
            raise UsageError(_jvm_ended(path, returncode, err))
        return _document(out, path)


@dataclass(frozen=True)
class JobRun:
    """One job for :func:`plan_jobs`: its jar, its main class (None: the manifest's) and its own arguments."""

    jar: Path
    entry_class: str | None = None
    args: tuple[str, ...] = ()


def plan_jobs(
    runs: Sequence[JobRun],
    release: str,
    *,
    timeout: float = DEFAULT_TIMEOUT,
    notify: Notify | None = None,
) -> list[dict[str, Any] | UsageError]:
    """:func:`plan_job` for several jobs of one Flink ``release`` in one JVM (starting the JVM and loading Flink's
    classes is most of what planning one job costs): in ``runs``' order, each job's document, or the
    ``UsageError`` that job alone gets (the others are still planned). ``timeout`` seconds per job: a batch that
    outlives them all (a main that never builds its job holds up the JVM) is one ``UsageError`` for the batch."""
    if not runs:
        return []
    for run in runs:
        _open_jar(run.jar).close()
    lib = flink_lib(release, notify)
    classes = _helper_classes(release, lib)
    with tempfile.TemporaryDirectory(prefix="spillway-planids-") as tmp:
        outs = [Path(tmp) / f"ids-{i}.json" for i in range(len(runs))]
        listing = Path(tmp) / "jobs"
        listing.write_text(
            "".join(
                " ".join(a.encode("utf-8").hex() for a in _job_arguments(run, out)) + "\n"
                for run, out in zip(runs, outs, strict=True)
            )
        )
        cmd = [*_helper_command(classes, lib), "--batch", str(listing)]
        shown = stage(f"running {len(runs)} jobs' mains with Flink {release} (plan only)", None, "runs")
        try:
            returncode, err = _run_helper(cmd, timeout * len(runs), runs[0].jar)
        finally:
            shown.done()
        found: list[dict[str, Any] | UsageError] = []
        for run, out in zip(runs, outs, strict=True):
            failed = out.with_name(out.name + ".failed")
            if failed.exists():
                found.append(UsageError(f"{run.jar}: {failed.read_text().partition(chr(9))[2]}"))
            elif out.exists():
                try:
                    found.append(_document(out, run.jar))
                except UsageError as exc:
                    found.append(exc)
            else:  # the JVM ended before it came to this job
                found.append(UsageError(_jvm_ended(run.jar, returncode, err)))
        return found


def _helper_command(classes: Path, lib: Path) -> list[str]:
    """The java command line that runs the helper (compiled into ``classes``) with Flink's jars in ``lib``."""
    java = _tool("java")
    logging = f"-Dlog4j.configurationFile={classes / _LOG_CONFIG}"
    # A planning run is all class loading and start-up code, which the JIT's first tier compiles soonest: about
    # 40 % less CPU than the default tiered compilation (measured on a 13-job batch); JDK 8 knows the flag too.
    cmd = [java, _FIRST_TIER_ONLY, *_jdk_opens(java), logging, f"-Dlog4j2.configurationFile={classes / _LOG_CONFIG}"]
    return [*cmd, "-cp", f"{classes}{os.pathsep}{lib}/*", _HELPER_CLASS]


def _job_arguments(run: JobRun, out: Path) -> list[str]:
    args = ["--jar", str(run.jar.resolve()), "--out", str(out)]
    if run.entry_class:
        args += ["--class", run.entry_class]
    return [*args, "--", *run.args]


def _run_helper(cmd: list[str], timeout: float, path: Path) -> tuple[int, str]:
    """(exit code, stderr) of the helper's JVM; a run longer than ``timeout`` seconds is a ``UsageError``."""
    # In the caller's directory, as `flink info`: a job's arguments may name files relative to it.
    proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True, start_new_session=True)
    try:
        _, err = proc.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        raise UsageError(
            f"{path}: the job's main did not finish planning within {timeout:g} s "
            "(does it wait for something before building its job?)"
        ) from None
    finally:
        if proc.poll() is None:  # timed out or interrupted: the JVM (its own session) goes with us
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
    return proc.returncode, err


def _jvm_ended(path: Path, returncode: int, err: str) -> str:
    last = (err.strip().splitlines() or [""])[-1].strip()
    return (
        f"{path}: the JVM ended (exit code {returncode}) before Flink built the job; does the job's "
        "main call System.exit?" + (f" Last line it printed: {last}" if last else "")
    )


def _document(out: Path, path: Path) -> dict[str, Any]:
    try:
        doc: dict[str, Any] = json.loads(out.read_text())
    except (OSError, ValueError) as exc:
        raise UsageError(f"{path}: spillway's Flink helper wrote no readable document ({exc})") from None
    return doc


@functools.lru_cache(maxsize=8)  # one `java -version` per java a process uses, not one per planned job
def _jdk_opens(java: str) -> tuple[str, ...]:
    """The module opens a job's main needs on JDK 9+ (none on 8, which would refuse the flags)."""
    try:
        shown = subprocess.run([java, "-version"], capture_output=True, text=True, timeout=30).stderr
    except (OSError, subprocess.SubprocessError):
        return _JDK9_OPENS  # the run itself will say what is wrong with this java
    return () if '"1.' in shown else _JDK9_OPENS
