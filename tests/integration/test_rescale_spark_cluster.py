"""`spillway rescale --master spark://…` on a real standalone Spark cluster (a master and one worker
started on loopback from the pyspark distribution in the venv) writes byte-identical output to
`local[*]` and to the in-process backend — every file, `_metadata` included.

Rescales the real 2.3.0 "counted" checkpoint: parse 2->3 (REBALANCE input, balanced by bytes) and
count 2->3 (keyBy input routed by key group with `tuple:0:long`, keyed state cut and merged). Each
rescale runs through the CLI in its own process (a SparkSession is a per-process singleton)."""

from __future__ import annotations

import contextlib
import json
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pyspark
import pytest

pytestmark = [pytest.mark.slow]

FIXTURE = Path(__file__).parents[1] / "fixtures" / "2.3.0-counted"
SPARK_HOME = Path(pyspark.__file__).parent
SPILLWAY = [sys.executable, "-m", "spillway"]
REGISTER_TIMEOUT = 45.0


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _java() -> str:
    home = os.environ.get("JAVA_HOME")
    java = Path(home, "bin", "java") if home else shutil.which("java")
    assert java, "java (17) is needed for Spark"
    return str(java)


def _daemon(cls: str, args: list[str], log: Path, env: dict[str, str]) -> subprocess.Popen:
    cmd = [_java(), "-Xmx512m", "-cp", f"{SPARK_HOME / 'jars'}/*", cls, *args]
    # Own process group: teardown kills the daemon and the executor JVMs the worker forked.
    return subprocess.Popen(
        cmd, stdout=log.open("wb"), stderr=subprocess.STDOUT, env=env, start_new_session=True, cwd=log.parent
    )


def _stop(proc: subprocess.Popen) -> None:
    if proc.poll() is None:
        try:
            os.killpg(proc.pid, signal.SIGTERM)
            proc.wait(timeout=10)
        except (ProcessLookupError, subprocess.TimeoutExpired):
            with contextlib.suppress(ProcessLookupError):
                os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()


@pytest.fixture(scope="module")
def spark_cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[str, Path]]:
    """(spark://127.0.0.1:PORT, the worker's work dir) of a fresh standalone master with one registered
    1-core worker."""
    base = tmp_path_factory.mktemp("spark-cluster")
    port = _free_port()
    url = f"spark://127.0.0.1:{port}"
    env = {
        **os.environ,
        "SPARK_HOME": str(SPARK_HOME),  # the worker builds executor command lines from it
        # pip's pyspark has no RELEASE file, so Spark's launcher takes it for a source build and asks
        # for the Scala version instead of finding build directories.
        "SPARK_SCALA_VERSION": "2.13",
        "SPARK_LOCAL_IP": "127.0.0.1",
        "SPARK_NO_DAEMONIZE": "1",
        "PYSPARK_PYTHON": sys.executable,  # executors' python workers: this venv (spillway installed)
    }
    master = _daemon(
        "org.apache.spark.deploy.master.Master",
        ["--host", "127.0.0.1", "--port", str(port), "--webui-port", "0"],
        base / "master.log",
        env,
    )
    worker = None
    try:
        work = base / "work"
        work.mkdir()
        worker = _daemon(
            "org.apache.spark.deploy.worker.Worker",
            [
                url,
                "--host",
                "127.0.0.1",
                "--cores",
                "1",
                "--memory",
                "1g",
                "--webui-port",
                "0",
                "--work-dir",
                str(work),
            ],
            base / "worker.log",
            env,
        )
        deadline = time.monotonic() + REGISTER_TIMEOUT
        log = base / "master.log"
        while not re.search(r"Registering worker 127\.0\.0\.1:\d+ with 1 cores", log.read_text(errors="replace")):
            for p, name in ((master, "master"), (worker, "worker")):
                if p.poll() is not None:
                    pytest.fail(f"spark {name} exited ({p.returncode}):\n{(base / f'{name}.log').read_text()[-3000:]}")
            if time.monotonic() > deadline:
                pytest.fail(
                    f"no worker registered with {url} within {REGISTER_TIMEOUT:.0f} s:\n{log.read_text()[-3000:]}"
                )
            time.sleep(0.2)
        yield url, work
    finally:
        if worker is not None:
            _stop(worker)
        _stop(master)


def _rescale(out: Path, master: str) -> str:
    # SRC relative to the driver's working directory: executors run elsewhere (their work dir) and must
    # still find the old channel files.
    root = Path(__file__).parents[2]
    chk = next(FIXTURE.glob("checkpoints/*/chk-*")).relative_to(root)
    cmd = [
        *SPILLWAY,
        "rescale",
        str(chk),
        "--plan",
        str(FIXTURE / "jobgraph.json"),
        "-p",
        "parse=3",
        "-p",
        "count=3",
        "--key",
        "count=tuple:0:long",
        "--out",
        str(out),
        "--master",
        master,
        "--json",
    ]
    env = {**os.environ, "SPARK_LOCAL_IP": "127.0.0.1", "PYSPARK_PYTHON": sys.executable}
    res = subprocess.run(cmd, capture_output=True, text=True, env=env, timeout=300, cwd=root)
    assert res.returncode == 0, f"{master}: exit {res.returncode}\n{res.stdout}\n{res.stderr[-4000:]}"
    return res.stdout


def _tree(root: Path) -> dict[str, bytes]:
    return {str(p.relative_to(root)): p.read_bytes() for p in sorted(root.rglob("*")) if p.is_file()}


def test_standalone_cluster_writes_the_same_bytes_as_local_and_inprocess(
    spark_cluster: tuple[str, Path], tmp_path: Path
) -> None:
    url, work = spark_cluster
    outs = {m: tmp_path / re.sub(r"\W+", "_", m) for m in (url, "local[*]", "inprocess")}
    docs = {m: json.loads(_rescale(out, m)) for m, out in outs.items()}

    # The job really ran on the cluster: the worker launched an executor for the application.
    assert list(work.glob("app-*/*/stderr")), "the worker ran no executor"
    trees = {m: _tree(out) for m, out in outs.items()}
    cluster = trees[url]
    assert "_metadata" in cluster
    assert sum(n.endswith(".channels") for n in cluster) == 8  # parse 3 + count 3 + check 2 input files
    for m in ("local[*]", "inprocess"):
        assert sorted(trees[m]) == sorted(cluster), m
        for name, data in cluster.items():
            assert trees[m][name] == data, f"{name}: {url} and {m} differ"
    assert docs[url]["records_moved"] == docs["inprocess"]["records_moved"] > 0
    assert docs[url]["vertices"] == docs["local[*]"]["vertices"]
