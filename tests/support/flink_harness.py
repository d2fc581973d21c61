"""Restore a checkpoint with real Apache Flink and report whether Flink accepts it.

    result = restore("2.3.0", "finished", fixture.checkpoint_dir, variant="rewired-fully-finished",
                     plan_out=tmp_path / "plan.json")
    result["outcome"]   # "restored" | "refused" | "failed"; result["error"] is Flink's root-cause message

Runs ``spillway.fixtures.RestoreCheck`` (tests/fixtures/generator/java/) on a local MiniCluster: the fixture
scenario's job, optionally modified by a variant, submitted with the checkpoint as its restore path. Jars come
from ``tools/flink_jars.py`` and classes from the generator's compile cache (both reused across runs; see
tests/fixtures/generator/README.md, "Restore harness"). The checkpoint is always copied first: Flink never sees
a path inside tests/fixtures/.

One JVM per release serves the restores of a test session one after the other (``RestoreServer``,
tests/support/java/restore/): JVM start-up and loading Flink's classes were most of a restore's cost. Each restore
still starts and closes a MiniCluster of its own. ``SPILLWAY_RESTORE_SERVER=0`` runs every restore in a JVM of its
own instead (to rule out that one restore affects the next).
"""

from __future__ import annotations

import atexit
import contextlib
import fcntl
import hashlib
import importlib.util
import json
import os
import queue
import shutil
import subprocess
import tempfile
import threading
import time
from collections import OrderedDict
from functools import cache
from pathlib import Path
from types import ModuleType
from typing import Any

from spillway.model.checkpoint import FileHandle, SegmentFileHandle
from spillway.model.walk import all_stream_handles
from spillway.storage.load import load_checkpoint
from support.announce import announce

TESTS = Path(__file__).resolve().parents[1]
GENERATE = TESTS / "fixtures" / "generator" / "generate.py"
TIMEOUT = 120  # seconds for one RestoreCheck run (JVM start, MiniCluster, restore, --run-seconds)
SERVER_SOURCE = Path(__file__).parent / "java" / "restore" / "RestoreServer.java"
SERVER_DONE = "spillway-restore-done "
# Restores one JVM serves before a fresh one takes over: bounds what closed MiniClusters leave behind in it.
SERVER_RUNS = 40
# JVMs kept waiting at once, one per release (each holds a few hundred MB); the least recently used one goes.
SERVERS_KEPT = 4


class FlinkHarnessError(RuntimeError):
    """The harness itself could not run (no Java, compile error, RestoreCheck crashed or hung)."""


@cache
def _generator() -> ModuleType:
    spec = importlib.util.spec_from_file_location("spillway_fixture_generate", GENERATE)
    assert spec is not None and spec.loader is not None
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def jars_cached(release: str) -> bool:
    """True if tools/flink_jars.py already holds the release's jars (nothing to download)."""
    spec = importlib.util.spec_from_file_location("spillway_flink_jars", TESTS.parent / "tools" / "flink_jars.py")
    assert spec is not None and spec.loader is not None
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return (mod.cache_root() / release / "lib" / ".complete").exists()


def require_java() -> None:
    missing = [tool for tool in ("java", "javac") if shutil.which(tool) is None]
    if missing:
        raise FlinkHarnessError(
            f"{' and '.join(missing)} not found on PATH: the real-Flink restore tests need a JDK 17 "
            "(e.g. `apt-get install openjdk-17-jdk-headless`)"
        )


