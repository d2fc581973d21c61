"""``cli/options.bundled``: a command takes a group of options as one dataclass parameter; typer sees the group's
options in its place, and the command gets the dataclass built from what was given."""

from __future__ import annotations

import dataclasses
import re
from typing import Annotated, Any

import typer
from typer.testing import CliRunner

from spillway.cli.options import Naming, bundled


@dataclasses.dataclass(frozen=True)
class Window:
    start: Annotated[int, typer.Option("--start", help="First.")] = 0
    names: Annotated[list[str] | None, typer.Option("--name", help="Repeatable.")] = None


def _app(seen: dict[str, Any]) -> typer.Typer:
    @bundled
    def command(
        path: Annotated[str, typer.Argument()],
        window: Window = Window(),
        verbose: Annotated[bool, typer.Option("--verbose")] = False,
        naming: Naming = Naming(),
    ) -> None:
        seen.update(path=path, window=window, verbose=verbose, naming=naming)

    app = typer.Typer()
    app.command("go")(command)
    app.command("other")(lambda: None)  # two commands: "go" stays a subcommand
    return app


def test_the_command_gets_its_groups_built_from_the_options() -> None:
    seen: dict[str, Any] = {}
    argv = ["go", "p", "--name", "a", "--verbose", "--start", "3", "--name", "b", "--uid", "x=y", "--rebase", "o=n"]
    result = CliRunner().invoke(_app(seen), argv)
    assert result.exit_code == 0, result.output
    assert seen == {
        "path": "p",
        "window": Window(3, ["a", "b"]),
        "verbose": True,
        "naming": Naming(rebase=["o=n"], uid=["x=y"], uid_map=None),
    }


def test_help_lists_a_groups_options_in_its_place() -> None:
    result = CliRunner().invoke(_app({}), ["go", "--help"], env={"COLUMNS": "200"})
    assert result.exit_code == 0, result.output
    order = ["--start", "--name", "--verbose", "--rebase", "--uid", "--uid-map"]
    found = [re.search(rf"(?<![\w-]){opt}(?![\w-])", result.output) for opt in order]
    assert all(found), result.output
    positions = [m.start() for m in found if m]
    assert positions == sorted(positions), result.output
