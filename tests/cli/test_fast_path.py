"""Plain ``spillway dump`` and ``validate`` skip typer (spillway/cli/fast.py): the command function must get
exactly what typer would give it, every other argument list must go to typer, and each command's table
must be its declared parameters (tests/cli/test_fast_validate.py: validate's own cases)."""

from __future__ import annotations

import functools
import importlib
import json
import os
import subprocess
import sys
from collections.abc import Iterator
from typing import Any

import pytest
import typer
from support.fixtures import fixture_named
from typer.testing import CliRunner

from spillway.cli import fast
from spillway.cli.app import app

ACCEPTED = [
    ["dump", "chk-1"],
    ["dump", "chk-1", "--json"],
    ["dump", "--tree", "chk-1"],
    ["dump", "chk-1", "--operator", "slow", "--subtask", "1"],
    ["dump", "chk-1", "--subtask", "007"],
    ["dump", "chk-1", "--subtask", "0"],
    ["dump", "/a b/chk-ü", "--operator", "Window(TumblingEventTimeWindows(5000))"],
    ["dump", "--plan", "p.json", "--uid", "a=b", "--uid", "c=d", "--uid-map", "m.json", "--rebase", "x=y", "chk"],
    ["dump", "chk", "--rebase", "a=b", "--rebase", "c=d", "--json", "--tree"],
    ["validate", "chk", "--strict", "--json"],
    ["validate", "--uid", "n=u", "chk", "--plan", "p", "--rebase", "a=b"],
]

DECLINED = [
    ["dump"],
    ["dump", "a", "b"],
    ["dump", "-h"],
    ["dump", "a", "--help"],
    ["dump", "a", "--subtask", "-1"],
    ["dump", "a", "--subtask", "1x"],
    ["dump", "a", "--subtask", "\u0661"],  # an Arabic-Indic digit: int() takes it; typer's conversion decides
    ["dump", "a", "--subtask", " 1"],
    ["dump", "a", "--subtask", "1" * 19],
    ["dump", "a", "--operator", "x", "--operator", "y"],
    ["dump", "a", "--tree", "--tree"],
    ["dump", "--json=1", "a"],
    ["dump", "a", "--strict"],  # validate's, not dump's
    ["dump", "a", "--storage-timeout", "3"],
    ["--storage-timeout", "3", "dump", "a"],
    ["dump", "--", "a"],
    ["dump", "a\udcff"],
    ["files", "a"],
]


class _Stop(Exception):
    pass


@pytest.fixture
def received(monkeypatch: pytest.MonkeyPatch) -> Iterator[list[dict[str, Any]]]:
    """What each command's body (``spillway.cli.<name>_body.run``, called by its typer command and by the fast
    path) is called with, whoever parsed the arguments; the stand-in does no work."""
    calls: list[dict[str, Any]] = []
    for name in fast.COMMANDS:
        body = importlib.import_module(f"spillway.cli.{name}_body")

        def record(run: Any = body.run, name: str = name) -> Any:
            @functools.wraps(run)
            def stand_in(path: str, **kwargs: Any) -> int:
                calls.append({"command": name, "path": path, **kwargs})
                return 0

            return stand_in

        monkeypatch.setattr(body, "run", record())
    yield calls


@pytest.mark.parametrize("argv", ACCEPTED, ids=" ".join)
def test_the_command_gets_what_typer_gives_it(argv: list[str], received: list[dict[str, Any]]) -> None:
    result = CliRunner().invoke(app, argv)
    assert result.exit_code == 0, result.output
    plain = fast.parse(argv)
    assert plain is not None
    assert fast.run(plain) == 0
    by_typer, by_fast = received
    assert by_fast == by_typer
    assert by_fast["command"] == argv[0]


@pytest.mark.parametrize("argv", DECLINED, ids=repr)
def test_anything_else_goes_to_typer(argv: list[str]) -> None:
    assert fast.parse(argv) is None


@pytest.mark.parametrize("name", sorted(fast.COMMANDS))
def test_each_table_is_the_commands_own_options(name: str) -> None:
    """A new option must be taught to the fast path (or it would go to typer forever), and every value the
    fast path passes on as text must be text to typer too (an int only as ``INTEGERS`` says)."""
    command = typer.main.get_command(app).commands[name]  # type: ignore[attr-defined]
    options = {}
    arguments = []
    for param in command.params:
        if isinstance(param, typer.core.TyperArgument):
            arguments.append(param.name)
            assert param.type_descriptor.annotation is str
            continue
        assert not param.secondary_opts, param.name  # no --no-x forms, which the fast path does not know
        annotation = param.type_descriptor.annotation
        for opt in param.opts:
            options[opt] = (param.name, not param.is_flag, param.multiple)
            if param.is_flag:
                assert annotation is bool
            elif (name, opt) in fast.INTEGERS:
                assert annotation is int and not param.multiple
            else:
                assert annotation == (list[str] if param.multiple else str), (opt, annotation)
    assert arguments == ["path"]
    assert options == fast.COMMANDS[name]


def _env() -> dict[str, str]:
    return {k: v for k, v in os.environ.items() if k not in ("COLUMNS", "TERM")} | {"NO_COLOR": "1"}


@pytest.mark.parametrize("extra", [["--json"], [], ["--operator", "count", "--subtask", "1", "--json"]], ids=repr)
def test_dump_prints_what_it_prints_through_typer(extra: list[str]) -> None:
    """The child process takes the fast path, CliRunner the typer app: same exit code, same output."""
    fx = fixture_named("2.3.0-counted")
    argv = ["dump", str(fx.checkpoint_dir), *extra]
    assert fast.parse(argv) is not None
    child = subprocess.run([sys.executable, "-m", "spillway", *argv], capture_output=True, env=_env(), check=False)
    runner = CliRunner().invoke(app, argv, env={"NO_COLOR": "1"})
    assert child.returncode == runner.exit_code == 0, child.stderr
    if "--json" in extra:
        doc = json.loads(child.stdout)
        assert doc == json.loads(runner.stdout)
        ids = {n["operator_id"] for n in json.loads((fx.root / "ids.json").read_text())["stream_nodes"]}
        assert {o["operator_id"] for o in doc["operators"]} <= ids  # Flink's own ids, from the job
    else:
        assert child.stdout.decode().split() == runner.stdout.split()
