"""The python daemon the Spark backend asks for: Spark's zips go behind the installed pyspark they were shipped
with, and only then (a layout laid out here the way ``pip install pyspark`` lays it out, and the real one)."""

from __future__ import annotations

import importlib.util
import os
import subprocess
import sys
from pathlib import Path

from spillway.rescale.spark_daemon import installed_first


def _install(site: Path) -> tuple[str, str]:
    """A pip-style pyspark in ``site``: the package, and Spark's zips inside it (its SPARK_HOME)."""
    lib = site / "pyspark" / "python" / "lib"
    lib.mkdir(parents=True)
    (site / "pyspark" / "__init__.py").write_text("")
    (lib / "pyspark.zip").write_bytes(b"")
    (lib / "py4j-0.10.9.9-src.zip").write_bytes(b"")
    return str(lib / "pyspark.zip"), str(lib / "py4j-0.10.9.9-src.zip")


def test_zips_of_the_installed_package_go_last(tmp_path: Path) -> None:
    pyspark_zip, py4j_zip = _install(tmp_path / "site")
    other = str(tmp_path / "mine")
    path = [pyspark_zip, py4j_zip, other, str(tmp_path / "site")]
    assert installed_first(path) == [other, str(tmp_path / "site"), pyspark_zip, py4j_zip]


def test_zips_of_another_spark_stay_first(tmp_path: Path) -> None:
    _install(tmp_path / "site")
    spark_home = tmp_path / "spark-4.3.0" / "python" / "lib"  # a Spark distribution, not the package found
    spark_home.mkdir(parents=True)
    path = [str(spark_home / "pyspark.zip"), str(spark_home / "py4j-0.10.9.9-src.zip"), str(tmp_path / "site")]
    assert installed_first(path) == path


def test_without_an_installed_pyspark_nothing_moves(tmp_path: Path) -> None:
    pyspark_zip, py4j_zip = _install(tmp_path / "site")
    path = [pyspark_zip, py4j_zip, str(tmp_path / "elsewhere")]
    assert installed_first(path) == path
    assert installed_first([str(tmp_path)]) == [str(tmp_path)]  # no zips at all


def test_the_daemon_imports_the_installed_pyspark_with_sparks_path_first() -> None:
    # the PYTHONPATH Spark gives its python daemon: SPARK_HOME/python/lib zips first (SPARK_HOME = the package)
    # pyspark is in the dev extra `make test` installs: the real package is checked, never skipped
    spec = importlib.util.find_spec("pyspark")
    assert spec is not None and spec.origin is not None, "pyspark is not installed (pip install -e '.[dev]')"
    home = Path(spec.origin).parent
    zips = sorted(str(p) for p in (home / "python" / "lib").glob("*.zip"))
    assert any(z.endswith("pyspark.zip") for z in zips)
    probe = (
        "import sys; from spillway.rescale.spark_daemon import installed_first; "
        "sys.path[:] = installed_first(sys.path); import pyspark.daemon, pyspark; print(pyspark.__file__)"
    )
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([*zips, *sys.path])}
    done = subprocess.run([sys.executable, "-c", probe], env=env, capture_output=True, text=True, check=True)
    assert done.stdout.strip() == spec.origin
    # and without the daemon's reordering the same path imports the zip's copy (what Spark's own daemon does)
    plain = subprocess.run(
        [sys.executable, "-c", "import pyspark; print(pyspark.__file__)"], env=env, capture_output=True, text=True
    )
    assert ".zip" in plain.stdout
