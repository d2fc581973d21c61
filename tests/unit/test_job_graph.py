"""Running a job's main with Flink's classes (spillway/storage/job_graph.py), with stand-ins for ``javac`` and
``java`` that keep the helper's contract (spillway/flink/java/PlanIds.java): ``--jar J --out F [--class C] --
ARGS`` writes the document to F; ``--batch LISTING`` takes one job a line (its arguments hex-encoded), a job that
fails gets ``F.failed`` holding ``EXIT-CODE TAB MESSAGE``; a failure of a single job is the last stderr line starting
``spillway-planids: ``. What each stand-in job does is chosen by its jar's name. No JVM runs here; the real helper
runs against real jobs in tests/unit/test_job_ids.py and tests/integration/."""

from __future__ import annotations

import json
import os
import sys
import zipfile
from pathlib import Path

import pytest

from spillway.errors import UsageError
from spillway.storage.job_graph import JobRun, jar_release, plan_job, plan_jobs

JAVA = r"""
import json, os, sys, time
log = os.environ["FAKE_LOG"]
argv = sys.argv[1:]
if argv == ["-version"]:
    sys.stderr.write(os.environ.get("FAKE_JDK", 'openjdk version "17.0.2" 2022-01-18\n'))
    sys.exit(0)
with open(log, "a") as f:
    f.write(json.dumps(argv) + "\n")
rest = argv[argv.index("spillway.planids.PlanIds") + 1 :]

def job(args):
    jar, out = args[args.index("--jar") + 1], args[args.index("--out") + 1]
    name = os.path.basename(jar)
    if name.startswith("sleeps"):
        time.sleep(30)
    if name.startswith("quiet"):
        sys.exit(3)
    if name.startswith("exits"):
        sys.stderr.write("starting\nboom: System.exit(3)\n")
        sys.exit(3)
    if name.startswith("fails"):
        return "the job's main threw IllegalStateException: no source"
    if name.startswith("tabbed"):
        return "the job's main threw\tat once"
    if name.startswith("garbled"):
        open(out, "w").write("{not json")
        return None
    cls = args[args.index("--class") + 1] if "--class" in args else None
    json.dump({"jar": jar, "class": cls, "args": args[args.index("--") + 1 :]}, open(out, "w"))
    return None

if rest[0] == "--batch":
    for line in open(rest[1]).read().splitlines():
        args = [bytes.fromhex(a).decode() for a in line.split()]
        failed = job(args)
        if failed:
            open(args[args.index("--out") + 1] + ".failed", "w").write("3\t" + failed)
    sys.exit(0)
failed = job(rest)
if failed:
    sys.stderr.write("spillway-planids: an earlier report\nspillway-planids: " + failed + "\nother noise\n")
    sys.exit(3)
"""

JAVAC = r"""
import os, sys
with open(os.environ["FAKE_LOG"] + ".javac", "a") as f:
    f.write(" ".join(sys.argv[1:]) + "\n")
if os.environ.get("FAKE_JAVAC_FAILS"):
    print("PlanIds.java:12: warning: something")
    print("PlanIds.java:40: error: cannot find symbol StreamGraph")
    sys.exit(1)
out = sys.argv[sys.argv.index("-d") + 1]
os.makedirs(out + "/spillway/planids", exist_ok=True)
open(out + "/spillway/planids/PlanIds.class", "wb").write(b"\xca\xfe\xba\xbe")
"""


