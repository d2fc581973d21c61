"""Output that reads well and pipes well, through the CLI on real fixtures: identifiers (operator ids,
file names, paths, vertex names) are never broken in any command's tables, markup in names is shown
literally, and nothing ends a line with blanks in a pipe (CliRunner's output is a pipe)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner
from support.fixtures import fixture_named

from spillway.cli.app import app

SQL = ["2.3.0-sql", "1.20.3-sql"]


def run(*args: str, columns: int | None = None, code: int | None = 0) -> str:
    env = {"COLUMNS": str(columns)} if columns else {"COLUMNS": ""}
    res = CliRunner().invoke(app, list(args), env=env)
    if code is not None:
        assert res.exit_code == code, res.output
    return res.stdout


def _file_names(node: Any, found: set[str]) -> None:
    if isinstance(node, dict):
        for k, v in node.items():
            if k in ("path", "handle_name", "relative_path", "file_path") and isinstance(v, str):
                found.add(v.rsplit("/", 1)[-1])
            else:
                _file_names(v, found)
    elif isinstance(node, list):
        for v in node:
            _file_names(v, found)


def _no_trailing_blanks(text: str) -> None:
    bad = [line for line in text.splitlines() if line != line.rstrip()]
    assert not bad, f"{len(bad)} lines end with blanks, e.g. {bad[0]!r}"


def _whole(text: str, identifiers: set[str]) -> None:
    lines = text.splitlines()
    for ident in identifiers:
        assert any(ident in line for line in lines), f"{ident!r} is not whole on any line"


@pytest.mark.parametrize("name", SQL)
@pytest.mark.parametrize("columns", [60, None])
def test_dump_tree_prints_every_operator_id_and_file_name_whole(name: str, columns: int | None) -> None:
    fx = fixture_named(name)
    doc = json.loads(run("dump", str(fx.checkpoint_dir), "--json"))
    ids = {op["operator_id"] for op in doc["operators"]}
    files: set[str] = set()
    _file_names(doc["operators"], files)
    assert ids and files
    text = run("dump", str(fx.checkpoint_dir), "--tree", columns=columns)
    _whole(text, ids | files | {str(fx.metadata)})
    _no_trailing_blanks(text)
    if columns is None:
        # A pipe is not padded to a fixed width: the longest line is the widest content, no more.
        assert max(len(line) for line in text.splitlines()) < 400


@pytest.mark.parametrize("name", SQL)
def test_vertex_names_keep_their_brackets(name: str) -> None:
    fx = fixture_named(name)
    plan = str(fx.root / "jobgraph.json")
    names = [n["description"].split("<br/>")[0] for n in json.loads(Path(plan).read_text())["nodes"]]
    assert any("[[" in n for n in names)
    for command in ("analyze", "validate"):
        text = run(command, str(fx.checkpoint_dir), "--plan", plan, columns=60, code=None)
        _no_trailing_blanks(text)
        if name.startswith("1.") and command == "analyze":  # a 1.x checkpoint stores no names: the plan's
            assert "TableSourceScan(table=[[default_catalog, default_database, src]], fields=[k, v])" in text
    text = run("dump", str(fx.checkpoint_dir), columns=60)
    _no_trailing_blanks(text)


def _ids(fx_dir: Path) -> set[str]:
    return {op["operator_id"] for op in json.loads(run("dump", str(fx_dir), "--json"))["operators"]}


@pytest.mark.parametrize("columns", [40, None])
def test_every_command_keeps_identifiers_whole(tmp_path: Path, columns: int | None) -> None:
    fx = fixture_named("2.3.0-counted")
    chk, plan = str(fx.checkpoint_dir), str(fx.root / "jobgraph.json")
    ids = _ids(fx.checkpoint_dir)
    for args, code in (
        (["dump", chk], 0),
        (["analyze", chk, "--plan", plan], None),
        (["validate", chk, "--plan", plan], None),
    ):
        text = run(*args, columns=columns, code=code)
        if args[0] != "validate":  # a sound checkpoint has no findings table
            _whole(text, ids)
        _no_trailing_blanks(text)
    out = tmp_path / "a-rather-long-output-directory-name-that-does-not-fit-in-forty-columns"
    text = run(
        "rescale", chk, "--plan", plan, "-p", "count=3", "--key", "count=tuple:0:long",
        "--master", "inprocess", "--out", str(out), columns=columns,
    )  # fmt: skip
    _whole(text, {f"wrote {out}"})
    _no_trailing_blanks(text)
    stripped = tmp_path / "stripped-checkpoint-with-a-long-name-that-does-not-fit"
    text = run("repair", "strip-channel-state", chk, "--out", str(stripped), "--plan", plan, columns=columns)
    _whole(text, {f"wrote {stripped}"})
    _no_trailing_blanks(text)
    text = run("keygroup", "[bold]k", "--parallelism", "3", columns=columns)
    assert "'[bold]k'" in text


# Conventions: usage errors are usage errors, unknowns are null with a reason, help shows no Python types.


@pytest.mark.parametrize("subtask", ["7", "2", "-1"])
def test_dump_subtask_beyond_the_parallelism_is_a_usage_error(subtask: str) -> None:
    fx = fixture_named("2.3.0-sql")  # parallelism 2
    res = CliRunner().invoke(app, ["dump", str(fx.checkpoint_dir), "--subtask", subtask])
    assert res.exit_code == 2, res.output
    assert "parallelism is 2" in res.output
    res = CliRunner().invoke(app, ["dump", str(fx.checkpoint_dir), "--subtask", subtask, "--json"])
    assert res.exit_code == 2 and json.loads(res.stdout)["kind"] == "UsageError"
    assert CliRunner().invoke(app, ["dump", str(fx.checkpoint_dir), "--subtask", "1"]).exit_code == 0


def _nulls_have_reasons(node: Any, where: str = "") -> None:
    if isinstance(node, dict):
        for k, v in node.items():
            assert v != -1 or k in ("offset", "start"), f"{where}.{k} is -1"
            _nulls_have_reasons(v, f"{where}.{k}")
    elif isinstance(node, list):
        for i, v in enumerate(node):
            _nulls_have_reasons(v, f"{where}[{i}]")


def test_unknown_records_dropped_is_null_with_a_reason(tmp_path: Path) -> None:
    fx = fixture_named("2.3.0-unaligned-p3")  # without --plan the output side's records are not counted
    doc = json.loads(
        run("repair", "strip-channel-state", str(fx.checkpoint_dir), "--out", str(tmp_path / "j"), "--json")
    )
    assert doc["records_dropped"] is None and doc["records_dropped_reason"]
    row = next(c for c in doc["changes"] if c["what"] == "records dropped")
    assert row["count"] is None and row["reason"]
    _nulls_have_reasons(doc)
    text = run("repair", "strip-channel-state", str(fx.checkpoint_dir), "--out", str(tmp_path / "h"))
    line = next(x for x in text.splitlines() if "records dropped" in x)
    assert "unknown" in line and "-1" not in line and "None" not in line
    _no_trailing_blanks(text)


def _commands() -> list[list[str]]:
    import click
    from support.commands import every_command

    return [list(path) for path, cmd in every_command(app).items() if not isinstance(cmd, click.Group)]


def test_help_shows_no_python_types() -> None:
    commands = _commands()
    assert ["rescale"] in commands and ["repair", "relocate"] in commands
    for cmd in commands:
        text = run(*cmd, "--help", columns=200)
        for bad in ("<list[", "<str>", "<int>", "<bool>", "<float>"):
            assert bad not in text, f"spillway {' '.join(cmd)} --help shows {bad}"
    rescale = run("rescale", "--help", columns=200)
    assert "VERTEX=N" in rescale and "VERTEX=EXTRACTOR" in rescale and "FILE" in rescale


def test_a_repair_table_without_details_has_no_empty_detail_column(tmp_path: Path) -> None:
    """relocate of a checkpoint with nothing to rewrite: its one change has no detail, so no `detail` column."""
    fx = fixture_named("2.3.0-unaligned")
    out = tmp_path / "x"
    res = CliRunner().invoke(
        app, ["repair", "relocate", str(fx.checkpoint_dir), "--out", str(out), "--from", "file:/a", "--to", "file:/b"]
    )
    assert res.exit_code == 0, res.output
    assert "relative files copied into the output" in res.output and "detail" not in res.output