@cache
def prepare(release: str) -> tuple[Path, Path]:
    """(jar dir, class dir) for a release: jars fetched and RestoreCheck compiled once (cached on disk)."""
    require_java()
    gen = _generator()
    if gen.source_tree(release).name != "java":
        raise FlinkHarnessError(f"RestoreCheck exists for Flink >= 1.14 only, not {release}")
    gen.CLASS_CACHE.mkdir(parents=True, exist_ok=True)
    # Serialize fetch + compile between concurrent test processes (the compile cache is not atomic).
    with open(gen.CLASS_CACHE / f".{release}.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        try:
            fresh, started = not jars_cached(release), time.monotonic()
            if fresh:
                announce(f"fetching the jars of Flink {release} from PyPI (once; 190-300 MB a release) …")
            lib = gen.fetch_jars(release)
            if fresh:
                size = sum(p.stat().st_size for p in lib.iterdir()) / 1e6
                announce(f"Flink {release}: {size:.0f} MB of jars in {time.monotonic() - started:.0f} s -> {lib}")
            classes = gen.compile_job(release, lib)
        except SystemExit as exc:  # generate.py reports problems with SystemExit
            raise FlinkHarnessError(f"cannot prepare Flink {release}: {exc}") from None
        except subprocess.CalledProcessError as exc:
            raise FlinkHarnessError(f"cannot fetch the jars of Flink {release}: {exc}") from None
    return lib, classes


def _server_classes(release: str, lib: Path, classes: Path) -> Path:
    """RestoreServer compiled against the generator's ``classes``, kept beside them in the class cache (keyed by
    its source and the classes' directory; built in a directory of its own and renamed into place, so concurrent
    first uses never see half-written classes)."""
    digest = hashlib.sha256(SERVER_SOURCE.read_bytes() + str(classes.resolve()).encode()).hexdigest()[:16]
    out = classes.parent / f"restore-server-{classes.name}-{digest}"
    if (out / ".complete").exists():
        return out
    with tempfile.TemporaryDirectory(dir=classes.parent, prefix=".restore-server-") as tmp:
        built = Path(tmp) / "classes"
        cp = _generator().job_classpath(lib, classes)
        cmd = ["javac", "-nowarn", "-encoding", "UTF-8", "--release", "8", "-cp", cp]
        done = subprocess.run([*cmd, "-d", str(built), str(SERVER_SOURCE)], capture_output=True, text=True)
        if done.returncode != 0:
            raise FlinkHarnessError(
                f"cannot compile {SERVER_SOURCE.name} for Flink {release}:\n{done.stdout}{done.stderr}"
            )
        (built / ".complete").write_text(release)
        try:
            built.rename(out)
        except OSError:
            if not (out / ".complete").exists():
                raise
    return out


def _java(release: str, classpath: list[Path | str], log: Path | str, log_config: Path, main: str) -> list[str]:
    gen = _generator()
    return [
        "java",
        *gen.JVM_OPENS,
        "-Xmx1g",
        # a restore check is a short run, mostly start-up: the JIT's first tier alone costs a third less CPU
        "-XX:TieredStopAtLevel=1",
        f"-Dlog4j.configurationFile={log_config}",
        f"-Dlog4j2.configurationFile={log_config}",
        f"-Dspillway.log={log}",
        *gen.read_options(gen.source_tree(release), "jvm.options"),
        "-cp",
        ":".join(map(str, classpath)),
        main,
    ]


def _surroundings() -> tuple[dict[str, str], str]:
    """The environment (less pytest's per-test name) and working directory a JVM started now would inherit."""
    return {k: v for k, v in os.environ.items() if k != "PYTEST_CURRENT_TEST"}, os.getcwd()


class _RestoreServer:
    """One JVM running RestoreServer: restores of one release, one at a time (see RestoreServer.java)."""

    def __init__(self, release: str) -> None:
        lib, classes = prepare(release)
        own = _server_classes(release, lib, classes)
        cmd = _java(
            release,
            [own, classes, f"{lib}/*", *_generator().avro_jars()],
            os.devnull,
            classes / "log4j2.properties",
            "spillway.fixtures.RestoreServer",
        )
        self.runs = 0
        # what a fresh JVM would inherit (a variant may read an environment variable a test set): a restore
        # asked for in another environment or working directory gets a JVM of its own
        self.started_in = _surroundings()
        self.proc = subprocess.Popen(
            cmd, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, bufsize=1
        )
        self.lines: queue.Queue[str | None] = queue.Queue()
        threading.Thread(target=self._read, daemon=True).start()

    def _read(self) -> None:
        assert self.proc.stdout is not None
        for line in self.proc.stdout:
            self.lines.put(line)
        self.lines.put(None)

    def run(self, args: list[str], log: Path, log_config: Path, console: Path) -> tuple[int, str]:
        """RestoreCheck's exit code and the JVM's own output besides what the run printed into ``console``."""
        fields = [str(log), str(log_config), str(console), *args]
        if any("\t" in f or "\n" in f for f in fields):
            raise FlinkHarnessError(f"a tab or newline in a RestoreCheck argument: {fields}")
        assert self.proc.stdin is not None
        self.runs += 1
        try:
            self.proc.stdin.write("\t".join(fields) + "\n")
            self.proc.stdin.flush()
        except OSError as exc:
            raise FlinkHarnessError(f"the restore JVM is gone (rc={self.proc.poll()}): {exc}") from None
        deadline = time.monotonic() + TIMEOUT
        other: list[str] = []
        while True:
            try:
                line = self.lines.get(timeout=max(0.0, deadline - time.monotonic()))
            except queue.Empty:
                raise FlinkHarnessError(
                    f"RestoreCheck did not finish within {TIMEOUT}s; work dir {log.parent}"
                ) from None
            if line is None:
                raise FlinkHarnessError(f"the restore JVM ended (rc={self.proc.wait()}):\n{''.join(other)[-4000:]}")
            if line.startswith(SERVER_DONE):
                return int(line[len(SERVER_DONE) :]), "".join(other)
            other.append(line)

    def close(self, kill: bool = False) -> None:
        """End the JVM: at the end of its input when idle, at once (``kill``) when a run may still be going on."""
        if kill:
            self.proc.kill()
        with contextlib.suppress(OSError):
            if self.proc.stdin is not None:
                self.proc.stdin.close()
        try:
            self.proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()


_idle: OrderedDict[str, _RestoreServer] = OrderedDict()
_idle_lock = threading.Lock()


def _take_server(release: str) -> _RestoreServer:
    """The release's waiting JVM, or a new one (also while another restore of the release holds the first)."""
    with _idle_lock:
        server = _idle.pop(release, None)
    if server is not None and server.proc.poll() is None and server.started_in == _surroundings():
        return server
    if server is not None:
        server.close()
    return _RestoreServer(release)


def _return_server(release: str, server: _RestoreServer) -> None:
    retired: list[_RestoreServer] = []
    with _idle_lock:
        if server.runs >= SERVER_RUNS or release in _idle:
            retired.append(server)
        else:
            _idle[release] = server
        while len(_idle) > SERVERS_KEPT:
            retired.append(_idle.popitem(last=False)[1])
    for old in retired:
        old.close()


@atexit.register
def _close_servers() -> None:
    with _idle_lock:
        servers = list(_idle.values())
        _idle.clear()
    for server in servers:
        server.close()


def _run_restore_check(release: str, args: list[str], log: Path, log_config: Path, console: Path) -> tuple[int, str]:
    """RestoreCheck's exit code and everything it printed."""
    lib, classes = prepare(release)
    if os.environ.get("SPILLWAY_RESTORE_SERVER") == "0":
        cmd = [
            *_java(
                release,
                [classes, f"{lib}/*", *_generator().avro_jars()],
                log,
                log_config,
                "spillway.fixtures.RestoreCheck",
            ),
            *args,
        ]
        try:
            res = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, timeout=TIMEOUT)
        except subprocess.TimeoutExpired as exc:
            raise FlinkHarnessError(f"RestoreCheck did not finish within {TIMEOUT}s; work dir {log.parent}") from exc
        return res.returncode, res.stdout
    server = _take_server(release)
    try:
        rc, other = server.run(args, log, log_config, console)
    except BaseException:
        server.close(kill=True)  # a run that failed or was interrupted may still be going on in it
        raise
    _return_server(release, server)
    return rc, (console.read_text(errors="replace") if console.is_file() else "") + other


