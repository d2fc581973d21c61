"""The CLI's conventions, through the installed console script (a real process, a real ``COLUMNS``):
``--version``, one line per command in ``-h``, help and tables that fit the width they are given without
cutting an identifier, and ``--json`` errors as ``spillway.error/1`` from every command."""

from __future__ import annotations

import json
import re
import shlex
from pathlib import Path
from typing import Any

import pytest
from support.commands import every_command
from support.console import ROOT, run
from support.fixtures import fixture_named

from spillway.cli.app import app

WIDTHS = (60, 80, 120)


def _commands() -> dict[tuple[str, ...], Any]:
    """Every command and group of the app, by its path of names (the root is ``()``)."""
    return dict(every_command(app))


def _words(line: str) -> list[str]:
    """The shell words of a line (a quoted jq program in an example is one)."""
    try:
        return shlex.split(line)
    except ValueError:
        return line.split()


def _fits(text: str, columns: int, table: bool = False) -> None:
    """Every line fits ``columns``, unless it is one word (an identifier longer than the line stands alone);
    a ``table`` has no ellipsized cell (help text has its own ``…`` in prose and examples)."""
    wide = [line for line in text.splitlines() if len(line) > columns and len(_words(line)) > 1]
    assert not wide, f"{len(wide)} lines wider than {columns} columns, e.g. {wide[0]!r}"
    assert not table or "…" not in text


def test_version_prints_the_projects_version() -> None:
    version = re.search(r'^version = "(.+)"$', (ROOT / "pyproject.toml").read_text(), re.M).group(1)  # type: ignore[union-attr]
    code, stdout, stderr = run(["--version"])
    assert (code, stdout, stderr) == (0, f"spillway {version}\n", "")


def test_top_level_help_has_one_line_per_command() -> None:
    code, stdout, _ = run(["-h"], columns=80)
    assert code == 0
    section = stdout.split("Commands:\n", 1)[1].strip("\n").splitlines()
    names = sorted(path[0] for path in _commands() if len(path) == 1)
    assert sorted(line.split()[0] for line in section) == names, section
    assert all(len(line) <= 80 for line in section)


@pytest.mark.parametrize("columns", WIDTHS)
def test_every_help_fits_and_keeps_option_names_whole(columns: int) -> None:
    for path, cmd in _commands().items():
        code, stdout, stderr = run([*path, "-h"], columns=columns)
        assert code == 0, stderr
        _fits(stdout, columns)
        for param in cmd.params:
            if getattr(param, "hidden", False):  # a deprecated alias, kept working but not shown
                continue
            for name in [*param.opts, *param.secondary_opts]:
                if name.startswith("-"):
                    assert re.search(rf"(^|[\s,]){re.escape(name)}([\s,]|$)", stdout, re.M), (path, name)


def test_rescale_help_at_80_columns_keeps_flinks_option_names_whole() -> None:
    _, stdout, _ = run(["rescale", "-h"], columns=80)
    _fits(stdout, 80)
    for name in ("--buffers-per-channel", "--floating-buffers-per-gate", "--buffer-size", "--key-fn"):
        assert re.search(rf"^  {name} ", stdout, re.M), name  # the option column, whole
    # Flink's own option names in the descriptions: whole, on a line of their own where the column is too narrow
    for key in (
        "taskmanager.network.memory.buffers-per-channel",
        "taskmanager.network.memory.floating-buffers-per-gate",
    ):
        assert any(key in line for line in stdout.splitlines()), key
    # the examples are continued at spaces, as a shell reads them
    examples = stdout.split("Examples:", 1)[1].split("Arguments:", 1)[0]
    joined = re.sub(r" \\\n\s+", " ", examples)
    assert "--key count=tuple:0:long --out chk-42-p4" in joined


def _operator_ids(name: str) -> set[str]:
    ids = json.loads((fixture_named(name).root / "ids.json").read_text())  # Flink's, from the job itself
    return {n["operator_id"] for n in ids["stream_nodes"]}


def test_analyze_tables_fit_60_columns_with_operator_ids_whole() -> None:
    fx = fixture_named("2.3.0-counted")
    code, stdout, _ = run(["analyze", str(fx.checkpoint_dir), "--plan", str(fx.root / "jobgraph.json")], columns=60)
    assert code == 0
    _fits(stdout, 60, table=True)
    lines = stdout.splitlines()
    for op_id in _operator_ids(fx.name):
        assert any(op_id in line for line in lines), op_id
    wide = run(["analyze", str(fx.checkpoint_dir), "--plan", str(fx.root / "jobgraph.json")], columns=200)[1]
    assert max(len(line) for line in wide.splitlines()) > 60  # the same tables, laid out as tables


def test_validate_findings_fit_60_columns() -> None:
    fx = fixture_named("1.18.1-unaligned")  # one note: output-side handles not framed without --plan
    code, stdout, _ = run(["validate", str(fx.checkpoint_dir)], columns=60)
    assert code == 0
    _fits(stdout, 60, table=True)
    doc = json.loads(run(["validate", str(fx.checkpoint_dir), "--json"])[1])
    finding = doc["findings"][0]
    # Too wide for a table: one paragraph per finding, its identifiers first, each after its column's name.
    assert f"{finding['severity']}  rule {finding['rule']}" in stdout.splitlines()
    assert " ".join(finding["message"].split()) in " ".join(stdout.split())
    assert str(fx.metadata) in stdout.splitlines()[0]


