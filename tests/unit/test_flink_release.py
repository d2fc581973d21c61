"""A Flink release's jars (spillway/storage/flink_release.py): the cache, which PyPI package holds which release
(``apache-flink-libraries`` from 1.13.6 on, the ``apache-flink`` source archive before), only ``lib/*.jar`` kept,
a download staged and renamed into place. pip is replaced by a stand-in that writes the archive each package
really ships (a wheel of ``pyflink/lib/*.jar``, a tar.gz of ``apache-flink-X/deps/lib/*.jar``)."""

from __future__ import annotations

import io
import subprocess
import sys
import tarfile
import zipfile
from pathlib import Path
from typing import Any

import pytest

from spillway.errors import StorageError, UsageError
from spillway.storage import flink_release
from spillway.storage.flink_release import cache_root, fetch_release, flink_lib

JARS = {"flink-dist-{v}.jar": b"dist", "flink-table-api-{v}.jar": b"table", "log4j-core-2.17.1.jar": b"log"}


@pytest.fixture
def cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("SPILLWAY_FLINK_CACHE", str(tmp_path / "cache"))
    monkeypatch.delenv("FLINK_HOME", raising=False)
    return tmp_path / "cache"


class Pip:
    """pip download, as the stand-in: which packages were asked for, and what each one ships."""

    def __init__(self, ships: dict[str, str]):
        self.ships = ships  # package -> "wheel", "zip", "sdist", "empty" (no flink-dist jar) or "missing"
        self.asked: list[list[str]] = []

    def __call__(self, cmd: list[str], **kwargs: Any) -> subprocess.CompletedProcess[str]:
        self.asked.append(cmd)
        # pip as this interpreter's module, quiet, the one package alone, its output unseen, its errors kept
        assert cmd[:6] == [sys.executable, "-m", "pip", "download", "--no-deps", "-q"], cmd
        assert cmd[-2] == "-d" and cmd[-3] == next(a for a in cmd if "==" in a), cmd
        assert kwargs == {"stdout": subprocess.DEVNULL, "stderr": subprocess.PIPE, "text": True}, kwargs
        spec = next(a for a in cmd if "==" in a)
        package, _, version = spec.partition("==")
        out = Path(cmd[cmd.index("-d") + 1])
        # staged beside the release's directory (renamed into place on the same file system), in a hidden directory
        # no reader takes for a release
        assert out.parent.parent == cache_root() / version and out.parent.name.startswith("."), out
        kind = self.ships.get(package, "missing")
        if kind == "silent":
            return subprocess.CompletedProcess(cmd, 1, "", "")
        if kind == "missing":
            said = f"WARNING: a newer pip is out\nERROR: No matching distribution found for {spec}\n"
            return subprocess.CompletedProcess(cmd, 1, "", said)
        out.mkdir(parents=True, exist_ok=True)
        jars = {name.format(v=version): data for name, data in JARS.items()}
        if kind == "empty":
            jars = {"log4j-core-2.17.1.jar": b"log"}
        if kind in ("sdist", "empty"):
            with tarfile.open(out / f"{package}-{version}.tar.gz", "w:gz") as tf:
                for name, data in {**jars, "README.txt": b"x"}.items():
                    where = f"{package}-{version}/deps/{'lib' if name.endswith('.jar') else 'doc'}/{name}"
                    info = tarfile.TarInfo(where)
                    info.size = len(data)
                    tf.addfile(info, io.BytesIO(data))
                tf.addfile(tarfile.TarInfo(f"{package}-{version}/deps/lib/sub"), None)  # not a jar: skipped
        else:
            suffix = ".zip" if kind == "zip" else "-py3-none-any.whl"
            with zipfile.ZipFile(out / f"{package.replace('-', '_')}-{version}{suffix}", "w") as zf:
                for name, data in jars.items():
                    zf.writestr(f"pyflink/lib/{name}", data)
                zf.writestr("pyflink/opt/flink-python-extra.jar", b"opt")  # not in lib/: not kept
                zf.writestr("pyflink/lib/notes.txt", b"txt")
        return subprocess.CompletedProcess(cmd, 0, "", "")


def _install(monkeypatch: pytest.MonkeyPatch, pip: Pip) -> Pip:
    monkeypatch.setattr(flink_release.subprocess, "run", pip)
    return pip