def _fixture_of(checkpoint_dir: Path) -> tuple[Path, dict] | None:
    """(fixture root, fixture.json) when checkpoint_dir is a fixture's checkpoint."""
    for parent in checkpoint_dir.parents:
        info = parent / "fixture.json"
        if info.is_file():
            doc = json.loads(info.read_text())
            if (parent / doc["checkpoint"]).resolve() == checkpoint_dir:
                return parent, doc
            return None
    return None


def needs_absolute_paths(checkpoint_dir: Path) -> bool:
    """True if some handle names a file by absolute path (FileStateHandle, SegmentFileStateHandle): such a
    checkpoint is only readable at the place it was written. Inline and relative handles travel with chk-N."""
    cp = load_checkpoint(checkpoint_dir).checkpoint
    return any(isinstance(h, FileHandle | SegmentFileHandle) for _, h in all_stream_handles(cp))


def stage(checkpoint_dir: Path, workdir: Path) -> tuple[Path, Path | None]:
    """Copy a checkpoint where Flink can restore it; returns (restore path, directory to delete afterwards).

    Inline/relative-only checkpoints: chk-N is copied into workdir. A fixture with absolute paths: its whole
    ``checkpoints/<job-id>/`` tree is copied back to where the generator wrote it (``generated_at``), because
    those are the paths inside ``_metadata``. Other checkpoints: chk-N is copied; absolute paths keep pointing
    at their (existing) originals, which Flink only reads (default claim mode)."""
    checkpoint_dir = checkpoint_dir.resolve()
    if not (checkpoint_dir / "_metadata").is_file():
        raise FlinkHarnessError(f"{checkpoint_dir}: no _metadata (pass a chk-N or savepoint directory)")
    fixture = _fixture_of(checkpoint_dir)
    if fixture is not None and needs_absolute_paths(checkpoint_dir):
        root, info = fixture
        job_dir = Path("checkpoints") / info["job_id"]
        if not Path(info["checkpoint"]).is_relative_to(job_dir):
            raise FlinkHarnessError(f"{root.name}: absolute paths outside {job_dir} are not supported")
        generated_at = Path(info["generated_at"])
        created = None if generated_at.exists() else generated_at
        shutil.copytree(root / job_dir, generated_at / job_dir, dirs_exist_ok=True)
        return generated_at / info["checkpoint"], created
    copy = workdir / "restore-from" / checkpoint_dir.name
    shutil.copytree(checkpoint_dir, copy)
    return copy, None


