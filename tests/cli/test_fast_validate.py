"""``spillway validate`` skips typer for plain argument lists (spillway/cli/fast.py). The command body must get
exactly what typer would give it, and every other argument list must go to typer."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import typer
from support.damaged import copy_fixture
from support.fixtures import fixture_named
from typer.testing import CliRunner

import spillway.cli.validate_body as validate_cli
from spillway.cli.app import app
from spillway.cli.fast import OPTIONS, parse_validate, run_validate

ACCEPTED = [
    ["validate", "chk-1"],
    ["validate", "chk-1", "--json"],
    ["validate", "--json", "chk-1"],
    ["validate", "--plan", "plan.json", "chk-1"],
    ["validate", "/a b/chk-ü", "--plan", "p=q.json"],
    ["validate", "chk", "--rebase", "a=b", "--uid", "x=y", "--rebase", "c=d", "--uid-map", "m.json", "--json"],
    ["validate", "--uid", "n=u", "chk", "--plan", "p"],
]

DECLINED = [
    [],
    ["dump", "chk"],
    ["--version"],
    ["validate"],
    ["validate", "a", "b"],
    ["validate", "-h"],
    ["validate", "a", "--help"],
    ["validate", "--plan=p", "a"],
    ["validate", "a", "--plan"],
    ["validate", "a", "--plan", "--json"],
    ["validate", "a", "--plan", "p", "--plan", "q"],
    ["validate", "a", "--json", "--json"],
    ["validate", "a", "--bogus"],
    ["validate", "--", "a"],
    ["validate", "-"],
    ["validate", "a\udcff"],
    ["validate", "a", "--plan", "p\udcff"],
]


class _Stop(Exception):
    pass


@pytest.fixture
def received(monkeypatch: pytest.MonkeyPatch) -> dict[str, Any]:
    """What the command body is called with, whoever parsed the arguments (it stops before any work)."""
    seen: dict[str, Any] = {}

    def guarded(action: Any, json_out: bool = False) -> int:
        seen["json_out"] = json_out
        try:
            action()
        except _Stop:
            return 0
        raise AssertionError("the command body went past loading")

    def open_checkpoint(path: Any, *, plan: Any, uids: Any, uid_map: Any, rebase: Any) -> None:
        seen.update(path=path, plan=plan, uids=uids, uid_map=uid_map, rebase=rebase)
        raise _Stop

    monkeypatch.setattr(validate_cli, "guarded", guarded)
    monkeypatch.setattr(validate_cli, "uid_pairs", lambda plan, uid, uid_map: uid)  # --uid as typer gave it
    monkeypatch.setattr(validate_cli.api, "open", open_checkpoint)  # the one API call, before any work
    return seen


@pytest.mark.parametrize("argv", ACCEPTED, ids=" ".join)
def test_the_command_gets_what_typer_gives_it(argv: list[str], received: dict[str, Any]) -> None:
    result = CliRunner().invoke(app, argv)
    assert result.exit_code == 0, result.output
    by_typer = dict(received)
    received.clear()
    assert run_validate(argv) == 0
    assert received == by_typer
    assert received["path"] == next(a for i, a in enumerate(argv[1:]) if not a.startswith("-") and _is_path(argv, i))


def _is_path(argv: list[str], i: int) -> bool:
    """argv[1:][i] is not the value of an option."""
    before = argv[1:][i - 1] if i > 0 else ""
    return before not in OPTIONS or not OPTIONS[before][1]


@pytest.mark.parametrize("argv", DECLINED, ids=repr)
def test_anything_else_goes_to_typer(argv: list[str]) -> None:
    assert parse_validate(argv) is None
    assert run_validate(argv) is None


def test_the_options_are_the_commands_own() -> None:
    """A new option of ``validate`` must be taught to the fast path (or it would send it to typer forever)."""
    command = typer.main.get_command(app).commands["validate"]  # type: ignore[attr-defined]
    options = {}
    arguments = []
    for param in command.params:
        if isinstance(param, typer.core.TyperArgument):
            arguments.append(param.name)
            continue
        assert not param.secondary_opts, param.name  # no --no-x forms, which the fast path does not know
        for opt in param.opts:
            options[opt] = (param.name, not param.is_flag, param.multiple)
    assert arguments == ["path"]
    assert options == OPTIONS


def _env() -> dict[str, str]:
    return {k: v for k, v in os.environ.items() if k not in ("COLUMNS", "TERM")} | {"NO_COLOR": "1"}


@pytest.mark.parametrize("json_out", [True, False], ids=["json", "text"])
def test_same_output_as_through_typer(tmp_path: Path, json_out: bool) -> None:
    """A damaged copy (a chunk length broken, so faults in several rules): the child process takes the fast
    path, CliRunner the typer app; same exit code, same report."""
    copy = copy_fixture("2.3.0-counted", tmp_path)
    path, _ = copy.channel_files()[0]
    data = bytearray(path.read_bytes())
    data[6] ^= 0x40  # inside the first chunk's length field
    path.write_bytes(bytes(data))
    argv = ["validate", str(copy.chk), "--plan", str(copy.plan), *(["--json"] if json_out else [])]
    assert parse_validate(argv) is not None
    child = subprocess.run([sys.executable, "-m", "spillway", *argv], capture_output=True, env=_env(), check=False)
    runner = CliRunner().invoke(app, argv, env={"NO_COLOR": "1"})
    assert child.returncode == runner.exit_code == 1
    if json_out:
        assert json.loads(child.stdout) == json.loads(runner.stdout)
        assert json.loads(child.stdout)["summary"]["error"] > 0
    else:
        assert child.stdout.decode().split() == runner.stdout.split()


def test_a_usage_error_still_comes_from_typer() -> None:
    fx = fixture_named("2.3.0-counted")
    child = subprocess.run(
        [sys.executable, "-m", "spillway", "validate", str(fx.checkpoint_dir), "--plan"],
        capture_output=True,
        env=_env(),
        check=False,
    )
    assert child.returncode == 2
    assert b"--plan" in child.stderr and b"requires an argument" in child.stderr
