"""The local Spark driver's class-data-sharing archive: built once, moved into place only when complete."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from spillway.rescale import spark_cds


@pytest.fixture
def cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("SPILLWAY_CACHE", str(tmp_path))
    monkeypatch.delenv("SPILLWAY_SPARK_CDS", raising=False)
    monkeypatch.delenv("SPARK_CONF_DIR", raising=False)
    return tmp_path / "spark-cds"


def _dead_pid() -> int:
    proc = subprocess.Popen([sys.executable, "-c", "pass"])
    proc.wait()
    return proc.pid


def test_first_run_builds_later_runs_map_the_finished_archive(cache: Path) -> None:
    opts, building = spark_cds.java_options()
    assert building is not None and building.exists()
    part = Path(opts.split("-XX:ArchiveClassesAtExit=")[1].split()[0])
    assert part.parent == cache and part.name.endswith(".jsa.part")
    assert "-Xlog:disable" in opts  # JVM warnings never reach stdout (--json)

    # while the building JVM is alive, nobody else builds and nothing is used
    building.write_text("1")  # pid 1 is always alive
    assert spark_cds.java_options() == ("", None)

    part.write_bytes(spark_cds.MAGIC + b"\0" * 100)  # the JVM wrote its archive and exited
    building.write_text(str(_dead_pid()))
    opts, again = spark_cds.java_options()
    final = cache / part.name.removesuffix(".part")
    assert again is None and f"-XX:SharedArchiveFile={final}" in opts
    assert final.is_file() and not part.exists() and not building.exists()


def test_a_damaged_build_is_discarded_and_rebuilt(cache: Path) -> None:
    opts, building = spark_cds.java_options()
    assert building is not None
    part = Path(opts.split("-XX:ArchiveClassesAtExit=")[1].split()[0])
    part.write_bytes(b"junk")  # the JVM died while dumping
    building.write_text(str(_dead_pid()))
    opts, building = spark_cds.java_options()
    assert building is not None and "ArchiveClassesAtExit" in opts  # a fresh build, not the junk
    assert not list(cache.glob("*.jsa"))


def test_a_build_whose_jvm_never_started_goes_stale(cache: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    _, building = spark_cds.java_options()
    assert building is not None  # marker left empty: the JVM did not start
    assert spark_cds.java_options() == ("", None)
    monkeypatch.setattr(spark_cds, "STALE", -1)
    assert spark_cds.java_options()[1] is not None


def test_opt_out_and_unwritable_cache(cache: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("SPILLWAY_SPARK_CDS", "0")
    assert spark_cds.java_options() == ("", None)
    monkeypatch.delenv("SPILLWAY_SPARK_CDS")
    cache.parent.mkdir(parents=True, exist_ok=True)
    cache.write_text("not a directory")
    assert spark_cds.java_options() == ("", None)


def test_a_conf_dir_on_the_class_path_gets_its_own_archive_or_none(
    cache: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # the launcher puts SPARK_CONF_DIR first on the driver's class path: an archive dumped with another class
    # path is refused by the JVM ("shared class paths mismatch"), and none can be dumped while a non-empty
    # directory is on it ("non-empty directory"), as JDK 17 says when asked (benchmarks/README.md)
    default = spark_cds.archive_key()
    empty = tmp_path / "conf-empty"
    empty.mkdir()
    monkeypatch.setenv("SPARK_CONF_DIR", str(empty))
    assert spark_cds.archive_key() != default
    opts, building = spark_cds.java_options()
    assert building is not None and spark_cds.archive_key() in opts
    full = tmp_path / "conf"
    full.mkdir()
    (full / "spark-defaults.conf").write_text("spark.eventLog.enabled true\n")
    monkeypatch.setenv("SPARK_CONF_DIR", str(full))
    assert spark_cds.java_options() == ("", None)
    assert not list(cache.glob(f"spark-{spark_cds.archive_key()}*"))  # no build attempted