def restore(
    release: str,
    scenario: str,
    checkpoint_dir: Path,
    variant: str | None = None,
    parallelism: int | None = None,
    allow_non_restored: bool = False,
    plan_out: Path | None = None,
    *,
    run_seconds: float = 5,
    workdir: Path | None = None,
    vertex_parallelism: dict[str, int] | None = None,
    until_finished: bool = False,
    debug_loggers: tuple[str, ...] = (),
    max_parallelism: int | None = None,
    rest_port: int | None = None,
    claim: bool = False,
    stop_file: Path | None = None,
) -> dict[str, Any]:
    """Restore ``checkpoint_dir`` into FixtureJob's ``scenario`` (modified by ``variant``) on Flink ``release``.

    Returns RestoreCheck's RESULT.json (``outcome``, ``error``, ``error_class``, ``seconds``, ``causes``, ``tasks``
    …) plus ``log`` (the Flink log), ``workdir``, and ``jobgraph_plan`` / ``stream_plan``: the submitted job's
    plans (``JsonPlanGenerator`` / ``getExecutionPlan()``) in the work dir. ``plan_out`` receives another copy of
    the job-graph plan.
    Without ``workdir`` a temporary directory is used and deleted unless the outcome is "failed".
    ``vertex_parallelism`` sets single operators' parallelism by key: the uid in "counted"; in "prod-counted" and
    "prod-counted-no-uid" numbers, parse, counter, checker; in "prod", "prod-no-uid" and "prod-finished"
    events-src, rules, slow, length (the keys are the same with and without uids); ``until_finished``
    waits for a bounded job to finish, and ``results`` then holds the lines the job reported (Counted.java).
    ``debug_loggers`` (class or package names) log at DEBUG into the same flink.log (a log4j2 configuration
    written into the work dir), e.g. Flink's ``TaskStateAssignment`` for the rescaling descriptors.
    ``max_parallelism`` sets the job's max parallelism explicitly (``env.setMaxParallelism`` after the
    scenario's own). ``rest_port`` serves the MiniCluster's REST API on 127.0.0.1:PORT while the job runs.
    ``claim`` restores in CLAIM mode (the changelog state backend cannot take the full first checkpoint that the
    default NO_CLAIM mode asks for). ``stop_file``: once it exists (and every task is up) the run ends as restored,
    before ``run_seconds``: a test watching the running job creates it when it has seen enough."""
    _, classes = prepare(release)
    own_workdir = workdir is None
    work = Path(tempfile.mkdtemp(prefix="spillway-restore-")) if workdir is None else Path(workdir)
    work.mkdir(parents=True, exist_ok=True)
    restore_path, cleanup = stage(Path(checkpoint_dir), work)
    out = work / "result.json"
    log = work / "flink.log"
    log_config = classes / "log4j2.properties"
    if debug_loggers:
        log_config = work / "log4j2-debug.properties"
        extra = "".join(
            f"logger.d{i}.name = {name}\nlogger.d{i}.level = DEBUG\n" for i, name in enumerate(debug_loggers)
        )
        log_config.write_text((classes / "log4j2.properties").read_text() + extra)
    args = [
        "--scenario",
        scenario,
        "--restore",
        str(restore_path),
        "--run-seconds",
        str(run_seconds),
        "--checkpoint-dir",
        str(work / "checkpoints"),
        "--out",
        str(out),
    ]
    if variant:
        args += ["--variant", variant]
    if parallelism:
        args += ["--parallelism", str(parallelism)]
    if allow_non_restored:
        args.append("--allow-non-restored-state")
    if claim:
        args.append("--claim")
    for uid, n in (vertex_parallelism or {}).items():
        args += ["--vertex-parallelism", f"{uid}={n}"]
    if until_finished:
        args.append("--until-finished")
    if max_parallelism is not None:
        args += ["--max-parallelism", str(max_parallelism)]
    if rest_port is not None:
        args += ["--rest-port", str(rest_port)]
    if plan_out is not None:
        args += ["--plan-out", str(Path(plan_out).resolve())]
    if stop_file is not None:
        args += ["--stop-file", str(Path(stop_file).resolve())]
    t0 = time.monotonic()
    try:
        rc, output = _run_restore_check(release, args, log, log_config, work / "restore.out")
    finally:
        if cleanup is not None:
            shutil.rmtree(cleanup, ignore_errors=True)
    if rc != 0 or not out.is_file():
        raise FlinkHarnessError(f"RestoreCheck failed (rc={rc}); log {log}; output:\n{output[-4000:]}")
    result = json.loads(out.read_text())
    # RestoreCheck writes the submitted job's plans next to result.json (both flavours, from Flink itself)
    result["jobgraph_plan"] = str(work / "jobgraph.json")
    result["stream_plan"] = str(work / "plan.json")
    result["wall_seconds"] = round(time.monotonic() - t0, 2)
    result["log"] = str(log)
    result["workdir"] = str(work)
    if own_workdir and result["outcome"] != "failed":
        shutil.rmtree(work, ignore_errors=True)
    return result
