"""``spillway version``: what to paste into a bug report, through the installed console script. The expected
values come from outside spillway: the version in pyproject.toml, the interpreter the script runs on, and the
``NAME-VERSION.dist-info`` directories the installer left next to the libraries."""

from __future__ import annotations

import json
import re
import sys
import sysconfig
from pathlib import Path

from support.console import ROOT, run

LIBRARIES = ("click", "rich", "construct", "pyarrow", "numpy", "mmh3", "pyspark")


def _installed() -> dict[str, str]:
    """Each library's installed version, by the installer's own record of it (its dist-info directory's name)."""
    found: dict[str, str] = {}
    for info in Path(sysconfig.get_paths()["purelib"]).glob("*.dist-info"):
        name, _, version = info.name.removesuffix(".dist-info").partition("-")
        if name.lower() in LIBRARIES:
            found[name.lower()] = version
    return found


def test_version_json_names_spillway_python_and_each_library() -> None:
    code, stdout, stderr = run(["version", "--json"])
    assert (code, stderr) == (0, "")
    doc = json.loads(stdout)
    project = re.search(r'^version = "(.+)"$', (ROOT / "pyproject.toml").read_text(), re.M)
    assert project is not None
    assert doc["schema"] == "spillway.version/1" and doc["spillway"] == project.group(1)
    assert doc["python"].endswith(" " + ".".join(map(str, sys.version_info[:3]))) and doc["platform"] == sys.platform
    installed = _installed()
    assert {"click", "rich", "construct"} <= set(installed)  # what spillway cannot run without
    assert doc["distributions"] == {name: installed.get(name) for name in LIBRARIES}


def test_version_text_is_one_line_each() -> None:
    code, stdout, _ = run(["version"])
    lines = stdout.splitlines()
    assert code == 0 and lines[0].startswith("spillway ") and len(lines) == 2 + len(LIBRARIES)
    installed = _installed()
    for name, line in zip(LIBRARIES, lines[2:], strict=True):
        assert line == f"{name} {installed.get(name, 'not installed')}"
