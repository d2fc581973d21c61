"""Restore a checkpoint with real Apache Flink and report whether Flink accepts it.

    result = restore("2.3.0", "finished", fixture.checkpoint_dir, variant="rewired-fully-finished",
                     plan_out=tmp_path / "plan.json")
    result["outcome"]   # "restored" | "refused" | "failed"; result["error"] is Flink's root-cause message

Runs ``spillway.fixtures.RestoreCheck`` (tests/fixtures/generator/java/) on a local MiniCluster: the fixture
scenario's job, optionally modified by a variant, submitted with the checkpoint as its restore path. Jars come
from ``tools/flink_jars.py`` and classes from the generator's compile cache (both reused across runs; see
tests/fixtures/generator/README.md, "Restore harness"). The checkpoint is always copied first: Flink never sees
a path inside tests/fixtures/.
"""

from __future__ import annotations

import fcntl
import importlib.util
import json
import shutil
import subprocess
import tempfile
import time
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
    default NO_CLAIM mode asks for)."""
    lib, classes = prepare(release)
    gen = _generator()
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
    cmd = [
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
        gen.job_classpath(lib, classes),
        "spillway.fixtures.RestoreCheck",
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
        cmd += ["--variant", variant]
    if parallelism:
        cmd += ["--parallelism", str(parallelism)]
    if allow_non_restored:
        cmd.append("--allow-non-restored-state")
    if claim:
        cmd.append("--claim")
    for uid, n in (vertex_parallelism or {}).items():
        cmd += ["--vertex-parallelism", f"{uid}={n}"]
    if until_finished:
        cmd.append("--until-finished")
    if max_parallelism is not None:
        cmd += ["--max-parallelism", str(max_parallelism)]
    if rest_port is not None:
        cmd += ["--rest-port", str(rest_port)]
    if plan_out is not None:
        cmd += ["--plan-out", str(Path(plan_out).resolve())]
    t0 = time.monotonic()
    try:
        res = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, timeout=TIMEOUT)
    except subprocess.TimeoutExpired as exc:
        raise FlinkHarnessError(f"RestoreCheck did not finish within {TIMEOUT}s; work dir {work}") from exc
    finally:
        if cleanup is not None:
            shutil.rmtree(cleanup, ignore_errors=True)
    if res.returncode != 0 or not out.is_file():
        raise FlinkHarnessError(f"RestoreCheck failed (rc={res.returncode}); log {log}; output:\n{res.stdout[-4000:]}")
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