def _error(args: list[str], code: int = 2) -> dict[str, Any]:
    got, stdout, stderr = run(args)
    assert got == code, stderr
    assert "Traceback" not in stderr
    doc = json.loads(stdout)
    assert doc["schema"] == "spillway.error/1" and doc["exit_code"] == code and doc["error"]
    return doc


def test_json_errors_from_every_command(tmp_path: Path) -> None:
    gone = str(tmp_path / "gone")
    assert "gone" in _error(["files", gone, "--json"])["error"]
    assert "gone" in _error(["diff", gone, gone, "--json"])["error"]
    assert "not an integer" in _error(["keygroup", "x", "--type", "long", "--json"])["error"]
    assert "--bogus" in _error(["analyze", gone, "--json", "--bogus"])["error"]
    assert "--out" in _error(["repair", "drop-operator", gone, "--json"])["error"]
    assert "nosuch" in _error(["nosuch", "--json"])["error"]


def test_keygroup_json_has_a_schema() -> None:
    code, stdout, _ = run(
        ["keygroup", "17", "--type", "long", "--max-parallelism", "128", "--parallelism", "2", "--json"]
    )
    doc = json.loads(stdout)
    assert code == 0 and doc["schema"] == "spillway.keygroup/1" and doc["key"] == "17"


COUNTED = fixture_named("2.3.0-counted")  # count is keyed by the Tuple2's first field, a long
KEY_MODULE = '''
import struct


def first_long(payload: bytes) -> int:
    """java.lang.Long.hashCode of the Tuple2's first field (a long, big-endian)."""
    (v,) = struct.unpack_from(">q", payload, 0)
    return ((v ^ (v >> 32)) + (1 << 31)) % (1 << 32) - (1 << 31)
'''


def _dry_run(*key: str, cwd: Path | None = None) -> tuple[int, dict[str, Any], str]:
    args = ["rescale", str(COUNTED.checkpoint_dir), "--plan", str(COUNTED.root / "jobgraph.json"), "-p", "count=3"]
    code, stdout, stderr = run([*args, *key, "--master", "inprocess", "--dry-run", "--json"], cwd=cwd)
    return code, json.loads(stdout) if stdout else {}, stderr


def test_rescale_dry_run_needs_no_out_and_a_real_run_does() -> None:
    code, doc, stderr = _dry_run("--key", "count=tuple:0:long")
    assert code == 0, stderr
    assert doc["schema"] == "spillway.rescale/1" and doc["out"] is None and doc["forecast"]
    args = ["rescale", str(COUNTED.checkpoint_dir), "--plan", str(COUNTED.root / "jobgraph.json"), "-p", "count=3"]
    code, stdout, stderr = run([*args, "--key", "count=tuple:0:long", "--master", "inprocess", "--json"])
    assert code == 2 and "--out" in json.loads(stdout)["error"] and "--dry-run" in stderr


def test_key_fn_module_is_found_in_the_current_directory(tmp_path: Path) -> None:
    (tmp_path / "my_keys.py").write_text(KEY_MODULE)
    code, by_fn, stderr = _dry_run("--key-fn", "count=my_keys:first_long", cwd=tmp_path)
    assert code == 0, stderr
    _, by_extractor, _ = _dry_run("--key", "count=tuple:0:long")
    # the same routing as the built-in extractor of the job's key (checked against Flink elsewhere)
    assert by_fn["forecast"] == by_extractor["forecast"]
    code, doc, _ = _dry_run("--key-fn", "count=my_keys:first_long")  # not in this directory: not found
    assert code != 0 and "my_keys" in doc["error"]


def test_report_html_dash_writes_the_page_to_stdout(tmp_path: Path) -> None:
    code, stdout, stderr = run(["report", str(COUNTED.checkpoint_dir), "--html", "-"], cwd=tmp_path)
    assert code == 0, stderr
    assert stdout.startswith("<!DOCTYPE html>") and stdout.rstrip().endswith("</html>")
    assert list(tmp_path.iterdir()) == []  # no file named "-"
    page = tmp_path / "page.html"
    assert run(["report", str(COUNTED.checkpoint_dir), "--html", str(page)])[0] == 0
    strip = re.compile(r"<meta name=\"generated\"[^>]*>|\d{4}-\d\d-\d\dT[\d:.]+Z?")
    assert strip.sub("", page.read_text()) == strip.sub("", stdout)


@pytest.mark.parametrize(
    ("command", "usage"),
    [
        (("validate",), "Usage: spillway validate [OPTIONS] PATH"),
        (("files",), "Usage: spillway files [OPTIONS] PATHS..."),
        (("diff",), "Usage: spillway diff [OPTIONS] A B"),
        (("repair", "relocate"), "Usage: spillway repair relocate [OPTIONS] SRC"),
    ],
)
def test_usage_names_arguments_as_click_and_git_do(command: tuple[str, ...], usage: str) -> None:
    # Expected from each command's declared arguments: names upper-cased, a repeatable one with "...".
    code, out, _ = run([*command, "-h"], columns=80)
    assert code == 0 and out.splitlines()[0] == usage
    code, _, err = run([*command], columns=80)
    assert code == 2 and usage in err