def test_the_cache_is_under_home_unless_moved(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.delenv("SPILLWAY_FLINK_CACHE", raising=False)
    monkeypatch.setenv("HOME", str(tmp_path))
    assert cache_root() == tmp_path / ".cache" / "spillway" / "flink"
    monkeypatch.setenv("SPILLWAY_FLINK_CACHE", str(tmp_path / "elsewhere"))
    assert cache_root() == tmp_path / "elsewhere"


def test_a_release_from_1_13_on_comes_from_the_libraries_wheel(cache: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    pip = _install(monkeypatch, Pip({"apache-flink-libraries": "wheel", "apache-flink": "sdist"}))
    notes: list[str] = []
    lib = fetch_release("1.20.3", notes.append)
    assert lib == cache / "1.20.3" / "lib"
    assert sorted(p.name for p in lib.iterdir()) == sorted(
        [".complete", "flink-dist-1.20.3.jar", "flink-table-api-1.20.3.jar", "log4j-core-2.17.1.jar"]
    )
    assert (lib / "flink-dist-1.20.3.jar").read_bytes() == b"dist"
    assert len(pip.asked) == 1 and "apache-flink-libraries==1.20.3" in pip.asked[0]
    assert "--no-binary" not in pip.asked[0] and "--no-deps" in pip.asked[0]
    assert notes == [
        f"downloading Flink 1.20.3's jars (apache-flink-libraries from PyPI, 100-400 MB; cached in {lib.parent})"
    ]
    assert [p.name for p in (cache / "1.20.3").iterdir()] == ["lib"]  # the staging directory is gone
    assert fetch_release("1.20.3") == lib and len(pip.asked) == 1  # cached: no second download


def test_an_older_release_comes_from_the_source_archive(cache: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    pip = _install(monkeypatch, Pip({"apache-flink": "sdist"}))
    lib = fetch_release("1.12.7")
    assert sorted(p.name for p in lib.iterdir()) == sorted(
        [".complete", "flink-dist-1.12.7.jar", "flink-table-api-1.12.7.jar", "log4j-core-2.17.1.jar"]
    )
    assert len(pip.asked) == 1
    assert "apache-flink==1.12.7" in pip.asked[0] and pip.asked[0][pip.asked[0].index("--no-binary") + 1] == ":all:"


def test_the_other_package_is_tried_when_the_first_has_no_flink_dist(
    cache: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    pip = _install(monkeypatch, Pip({"apache-flink-libraries": "empty", "apache-flink": "sdist"}))
    lib = fetch_release("1.13.6")
    assert (lib / "flink-dist-1.13.6.jar").is_file()
    assert [next(a for a in cmd if "==" in a) for cmd in pip.asked] == [
        "apache-flink-libraries==1.13.6",
        "apache-flink==1.13.6",
    ]


def test_no_package_for_the_release_says_why_for_each(cache: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    _install(monkeypatch, Pip({"apache-flink": "empty"}))
    with pytest.raises(StorageError) as raised:
        fetch_release("1.9.3")
    assert str(raised.value) == (
        "no jars for Flink 1.9.3: no flink-dist jar found in apache-flink-1.9.3.tar.gz; apache-flink-libraries==1.9.3 "
        "not downloadable (ERROR: No matching distribution found for apache-flink-libraries==1.9.3) (or set FLINK_HOME)"
    )
    assert not (cache / "1.9.3" / "lib").exists()


@pytest.mark.parametrize("version", ["1", "1.x", "1.20.3-SNAPSHOT", "latest", ""])
def test_a_version_that_is_no_release_number_is_refused(cache: Path, version: str) -> None:
    with pytest.raises(UsageError) as raised:
        fetch_release(version)
    assert str(raised.value) == f"Flink release {version!r}: expected a version like 1.20.3"


def test_a_pip_failing_without_a_word_is_said_so(cache: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    _install(monkeypatch, Pip({"apache-flink-libraries": "silent", "apache-flink": "silent"}))
    with pytest.raises(StorageError, match=r"apache-flink-libraries==2\.0\.0 not downloadable \(pip failed\);"):
        fetch_release("2.0.0")


def test_a_zip_archive_is_read_like_a_wheel(cache: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    _install(monkeypatch, Pip({"apache-flink": "zip"}))
    assert (fetch_release("1.11.6") / "flink-dist-1.11.6.jar").read_bytes() == b"dist"


def test_an_incomplete_copy_is_replaced(cache: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    stale = cache / "2.0.0" / "lib"
    stale.mkdir(parents=True)
    (stale / "flink-dist-old.jar").write_bytes(b"old")  # no .complete: a copy of an older layout
    _install(monkeypatch, Pip({"apache-flink-libraries": "wheel"}))
    lib = fetch_release("2.0.0")
    assert not (lib / "flink-dist-old.jar").exists() and (lib / ".complete").read_text() == "2.0.0"


def test_flink_home_wins_over_the_cache(cache: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    home = tmp_path / "flink"
    (home / "lib").mkdir(parents=True)
    (home / "lib" / "flink-dist-1.20.3.jar").write_bytes(b"")
    monkeypatch.setenv("FLINK_HOME", str(home))
    assert flink_lib("1.20.3") == home / "lib"
    with pytest.raises(UsageError) as raised:
        flink_lib("1.19.3")
    assert str(raised.value) == (
        f"FLINK_HOME={home} is Flink 1.20.3, the job is for 1.19.3: unset FLINK_HOME or point it at that release"
    )
    (home / "lib" / "flink-dist-1.20.3.jar").unlink()
    with pytest.raises(UsageError) as raised:
        flink_lib("1.20.3")
    assert str(raised.value) == f"FLINK_HOME={home}: no lib/flink-dist*.jar there (not a Flink distribution)"
    monkeypatch.setenv("FLINK_HOME", "")
    pip = _install(monkeypatch, Pip({"apache-flink-libraries": "wheel"}))
    notes: list[str] = []
    assert flink_lib("1.20.3", notes.append) == cache / "1.20.3" / "lib" and len(pip.asked) == 1
    assert len(notes) == 1 and notes[0].startswith("downloading Flink 1.20.3's jars")
