#!/usr/bin/env python3
"""A standalone Spark cluster on loopback, started from the pyspark distribution in the venv (run on demand).

    python benchmarks/spark_cluster.py --workers 2                 # prints spark://127.0.0.1:PORT, Ctrl-C stops it
    python benchmarks/spark_cluster.py --workers 2 -- spillway rescale CHK --plan P -p parse=3 --out O --master {master}

One master and N workers (``--cores`` and ``--memory`` each; 1 core and 1 GiB by default), each a JVM of
its own run with Spark's classes from ``$SPARK_HOME/jars`` (the class ``spark-class`` would start:
``org.apache.spark.deploy.master.Master`` and ``...worker.Worker``; started with ``java`` directly because
pip's pyspark has no RELEASE file for the shell scripts to find the Scala version). Every daemon gets a
process group of its own, and leaving (the command's end, Ctrl-C, SIGTERM) kills each group: the master,
the workers and the executor JVMs the workers forked. Logs and work directories go to ``--dir`` (a temp
directory by default). With a command after ``--``, ``{master}`` in it is replaced by the master's URL, the
command runs (``SPARK_MASTER`` is set too) and the cluster is stopped when it ends; its exit status is this
script's.
"""

from __future__ import annotations

import argparse
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager, suppress
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
PY = str(ROOT / ".venv" / "bin" / "python") if (ROOT / ".venv" / "bin" / "python").exists() else sys.executable
REGISTER_TIMEOUT = 90.0


def _java() -> str:
    home = os.environ.get("JAVA_HOME")
    java = Path(home, "bin", "java") if home else shutil.which("java")
    if not java:
        raise SystemExit("java (17) is needed for a standalone cluster")
    return str(java)


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def _stop(proc: subprocess.Popen[bytes]) -> None:
    if proc.poll() is not None:
        return
    try:
        os.killpg(proc.pid, signal.SIGTERM)
        proc.wait(timeout=15)
    except (ProcessLookupError, subprocess.TimeoutExpired):
        with suppress(ProcessLookupError):
            os.killpg(proc.pid, signal.SIGKILL)
        proc.wait()


@contextmanager
def standalone(
    workers: int, base: Path, cores: int = 1, memory: str = "1g", python: str = PY
) -> Iterator[tuple[str, tuple[int, ...]]]:
    """(spark://127.0.0.1:PORT, the worker daemons' pids) of a fresh standalone master with ``workers``
    registered workers of ``cores`` cores and ``memory`` each; stopped (process groups killed) on exit."""
    import pyspark

    home = Path(pyspark.__file__).parent
    base.mkdir(parents=True, exist_ok=True)
    port = _free_port()
    url = f"spark://127.0.0.1:{port}"
    env = {
        **os.environ,
        "SPARK_HOME": str(home),
        "SPARK_SCALA_VERSION": "2.13",
        "SPARK_LOCAL_IP": "127.0.0.1",
        "PYSPARK_PYTHON": python,
    }

    def daemon(cls: str, args: list[str], log: Path) -> subprocess.Popen[bytes]:
        cmd = [_java(), "-Xmx512m", "-cp", f"{home / 'jars'}/*", cls, *args]
        return subprocess.Popen(
            cmd, stdout=log.open("wb"), stderr=subprocess.STDOUT, env=env, start_new_session=True, cwd=base
        )

    master_log = base / "master.log"
    procs = [
        daemon(
            "org.apache.spark.deploy.master.Master",
            ["--host", "127.0.0.1", "--port", str(port), "--webui-port", "0"],
            master_log,
        )
    ]
    try:
        for i in range(workers):
            work = base / f"work-{i}"
            work.mkdir(exist_ok=True)
            args = [url, "--host", "127.0.0.1", "--cores", str(cores), "--memory", memory, "--webui-port", "0"]
            worker = "org.apache.spark.deploy.worker.Worker"
            procs.append(daemon(worker, [*args, "--work-dir", str(work)], base / f"worker-{i}.log"))
        registered = re.compile(rf"Registering worker 127\.0\.0\.1:\d+ with {cores} cores")
        deadline = time.monotonic() + REGISTER_TIMEOUT
        while len(registered.findall(master_log.read_text(errors="replace"))) < workers:
            if any(p.poll() is not None for p in procs) or time.monotonic() > deadline:
                raise SystemExit(f"standalone cluster did not come up; logs in {base}")
            time.sleep(0.2)
        yield url, tuple(p.pid for p in procs[1:])
    finally:
        for p in reversed(procs):
            _stop(p)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--workers", type=int, default=2)
    ap.add_argument("--cores", type=int, default=1, help="cores per worker")
    ap.add_argument("--memory", default="1g", help="memory per worker")
    ap.add_argument("--dir", type=Path, help="logs and work directories (default: a temp directory)")
    ap.add_argument("command", nargs=argparse.REMAINDER, help="-- COMMAND ... ({master} is the master's URL)")
    args = ap.parse_args()
    command = args.command[1:] if args.command[:1] == ["--"] else args.command
    base = args.dir or Path(tempfile.mkdtemp(prefix="spillway-spark-cluster-"))
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))  # leave through the context manager's teardown
    with standalone(args.workers, base, args.cores, args.memory) as (url, _):
        print(f"{url} ({args.workers} workers x {args.cores} cores, logs in {base})", flush=True)
        if not command:
            with suppress(KeyboardInterrupt):
                while True:
                    time.sleep(3600)
            return 0
        cmd = [part.replace("{master}", url) for part in command]
        return subprocess.run(cmd, env={**os.environ, "SPARK_MASTER": url}).returncode


if __name__ == "__main__":
    sys.exit(main())
