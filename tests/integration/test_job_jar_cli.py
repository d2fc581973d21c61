"""``spillway ids`` and ``--job`` through the installed console script: a real fat jar (a connector and a
library bundled inside, a main that reads its arguments), and the errors a user can run into. Expected ids come
from Flink: the fixtures' ids.json hold Flink's ids of the uids WordStats uses."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest
from support.console import spillway
from support.fixtures import fixture_named
from support.flink_harness import prepare
from support.job_jars import fat_job_jar, fixture_job_jar

from spillway.errors import UsageError

RELEASE = "1.20.3"


@pytest.fixture(scope="module")
def jars(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    workdir = tmp_path_factory.mktemp("cli-jars")
    return {"fat": fat_job_jar(RELEASE, workdir), "fixtures": fixture_job_jar(RELEASE, workdir)}


def _flink_uid_ids() -> dict[str, str]:
    ids = json.loads((fixture_named("1.20.3-prod").root / "ids.json").read_text())
    return {n["uid"]: n["operator_id"] for n in ids["stream_nodes"] if n["uid"]}


def test_fat_jar_with_arguments_gives_flinks_ids(jars: dict[str, Path], tmp_path: Path) -> None:
    out_dir = tmp_path / "out"
    run = spillway("ids", str(jars["fat"]), "--json", "--", "--parallelism", "3", "--out", str(out_dir))
    assert run.code == 0, run.err
    doc = json.loads(run.out)
    assert doc["schema"] == "spillway.ids/1"
    assert doc["release"] == RELEASE  # read off the connector the jar bundles: no --flink-version given
    assert doc["entry_class"] == "spillway.fatjob.WordStats"
    by_uid = {n["uid"]: n for n in doc["nodes"] if n["uid"]}
    flink = _flink_uid_ids()
    for uid in ("events-src", "parse-events", "slow", "discard-sink"):
        assert by_uid[uid]["operator_id"] == flink[uid], uid
    names = [n["name"] for n in doc["nodes"]]
    assert "files: Writer" in names and "files: Committer" in names  # the bundled FileSink was built
    assert {n["parallelism"] for n in doc["nodes"] if n["name"] != "files: Global Committer"} == {3}
    assert not out_dir.exists()  # planned, never run

    again = spillway("ids", str(jars["fat"]), "--json", "--", "--parallelism", "5", "--out", str(out_dir))
    assert again.code == 0, again.err
    assert {n["parallelism"] for n in json.loads(again.out)["nodes"] if n["uid"] == "slow"} == {5}


def test_table_fits_80_columns(jars: dict[str, Path], tmp_path: Path) -> None:
    run = spillway("ids", str(jars["fat"]), "--", "--parallelism", "2", "--out", str(tmp_path), env={"COLUMNS": "80"})
    assert run.code == 0, run.err
    assert all(len(line) <= 80 for line in run.out.splitlines()), run.out
    flink = _flink_uid_ids()
    assert flink["slow"] in run.out and "slow-count" in run.out


def test_the_jobs_own_exception_is_the_error(jars: dict[str, Path]) -> None:
    run = spillway("ids", str(jars["fat"]), "--", "--parallelism", "2")  # no --out: ParameterTool refuses
    assert run.code == 2
    assert "No data for required key 'out'" in run.err
    assert len(run.err.strip().splitlines()) == 1
    assert "Traceback" not in run.err


def test_a_main_that_exits_the_jvm_is_named(jars: dict[str, Path]) -> None:
    run = spillway("ids", str(jars["fat"]), "--", "--exit", "7")
    assert run.code == 2
    assert "exit code 7" in run.err and "System.exit" in run.err
    assert len(run.err.strip().splitlines()) == 1


def test_a_main_that_never_builds_its_job_meets_the_deadline(jars: dict[str, Path]) -> None:
    run = spillway("ids", str(jars["fat"]), "--timeout", "8", "--", "--wait-forever", "1")
    assert run.code == 2
    assert "did not finish planning within 8 s" in run.err
    assert run.seconds < 30


def test_not_a_jar_and_unknown_release_are_usage_errors(jars: dict[str, Path], tmp_path: Path) -> None:
    text = tmp_path / "job.jar"
    text.write_text("not a zip")
    run = spillway("ids", str(text), "--flink-version", RELEASE)
    assert run.code == 2 and "not a jar" in run.err
    # The fixture jar bundles no Flink artifacts: the release must be given.
    run = spillway("ids", str(jars["fixtures"]), "--", "--scenario", "prod", env={"FLINK_HOME": ""})
    assert run.code == 2 and "--flink-version" in run.err


def test_no_java_names_what_to_install(jars: dict[str, Path]) -> None:
    run = spillway("ids", str(jars["fat"]), "--", "--parallelism", "2", "--out", "x", env={"PATH": "/nonexistent"})
    assert run.code == 2
    assert "java not found" in run.err and "JDK" in run.err


def test_validate_with_job_binds_every_operator_by_flinks_id(jars: dict[str, Path]) -> None:
    fixture = fixture_named("1.20.3-prod-no-uid")
    lib, _ = prepare(RELEASE)
    job = ["--job", str(jars["fixtures"]), "--job-arg", "--scenario", "--job-arg", "prod-no-uid"]
    run = spillway("validate", str(fixture.checkpoint_dir), *job, "--json", env={"FLINK_HOME": str(lib.parent)})
    assert run.code == 0, run.err
    doc = json.loads(run.out)
    flink = {n["name"]: n["operator_id"] for n in json.loads((fixture.root / "ids.json").read_text())["stream_nodes"]}
    rows = doc["binding"]
    assert len(rows) == len(flink)
    for row in rows:
        assert row["method"] == "flink-id" and row["exact"]
        assert row["operator_id"] == flink[row["operator"]]


def test_several_jobs_in_one_jvm_each_get_their_own_result(jars: dict[str, Path], tmp_path: Path) -> None:
    from spillway import api

    fixture = fixture_named("1.20.3-prod")
    fat = jars["fat"]
    found = api.ids_each(
        [
            api.JobJar(fat, args=("--parallelism", "3", "--out", str(tmp_path / "out"))),
            api.JobJar(fat, args=("--parallelism", "2")),  # no --out: ParameterTool refuses
            api.JobJar(jars["fixtures"], args=("--scenario", "prod"), flink_version=RELEASE),
            api.JobJar(fat, args="--parallelism 2"),  # one string, not a list
            api.JobJar(fat, args=("--exit", "7")),  # the JVM ends here
            api.JobJar(jars["fixtures"], args=("--scenario", "prod"), flink_version=RELEASE),
        ]
    )
    assert len(found) == 6
    first, refused, prod, one_string, exits, after_exit = found
    flink = _flink_uid_ids()
    assert isinstance(first, api.JobIds)
    assert {n.uid: n.operator_id for n in first.nodes if n.uid in flink} == {
        uid: flink[uid] for uid in ("events-src", "parse-events", "slow", "discard-sink")
    }
    assert {n.parallelism for n in first.nodes if n.uid == "slow"} == {3}
    assert isinstance(refused, UsageError)
    assert str(refused).startswith(f"{fat}: ") and "No data for required key 'out'" in str(refused)
    # a job planned after another's failure in the same JVM still gets every one of Flink's ids
    assert isinstance(prod, api.JobIds)
    theirs = json.loads((fixture.root / "ids.json").read_text())["stream_nodes"]
    assert sorted((n.name, n.operator_id) for n in prod.nodes) == sorted((n["name"], n["operator_id"]) for n in theirs)
    assert isinstance(one_string, UsageError) and "not one string" in str(one_string)
    for ended in (exits, after_exit):
        assert isinstance(ended, UsageError)
        assert "exit code 7" in str(ended) and "System.exit" in str(ended)


def test_plan_and_job_together_are_refused(jars: dict[str, Path]) -> None:
    fixture = fixture_named("1.20.3-prod-no-uid")
    run = spillway(
        "validate", str(fixture.checkpoint_dir), "--plan", str(fixture.root / "plan.json"), "--job", str(jars["fat"])
    )
    assert run.code == 2 and "--plan and --job both given" in run.err


@pytest.mark.parametrize(
    ("fixture_name", "new_scenario", "exit_code", "refused_by", "flink_outcome"),
    [
        # the same job: every id the checkpoint holds is in it
        ("1.20.3-prod-no-uid", "prod-no-uid", 0, None, "restored"),
        # uids added to a job that had none: every stateful operator's id changes
        ("1.20.3-prod-no-uid", "prod", 1, "operator-mapping", "refused"),
        # the new job's code sets a max parallelism other than the checkpoint's (128)
        ("1.20.3-prod-no-uid", "prod-no-uid --max-parallelism 64", 1, "max-parallelism", "refused"),
    ],
)
def test_preflight_with_the_new_jobs_jar_agrees_with_a_real_restore(
    jars: dict[str, Path],
    fixture_name: str,
    new_scenario: str,
    exit_code: int,
    refused_by: str | None,
    flink_outcome: str,
) -> None:
    from support.flink_harness import restore

    fixture = fixture_named(fixture_name)
    lib, _ = prepare(RELEASE)
    scenario, *extra = new_scenario.split()
    job = ["--job", str(jars["fixtures"]), "--job-arg", "--scenario", "--job-arg", scenario]
    job += [f"--job-arg={arg}" for arg in extra]
    run = spillway("preflight", str(fixture.checkpoint_dir), *job, "--json", env={"FLINK_HOME": str(lib.parent)})
    assert run.code == exit_code, run.err
    doc = json.loads(run.out)
    assert doc["restorable"] is (exit_code == 0)
    refused = {r["check"] for r in doc["reasons"] if r["verdict"] == "refused"}
    assert refused == ({refused_by} if refused_by else set())

    max_parallelism = int(extra[1]) if extra else None
    flink = restore(RELEASE, scenario, fixture.checkpoint_dir, run_seconds=2, max_parallelism=max_parallelism)
    assert flink["outcome"] == flink_outcome, flink.get("error")


def test_concurrent_first_uses_share_one_compiled_helper(jars: dict[str, Path], tmp_path: Path) -> None:
    import subprocess

    from support.console import ROOT, SCRIPT

    cache = tmp_path / "planids"
    env = {**os.environ, "PYTHONPATH": str(ROOT), "SPILLWAY_PLANIDS_CACHE": str(cache)}
    args = [str(SCRIPT), "ids", str(jars["fat"]), "--json", "--", "--parallelism", "2", "--out", str(tmp_path)]
    runs = [subprocess.Popen(args, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE) for _ in range(3)]
    results = [(p.wait(timeout=300), p.stdout.read(), p.stderr.read()) for p in runs]  # type: ignore[union-attr]
    assert [code for code, _, _ in results] == [0, 0, 0], [err for _, _, err in results]
    assert len({out for _, out, _ in results}) == 1  # the same document three times
    entries = sorted(p.name for p in cache.iterdir())
    assert len(entries) == 1 and entries[0].startswith(f"{RELEASE}-"), entries  # no half-written leftovers
    assert (cache / entries[0] / ".complete").is_file()


def test_interrupt_ends_the_jvm_too(jars: dict[str, Path], tmp_path: Path) -> None:
    import signal
    import subprocess
    import time

    from support.console import ROOT, SCRIPT

    marker = tmp_path / "hanging.jar"
    marker.write_bytes(jars["fat"].read_bytes())  # a path no other process uses
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    proc = subprocess.Popen(
        [str(SCRIPT), "ids", str(marker), "--", "--wait-forever", "1"],
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )
    deadline = time.monotonic() + 60
    while not _processes_using(marker) and time.monotonic() < deadline:
        time.sleep(0.2)
    assert _processes_using(marker), "the JVM never started"
    proc.send_signal(signal.SIGINT)
    assert proc.wait(timeout=30) == 130
    time.sleep(0.5)
    assert _processes_using(marker) == []


def _processes_using(path: Path) -> list[int]:
    """Java processes whose command line names ``path``."""
    found = []
    for proc in Path("/proc").iterdir():
        if not proc.name.isdigit():
            continue
        try:
            cmdline = (proc / "cmdline").read_bytes().split(b"\0")
        except OSError:
            continue
        if cmdline and cmdline[0].endswith(b"java") and str(path).encode() in cmdline:
            found.append(int(proc.name))
    return found