@pytest.fixture
def jdk(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A bin directory with the stand-ins first on PATH, Flink 1.20.3 as FLINK_HOME, the helper cache in tmp_path;
    returns the log of the java command lines."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    for name, body in (("java", JAVA), ("javac", JAVAC)):
        tool = bin_dir / name
        tool.write_text(f"#!{sys.executable}\n{body}")
        tool.chmod(0o755)
    home = tmp_path / "flink"
    (home / "lib").mkdir(parents=True)
    (home / "lib" / "flink-dist-1.20.3.jar").write_bytes(b"")
    log = tmp_path / "java.log"
    monkeypatch.setenv("PATH", f"{bin_dir}{os.pathsep}{os.environ['PATH']}")
    monkeypatch.setenv("FLINK_HOME", str(home))
    monkeypatch.setenv("SPILLWAY_PLANIDS_CACHE", str(tmp_path / "planids"))
    monkeypatch.setenv("FAKE_LOG", str(log))
    return log


def _jar(tmp_path: Path, name: str) -> Path:
    jar = tmp_path / name
    with zipfile.ZipFile(jar, "w") as zf:
        zf.writestr("com/example/Job.class", b"\xca\xfe\xba\xbe")
    return jar


def _java_runs(log: Path) -> list[list[str]]:
    return [json.loads(line) for line in log.read_text().splitlines()]


def test_a_job_is_planned_with_flinks_jars_and_the_helper_compiled_once(jdk: Path, tmp_path: Path) -> None:
    jar = _jar(tmp_path, "good.jar")
    doc = plan_job(jar, "1.20.3", entry_class="com.example.Job", args=["--p", "3"])
    assert doc == {"jar": str(jar.resolve()), "class": "com.example.Job", "args": ["--p", "3"]}
    (cmd,) = _java_runs(jdk)
    (classes,) = (tmp_path / "planids").iterdir()
    assert classes.name.startswith("1.20.3-") and (classes / ".complete").read_text() == "1.20.3"
    lib = tmp_path / "flink" / "lib"
    log_config = classes / "spillway-planids-log4j2.properties"
    assert log_config.read_text() == "status = off\nrootLogger.level = off\n"
    assert cmd[0] == "-XX:TieredStopAtLevel=1"
    assert "--add-opens=java.base/java.lang=ALL-UNNAMED" in cmd  # a JDK 17 refuses the job's reflection without
    assert f"-Dlog4j.configurationFile={log_config}" in cmd and f"-Dlog4j2.configurationFile={log_config}" in cmd
    assert cmd[cmd.index("-cp") + 1] == f"{classes}{os.pathsep}{lib}/*"
    assert cmd[cmd.index("spillway.planids.PlanIds") + 1 :][:2] == ["--jar", str(jar.resolve())]
    javac = (tmp_path / "java.log.javac").read_text().splitlines()
    assert len(javac) == 1 and "--release 8" in javac[0] and f"-cp {lib}/*" in javac[0]
    assert plan_job(jar, "1.20.3")["class"] is None  # no --class: the manifest's main
    assert len((tmp_path / "java.log.javac").read_text().splitlines()) == 1  # compiled once


def test_a_jdk_8_gets_no_module_flags(jdk: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("FAKE_JDK", 'java version "1.8.0_292"\n')
    bin_dir = tmp_path / "bin8"  # another java path: the flags are decided once per java
    bin_dir.mkdir()
    (bin_dir / "java").symlink_to(tmp_path / "bin" / "java")
    monkeypatch.setenv("PATH", f"{bin_dir}{os.pathsep}{os.environ['PATH']}")
    plan_job(_jar(tmp_path, "good.jar"), "1.20.3")
    (cmd,) = _java_runs(jdk)
    assert not [a for a in cmd if a.startswith("--add-opens")]


def test_a_helper_that_does_not_compile_says_the_first_error(jdk: Path, tmp_path: Path, monkeypatch) -> None:  # type: ignore[no-untyped-def]
    monkeypatch.setenv("FAKE_JAVAC_FAILS", "1")
    with pytest.raises(UsageError) as raised:
        plan_job(_jar(tmp_path, "good.jar"), "1.20.3")
    lib = tmp_path / "flink" / "lib"
    assert str(raised.value) == (
        f"cannot compile spillway's Flink helper against Flink 1.20.3 ({lib}): "
        "PlanIds.java:40: error: cannot find symbol StreamGraph"
    )
    assert not [p for p in (tmp_path / "planids").iterdir() if not p.name.startswith(".")]


def test_a_failing_main_is_said_in_the_helpers_last_words(jdk: Path, tmp_path: Path) -> None:
    jar = _jar(tmp_path, "fails.jar")
    with pytest.raises(UsageError) as raised:
        plan_job(jar, "1.20.3")
    assert str(raised.value) == f"{jar}: the job's main threw IllegalStateException: no source"


def test_a_jvm_that_ends_without_a_word_is_said_with_its_last_line(jdk: Path, tmp_path: Path) -> None:
    jar = _jar(tmp_path, "exits.jar")
    with pytest.raises(UsageError) as raised:
        plan_job(jar, "1.20.3")
    assert str(raised.value) == (
        f"{jar}: the JVM ended (exit code 3) before Flink built the job; does the job's main call System.exit? "
        "Last line it printed: boom: System.exit(3)"
    )


def test_a_jvm_that_ends_silently_is_said_without_a_last_line(jdk: Path, tmp_path: Path) -> None:
    jar = _jar(tmp_path, "quiet.jar")
    with pytest.raises(UsageError) as raised:
        plan_job(jar, "1.20.3")
    assert str(raised.value) == (
        f"{jar}: the JVM ended (exit code 3) before Flink built the job; does the job's main call System.exit?"
    )


def test_a_main_that_never_builds_its_job_is_stopped(jdk: Path, tmp_path: Path) -> None:
    jar = _jar(tmp_path, "sleeps.jar")
    with pytest.raises(UsageError) as raised:
        plan_job(jar, "1.20.3", timeout=1.5)
    assert str(raised.value) == (
        f"{jar}: the job's main did not finish planning within 1.5 s (does it wait for something before building "
        "its job?)"
    )


def test_an_unreadable_document_is_said(jdk: Path, tmp_path: Path) -> None:
    jar = _jar(tmp_path, "garbled.jar")
    with pytest.raises(UsageError, match=r"garbled\.jar: spillway's Flink helper wrote no readable document \("):
        plan_job(jar, "1.20.3")


def test_what_is_no_jar_is_said_before_any_jvm_runs(jdk: Path, tmp_path: Path) -> None:
    with pytest.raises(UsageError) as raised:
        plan_job(tmp_path / "missing.jar", "1.20.3")
    assert str(raised.value) == f"{tmp_path / 'missing.jar'}: no such job jar"
    with pytest.raises(UsageError) as raised:
        plan_job(tmp_path, "1.20.3")
    assert str(raised.value) == f"{tmp_path}: a directory, not a job jar"
    (tmp_path / "text.jar").write_text("not a zip")
    with pytest.raises(UsageError, match=r"text\.jar: not a jar \(zip\) file \("):
        plan_jobs([JobRun(_jar(tmp_path, "good.jar")), JobRun(tmp_path / "text.jar")], "1.20.3")
    assert not jdk.exists()


def test_no_java_says_how_to_get_one(jdk: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PATH", str(tmp_path / "nothing"))
    with pytest.raises(UsageError) as raised:
        plan_job(_jar(tmp_path, "good.jar"), "1.20.3")
    assert str(raised.value) == (
        "javac not found: spillway runs the job's main with Flink's own classes; install a JDK (8 or newer), "
        "e.g. `apt-get install default-jdk-headless`"
    )


def test_a_batch_plans_every_job_in_one_jvm_each_with_its_own_answer(jdk: Path, tmp_path: Path) -> None:
    good, fails, other = _jar(tmp_path, "good.jar"), _jar(tmp_path, "fails.jar"), _jar(tmp_path, "good2.jar")
    runs = [JobRun(good, "a.Main", ("x y", "é")), JobRun(fails), JobRun(other)]
    found = plan_jobs(runs, "1.20.3")
    assert found[0] == {"jar": str(good.resolve()), "class": "a.Main", "args": ["x y", "é"]}
    assert isinstance(found[1], UsageError)
    assert str(found[1]) == f"{fails}: the job's main threw IllegalStateException: no source"
    assert found[2] == {"jar": str(other.resolve()), "class": None, "args": []}
    (cmd,) = _java_runs(jdk)  # one JVM
    assert cmd[-2] == "--batch"
    (classes,) = (tmp_path / "planids").iterdir()
    assert cmd[cmd.index("-cp") + 1] == f"{classes}{os.pathsep}{tmp_path / 'flink' / 'lib'}/*"
    assert plan_jobs([], "1.20.3") == []


def test_a_batch_answers_an_unreadable_document_and_a_tabbed_message_for_that_job(jdk: Path, tmp_path: Path) -> None:
    garbled, tabbed = _jar(tmp_path, "garbled.jar"), _jar(tmp_path, "tabbed.jar")
    found = plan_jobs([JobRun(garbled), JobRun(tabbed)], "1.20.3")
    assert isinstance(found[0], UsageError)
    assert str(found[0]).startswith(f"{garbled}: spillway's Flink helper wrote no readable document (")
    assert isinstance(found[1], UsageError) and str(found[1]) == f"{tabbed}: the job's main threw\tat once"


def test_a_batch_whose_jvm_ends_early_says_so_for_the_jobs_left(jdk: Path, tmp_path: Path) -> None:
    good, exits, left = _jar(tmp_path, "good.jar"), _jar(tmp_path, "exits.jar"), _jar(tmp_path, "left.jar")
    found = plan_jobs([JobRun(good), JobRun(exits), JobRun(left)], "1.20.3")
    assert found[0] == {"jar": str(good.resolve()), "class": None, "args": []}
    for run, answer in zip((exits, left), found[1:], strict=True):
        assert isinstance(answer, UsageError)
        assert str(answer) == (
            f"{run}: the JVM ended (exit code 3) before Flink built the job; does the job's main call System.exit? "
            "Last line it printed: boom: System.exit(3)"
        )


def test_a_batch_gives_each_job_its_time(jdk: Path, tmp_path: Path) -> None:
    runs = [JobRun(_jar(tmp_path, "sleeps.jar")), JobRun(_jar(tmp_path, "good.jar"))]
    with pytest.raises(UsageError) as raised:
        plan_jobs(runs, "1.20.3", timeout=1.5)
    assert str(raised.value).startswith(f"{runs[0].jar}: the job's main did not finish planning within 3 s")


def test_a_pom_that_is_not_utf_8_still_gives_the_release(tmp_path: Path) -> None:
    fat = tmp_path / "fat.jar"
    with zipfile.ZipFile(fat, "w") as jar:
        jar.writestr("META-INF/maven/org.apache.flink/flink-core/pom.properties", b"#\xff\nversion=1.18.1\n")
    assert jar_release(fat) == "1.18.1"
